// precision: how far each variance algorithm, computed in the working precision of a dtype,
// lands from a high-precision reference, next to normlab's own engine.
//
// Per data x norm x dtype, the batch is rounded to the dtype; every algorithm then
// normalises those same rounded inputs:
//   naive     one pass, var = E[x^2] - E[x]^2 (the textbook formula; cancels when
//             |mean| >> std and can go negative, giving sqrt(negative) = NaN)
//   two_pass  mean first, then the mean of squared deviations
//   welford   Welford 1962 (Technometrics 4(3)): M_k = M_{k-1} + (x_k - M_{k-1})/k,
//             S_k = S_{k-1} + (x_k - M_{k-1})(x_k - M_k), var = S_n/n (Knuth TAOCP vol. 2,
//             4.2.2); one element at a time, no merging of partial results (Chan et al.
//             1979, which blocked kernels such as PyTorch's use, is not emulated)
//   normlab   the engine (engine.hpp): statistics in double; for float32 data the output
//             in float32 lanes (the float path, within 3 ulps), else in double with one
//             rounding (0.5 ulp)
// The three emulated algorithms run sequentially (left to right, in row-major order within
// each group) and round every intermediate result (each +, -, *, /, sqrt) to the working
// precision: for float32 that is exactly IEEE float arithmetic (an operation on two floats
// done in double and rounded once to float gives the correctly rounded float result, since
// 53 >= 2*24 + 2), for float16/bfloat16 it is round_to() on every intermediate. The
// element count n is exact (an integer). The reference repeats the two-pass computation
// (corrected: Chan, Golub and LeVeque 1983) in long double (x86-64: 64-bit significand)
// from the same rounded inputs, with eps, weight and bias exact, and is then compared with
// each output after its rounding to the dtype. Errors in ulps are those of the precision
// contract (DESIGN.md): the dtype's ulp at the largest of |x̂·w|, |b| and |y| per element.
#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/common.hpp"
#include "analysis/types.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

const std::vector<std::string> kAlgorithms = {"naive", "two_pass", "welford", "normlab"};

struct Options {
    std::vector<DType> dtypes;        ///< empty: the run dtype plus float64
    bool native = false;              ///< "accumulate": "native" (half formats in themselves)
    std::vector<std::string> algorithms = kAlgorithms;
};

Options read_options(const AnalysisSpec& spec) {
    ObjectReader r = analysis_reader(spec);
    Options o;
    if (auto ds = r.strings("dtypes")) {
        if (ds->empty()) r.at("dtypes").fail("list is empty");
        for (std::size_t i = 0; i < ds->size(); ++i) {
            DType d = DType::float32;
            try {
                d = parse_dtype((*ds)[i]);
            } catch (const InputError& e) {
                r.at("dtypes").child(i).fail(e.what());
            }
            if (std::find(o.dtypes.begin(), o.dtypes.end(), d) != o.dtypes.end())
                r.at("dtypes").child(i).fail("dtype " + quoted_text((*ds)[i]) + " listed twice");
            o.dtypes.push_back(d);
        }
    }
    o.native = r.choice("accumulate", {"float32", "native"}, "float32") == "native";
    if (auto as = r.strings("algorithms")) {
        if (as->empty()) r.at("algorithms").fail("list is empty");
        o.algorithms.clear();
        for (std::size_t i = 0; i < as->size(); ++i) {
            if (std::find(kAlgorithms.begin(), kAlgorithms.end(), (*as)[i]) == kAlgorithms.end()) {
                std::string hint = did_you_mean((*as)[i], kAlgorithms);
                r.at("algorithms").child(i).fail(
                    "unknown algorithm " + quoted_text((*as)[i]) + " (expected naive, two_pass, welford or normlab)" +
                    (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?"));
            }
            o.algorithms.push_back((*as)[i]);
        }
    }
    r.finish();
    return o;
}

/// Arithmetic in one binary format: every result is rounded to it (see the file comment).
struct Work {
    DType d;
    double r(double v) const {
        switch (d) {
            case DType::float64: return v;
            case DType::float32: return static_cast<double>(static_cast<float>(v));
            default: return round_to(d, v);
        }
    }
    double add(double a, double b) const { return r(a + b); }
    double sub(double a, double b) const { return r(a - b); }
    double mul(double a, double b) const { return r(a * b); }
    double div(double a, double b) const { return r(a / b); }
    double sqrt(double a) const { return r(std::sqrt(a)); }
};

/// Statistics of one group as an algorithm computed them, in the working precision.
struct GroupStats {
    double mean = 0, var = 0;
    bool overflow = false;  ///< an intermediate became +-inf or NaN from finite inputs
};

bool nonfinite(double v) { return !std::isfinite(v); }

/// The variance estimator and centring shared by all algorithms (from the norm's spec).
struct Method {
    bool center = true;
    bool unbiased = false;
};

// var_b -> the estimator the norm normalises with (Bessel's correction n/(n-1), computed in W).
double apply_estimator(const Work& w, const Method& m, double var, std::size_t n) {
    if (!m.unbiased) return var;
    const double nn = static_cast<double>(n);
    return w.mul(var, w.div(nn, nn - 1));
}

GroupStats naive(const Work& w, const Method& m, const double* x, const std::vector<std::size_t>& idx) {
    GroupStats g;
    double s = 0, q = 0;
    for (auto i : idx) {
        s = w.add(s, x[i]);
        q = w.add(q, w.mul(x[i], x[i]));
        g.overflow |= nonfinite(s) || nonfinite(q);
    }
    const double n = static_cast<double>(idx.size());
    if (m.center) {
        g.mean = w.div(s, n);
        g.var = w.sub(w.div(q, n), w.mul(g.mean, g.mean));  // E[x^2] - E[x]^2
    } else {
        g.var = w.div(q, n);
    }
    g.var = apply_estimator(w, m, g.var, idx.size());
    g.overflow |= !idx.empty() && (nonfinite(g.mean) || nonfinite(g.var));
    return g;
}

GroupStats two_pass(const Work& w, const Method& m, const double* x, const std::vector<std::size_t>& idx) {
    GroupStats g;
    const double n = static_cast<double>(idx.size());
    if (m.center) {
        double s = 0;
        for (auto i : idx) s = w.add(s, x[i]);
        g.mean = w.div(s, n);
        g.overflow |= nonfinite(s);
    }
    double q = 0;
    for (auto i : idx) {
        const double d = w.sub(x[i], g.mean);
        q = w.add(q, w.mul(d, d));
        g.overflow |= nonfinite(q);
    }
    g.var = apply_estimator(w, m, w.div(q, n), idx.size());
    g.overflow |= !idx.empty() && (nonfinite(g.mean) || nonfinite(g.var));
    return g;
}

GroupStats welford(const Work& w, const Method& m, const double* x, const std::vector<std::size_t>& idx) {
    GroupStats g;
    double mean = 0, s = 0;  // Welford's M_k and S_k (S unused when not centring)
    std::size_t k = 0;
    for (auto i : idx) {
        const double kk = static_cast<double>(++k);
        if (m.center) {
            const double d = w.sub(x[i], mean);
            mean = w.add(mean, w.div(d, kk));
            s = w.add(s, w.mul(d, w.sub(x[i], mean)));
        } else {  // running mean of x^2
            mean = w.add(mean, w.div(w.sub(w.mul(x[i], x[i]), mean), kk));
        }
        g.overflow |= nonfinite(mean) || nonfinite(s);
    }
    const double n = static_cast<double>(idx.size());
    if (m.center) {
        g.mean = idx.empty() ? std::nan("") : mean;
        g.var = w.div(s, n);
    } else {
        g.var = idx.empty() ? std::nan("") : mean;
    }
    g.var = apply_estimator(w, m, g.var, idx.size());
    g.overflow |= !idx.empty() && (nonfinite(g.mean) || nonfinite(g.var));
    return g;
}

/// Inputs of one (data, norm, dtype) comparison, as the engine would see them.
struct Problem {
    xt::xarray<double> x;       ///< the batch rounded to the dtype, input shape
    // A default xarray is 0-d with one element, so presence is kept in flags.
    bool has_weight = false, has_bias = false;
    xt::xarray<double> weight;  ///< param_shape, indexed by layout.param (when has_weight)
    xt::xarray<double> bias;    ///< same (when has_bias)
    NormSpec spec;
    GroupLayout layout;
    DType dtype = DType::float32;
};

/// The float64 reference output (computed in long double, see the file comment), and per
/// element the magnitude whose ulp is the precision contract's unit: max(|x̂·w|, |b|, |y|).
xt::xarray<double> reference(const Problem& p, std::vector<double>& var_out, xt::xarray<double>& basis) {
    const Method m{p.spec.center, p.spec.variance == VarianceEstimator::unbiased};
    const double* x = p.x.data();
    xt::xarray<double> y = xt::xarray<double>::from_shape(p.x.shape());
    basis = xt::zeros<double>(p.x.shape());
    var_out.assign(p.layout.num_groups, 0);
    for (std::size_t g = 0; g < p.layout.num_groups; ++g) {
        const auto& idx = p.layout.members[g];
        const long double n = static_cast<long double>(idx.size());
        long double mean = 0, q = 0;
        if (m.center) {
            for (auto i : idx) mean += x[i];
            mean /= n;
            long double dev = 0;  // corrected two-pass: the first mean's rounding taken out
            for (auto i : idx) dev += x[i] - mean;
            mean += dev / n;
        }
        for (auto i : idx) q += (x[i] - mean) * (x[i] - mean);
        long double var = q / n;
        if (m.unbiased) var = var * n / (n - 1);
        var_out[g] = static_cast<double>(var);
        const long double eps = p.spec.eps;
        const long double rstd = p.spec.rstd_is_zero(static_cast<double>(var)) ? 0.0L
                                 : p.spec.eps_placement == EpsPlacement::inside_sqrt ? 1.0L / std::sqrt(var + eps)
                                                                                     : 1.0L / (std::sqrt(var) + eps);
        for (auto i : p.layout.all[g]) {
            long double v = (x[i] - mean) * rstd;
            if (p.has_weight) v *= p.spec.weight_offset + static_cast<long double>(p.weight.data()[p.layout.param[i]]);
            const long double b = p.has_bias ? p.bias.data()[p.layout.param[i]] : 0.0;
            y.data()[i] = static_cast<double>(v + b);
            basis.data()[i] = static_cast<double>(std::max({std::fabs(v), std::fabs(b), std::fabs(v + b)}));
        }
    }
    return y;
}

/// Output of an emulated algorithm in working precision `w`, rounded to the dtype at the end.
xt::xarray<double> emulate(const Problem& p, const Work& w, const std::string& algorithm,
                           std::vector<double>& var_out, std::size_t& overflow_groups) {
    const Method m{p.spec.center, p.spec.variance == VarianceEstimator::unbiased};
    const double* x = p.x.data();
    xt::xarray<double> y = xt::xarray<double>::from_shape(p.x.shape());
    const double eps = w.r(p.spec.eps);
    var_out.assign(p.layout.num_groups, 0);
    overflow_groups = 0;
    for (std::size_t g = 0; g < p.layout.num_groups; ++g) {
        const auto& idx = p.layout.members[g];
        GroupStats s = algorithm == "naive" ? naive(w, m, x, idx)
                       : algorithm == "two_pass" ? two_pass(w, m, x, idx)
                                                 : welford(w, m, x, idx);
        bool finite_in = true;
        for (auto i : idx) finite_in = finite_in && std::isfinite(x[i]);
        if (s.overflow && finite_in) ++overflow_groups;
        var_out[g] = s.var;
        const double rstd = p.spec.rstd_is_zero(s.var) ? 0.0
                            : p.spec.eps_placement == EpsPlacement::inside_sqrt ? w.div(1.0, w.sqrt(w.add(s.var, eps)))
                                                                                : w.div(1.0, w.add(w.sqrt(s.var), eps));
        for (auto i : p.layout.all[g]) {
            double v = w.mul(w.sub(x[i], s.mean), rstd);
            if (p.has_weight) v = w.mul(v, w.add(p.spec.weight_offset, w.r(p.weight.data()[p.layout.param[i]])));
            if (p.has_bias) v = w.add(v, w.r(p.bias.data()[p.layout.param[i]]));
            y.data()[i] = round_to(p.dtype, v);
        }
    }
    return y;
}

std::pair<double, double> min_max_ignoring_nan(const std::vector<double>& v) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    bool any = false;
    for (double a : v)
        if (!std::isnan(a)) lo = std::min(lo, a), hi = std::max(hi, a), any = true;
    if (!any) return {std::nan(""), std::nan("")};
    return {lo, hi};
}

// The dtypes compared: the option's, else the run dtype and float64.
std::vector<DType> run_dtypes(const Options& o, const AnalysisContext& ctx) {
    std::vector<DType> dtypes = o.dtypes;
    if (dtypes.empty()) {
        dtypes.push_back(ctx.dtype);
        if (ctx.dtype != DType::float64) dtypes.push_back(DType::float64);
    }
    return dtypes;
}

// Every pair in every dtype (bound as one forward step binds it, padding mask included),
// and what precision cannot compare although the norm fits the data (InputError at the
// analysis' norms): no batch statistics (running statistics in use), statistics per replica.
void check(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    const Options o = read_options(spec);
    for (const auto& dn : spec.data)
        for (const auto& nn : spec.norms)
            for (DType dt : run_dtypes(o, ctx)) {
                const NormDef& def = ctx.norm(nn);
                const Resolution res = check_pair(def, dt, shape_of(ctx.batch(dn)), dn);
                const std::string pair = norm_on_data(def.type, nn, dn) + ": ";
                if (!res.use_batch_stats)
                    spec.loc.child("norms").fail(pair + "normalises with running statistics (training: false), so there "
                                                        "is no variance to compute; precision compares batch statistics");
                if (!res.replicas.empty())
                    spec.loc.child("norms").fail(pair + "normalises each of its replicas with its own statistics (sync "
                                                        "false); precision compares the statistics of one batch (use "
                                                        "sync: true, or no replicas)");
            }
}

Table run(const AnalysisSpec& spec, const AnalysisContext& ctx) {
    Options o = read_options(spec);
    const std::vector<DType> dtypes = run_dtypes(o, ctx);
    Table t;
    t.columns = precision_analysis().columns;
    for (const auto& dn : spec.data) {
        const Batch& b = ctx.batch(dn);
        const xt::xarray<double> x64 = b.x.to_double();
        for (const auto& nn : spec.norms) {
            const NormDef& def = ctx.norm(nn);
            for (DType dt : dtypes) {
                NormLayer layer(def, dt);
                const Resolution res = layer.resolve(b.x.shape(), b.channel_axis, dn);
                Problem p;
                p.dtype = dt;
                p.spec = res.spec;
                p.layout = group_layout(res, def.mask ? &b.mask : nullptr);
                Batch bd = b;
                bd.x = Tensor::from_double(x64, dt);
                p.x = bd.x.to_double();
                p.has_weight = res.has_weight;
                p.has_bias = res.has_bias;
                if (res.has_weight)
                    p.weight = def.weight ? materialize(*def.weight, res.param_shape, "weight", nn)
                                          : xt::ones<double>(res.param_shape);
                if (res.has_bias)
                    p.bias = def.bias ? materialize(*def.bias, res.param_shape, "bias", nn)
                                      : xt::zeros<double>(res.param_shape);

                std::vector<double> ref_var;
                xt::xarray<double> basis;
                const xt::xarray<double> ref = reference(p, ref_var, basis);
                bool ref_finite = false;
                for (std::size_t i = 0; i < ref.size() && !ref_finite; ++i)
                    ref_finite = p.layout.real[i] && std::isfinite(ref.data()[i]);
                const DType half_acc = o.native ? dt : DType::float32;
                const DType work = dt == DType::float16 || dt == DType::bfloat16 ? half_acc : dt;
                for (const auto& alg : o.algorithms) {
                    xt::xarray<double> y;
                    std::vector<double> var;
                    std::size_t overflow = 0;
                    DType work_row = work;
                    double eps_work = Work{work}.r(res.eps);
                    if (alg == "normlab") {
                        Step s = forward_batch(layer, bd);
                        y = s.fwd.y.to_double();
                        var.assign(s.fwd.var.begin(), s.fwd.var.end());
                        work_row = DType::float64;
                        eps_work = res.eps;
                        for (std::size_t g = 0; g < p.layout.num_groups; ++g) {
                            bool finite_in = true;
                            for (auto i : p.layout.members[g]) finite_in = finite_in && std::isfinite(p.x.data()[i]);
                            if (!p.layout.members[g].empty() && finite_in &&
                                (nonfinite(s.fwd.mean.data()[g]) || nonfinite(var[g])))
                                ++overflow;
                        }
                    } else {
                        y = emulate(p, Work{work}, alg, var, overflow);
                    }
                    Deviation dv = deviation(y, ref, dt, &p.layout.real, &basis);
                    // A reference without any finite value (data that overflowed the dtype,
                    // or NaN throughout) leaves no error to measure: an output of NaN where
                    // it is NaN agrees, and a 0 would read as an exact result. A finite
                    // output there disagrees (inf) and stays so.
                    if (!ref_finite && dv.max_abs == 0)
                        dv.max_abs = dv.max_rel = dv.max_ulp = std::numeric_limits<double>::quiet_NaN();
                    // Fully padded groups have no variance: skipped, and counted.
                    std::vector<double> kept;
                    for (std::size_t g = 0; g < var.size(); ++g)
                        if (!p.layout.members[g].empty()) kept.push_back(var[g]);
                    auto vmm = min_max_ignoring_nan(kept);
                    t.add_row({dn, nn, norm_type_name(def.type), dtype_name(dt), alg, dtype_name(work_row),
                               res.eps, eps_work, dv.max_abs, dv.max_rel, dv.max_ulp,
                               static_cast<long long>(dv.nonfinite), static_cast<long long>(overflow),
                               vmm.first, vmm.second, static_cast<long long>(var.size() - kept.size())});
                }
            }
        }
    }
    return t;
}

// Memory beyond the batch, with E the data's elements, G the most statistics groups of its
// norms on it (E when not known yet), d bytes per value of the run dtype and d' of the
// widest compared dtype (value_bytes): the data in float64 (8 E), and per norm and dtype the
// group layout (33 bytes per element and two lists per group), the data rounded to the dtype
// and back in float64, the reference and its ulp basis, an algorithm's output, and the
// engine's output and its float64 copy: 104 + d + 2d' bytes per element; per group the
// layout's two lists (about 80 bytes), the variances and the engine's statistics (314 bytes
// measured with groups of one element; estimate 352).
// Measured with four norms on (64, 256, 256) float32 at 94 bytes per element (estimate 126).
WorkBytes work_bytes(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t E = w.elements, d = value_bytes(w.dtype);
    std::size_t widest = o.dtypes.empty() ? 8 : 0;
    for (DType dt : o.dtypes) widest = std::max(widest, value_bytes(dt));
    return {(Sat(E) * (104 + d + 2 * widest) + Sat(most_groups(spec.norms, w)) * (96 + 4 * kStepGroupBytes)).n, ""};
}

// A row per norm, dtype and algorithm.
TableRows rows(const AnalysisSpec& spec, const WorkInputs& w) {
    const Options o = read_options(spec);
    const std::size_t dtypes = o.dtypes.empty() ? (w.dtype == DType::float64 ? 1 : 2) : o.dtypes.size();
    return {spec.norms.size() * dtypes * o.algorithms.size(), key_if_set(spec, "algorithms")};
}

}  // namespace

AnalysisType precision_analysis() {
    AnalysisType a;
    a.name = "precision";
    a.summary = "max output error vs a high-precision reference per dtype: naive, two-pass, "
                "Welford variance in working precision, and normlab's engine";
    a.columns = {"data", "norm", "type", "dtype", "algorithm", "work_dtype", "eps", "eps_work",
                 "max_abs_err", "max_rel_err", "max_ulp_err", "nonfinite_count", "overflow_groups",
                 "var_min", "var_max", "empty_groups"};
    a.figure.title = "output error against the high-precision reference, per algorithm";
    a.figure.category = {"data", "norm", "dtype"};
    a.figure.series = {"algorithm"};
    a.figure.metrics = {{"max_abs_err", "max absolute error"}, {"max_ulp_err", "max error in ulps"}};
    a.figure.log = true;
    a.keys = {{"dtypes", "the run's and float64"}, {"accumulate", "float32"}, {"algorithms", "all four"}};
    a.validate = [](const AnalysisSpec& s) { read_options(s); };
    a.check = check;
    a.work_bytes = work_bytes;
    a.rows = rows;
    a.run = run;
    return a;
}

}  // namespace normlab
