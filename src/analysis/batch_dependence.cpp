// batch_dependence: does one sample's output depend on who else is in the batch? The
// sample is normalised alone and beside batch-mates at several batch sizes and compared
// with its output in the given batch on one device. The batch-mates are seeded draws like
// the data, or ("mates": "data") the data's own other samples in order: real images or
// token sequences, whose statistics draws need not resemble. With "replicas", the given
// batch is also split into R equal data-parallel replicas, normalised with per-replica
// statistics (unsynchronised: DataParallel, DDP) and with the whole batch's (SyncBatchNorm).
// Only statistics taken across samples (BatchNorm in training) may make a difference;
// every other norm must give exactly 0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    std::vector<long long> sizes = {1, 2, 8, 32};
    long long sample = 0;
    bool data_mates = false;  ///< "mates": "data" (the data's own samples), not "drawn"
    std::vector<long long> replicas;  ///< replica counts R: the given batch split into R slices
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    if (auto s = r.integers("sizes")) {
        if (s->empty()) r.at("sizes").fail("list is empty");
        for (std::size_t i = 0; i < s->size(); ++i)
            if ((*s)[i] < 1) r.at("sizes").child(i).fail("a batch size must be >= 1, but got " + std::to_string((*s)[i]));
        o.sizes = *s;
    }
    if (auto rs = r.integers("replicas")) {
        if (rs->empty()) r.at("replicas").fail("list is empty");
        for (std::size_t i = 0; i < rs->size(); ++i)
            if ((*rs)[i] < 1)
                r.at("replicas").child(i).fail("a replica count must be >= 1, but got " + std::to_string((*rs)[i]));
        o.replicas = *rs;
    }
    o.sample = r.integer("sample", 0);
    if (o.sample < 0) r.at("sample").fail("sample must be >= 0, but got " + std::to_string(o.sample));
    o.data_mates = r.choice("mates", {"drawn", "data"}, "drawn") == "data";
    r.finish();
    return o;
}

// Elements [first, first + n) of a row-major array, as a flat array.
xt::xarray<double> flat_slice(const xt::xarray<double>& a, std::size_t first, std::size_t n) {
    xt::xarray<double> out = xt::xarray<double>::from_shape({n});
    std::copy(a.data() + first, a.data() + first + n, out.data());
    return out;
}

// Sample k of b followed by the first n - 1 other samples of b in order (k skipped), with
// their mask rows and lengths: the sample among real batch-mates. Requires 1 <= n <= b's
// batch size (check() refuses larger sizes) and k < it; run() takes b itself for n = N.
Batch data_mates(const Batch& b, std::size_t k, std::size_t n) {
    Batch out = take_samples(b, k, 1);
    const std::size_t before = std::min(k, n - 1), after = n - 1 - before;
    if (before > 0) out = concat_samples(out, take_samples(b, 0, before));
    if (after > 0) out = concat_samples(out, take_samples(b, k + 1, after));
    return out;
}

// The norm on one device: its own replicas and sync dropped (the reference of every row).
NormDef single_device(NormDef d) {
    d.replica_sizes.clear();
    d.replica_count = 0;
    d.sync = false;
    return d;
}

// Sample k's output (flat) when b is split into R equal replicas, synchronised or not.
// BatchNorm takes its own replicas/sync keys; every other norm has per-sample statistics,
// so unsynchronised means normalising the replica holding k as a batch of its own.
// R divides the batch (check() refuses any other; std::logic_error if one gets here).
// Throws InputError when a replica cannot be normalised (one value per channel).
xt::xarray<double> replica_output(const NormDef& def, DType dtype, const Batch& b, std::size_t k, long long R,
                                  bool sync) {
    const std::size_t n = b.x.shape()[0], per = b.x.size() / n;
    if (n % static_cast<std::size_t>(R) != 0)
        throw std::logic_error("batch_dependence: replicas " + std::to_string(R) + " passed check() on a batch of " +
                               std::to_string(n));
    if (def.type == NormType::batchnorm) {
        NormDef d = single_device(def);
        d.replica_count = R;
        d.sync = sync;
        return flat_slice(apply_norm(d, dtype, b).fwd.y.to_double(), k * per, per);
    }
    if (sync) return flat_slice(apply_norm(def, dtype, b).fwd.y.to_double(), k * per, per);
    const std::size_t slice = n / static_cast<std::size_t>(R), first = k / slice * slice;
    const xt::xarray<double> y = apply_norm(def, dtype, take_samples(b, first, slice)).fwd.y.to_double();
    return flat_slice(y, (k - first) * per, per);
}

// "R must divide N": the divisors of n when there are a few, else the rule alone.
std::string divisors_hint(std::size_t n) {
    std::vector<std::size_t> small, large;  // divisors up to sqrt(n), and their partners
    for (std::size_t d = 1; d <= n / d; ++d)
        if (n % d == 0) {
            small.push_back(d);
            if (d != n / d) large.push_back(n / d);
        }
    small.insert(small.end(), large.rbegin(), large.rend());
    if (small.size() > 12) return "use a divisor of " + std::to_string(n);
    std::string list;
    for (std::size_t i = 0; i < small.size(); ++i)
        list += (i == 0 ? "" : i + 1 == small.size() ? " or " : ", ") + std::to_string(small[i]);
    return "use " + list;
}

// A batch axis holding the sample; with the data's own batch-mates, enough samples for
// every size (a run could not build the batch); replica counts that split the batch into
// equal slices (a count that does not is a config error, not a dependence on the batch);
// every pair on the given batch. The batches of other sizes and the replicas may be
// refused by a norm (BatchNorm in training on one sample): a status, not an error.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data) {
        const DataShape d = shape_of(ctx.batch(dn));
        require_sample_axis(spec.loc, "batch_dependence", dn, d.shape, d.channel_axis);
        if (static_cast<std::size_t>(o.sample) >= d.shape[0])
            spec.loc.child("sample").fail("batch_dependence on data " + quoted_text(dn) + ": sample " + std::to_string(o.sample) +
                                          " out of range for a batch of " + std::to_string(d.shape[0]));
        const std::size_t N = d.shape[0];
        if (o.data_mates)
            for (std::size_t i = 0; i < o.sizes.size(); ++i)
                if (static_cast<std::size_t>(o.sizes[i]) > N) {
                    // Wrong because of the data's batch or of "mates": an override of either is to blame.
                    std::vector<std::string> related = data_related(dn);
                    related.push_back(spec.loc.child("mates").pointer);
                    spec.loc.child("sizes").child(i).fail(
                        "batch_dependence on data " + quoted_text(dn) + ": batch size " + std::to_string(o.sizes[i]) +
                            " with \"mates\": \"data\" needs " + std::to_string(o.sizes[i]) +
                            " samples, but the data has a batch of N = " + std::to_string(N) +
                            " (use sizes <= " + std::to_string(N) + ", or \"mates\": \"drawn\")",
                        related);
                }
        for (std::size_t i = 0; i < o.replicas.size(); ++i)
            if (N % static_cast<std::size_t>(o.replicas[i]) != 0)
                spec.loc.child("replicas").child(i).fail(
                    "batch_dependence on data " + quoted_text(dn) + ": replicas " + std::to_string(o.replicas[i]) +
                    " does not divide the batch of N = " + count_noun(N, "sample") +
                    " into equal slices (" + divisors_hint(N) + ")");
        for (const auto& nn : spec.norms) check_pair(ctx.norm(nn), ctx.dtype, d, dn);
    }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = batch_dependence_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const std::size_t k = static_cast<std::size_t>(o.sample), B = b.x.shape()[0];
        const Batch fixed = take_samples(b, k, 1);
        const std::size_t per = fixed.x.size();
        // The sample comes first, its batch-mates after it; every norm sees the same.
        std::vector<Batch> batches;
        // Where the sample sits in each batch: first, except that the data's own N samples are
        // the given batch itself, the sample at its own place, so that the row at n = N is
        // exactly the reference (reordered, BatchNorm's sums would round differently).
        std::vector<std::size_t> at(o.sizes.size(), 0);
        for (long long n : o.sizes) {
            if (o.data_mates && static_cast<std::size_t>(n) == B) {
                at[batches.size()] = k;
                batches.push_back(b);
                continue;
            }
            if (o.data_mates) {
                batches.push_back(data_mates(b, k, static_cast<std::size_t>(n)));
                continue;
            }
            Rng rng(derive_seed(ctx.seed, "batch_dependence/" + dn + "/" + std::to_string(n)));
            batches.push_back(n == 1 ? fixed
                                     : concat_samples(fixed, gaussian_like(b, static_cast<std::size_t>(n - 1), rng, b.x.dtype)));
        }
        for (const auto& nn : spec.norms) {
            const NormDef def = single_device(ctx.norm(nn));
            const xt::xarray<double> y = apply_norm(def, ctx.dtype, b).fwd.y.to_double();
            const xt::xarray<double> ref = flat_slice(y, k * per, per);
            // One row: the sample's output `get()` gives against ref, or the layer's refusal.
            // `mates` names who is beside the sample: the replica rows always hold the given
            // batch's own samples, whatever the analysis' key says.
            auto row = [&](long long batch_size, const char* kind, const char* mates, long long replicas,
                           const auto& get) {
                std::optional<double> diff;  // absent: the layer refused (an empty cell)
                std::string status = "ok";
                try {
                    diff = deviation(get(), ref, ctx.dtype).max_abs;
                } catch (const InputError& e) {
                    // PyTorch refuses it too (BatchNorm in training with one value per channel):
                    // the layer cannot normalise the sample without batch-mates. The engine's
                    // message names the norm and the data but not the config's path, which
                    // does not belong in the table.
                    status = "error: " + std::string(e.what());
                }
                t.add_row({dn, nn, norm_type_name(def.type), batch_size, diff ? Cell(*diff) : not_applicable(),
                           !(diff && *diff == 0), status,
                           static_cast<long long>(k), std::string(kind), std::string(mates), replicas});
            };
            for (std::size_t i = 0; i < batches.size(); ++i)
                row(o.sizes[i], "size", o.data_mates ? "data" : "drawn", 1, [&] { return flat_slice(apply_norm(def, ctx.dtype, batches[i]).fwd.y.to_double(), at[i] * per, per); });
            for (long long R : o.replicas)
                for (bool sync : {false, true})
                    row(static_cast<long long>(B) / R, sync ? "synced" : "unsynced", "data", R, [&] { return replica_output(def, ctx.dtype, b, k, R, sync); });
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements, P a sample's, and d bytes per value
// (value_bytes). Every batch of `sizes` is built before the first norm runs and kept until
// the last: (d + 1) bytes (values, full-shape mask) per element of each, sum(sizes) P
// elements in all. Building one holds its float64 draws and their concatenation with the
// sample (19 + 2d bytes per element of the largest size) beside the float64 copy of the
// given batch; running a norm holds the given batch's float64 output (8 E) beside one
// batch's output and its float64 copy ((d + 8) per element of the larger of the largest
// batch and the given one, and twice its statistics: step_stats_per_element); the output pool
// keeps up to four outputs of other sizes beside it. Measured with the default sizes on
// (64, 256, 256) float32 at 22 bytes per element beyond the batch (estimate 29); with sizes
// [4000000] on (4, 6, 8) at a 4404 MiB peak (estimate 5.9 GiB).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t E = w.elements, N = w.shape.empty() ? 1 : w.shape[0], P = N ? E / N : 0;
    const std::size_t d = value_bytes(w.dtype);
    Sat all;  // samples in all the batches
    std::size_t largest = 0;
    std::vector<std::size_t> distinct{N};
    for (long long n : o.sizes) {
        const auto u = static_cast<std::size_t>(n);
        all = all + u;
        largest = std::max(largest, u);
        if (std::find(distinct.begin(), distinct.end(), u) == distinct.end()) distinct.push_back(u);
    }
    std::sort(distinct.rbegin(), distinct.rend());
    Sat pooled;  // the outputs of the next four sizes, by samples, beside the largest one's
    for (std::size_t i = 1; i < distinct.size() && i <= OutputPool::kKeep; ++i) pooled = pooled + distinct[i];
    const std::size_t stats = step_stats_per_element(spec.norms, w);
    const Sat big = std::max(Sat(largest) * P, Sat(E));
    const Sat build = Sat(E) * 8 + Sat(largest) * P * (19 + 2 * d);
    const Sat run = Sat(E) * 8 + big * (d + 8 + 2 * stats);
    WorkBytes wb;
    wb.bytes = (all * P * (d + 1) + pooled * P * (d + stats) + std::max(build, run)).n;
    // The sizes make it large when their batches outweigh the data.
    if (all * P > Sat(E)) wb.key = key_if_set(spec, "sizes");
    return wb;
}

// A row per norm and size, and two per norm and replica count.
TableRows rows(const AnalysisSpec& spec, const WorkInputs&) {
    const Options o = read_options(spec);
    TableRows r;
    r.rows = (Sat(spec.norms.size()) * (Sat(o.sizes.size()) + Sat(o.replicas.size()) * 2)).n;
    r.key = key_if_set(spec, o.sizes.size() >= 2 * o.replicas.size() ? "sizes" : "replicas");
    return r;
}

}  // namespace

AnalysisType batch_dependence_analysis() {
    AnalysisType a;
    a.name = "batch_dependence";
    a.summary = "one sample's output as its batch-mates (seeded draws or the data's own) and the batch size "
                "change, and as the batch is split over data-parallel replicas, synchronised or not";
    a.columns = {"data", "norm", "type", "batch_size", "max_abs_diff", "batch_dependent", "status", "sample",
                 "kind", "mates", "replicas"};
    a.figure.title = "change of one sample's output against the (per-replica) batch size";
    a.figure.kind = FigureKind::lines;
    a.figure.x = "batch_size";
    a.figure.x_log = true;
    // sample too: two analyses of one type that follow different samples share the table.
    a.figure.series = {"data", "norm", "kind", "mates", "sample"};
    a.figure.metrics = {{"max_abs_diff", "max |output change| of the sample"}};
    a.keys = {{"sizes", "[1, 2, 8, 32]"}, {"sample", "0"}, {"mates", "drawn"}, {"replicas", "none"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
