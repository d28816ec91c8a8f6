#include "run/bench_stack.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <iomanip>
#include <sstream>
#include <sys/resource.h>

#include <xtensor-blas/xlinalg.hpp>

#include "analysis/stack_weights.hpp"
#include "data/random.hpp"
#include "json/text.hpp"
#include "norm/engine.hpp"
#include "run/process_memory.hpp"
#include "run/safety.hpp"
#include "tensor/order_stats.hpp"
#include "stack/buffers.hpp"
#include "stack/model.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The peak since the reset, or the process-wide maximum when the kernel refused the reset.
double case_peak_mib(bool since_reset) {
    if (since_reset) return peak_rss_mib();
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0;
}

template <class T>
xt::xarray<T> uniform_array(const Shape& s, Rng& rng) {
    xt::xarray<T> a = xt::xarray<T>::from_shape(s);
    for (auto& v : a) v = static_cast<T>(2.0 * rng.uniform() - 1.0);
    return a;
}

// The six products of one ffn block's forward and backward pass, as (m, k, n).
std::vector<std::array<std::size_t, 3>> block_products(std::size_t R, std::size_t D, std::size_t H) {
    return {{R, D, H}, {R, H, D},                       // a = z W1, F = h W2
            {H, R, D}, {R, D, H}, {D, R, H}, {R, H, D}};  // dW2 = h^T dF, dh = dF W2^T, dW1 = z^T dh, dz = dh W1^T
}

// The same products as one pass of the stack, as plain xt::linalg::dot calls on
// contiguous operands of one block's sizes, `layers` times over (each call allocates its
// result, as dot does).
template <class T>
class PlainDots {
public:
    PlainDots(std::size_t R, std::size_t D, std::size_t H) {
        Rng rng(1);
        for (const auto& p : block_products(R, D, H))
            m_ops.push_back({uniform_array<T>({p[0], p[1]}, rng), uniform_array<T>({p[1], p[2]}, rng)});
    }
    double seconds_for(std::size_t layers) {
        auto t0 = Clock::now();
        for (std::size_t l = 0; l < layers; ++l)
            for (const auto& [a, b] : m_ops) {
                xt::xarray<T> c = xt::linalg::dot(a, b);
                m_sink += static_cast<double>(c.data()[0]);  // keeps the product observable
            }
        return seconds(t0, Clock::now());
    }

private:
    std::vector<std::pair<xt::xarray<T>, xt::xarray<T>>> m_ops;
    double m_sink = 0;
};

std::size_t trace_bytes(const StackTrace& tr) {
    auto bytes = [](const Tensor& t) { return t.size() * (t.dtype == DType::float64 ? 8 : 4); };
    auto stats = [](const StepResult& s) {
        return 8 * (s.fwd.mean.size() + s.fwd.var.size() + s.fwd.rstd.size() + s.fwd.batch.mean.size() +
                    s.fwd.batch.var.size() + s.fwd.batch.count.size());
    };
    std::size_t n = 0;
    for (const auto& x : tr.x) n += bytes(x);
    for (const auto& b : tr.blocks)
        n += bytes(b.norm.fwd.y) + bytes(b.norm2.fwd.y) + bytes(b.s) + bytes(b.a) + stats(b.norm) + stats(b.norm2);
    if (tr.has_final) n += bytes(tr.final_norm.fwd.y) + stats(tr.final_norm);
    return n;
}

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

struct Row {
    std::string dtype;
    double median_s = 0, cold_s = 0, act_mib = 0, weight_mib = 0, peak_mib = 0;
    // NaN for a stack without products (norm_only): there is nothing to count or compare.
    double gflops = kNone, dot_gflops = kNone;
    bool peak_reset = false;
};

// The floating-point operations of the matrix products of one forward+backward pass: each
// weight matrix W (fan_in, fan_out) of each layer takes part in one product forward (z W)
// and two backward (z^T dF for dW, dF W^T for dz), 2 N fan_in fan_out each. An ffn stack
// thus counts 12 L N D H; norm_only, which has no weights, nothing.
double product_flops(const StackDef& def, std::size_t rows, std::size_t features) {
    double f = 0;
    for (const auto& slot : weight_slots(def, features))
        f += 6.0 * static_cast<double>(rows) * static_cast<double>(slot.shape[0]) * static_cast<double>(slot.shape[1]) *
             static_cast<double>(slot.shape[2]);
    return f;
}

// The bytes of the stack's weights at `element_size` bytes a value (none for norm_only).
double weight_bytes(const StackDef& def, std::size_t features, std::size_t element_size) {
    double n = 0;
    for (const auto& slot : weight_slots(def, features))
        n += static_cast<double>(slot.shape[0]) * static_cast<double>(slot.shape[1]) * static_cast<double>(slot.shape[2]);
    return n * static_cast<double>(element_size);
}

// A figure for the JSON line: null where it does not exist (no products to count).
std::string json_number(double v) {
    if (!std::isfinite(v)) return "null";
    std::ostringstream s;
    s << std::setprecision(4) << v;
    return s.str();
}
// The same for the table: "-" where it does not exist.
std::string text_number(double v) { return std::isfinite(v) ? json_number(v) : "-"; }

// The benchmarked stack: an ffn stack of o's sizes, placement and norm, relu, xavier_uniform.
// Throws InputError for an unknown placement or norm.
StackDef bench_def(const StackBenchOptions& o) {
    StackDef def;
    def.name = "bench";
    def.layers = o.layers;
    def.block = BlockKind::ffn;
    def.hidden = o.hidden;
    def.activation = Activation::relu;
    def.init.kind = InitKind::xavier_uniform;
    bool found = false;
    for (std::size_t i = 0; i < placement_names().size(); ++i)
        if (placement_names()[i] == o.placement) def.placement = static_cast<Placement>(i), found = true;
    if (!found) throw InputError("bench --placement: unknown placement " + quoted_text(o.placement));
    def.norm.name = o.norm;
    if (o.norm == "layernorm" || o.norm == "rmsnorm") {
        def.norm.type = o.norm == "layernorm" ? NormType::layernorm : NormType::rmsnorm;
        def.norm.normalized_shape = std::vector<long long>{static_cast<long long>(o.features)};
    } else if (o.norm == "batchnorm") {
        def.norm.type = NormType::batchnorm;
    } else {
        throw InputError("bench --stack-norm: expected layernorm, rmsnorm or batchnorm, but got " + quoted_text(o.norm));
    }
    return def;
}

template <class T>
Row bench_one(const StackBenchOptions& o, DType dt) {
    const std::size_t L = o.layers, R = o.rows, D = o.features, H = o.hidden;
    const StackDef def = bench_def(o);
    Row row;
    row.dtype = dtype_name(dt);
    // What this placement really computes: norm_only has no block, hence no products and no
    // weights, and nothing for the plain products to be compared with.
    const double flops = product_flops(def, R, D);
    const bool products = flops > 0;

    Rng rng(2);
    Tensor x, dy;
    x.dtype = dy.dtype = dt;
    stack_buffers::values<T>(x) = uniform_array<T>({R, D}, rng);
    stack_buffers::values<T>(dy) = uniform_array<T>({R, D}, rng);
    row.peak_reset = reset_peak_rss();
    Stack s(def, make_stack_weights(def, D, dt, 3), {R, D}, dt, "bench");
    row.weight_mib = weight_bytes(def, D, sizeof(T)) / (1024.0 * 1024.0);
    StackTrace tr;
    StackGrads g;
    const auto none = xt::xarray<std::uint8_t>::from_shape({0});
    std::vector<double> times, dot_times;
    std::optional<PlainDots<T>> dots;
    for (unsigned k = 0; k <= o.repeat; ++k) {
        auto t0 = Clock::now();
        s.forward(x, none, tr);
        s.backward(tr, dy, g);
        const double t = seconds(t0, Clock::now());
        if (k == 0) {
            row.cold_s = t;
            // What the pass needed: measured before the plain products add their operands.
            row.peak_mib = case_peak_mib(row.peak_reset);
            if (products) {
                dots.emplace(R, D, H);
                dots->seconds_for(1);  // warm-up: OpenBLAS's threads and buffers
            }
            continue;
        }
        times.push_back(t);
        // Alternating with the stack's passes, so both see the same machine load.
        if (products) dot_times.push_back(dots->seconds_for(L));
    }
    row.act_mib = static_cast<double>(trace_bytes(tr)) / (1024.0 * 1024.0);
    row.median_s = median(times);
    if (products) {
        row.gflops = flops / row.median_s / 1e9;
        row.dot_gflops = flops / median(dot_times) / 1e9;
    }
    return row;
}

}  // namespace

std::string run_stack_bench(const StackBenchOptions& o) {
    if (o.layers == 0 || o.rows == 0 || o.features == 0 || o.hidden == 0 || o.repeat == 0)
        throw InputError("bench --stack: layers, rows, features, hidden and repeat must be >= 1");
    // Every dtype checked before any is timed: what the pass holds (weights, activations,
    // the backward's buffers, the input and upstream gradient) against the run command's
    // default memory limit, so that a size typed wrong is refused, not an out-of-memory.
    const StackDef def = bench_def(o);
    // The header and the JSON name only what the placement has: none has no norm, norm_only
    // no block (hence no hidden size, no weights and no products).
    const bool has_block = def.placement != Placement::norm_only, has_norm = def.has_norm();
    const std::string sizes = "L=" + std::to_string(o.layers) + " N=" + std::to_string(o.rows) +
                              " D=" + std::to_string(o.features) + (has_block ? " H=" + std::to_string(o.hidden) : "");
    for (const auto& name : o.dtypes) {
        const DType dt = parse_dtype(name);
        if (dt != DType::float32 && dt != DType::float64)
            throw InputError("bench --stack: dtype must be float32 or float64, but got " + quoted_text(name));
        const double need = static_cast<double>(stack_memory_bytes(def, {o.rows, o.features}, dt, false)) +
                            2.0 * static_cast<double>(o.rows) * static_cast<double>(o.features) * (dt == DType::float64 ? 8 : 4);
        check_default_memory("bench --stack: " + sizes + " in " + name, need);
    }
    std::vector<Row> rows;
    for (const auto& name : o.dtypes) {
        const DType dt = parse_dtype(name);
        if (dt == DType::float64) rows.push_back(bench_one<double>(o, dt));
        else rows.push_back(bench_one<float>(o, dt));
    }
    std::ostringstream out;
    out << std::setprecision(4);
    if (!o.json)
        out << "stack " << o.placement << (has_block ? " ffn" : "") << (has_norm ? " " + o.norm : "") << ": " << sizes
            << ", forward+backward, " << o.repeat << (o.repeat == 1 ? " timed pass\n" : " timed passes\n")
            << std::left << std::setw(9) << "dtype" << std::setw(12) << "median_s" << std::setw(12) << "cold_s"
            << std::setw(9) << "gflops" << std::setw(11) << "dot_gflops" << std::setw(10) << "fraction"
            << std::setw(17) << "activations_mib" << std::setw(13) << "weights_mib" << std::setw(14)
            << "peak_rss_mib" << "peak/activations\n";
    // The stack's norms take the default arithmetic (default_compute) for float32 data.
    const std::string f32_compute = compute_name(default_compute());
    for (const auto& r : rows) {
        const double frac = r.gflops / r.dot_gflops, ratio = r.peak_mib / r.act_mib;
        const std::string compute = r.dtype == "float32" ? f32_compute : compute_name(Compute::float64);
        if (o.json) {
            out << "{\"bench\": \"stack\", \"placement\": \"" << o.placement << "\", \"norm\": "
                << (has_norm ? "\"" + o.norm + "\"" : "null") << ", \"layers\": " << o.layers << ", \"rows\": " << o.rows
                << ", \"features\": " << o.features << ", \"hidden\": " << (has_block ? std::to_string(o.hidden) : "null")
                << ", \"dtype\": \"" << r.dtype << "\", \"compute\": \"" << compute
                << "\", \"median_s\": " << json_number(r.median_s) << ", \"cold_s\": " << json_number(r.cold_s)
                << ", \"gflops\": " << json_number(r.gflops) << ", \"dot_gflops\": " << json_number(r.dot_gflops)
                << ", \"fraction\": " << json_number(frac) << ", \"activations_mib\": " << json_number(r.act_mib)
                << ", \"weights_mib\": " << json_number(r.weight_mib) << ", \"peak_rss_mib\": " << json_number(r.peak_mib)
                << ", \"peak_since_reset\": " << (r.peak_reset ? "true" : "false") << "}\n";
        } else {
            out << std::left << std::setw(9) << r.dtype << std::setw(12) << text_number(r.median_s) << std::setw(12)
                << text_number(r.cold_s) << std::setw(9) << text_number(r.gflops) << std::setw(11)
                << text_number(r.dot_gflops) << std::setw(10) << text_number(frac) << std::setw(17)
                << text_number(r.act_mib) << std::setw(13) << text_number(r.weight_mib) << std::setw(14)
                << text_number(r.peak_mib) << text_number(ratio) << "\n";
        }
    }
    if (!o.json) {
        out << "(median_s: the median of the timed passes; cold_s: the first pass, timed on its own and left out of "
               "the median (it also allocates the buffers the later passes reuse)\n";
        if (has_block)
            out << " gflops: 12 L N D H per pass, the products' floating-point operations; dot_gflops: the same six "
                   "products per block as plain xt::linalg::dot; fraction = gflops / dot_gflops\n";
        else
            out << " gflops, dot_gflops, fraction: - (norm_only runs norms only: no products to count or compare)\n";
        out << " activations_mib: what the forward keeps for the backward; weights_mib: the blocks' weight matrices\n"
               " peak_rss_mib: the process's peak resident memory from building the stack to the end of the first "
               "pass, weights included, and also what the process holds anyway (program, libraries, input: several "
               "MiB), so peak/activations measures the stack only when the activations are far larger (see "
               "scripts/PERFORMANCE.md)\n"
               " the norms of float32 stacks compute "
            << f32_compute << ")\n";
    }
    return out.str();
}

}  // namespace normlab
