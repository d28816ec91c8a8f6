#include "run/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include <omp.h>

#include "config/config.hpp"
#include "data/random.hpp"
#include "json/text.hpp"
#include "norm/presets.hpp"
#include "report/table.hpp"
#include "run/process_memory.hpp"
#include "run/safety.hpp"
#include "tensor/order_stats.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

using Clock = std::chrono::steady_clock;

// Timed calls per measurement at most, whatever --min-time-ms asks.
constexpr unsigned kMaxCalls = 1000000;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Timed calls of one measurement: their median and quartiles in ms, and how many there were.
struct Timing {
    double median = 0, q1 = 0, q3 = 0;
    std::size_t calls = 0;
};

// Times f() over `repeat` calls after one untimed call, and over more calls until `min_ms`
// milliseconds of timed calls have passed: a 0.2 ms call timed 20 times is at the mercy of
// one interrupted call, timed 1000 times it is not.
template <class F>
Timing time_calls(unsigned repeat, double min_ms, F&& f) {
    f();
    std::vector<double> times;
    double spent = 0;
    for (unsigned r = 0; r < repeat || (spent < min_ms && r < kMaxCalls); ++r) {
        auto t0 = Clock::now();
        f();
        times.push_back(ms(t0, Clock::now()));
        spent += times.back();
    }
    std::sort(times.begin(), times.end());
    return {quantile(times, 0.5), quantile(times, 0.25), quantile(times, 0.75), times.size()};
}

// time_calls' median alone: the copy yardstick and the phases show no spread.
template <class F>
double median_ms(unsigned repeat, double min_ms, F&& f) {
    return time_calls(repeat, min_ms, std::forward<F>(f)).median;
}

// Median time of copying `bytes` between two warm buffers with `threads` threads of the
// same OpenMP team the engine uses (a thread start per copy would cost more than copying
// a small batch): the machine's achievable bandwidth for this size, the yardstick for the
// normalization.
double copy_ms(std::size_t bytes, unsigned threads, unsigned repeat, double min_ms) {
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    auto once = [&] {
        if (threads <= 1) {
            std::memcpy(dst.data(), src.data(), bytes);
            return;
        }
#pragma omp parallel num_threads(static_cast<int>(threads))
        {
            const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t n = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t lo = bytes * t / n, hi = bytes * (t + 1) / n;
            std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
        }
    };
    return median_ms(repeat, min_ms, once);
}

// The two phases of a forward timed on their own: the batch moments (compute_moments, one
// read of x), and the normalize pass with those statistics given (one read of x, one write
// of y). Both take the forward's kernels for rows and channels last, the walk elsewhere.
// Where the forward takes one pass (whole statistics, BatchNorm's planes one channel at a
// time), the phases are what two passes would cost, not a split of the forward's time.
struct Phases {
    double moments_ms = 0, normalize_ms = 0;
};

Phases time_phases(const Tensor& x, const Resolution& res, unsigned repeat, double min_ms) {
    const Shape ps = select_dims(res.view_shape, res.spec.param_axes);
    const xt::xarray<double> w = xt::ones<double>(ps), b = xt::zeros<double>(ps);
    Phases p;
    Moments m;
    // Into the same arrays each call, as the forward's own statistics are: a fresh array of
    // a few MiB (65536 rows of 64 values) costs its page faults on every call, which on a
    // 2-core AMD EPYC VM (Zen 5) made these moments take 1.9 ns per element against 0.24.
    p.moments_ms = median_ms(repeat, min_ms,
                             [&] { compute_moments(x, res.view_shape, res.spec.reduction_axes, res.spec.center, m); });
    ForwardInputs in;
    in.weight = res.has_weight ? &w : nullptr;
    in.bias = res.has_bias ? &b : nullptr;
    in.given_mean = &m.mean;
    in.given_var = &m.var;
    ForwardResult out;
    p.normalize_ms = median_ms(repeat, min_ms, [&] { forward(x, res.view_shape, res.spec, in, out); });
    return p;
}

NormDef bench_def(const std::string& norm, const Shape& shape, unsigned groups) {
    NormDef d;
    d.name = norm;
    d.type = norm_type_option("bench --norm", norm);
    if (d.type == NormType::layernorm || d.type == NormType::rmsnorm)
        d.normalized_shape = std::vector<long long>{static_cast<long long>(shape.back())};
    if (d.type == NormType::groupnorm) d.num_groups = groups;
    return d;
}

std::vector<std::vector<long long>> default_shapes(const std::string& norm) {
    // (B, T, D) transformer activations, and (tokens, heads, head_dim): the per-head rows of
    // 64 that a QK-norm normalises
    if (norm == "layernorm" || norm == "rmsnorm") return {{32, 64, 512}, {64, 128, 768}, {8, 512, 4096}, {4096, 16, 64}};
    if (norm == "batchnorm") return {{32, 64, 56, 56}, {32, 3, 64, 64}};
    return {{32, 64, 56, 56}};
}

}  // namespace

std::string run_bench(const BenchOptions& o) {
    DType dtype = parse_dtype(o.dtype);
    // The bytes per second count 4 or 8 bytes per value: the half formats are held in float
    // storage, so a figure for them would not be what it says.
    if (dtype != DType::float32 && dtype != DType::float64)
        throw InputError("bench --dtype: expected float32 or float64, but got " + quoted_text(o.dtype));
    std::vector<std::string> norms = o.norms;
    if (norms.empty()) norms = {"layernorm", "rmsnorm", "groupnorm", "instancenorm", "batchnorm"};
    // As shapes does: an option that no benchmarked norm takes is refused, not ignored.
    if (o.num_groups || o.channel_axis) {
        std::vector<NormType> types;
        std::string typed;
        for (const auto& n : norms) {
            types.push_back(norm_type_option("bench --norm", n));
            typed += (typed.empty() ? "" : ",") + n;
        }
        if (o.num_groups) check_option_taken("bench --num-groups", "num_groups", types, typed);
        if (o.channel_axis) check_option_taken("bench --channel-axis", "channel_axis", types, typed);
    }
    std::vector<unsigned> threads = o.threads;
    if (threads.empty()) threads = {1, std::max(1u, std::thread::hardware_concurrency())};
    if (o.repeat == 0) throw InputError("bench --repeat: must be at least 1");
    if (!(o.min_time_ms >= 0)) throw InputError("bench --min-time-ms: must be at least 0");
    const std::optional<Compute> chosen = o.compute.empty() ? default_compute() : compute_from_name(o.compute);
    if (!chosen) throw InputError("bench --compute: expected float or double, but got " + quoted_text(o.compute));
    // What the forward runs: the arithmetic applies to float32 data; float64 is always double.
    const Compute arithmetic = dtype != DType::float32 ? Compute::float64 : *chosen;
    const std::string compute = compute_name(arithmetic);
    const unsigned saved_threads = engine_threads();
    const unsigned groups = o.num_groups.value_or(32);

    std::ostringstream out;
    if (!o.json)
        out << std::left << std::setw(13) << "norm" << std::setw(18) << "shape" << std::setw(9) << "dtype"
            << std::setw(8) << "threads" << std::setw(11) << "median_ms" << std::setw(10) << "iqr_ms" << std::setw(10) << "gb_per_s"
            << std::setw(14) << "copy_gb_per_s" << std::setw(10) << "of_copy" << std::setw(12) << "moments_ns"
            << std::setw(10) << "of_copy" << std::setw(14) << "normalize_ns" << std::setw(10) << "of_copy"
            << std::setw(9) << "cold_ms" << "peak_rss_mib\n";
    // Every case checked before any is timed: its dims, its size (a batch, its output and the
    // copy's buffers, and the double values the batch is drawn in) against the run command's
    // default memory limit, so that a shape typed wrong is refused, not an out-of-memory, and
    // the norm's own shape errors, so that a bad last case does not come after minutes of
    // timing. A shape error names the option that chose the value at fault.
    const std::map<std::string, std::string> options = {
        {"num_groups", "bench --num-groups " + (o.num_groups ? std::to_string(groups)
                                                             : "(default " + std::to_string(groups) + ")")}};
    struct Case {
        std::string norm;
        Shape shape;
        std::size_t channel_axis;
        NormDef def;  // resolved against the shape once, for every thread count
    };
    std::vector<Case> cases;
    for (const auto& norm : norms)
        for (const auto& sv : o.shapes.empty() ? default_shapes(norm) : o.shapes) {
            if (sv.empty()) throw InputError("bench --shape: expected at least one dim, e.g. 32,64,512");
            Shape shape;
            double values = 1;  // in double: a product of typed dims may overflow size_t
            for (long long d : sv) {
                if (d <= 0) throw InputError("bench --shape: dims must be positive");
                shape.push_back(static_cast<std::size_t>(d));
                values *= static_cast<double>(d);
            }
            const double sz = dtype == DType::float64 ? 8 : 4;
            check_default_memory("bench --shape " + option_list(sv) + " (the batch, its output and the copy)",
                                 values * std::max(8 + sz, 3 * sz));
            const long long rank = static_cast<long long>(shape.size());
            const long long given = o.channel_axis.value_or(rank > 1 ? 1 : 0);
            const long long ca = given < 0 ? rank + given : given;
            if (ca < 0 || ca >= rank)
                throw InputError("bench --channel-axis: " + std::to_string(given) +
                                 " is outside a shape of rank " + std::to_string(rank));
            const std::size_t channel_axis = static_cast<std::size_t>(ca);
            NormDef def = bench_def(norm, shape, groups);
            def.compute = arithmetic;
            locate_option_errors("bench --norm " + norm + " (shape " + compact_shape(shape) + ")", options,
                                 [&] { NormLayer(def, dtype).resolve(shape, channel_axis, "bench"); });
            cases.push_back({norm, shape, channel_axis, def});
        }
    for (const Case& c : cases) {
        const std::string& norm = c.norm;
        const Shape& shape = c.shape;
        const std::size_t channel_axis = c.channel_axis;
        xt::xarray<double> v = xt::xarray<double>::from_shape(shape);
        Rng rng(1);
        for (auto& e : v) e = o.data_mean + (rng.uniform() * 4.0 - 2.0);
        const Tensor x = Tensor::from_double(v, dtype);
        v = xt::xarray<double>();
        const std::size_t bytes = x.size() * (dtype == DType::float64 ? 8 : 4);
        for (unsigned th : threads) {
            set_engine_threads(th);
            // This case's peak: the input (resident already), the output and the
            // engine's buffers, not an earlier, larger case's, nor the copy's buffers.
            const bool own_peak = reset_peak_rss();
            const NormDef& def = c.def;
            NormLayer layer(def, dtype);
            StepResult s;
            auto c0 = Clock::now();
            layer.forward(x, channel_axis, "bench", nullptr, s);  // first call: touches fresh output pages
            double cold = ms(c0, Clock::now());
            const Timing fwd = time_calls(o.repeat, o.min_time_ms, [&] { layer.forward(x, channel_axis, "bench", nullptr, s); });
            const double med = fwd.median;
            // read before the phases and the copy yardstick allocate their own buffers
            const double peak = own_peak ? peak_rss_mib() : std::numeric_limits<double>::quiet_NaN();
            const double copy = copy_ms(bytes, th, o.repeat, o.min_time_ms);
            const double gbs = 2.0 * static_cast<double>(bytes) / (med * 1e6);
            const double copy_gbs = 2.0 * static_cast<double>(bytes) / (copy * 1e6);
            // Phases against the copy: moments read the bytes once, normalize reads and
            // writes them, the copy reads and writes them.
            const Phases ph = s.res.use_batch_stats ? time_phases(x, s.res, o.repeat, o.min_time_ms) : Phases{};
            const double per_el = 1e6 / static_cast<double>(x.size());  // ms -> ns per element
            const double m_ns = ph.moments_ms * per_el, n_ns = ph.normalize_ms * per_el;
            const double m_of = ph.moments_ms > 0 ? copy / (2.0 * ph.moments_ms) : 0.0;
            const double n_of = ph.normalize_ms > 0 ? copy / ph.normalize_ms : 0.0;
            if (o.json) {
                out << "{\"norm\": \"" << norm << "\", \"shape\": " << compact_shape(shape) << ", \"dtype\": \""
                    << o.dtype << "\", \"compute\": \"" << compute << "\", \"channel_axis\": "
                    << (def.type == NormType::layernorm || def.type == NormType::rmsnorm ? "null" : std::to_string(channel_axis))
                    << ", \"num_groups\": " << (def.type == NormType::groupnorm ? std::to_string(def.num_groups) : "null")
                    << ", \"data_mean\": " << format_number(o.data_mean)
                    << ", \"threads\": " << th << ", \"median_ms\": " << med << ", \"q1_ms\": " << fwd.q1
                    << ", \"q3_ms\": " << fwd.q3 << ", \"timed_calls\": " << fwd.calls
                    << ", \"ns_per_elem\": " << med * per_el
                    << ", \"gb_per_s\": " << gbs << ", \"copy_gb_per_s\": " << copy_gbs
                    << ", \"fraction_of_copy\": " << gbs / copy_gbs << ", \"moments_ns_per_elem\": " << m_ns
                    << ", \"moments_of_copy\": " << m_of << ", \"normalize_ns_per_elem\": " << n_ns
                    << ", \"normalize_of_copy\": " << n_of << ", \"state\": \"steady\", \"cold_ms\": " << cold
                    << ", \"peak_rss_mib\": " << (std::isnan(peak) ? std::string("null") : format_number(peak))
                    << "}\n";
            } else {
                out << std::left << std::setw(13) << norm << std::setw(18) << compact_shape(shape)
                    << std::setw(9) << o.dtype << std::setw(8) << th << std::setw(11) << std::setprecision(4)
                    << med << std::setw(10) << fwd.q3 - fwd.q1 << std::setw(10) << gbs << std::setw(14) << copy_gbs << std::setw(10)
                    << gbs / copy_gbs << std::setw(12) << m_ns << std::setw(10) << m_of << std::setw(14) << n_ns
                    << std::setw(10) << n_of << std::setw(9) << cold << peak << "\n";
            }
        }
    }
    set_engine_threads(saved_threads);
    if (!o.json)
        out << "(median_ms: steady state, output buffers reused; iqr_ms: the spread of the timed calls, third\n"
               " quartile minus first; cold_ms: the first call, fresh pages;\n"
               " moments_ns, normalize_ns: each phase timed on its own, ns per element; their of_copy:\n"
               " the bytes the phase moves per second (moments: one read, normalize: a read and a write)\n"
               " against the copy's; peak_rss_mib: the process's peak resident memory during this case's\n"
               " normalization, nan when the kernel cannot reset it; compute " << compute << ")\n";
    return out.str();
}

}  // namespace normlab
