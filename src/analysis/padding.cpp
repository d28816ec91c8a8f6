// padding: what padded positions do to a norm's statistics and to its outputs at real
// positions, and whether the real-position outputs survive re-padding (longer padding and
// other batch-mates), which a model needs for its outputs not to depend on how it was batched.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    long long batch_mates = 2;
    std::optional<long long> extra_length;  ///< absent: half the padded axis, at least 1
    double pad_value = 0;
    std::optional<double> tolerance;        ///< absent: rounding_tolerance of the output
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    o.batch_mates = r.integer("batch_mates", 2);
    if (o.batch_mates < 0) r.at("batch_mates").fail("batch_mates must be >= 0, but got " + std::to_string(o.batch_mates));
    o.extra_length = r.integer("extra_length");
    if (o.extra_length && *o.extra_length < 1)
        r.at("extra_length").fail("extra_length must be >= 1, but got " + std::to_string(*o.extra_length));
    o.pad_value = r.number("pad_value", 0.0);
    o.tolerance = r.nonnegative("tolerance");
    r.finish();
    return o;
}

// For every element of an array of shape `s`, its flat offset in an array of shape `big`
// (each dim >= s's) when placed at the origin corner, shifted by `first` along axis 0.
std::vector<std::size_t> embed_offsets(const Shape& s, const Shape& big, std::size_t first) {
    std::vector<std::size_t> stride(big.size(), 1);
    for (std::size_t d = big.size() - 1; d-- > 0;) stride[d] = stride[d + 1] * big[d + 1];
    const std::size_t n = num_elements(s);
    std::vector<std::size_t> out(n), idx(s.size(), 0);
    std::size_t off = first * stride[0];
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = off;
        for (std::size_t d = s.size(); d-- > 0;) {  // odometer, innermost axis first
            off += stride[d];
            if (++idx[d] < s[d]) break;
            off -= stride[d] * s[d];
            idx[d] = 0;
        }
    }
    return out;
}

// The re-padded batch: `mates` seeded batch-mates (padding set to pad_value) followed by
// b's samples, every padded axis (an axis other than 0 and the channel axis along which
// the mask varies) made longer, new positions padding. `offsets` maps b's elements into it.
struct Repadded {
    Batch batch;
    std::vector<std::size_t> offsets;
};

Repadded repad(const Batch& b, const Options& o, std::uint64_t seed) {
    const Shape s = b.x.shape();
    const Shape ms(b.mask.shape().begin(), b.mask.shape().end());
    Shape big = s;
    for (std::size_t a = 1; a < s.size(); ++a)
        if (a != b.channel_axis && ms[a] > 1)
            big[a] += o.extra_length ? static_cast<std::size_t>(*o.extra_length) : std::max<std::size_t>(1, (s[a] + 1) / 2);
    const std::size_t mates = static_cast<std::size_t>(o.batch_mates);
    big[0] = mates + s[0];

    Rng rng(seed);
    Batch m = gaussian_like(b, mates, rng, DType::float64);
    xt::xarray<double> mx = m.x.to_double();
    const xt::xarray<std::uint8_t> mm = full_mask(m);
    for (std::size_t i = 0; i < mx.size(); ++i)
        if (!mm.data()[i]) mx.data()[i] = o.pad_value;

    xt::xarray<double> x = xt::xarray<double>::from_shape(big);
    x.fill(o.pad_value);
    xt::xarray<std::uint8_t> mask = xt::zeros<std::uint8_t>(big);
    Shape ss = s;
    ss[0] = mates;
    const std::vector<std::size_t> mo = embed_offsets(ss, big, 0);
    for (std::size_t i = 0; i < mo.size(); ++i) x.data()[mo[i]] = mx.data()[i], mask.data()[mo[i]] = mm.data()[i];
    Repadded r;
    r.offsets = embed_offsets(s, big, mates);
    const xt::xarray<double> bx = b.x.to_double();
    const xt::xarray<std::uint8_t> bm = full_mask(b);
    for (std::size_t i = 0; i < r.offsets.size(); ++i) x.data()[r.offsets[i]] = bx.data()[i], mask.data()[r.offsets[i]] = bm.data()[i];
    r.batch = with_values(b, x, b.x.dtype);
    r.batch.mask = mask;
    return r;
}

// The norm as it applies to another length: a normalized_shape (which names the lengths)
// becomes the equivalent trailing axes.
NormDef for_other_shape(NormDef d) {
    if (d.normalized_shape) {
        std::vector<long long> axes;
        const long long k = static_cast<long long>(d.normalized_shape->size());
        for (long long a = -k; a < 0; ++a) axes.push_back(a);
        d.axes = axes;
        d.normalized_shape.reset();
    }
    return d;
}

NormDef with_mask(NormDef d, bool m) {
    d.mask = m;
    return d;
}

// |a - b| and |a - b| / |b|, where b is the padding-free statistic (0/0 = 0, d/0 = inf).
struct Contamination {
    double abs_max = 0, rel_max = 0, incl_avg = 0, excl_avg = 0;
};
Contamination contamination(const xt::xarray<double>& incl, const xt::xarray<double>& excl) {
    Contamination c;
    std::size_t n = 0;
    for (std::size_t i = 0; i < excl.size(); ++i) {
        const double e = excl.data()[i], v = incl.data()[i];
        if (!std::isfinite(e)) continue;  // a group without real positions
        const double d = std::fabs(v - e);
        c.abs_max = std::max(c.abs_max, d);
        c.rel_max = std::max(c.rel_max, e != 0 ? d / std::fabs(e) : d == 0 ? 0 : std::numeric_limits<double>::infinity());
        c.incl_avg += v, c.excl_avg += e, ++n;
    }
    const double nan = std::numeric_limits<double>::quiet_NaN();
    c.incl_avg = n ? c.incl_avg / static_cast<double>(n) : nan;
    c.excl_avg = n ? c.excl_avg / static_cast<double>(n) : nan;
    return c;
}

// Data with a padding mask and a batch axis; every pair (the norms as configured: the
// masked and unmasked variants bind alike). Re-padding may not apply: a note, not an error.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    read_options(spec);
    for (const auto& dn : spec.data) {
        const DataShape d = shape_of(ctx.batch(dn));
        if (!d.has_mask)
            spec.loc.child("data").fail("padding on data " + quoted_text(dn) + ": needs data with a padding mask (give the "
                                        "source \"mask\" or \"lengths\", or use a source that pads, such as tokens)");
        require_sample_axis(spec.loc, "padding", dn, d.shape, d.channel_axis);
        for (const auto& nn : spec.norms) check_pair(ctx.norm(nn), ctx.dtype, d, dn);
    }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = padding_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const Repadded rp = repad(b, o, derive_seed(ctx.seed, "padding/" + dn));
        const xt::xarray<std::uint8_t> real_mask = full_mask(b);
        const std::vector<std::uint8_t> real(real_mask.begin(), real_mask.end());
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            const Step si = apply_norm(with_mask(def, false), ctx.dtype, b);
            const Step se = apply_norm(with_mask(def, true), ctx.dtype, b);
            const Contamination cm = contamination(si.fwd.mean, se.fwd.mean);
            const Contamination cv = contamination(si.fwd.var, se.fwd.var);
            long long empty = 0;
            for (double v : se.fwd.var) empty += std::isfinite(v) ? 0 : 1;
            const xt::xarray<double> yi = si.fwd.y.to_double(), ye = se.fwd.y.to_double();
            const double real_diff = deviation(yi, ye, ctx.dtype, &real).max_abs;

            // Re-padding: the norm as configured, on the longer batch with batch-mates.
            const xt::xarray<double>& y = def.mask ? ye : yi;
            std::optional<double> repad_diff;  // absent: the check does not apply (see note)
            std::string note;
            try {
                const xt::xarray<double> yr = apply_norm(for_other_shape(def), ctx.dtype, rp.batch).fwd.y.to_double();
                xt::xarray<double> back = xt::xarray<double>::from_shape(y.shape());
                for (std::size_t i = 0; i < rp.offsets.size(); ++i) back.data()[i] = yr.data()[rp.offsets[i]];
                repad_diff = deviation(back, y, ctx.dtype, &real).max_abs;
            } catch (const NormError& e) {
                note = "not applicable: " + norm_location(ctx.file, e).message(e.what());
            } catch (const InputError& e) {
                note = std::string("not applicable: ") + e.what();
            }
            // Exact for norms whose statistics never see the padded axis; masked norms that sum
            // over it see more (padded) positions, in another order: a few ulps.
            const double tol = o.tolerance ? *o.tolerance : rounding_tolerance(ctx.dtype, y, &real);
            t.add_row({dn, nn, norm_type_name(def.type), def.mask, b.pad_fraction(), cm.abs_max, cv.rel_max, real_diff,
                       repad_diff ? Cell(*repad_diff) : not_applicable(),
                       repad_diff ? Cell(*repad_diff <= tol) : not_applicable(), cm.rel_max, cv.abs_max, cm.incl_avg,
                       cm.excl_avg, cv.incl_avg, cv.excl_avg, empty, compact_shape(rp.batch.x.shape()), note, tol});
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements, P a sample's, R the re-padded
// batch's ((batch_mates + N) samples, every padded axis extra_length longer) and d bytes per
// value (value_bytes). The padded axes are those along which the mask varies, known only
// once the batch is built: every axis but the batch and channel axes counts here (all of
// them but the batch axis when the channel axis is not known yet). Re-padding holds R in
// float64 with its mask (9 R), the re-padded batch in the run dtype with its mask
// ((d + 1) R), the batch-mates' float64 draws and offsets (34 bytes per element of theirs)
// and the data's float64 copy and offsets (17 E); running a norm then holds the
// re-padded batch, its output and the output's float64 copy ((2d + 9) R) beside the
// outputs with and without the mask and their float64 copies ((2d + 34) E), and the steps'
// statistics (step_stats_per_element). Measured on tokens (64, 512, 64) float32 with three
// norms at a 164 MiB peak of the whole process with the defaults (estimate 176 MiB), and at
// 252 MiB with batch_mates 64 and extra_length 512 (estimate 345 MiB).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const Shape& s = w.shape;
    const std::size_t E = w.elements, N = s.empty() ? 1 : s[0], P = N ? E / N : 0;
    const std::size_t d = value_bytes(w.dtype), mates = static_cast<std::size_t>(o.batch_mates);
    Sat R = Sat(mates) + N, R_default = Sat(2) + N;  // samples, then elements; the same with the defaults
    for (std::size_t a = 1; a < s.size(); ++a) {
        const std::size_t fallback = std::max<std::size_t>(1, (s[a] + 1) / 2);
        const bool padded = !w.channel_axis || a != *w.channel_axis;
        const std::size_t ext = !padded ? 0 : o.extra_length ? static_cast<std::size_t>(*o.extra_length) : fallback;
        R = R * (Sat(s[a]) + ext);
        R_default = R_default * (s[a] + (padded ? fallback : 0));
    }
    const std::size_t stats = step_stats_per_element(spec.norms, w);
    WorkBytes wb;
    wb.bytes = (R * (2 * d + 12 + stats) + Sat(mates) * P * 34 + Sat(E) * (2 * d + 40 + 2 * stats)).n;
    // The key that makes the re-padded batch larger than the defaults would: more
    // batch-mates, or a longer padding.
    if (R > R_default) {
        const double by_mates = static_cast<double>((Sat(mates) + N).n) / static_cast<double>(2 + N);
        const double by_length = static_cast<double>(R.n) / static_cast<double>(R_default.n) / by_mates;
        wb.key = larger_key(spec, "batch_mates", by_mates, "extra_length", by_length);
    }
    return wb;
}

}  // namespace

AnalysisType padding_analysis() {
    AnalysisType a;
    a.name = "padding";
    a.summary = "statistics with padding included vs excluded, real-position output change, re-padding invariance";
    a.columns = {"data", "norm", "type", "masked", "pad_fraction", "mean_contamination_max",
                 "var_contamination_rel_max", "real_output_max_abs_diff", "repad_max_abs_diff",
                 "padding_invariant", "mean_contamination_rel_max", "var_contamination_max",
                 "mean_included_avg", "mean_excluded_avg", "var_included_avg", "var_excluded_avg",
                 "empty_groups", "repad_shape", "repad_note", "tolerance"};
    // The norm as configured first: its real outputs under re-padding. The contamination
    // columns compare statistics with and without padding whatever the norm's mask, so a
    // masked norm's bars there are what including the padding would do, not what it does:
    // the legend and the panel titles say so.
    a.figure.title = "real outputs that change when re-padded (the norm as configured), and statistics with vs "
                     "without padding\nmasked norms exclude padding: their bars in the last two panels show what "
                     "including it would do";
    a.figure.category = {"data", "norm"};
    a.figure.series = {"masked"};
    a.figure.value_names = {{"masked=true", "masked: padding excluded"},
                            {"masked=false", "unmasked: padding included"}};
    // Grey for the masked norms: in the contamination panels their bars are hypothetical.
    a.figure.series_colors = {{"masked: padding excluded", "#a0a0a0"}, {"unmasked: padding included", "#4c78a8"}};
    a.figure.metrics = {{"repad_max_abs_diff", "max |real output change| after re-padding"},
                        {"mean_contamination_max", "padding included: max |mean with - without|"},
                        {"var_contamination_rel_max", "padding included: max relative variance change"}};
    a.keys = {{"batch_mates", "2"}, {"extra_length", "half the padded axis"}, {"pad_value", "0"},
              {"tolerance", "8 x machine eps x max(1, max |output|)"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.run = run;
    return a;
}

}  // namespace normlab
