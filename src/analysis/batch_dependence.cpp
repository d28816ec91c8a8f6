// batch_dependence: does one sample's output depend on who else is in the batch? The
// sample is normalised alone and beside seeded batch-mates at several batch sizes and
// compared with its output in the given batch. Only statistics taken across samples
// (BatchNorm in training) may make a difference; every other norm must give exactly 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    std::vector<long long> sizes = {1, 2, 8, 32};
    long long sample = 0;
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
    o.sample = r.integer("sample", 0);
    if (o.sample < 0) r.at("sample").fail("sample must be >= 0, but got " + std::to_string(o.sample));
    r.finish();
    return o;
}

// Elements [first, first + n) of a row-major array, as a flat array.
xt::xarray<double> flat_slice(const xt::xarray<double>& a, std::size_t first, std::size_t n) {
    xt::xarray<double> out = xt::xarray<double>::from_shape({n});
    std::copy(a.data() + first, a.data() + first + n, out.data());
    return out;
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = batch_dependence_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        require_sample_axis(spec.loc, "batch_dependence", b);
        const std::size_t k = static_cast<std::size_t>(o.sample), B = b.x.shape()[0];
        if (k >= B)
            spec.loc.child("sample").fail("batch_dependence on data \"" + dn + "\": sample " + std::to_string(k) +
                                          " out of range for a batch of " + std::to_string(B));
        const Batch fixed = take_samples(b, k, 1);
        const std::size_t per = fixed.x.size();
        // The sample comes first, its seeded batch-mates after it; every norm sees the same.
        std::vector<Batch> batches;
        for (long long n : o.sizes) {
            Rng rng(derive_seed(ctx.seed, "batch_dependence/" + dn + "/" + std::to_string(n)));
            batches.push_back(n == 1 ? fixed
                                     : concat_samples(fixed, gaussian_like(b, static_cast<std::size_t>(n - 1), rng, b.x.dtype)));
        }
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            const xt::xarray<double> y = apply_norm(def, ctx.dtype, b).fwd.y.to_double();
            const xt::xarray<double> ref = flat_slice(y, k * per, per);
            for (std::size_t i = 0; i < batches.size(); ++i) {
                double diff = std::numeric_limits<double>::quiet_NaN();
                std::string status = "ok";
                try {
                    const xt::xarray<double> yn = apply_norm(def, ctx.dtype, batches[i]).fwd.y.to_double();
                    diff = deviation(flat_slice(yn, 0, per), ref, ctx.dtype).max_abs;
                } catch (const InputError& e) {
                    // PyTorch refuses it too (BatchNorm in training with one value per channel):
                    // the layer cannot normalise the sample without batch-mates. The engine's
                    // message names the norm and the data but not the config's path, which
                    // does not belong in the table.
                    status = "error: " + std::string(e.what());
                }
                t.add_row({dn, nn, norm_type_name(def.type), o.sizes[i], diff, !(diff == 0), status,
                           static_cast<long long>(k)});
            }
        }
    }
    return t;
}

}  // namespace

AnalysisType batch_dependence_analysis() {
    AnalysisType a;
    a.name = "batch_dependence";
    a.summary = "one sample's output as its batch-mates and the batch size change (seeded batch-mates)";
    a.columns = {"data", "norm", "type", "batch_size", "max_abs_diff", "batch_dependent", "status", "sample"};
    a.figure.title = "change of one sample's output against batch size";
    a.figure.kind = FigureKind::lines;
    a.figure.x = "batch_size";
    a.figure.x_log = true;
    a.figure.series = {"data", "norm"};
    a.figure.metrics = {{"max_abs_diff", "max |output change| of the sample"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.run = run;
    return a;
}

}  // namespace normlab
