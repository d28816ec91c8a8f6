// equivalence: do two norms compute the same thing on the same data? Pairwise output
// differences, with an optional reshape of the data for either side (InstanceNorm on
// (B,T,D) viewed as (B,T,D,1) is LayerNorm over D), and each side's reduction set read
// back in the original axes.
#include <cmath>
#include <map>
#include <optional>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

struct Options {
    std::map<std::string, std::vector<long long>> reshape;  ///< by norm name
    std::optional<double> tolerance;                        ///< absent: by dtype and output size
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    if (spec.norms.size() < 2) r.at("norms").fail("equivalence compares norms pairwise: list at least two");
    if (const Json* j = r.raw("reshape")) {
        const JsonLocation at = r.at("reshape");
        if (!j->is_object()) at.fail("expected an object {\"<norm>\": [dims...]}, but got " + json_type_name(*j));
        for (auto it = j->begin(); it != j->end(); ++it) {
            if (std::find(spec.norms.begin(), spec.norms.end(), it.key()) == spec.norms.end())
                at.child(it.key()).fail(quoted_text(it.key()) + " is not among this analysis' norms");
            std::vector<long long> dims = read_integers(it.value(), at.child(it.key()));
            if (dims.empty()) at.child(it.key()).fail("a shape needs at least one dim");
            int inferred = 0;
            for (std::size_t i = 0; i < dims.size(); ++i) {
                if (dims[i] < -1)
                    at.child(it.key()).child(i).fail("a dim is > 0, 0 (copy the input's dim) or -1 (inferred), but got " +
                                                     std::to_string(dims[i]));
                inferred += dims[i] == -1;
            }
            if (inferred > 1) at.child(it.key()).fail("at most one dim may be -1");
            o.reshape[it.key()] = dims;
        }
    }
    o.tolerance = r.nonnegative("tolerance");
    r.finish();
    return o;
}

// ONNX Reshape semantics: 0 copies the input's dim at that index, -1 takes what is left.
Shape target_shape(const std::vector<long long>& dims, const Shape& in, const JsonLocation& loc, const std::string& data) {
    const std::size_t n = num_elements(in);
    Shape out;
    std::size_t known = 1, inferred_at = dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i) {
        std::size_t d = 0;
        if (dims[i] == 0) {
            if (i >= in.size()) loc.child(i).fail("dim 0 copies the input's dim " + std::to_string(i) + ", but data " + quoted_text(data) + " has shape " + format_shape(in));
            d = in[i];
        } else if (dims[i] == -1) {
            inferred_at = i;
            d = 1;
        } else {
            d = static_cast<std::size_t>(dims[i]);
        }
        out.push_back(d);
        if (i != inferred_at) known *= d;
    }
    if (inferred_at < dims.size()) {
        if (known == 0 || n % known != 0)
            loc.fail("cannot reshape data " + quoted_text(data) + " of shape " + format_shape(in) + " (" + count_noun(n, "element") + ") with a -1 dim");
        out[inferred_at] = n / known;
    }
    if (num_elements(out) != n)
        loc.fail("cannot reshape data " + quoted_text(data) + " of shape " + format_shape(in) + " (" + count_noun(n, "element") +
                 ") to " + format_shape(out) + " (" + count_noun(num_elements(out), "element") + ")");
    return out;
}

// The data as norm `nn` sees it: reshaped when the analysis says so, the channel axis
// keeping its index while the rank allows.
DataShape side_shape(const AnalysisSpec& spec, const Options& o, const DataShape& d, const std::string& data,
                     const std::string& nn) {
    const auto it = o.reshape.find(nn);
    if (it == o.reshape.end()) return d;
    const Shape s = target_shape(it->second, d.shape, spec.loc.child("reshape").child(nn), data);
    return {s, std::min(d.channel_axis, s.size() - 1), d.has_mask};
}

// The same values (row-major order kept) with the shape and channel axis of `s`; the mask
// follows in full shape.
Batch reshape_batch(const Batch& b, const DataShape& s) {
    xt::xarray<double> x = b.x.to_double();
    x.reshape(s.shape);
    Batch out = with_values(b, x, b.x.dtype);
    out.channel_axis = s.channel_axis;
    if (b.has_mask()) {
        out.mask = full_mask(b);
        out.mask.reshape(s.shape);
    }
    return out;
}

// The axes of `shape` (the original data's) that a norm reduces over, read from the group
// each element's statistic belongs to (`group`, row-major): an axis counts when moving one
// step along it stays inside a group somewhere (fully or partly reduced, as GroupNorm's
// channel axis); an axis of length 1 never counts.
Axes reduced_axes(const std::vector<std::size_t>& group, const Shape& shape) {
    Axes out;
    std::size_t stride = 1;
    for (std::size_t a = shape.size(); a-- > 0;) {
        const std::size_t n = shape[a];
        bool any = false;
        for (std::size_t i = 0; !any && i < group.size(); ++i)
            if ((i / stride) % n + 1 < n && group[i] == group[i + stride]) any = true;
        if (any) out.insert(out.begin(), a);
        stride *= n;
    }
    return out;
}

std::string axes_cell(const Axes& a) { return compact_shape(Shape(a.begin(), a.end())); }

struct Side {
    xt::xarray<double> y;
    Axes reduced;
    std::size_t num_stats = 0;
    Shape shape;
};

Side apply_side(const AnalysisSpec& spec, const AnalysisContext& ctx, const Options& o, const Batch& b,
                const std::string& nn) {
    Side s;
    const Batch rb = o.reshape.count(nn) ? reshape_batch(b, side_shape(spec, o, shape_of(b), b.name, nn)) : b;
    const Step r = apply_norm(ctx.norm(nn), ctx.dtype, rb);
    s.y = r.fwd.y.to_double();
    s.reduced = reduced_axes(broadcast_offsets(r.res.view_shape, r.res.stats_shape), b.x.shape());
    s.num_stats = r.res.num_stats;
    s.shape = rb.x.shape();
    return s;
}

// Every norm on the data as it sees it (reshaped or not).
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data)
        for (const auto& nn : spec.norms) check_pair(ctx.norm(nn), ctx.dtype, side_shape(spec, o, shape_of(ctx.batch(dn)), dn, nn), dn);
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = equivalence_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        std::vector<Side> sides;
        for (const auto& nn : spec.norms) sides.push_back(apply_side(spec, ctx, o, b, nn));
        for (std::size_t i = 0; i < sides.size(); ++i)
            for (std::size_t j = i + 1; j < sides.size(); ++j) {
                const Side &a = sides[i], &c = sides[j];
                const Deviation dv = deviation(c.y, a.y, ctx.dtype);
                const double tol = o.tolerance ? *o.tolerance : rounding_tolerance(ctx.dtype, a.y);
                t.add_row({dn, spec.norms[i], spec.norms[j], axes_cell(a.reduced), axes_cell(c.reduced), dv.max_abs,
                           dv.max_rel, dv.max_abs <= tol, tol, static_cast<long long>(a.num_stats),
                           static_cast<long long>(c.num_stats), compact_shape(a.shape), compact_shape(c.shape)});
            }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements and d bytes per value (value_bytes):
// every norm's output is kept in float64 until the pairs are compared (8 E each), beside
// one norm's step: the data reshaped (float64, the dtype, the mask: 9 + d bytes per
// element, or a copy of the batch), its output (d E) and statistics (3 kStepGroupBytes per
// group: 121 bytes measured with groups of one element). Measured with four norms on
// (64, 256, 256) float32 at 48 bytes per element (estimate 58).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const std::size_t E = w.elements, d = value_bytes(w.dtype), n = spec.norms.size();
    WorkBytes wb{(Sat(E) * (Sat(n) * 8 + 17 + 2 * d) + Sat(most_groups(spec.norms, w)) * (3 * kStepGroupBytes)).n, ""};
    if (n * 8 > 17 + 2 * d) wb.key = "norms";  // the outputs kept outweigh the step
    return wb;
}

// A row per pair of norms.
TableRows rows(const AnalysisSpec& spec, const WorkInputs&) {
    const std::size_t n = spec.norms.size();
    return {(Sat(n) * (n ? n - 1 : 0)).n / 2, "norms"};
}

}  // namespace

AnalysisType equivalence_analysis() {
    AnalysisType a;
    a.name = "equivalence";
    a.summary = "pairwise output differences of norms on the same data (optional reshape per norm), with a verdict";
    a.columns = {"data", "norm_a", "norm_b", "reduction_axes_a", "reduction_axes_b", "max_abs_diff",
                 "max_rel_diff", "equivalent", "tolerance", "num_stats_a", "num_stats_b", "shape_a", "shape_b"};
    a.figure.title = "output difference per pair of norms, coloured by the verdict";
    a.figure.category = {"data", "norm_a", "norm_b"};
    a.figure.series = {"equivalent"};
    a.figure.metrics = {{"max_abs_diff", "max |output a - output b|"}};
    a.keys = {{"reshape", ""}, {"tolerance", "8 x machine eps x max(1, max |output_a|)"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
