// jacobian: the exact Jacobian of one statistics group's outputs with respect to its inputs
// (a row for LayerNorm, a channel across the batch for BatchNorm in training), built column
// by column with the engine's backward pass, and its singular values from xt::linalg::svd
// (LAPACK gesdd through xtensor-blas).
//
// Closed forms (no affine, no mask, batch statistics; v the variance the norm normalises
// with, rstd its reciprocal standard deviation): J = rstd (I - 11'/n - xhat xhat'/n) for a
// centring norm, whose singular values are 0 (along 1), rstd eps / (v + eps) (along xhat)
// and rstd (n - 2 times); RMSNorm (v the mean square) drops the 1 direction: rstd eps /
// (v + eps) once and rstd n - 1 times. eps is what keeps the scale direction xhat from
// being flattened completely. With eps added to the standard deviation the xhat value is
// rstd eps / (sqrt(v) + eps); with the unbiased variance, v is that variance. A weight
// scales row i by (weight_offset + w_i); with running statistics J = rstd diag(scale).
#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor-blas/xlinalg.hpp>

#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "data/estimate.hpp"
#include "json/text.hpp"
#include "norm/backward.hpp"
#include "tensor/order_stats.hpp"

namespace normlab {

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

struct Options {
    long long groups = 4;
    long long max_elements = 4096;
    bool save_sv = false;
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    o.groups = r.integer("groups", 4);
    if (o.groups < 1) r.at("groups").fail("groups must be >= 1, but got " + std::to_string(o.groups));
    o.max_elements = r.integer("max_elements", 4096);
    if (o.max_elements < 1)
        r.at("max_elements").fail("max_elements must be >= 1, but got " + std::to_string(o.max_elements));
    if (auto s = r.strings("save")) {
        for (std::size_t i = 0; i < s->size(); ++i)
            if ((*s)[i] != "jacobian_sv") r.at("save").child(i).fail("cannot save " + quoted_text((*s)[i]) + " (expected jacobian_sv)");
        o.save_sv = !s->empty();
    }
    r.finish();
    return o;
}

// Elements per statistics group of `norm` on `b`; refused above max_elements.
std::size_t group_size(const AnalysisSpec& spec, const Options& o, const AnalysisContext& ctx, const std::string& dn,
                       const std::string& nn) {
    const Batch& b = ctx.batch(dn);
    const Resolution r = NormLayer(ctx.norm(nn), ctx.dtype).resolve(b.x.shape(), b.channel_axis, dn);
    if (!r.replicas.empty())
        spec.loc.child("norms").fail("jacobian of " + norm_on_data(ctx.norm(nn).type, nn, dn) + ": each of its replicas normalises with its own statistics (sync false), "
                                     "so its groups are not those of one batch; use sync: true, or no replicas");
    const std::size_t n = r.num_stats ? b.x.size() / r.num_stats : 0;
    if (n > static_cast<std::size_t>(o.max_elements))
        spec.loc.child("max_elements")
            .fail("jacobian of " + norm_on_data(ctx.norm(nn).type, nn, dn) +
                  ": its groups have " + std::to_string(n) + " elements, more than max_elements (" +
                  std::to_string(o.max_elements) + "); raise max_elements (an n x n SVD costs O(n^3): n = 4096 "
                  "takes about 40 s on one core) or give smaller data");
    return n;
}

// Every pair, and each pair's group size against max_elements.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    check_pairs(spec, ctx);
    for (const auto& dn : spec.data)
        for (const auto& nn : spec.norms) group_size(spec, o, ctx, dn, nn);
}

// "groups" above the statistics groups a norm has on a data entry is not an error (the rows
// then cover every group, as "the first 100" of 12 are the 12), but the table has fewer rows
// than asked for, which a user counting on them should hear about: a note per such pair.
// Only for a "groups" the config gives: the default of 4 on a small batch asked for nothing.
std::vector<ConfigNote> notes(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    std::vector<ConfigNote> out;
    if (!spec.params.contains("groups")) return out;
    for (const auto& dn : spec.data)
        for (const auto& nn : spec.norms) {
            const Batch& b = ctx.batch(dn);
            const NormDef& d = ctx.norm(nn);
            const Resolution r = NormLayer(d, ctx.dtype).resolve(b.x.shape(), b.channel_axis, dn);
            if (static_cast<std::size_t>(o.groups) <= r.num_stats) continue;
            out.push_back({spec.loc.child("groups"),
                           "jacobian of " + norm_on_data(d.type, nn, dn) + ": groups " +
                               std::to_string(o.groups) + ", but it has " + count_noun(r.num_stats, "statistics group") +
                               " here (statistics shape " + format_shape(r.stats_shape) + "); the table has a row for " +
                               (r.num_stats == 1 ? "it" : "each of them"),
                           data_related(dn)});
        }
    return out;
}

// Memory beyond the batch: the n x n Jacobian and LAPACK's column-major copy of it for
// gesdd without singular vectors, measured at 2.0 to 2.1 n^2 doubles of peak resident
// memory over the process (LayerNorm rows of n = 1024 and 2048); 3 n^2 leaves room, on top
// of the default allowance of three doubles per element. n is the largest group among the
// analysis' norms that max_elements lets through (check() refuses a larger one, a norm with
// unsynchronised replicas, and a shape error, before anything is allocated); where the
// data's channel axis is not known before the batch is built, a group is taken at
// max_elements.
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t total = w.elements, cap = static_cast<std::size_t>(o.max_elements);
    std::size_t n = 0;
    for (const auto& nn : spec.norms) {
        std::size_t g = std::min(cap, total);
        const auto it = w.norms.find(nn);
        if (w.channel_axis && it != w.norms.end()) {
            try {
                const Resolution r = NormLayer(it->second, w.dtype).resolve(w.shape, *w.channel_axis, nn);
                g = r.num_stats ? total / r.num_stats : 0;
                if (g > cap || !r.replicas.empty()) g = 0;
            } catch (const std::exception&) {
                g = 0;
            }
        }
        n = std::max(n, g);
    }
    WorkBytes wb{saturating_add(saturating_mul(total, 3 * 8), saturating_mul(saturating_mul(n, n), 3 * 8)), ""};
    // A group above 4096 elements (the default) gets here only with a larger max_elements.
    if (n > 4096) wb.key = key_if_set(spec, "max_elements");
    return wb;
}

// A row per norm and group: the first `groups` of them, or all when it has fewer.
TableRows rows(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    TableRows r{0, key_if_set(spec, "groups")};
    for (const auto& nn : spec.norms)
        r.rows = saturating_add(r.rows, std::min(static_cast<std::size_t>(o.groups),
                                                 groups_on(nn, w).value_or(std::max<std::size_t>(w.elements, 1))));
    return r;
}

double norm2(const xt::xarray<double>& v) { return l2_norm(v.data(), v.size()); }

// |J v| / |v| through xt::linalg::dot; NaN for v = 0.
double gain(const xt::xarray<double>& j, const xt::xarray<double>& v) {
    const double nv = norm2(v);
    return nv > 0 ? norm2(xt::linalg::dot(j, v)) / nv : kNan;
}

// The median of the singular values left after removing, for each of `gains`, the one
// nearest to it (the singular values of the directions 1 and xhat when they are singular
// vectors). NaN when nothing is left.
double median_other(std::vector<double> sv, const std::vector<double>& gains) {
    for (double g : gains) {
        if (sv.empty() || std::isnan(g)) continue;
        auto it = std::min_element(sv.begin(), sv.end(), [g](double a, double b) { return std::abs(a - g) < std::abs(b - g); });
        sv.erase(it);
    }
    return median(std::move(sv));  // NaN when nothing is left
}

// One group as the engine's backward sees a LayerNorm over one row: its n elements in
// row-major order, each with its scale (weight_offset + weight, folded into the row's
// weight) and mask, and the group's statistics from the step.
struct Row {
    Tensor x;                          // (1, n), float64
    NormSpec spec;
    StepInputs in;
    ForwardResult fwd;                 // the step's statistics of this group, shape (1, 1)
    xt::xarray<double> xhat, scale;    // (n)
};

Row gather_row(const xt::xarray<double>& x, const StepResult& s, const std::vector<std::size_t>& members,
               const std::vector<std::size_t>& param, const std::vector<std::size_t>& mask_at, std::size_t g) {
    const std::size_t n = members.size();
    Row row;
    row.x.dtype = DType::float64;
    row.x.f64 = xt::xarray<double>::from_shape({std::size_t{1}, n});
    row.xhat = xt::xarray<double>::from_shape({n});
    row.scale = xt::ones<double>({n});
    row.spec = s.res.spec;
    row.spec.reduction_axes = {1};
    row.spec.param_axes = {1};
    row.spec.weight_offset = 0;
    const double mean = s.fwd.mean.data()[g], rstd = s.fwd.rstd.data()[g];
    row.in.has_weight = s.in.has_weight;
    row.in.has_mask = s.in.has_mask;
    if (row.in.has_weight) row.in.weight = xt::xarray<double>::from_shape({n});
    if (row.in.has_mask) row.in.mask = xt::xarray<std::uint8_t>::from_shape({std::size_t{1}, n});
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = members[k];
        row.x.f64.data()[k] = x.data()[i];
        row.xhat(k) = (x.data()[i] - mean) * rstd;
        if (row.in.has_weight) row.in.weight(k) = row.scale(k) = s.res.spec.weight_offset + s.in.weight.data()[param[i]];
        if (row.in.has_mask) row.in.mask.data()[k] = s.in.mask.data()[mask_at[i]];
    }
    row.in.given = s.in.given;
    auto stat = [](double v) {
        xt::xarray<double> a = xt::xarray<double>::from_shape({1, 1});
        a(0, 0) = v;
        return a;
    };
    row.fwd.mean = stat(mean);
    row.fwd.rstd = stat(rstd);
    row.fwd.var = stat(s.fwd.var.data()[g]);
    if (s.in.given) {
        row.in.given_mean = row.fwd.mean;
        row.in.given_var = row.fwd.var;
    } else {
        row.fwd.batch.count = stat(s.fwd.batch.count.data()[g]);
    }
    return row;
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    Table t;
    t.columns = jacobian_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const xt::xarray<double> x = b.x.to_double();
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            const std::size_t n = group_size(spec, o, ctx, dn, nn);
            NormLayer layer(def, ctx.dtype);
            const Step s = forward_batch(layer, b);
            const Resolution& r = s.res;
            // The first `groups` statistics groups that hold a real position: a fully padded
            // group (a padded token under a masked LayerNorm over D) has NaN statistics and
            // no Jacobian to speak of.
            const xt::xarray<double>& count = s.fwd.batch.count;
            const bool counted = count.dimension() > 0 && count.size() == r.num_stats;
            std::vector<std::size_t> chosen;
            for (std::size_t g = 0; g < r.num_stats && chosen.size() < static_cast<std::size_t>(o.groups); ++g)
                if (!counted || count.data()[g] > 0) chosen.push_back(g);
            const std::size_t groups = chosen.size();
            std::vector<std::size_t> slot(r.num_stats, groups);  // statistic -> its row, or groups
            for (std::size_t k = 0; k < groups; ++k) slot[chosen[k]] = k;
            // Element -> statistic, parameter and mask offsets, in the view's row-major order.
            const std::vector<std::size_t> group = broadcast_offsets(r.view_shape, r.stats_shape);
            Shape ps(r.view_shape.size(), 1);
            for (auto a : r.spec.param_axes) ps[a] = r.view_shape[a];
            const std::vector<std::size_t> param = broadcast_offsets(r.view_shape, ps);
            std::vector<std::size_t> mask_at;
            if (s.in.has_mask)
                mask_at = broadcast_offsets(r.view_shape, Shape(s.in.mask.shape().begin(), s.in.mask.shape().end()));
            std::vector<std::vector<std::size_t>> members(groups);
            for (std::size_t i = 0; i < group.size(); ++i)
                if (slot[group[i]] < groups) members[slot[group[i]]].push_back(i);

            xt::xarray<double> all_sv = xt::xarray<double>::from_shape({groups, n});
            for (std::size_t k = 0; k < groups; ++k) {
                const std::size_t g = chosen[k];
                const Row row = gather_row(x, s, members[k], param, mask_at, g);
                // Row i of J is dx for dy = e_i (the gradient of output i).
                xt::xarray<double> j = xt::xarray<double>::from_shape({n, n});
                xt::xarray<double> e = xt::zeros<double>({std::size_t{1}, n});
                BackwardResult br;
                for (std::size_t i = 0; i < n; ++i) {
                    e(0, i) = 1;
                    backward(row.x, row.x.shape(), row.spec, row.in.pointers(), row.fwd, e, br);
                    std::copy(br.dx.f64.begin(), br.dx.f64.end(), j.begin() + static_cast<std::ptrdiff_t>(i * n));
                    e(0, i) = 0;
                }
                const xt::xarray<double> svx = std::get<1>(xt::linalg::svd(j, false, false));
                std::vector<double> sv(svx.begin(), svx.end());
                std::sort(sv.rbegin(), sv.rend());
                std::copy(sv.begin(), sv.end(), all_sv.begin() + static_cast<std::ptrdiff_t>(k * n));
                long long rank = 0;
                for (double v : sv) rank += v > static_cast<double>(n) * machine_eps(DType::float64) * sv.front();

                const double rstd = row.fwd.rstd(0, 0), v = row.fwd.var(0, 0), eps = r.spec.eps;
                const double g_ones = gain(j, xt::ones<double>({n})), g_xhat = gain(j, row.xhat);
                // The xhat eigenvalue without the scale: rstd eps/(v+eps) (rstd with running statistics),
                // times |scale * xhat| / |xhat| for a weight; no closed form when a mask splits the
                // group into real positions (which move the statistics) and padded ones.
                Cell expected = not_applicable();
                if (!s.in.has_mask || s.in.given) {
                    const double lambda = s.in.given ? rstd
                                          : r.spec.eps_placement == EpsPlacement::inside_sqrt ? rstd * eps / (v + eps)
                                                                                               : rstd * eps / (std::sqrt(v) + eps);
                    expected = lambda * norm2(row.scale * row.xhat) / norm2(row.xhat);
                }
                const std::vector<double> special = r.spec.center ? std::vector<double>{g_ones, g_xhat}
                                                                  : std::vector<double>{g_xhat};
                t.add_row({dn, nn, norm_type_name(def.type), static_cast<long long>(g), eps, static_cast<long long>(n),
                           rstd, sv.front(), sv.back(), rank, g_ones, g_xhat, expected, median_other(sv, special)});
            }
            if (o.save_sv) ctx.save(dn, nn, "jacobian_sv", all_sv, DType::float64);
        }
    }
    return t;
}

}  // namespace

AnalysisType jacobian_analysis() {
    AnalysisType a;
    a.name = "jacobian";
    a.summary = "exact Jacobian of a few statistics groups and its singular values (xt::linalg::svd) "
                "against the closed forms";
    a.columns = {"data", "norm",   "type",   "group", "eps",       "n",         "rstd",
                 "sv_max", "sv_min", "rank", "gain_ones", "gain_xhat", "gain_xhat_expected", "gain_other"};
    // The values on the second line hold for weight 1 without a mask only: a weight scales
    // rows of J (weight 2: the largest singular value is 2 rstd), and under a mask a
    // BatchNorm's real and padded positions play different parts (1.3 to 2.5 rstd measured).
    a.figure.title = "Jacobian of each group: gain along x_hat, its closed form and the largest singular value\n"
                     "with weight 1 (or none) and no mask: closed form rstd eps/(var+eps) (batch statistics), "
                     "largest singular value rstd";
    a.figure.category = {"data", "norm", "group"};
    a.figure.metrics = {{"gain_xhat", "|J x_hat| / |x_hat|"}, {"gain_xhat_expected", "closed form"},
                        {"sv_max", "largest singular value"}};
    a.figure.log = true;
    a.keys = {{"groups", "4"}, {"max_elements", "4096"}, save_key({"jacobian_sv"})};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    a.check = check;
    a.notes = notes;
    return a;
}

}  // namespace normlab
