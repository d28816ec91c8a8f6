// The engine's precision contract, element by element against a long double reference from
// the same float32 inputs: the float path within 3 ulps, the double path within half an ulp,
// where the ulp is float32's at the largest of |x̂·w|, |b| and |y| (DESIGN.md). Row types are
// those of the precision analysis; layouts are those of every preset, channels first and
// last, with statistics that fit a chunk, span chunks, and exceed one, and outputs small
// enough for the caches and streamed past them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <xtensor/xrandom.hpp>

#include "analysis/common.hpp"
#include "norm/engine.hpp"
#include "norm/normalize_stream.hpp"

#include "norm_util.hpp"

using namespace normlab;

namespace {

struct RowType {
    std::string name;
    double mean, std;
};
const RowType kRows[] = {{"mean 1e4 std 1", 1e4, 1},
                         {"mean 1e3 std 1e-2", 1e3, 1e-2},
                         {"mean 0 std 1", 0, 1},
                         {"mean 5 std 1e-3", 5, 1e-3},
                         {"mean -300 std 30", -300, 30}};

/// A preset's reduction as the engine sees it (GroupNorm: the (G, C/G) view).
struct Layout {
    std::string norm;
    Shape shape;
    Axes reduced, params;
    bool center = true;
};

std::vector<Layout> layouts() {
    return {
        {"layernorm rows of 768", {48, 768}, {1}, {1}},
        {"layernorm 1024 rows of 768", {1024, 768}, {1}, {1}},
        {"layernorm rows of 7", {300, 7}, {1}, {1}},
        {"layernorm rows of 5000 (3 per chunk)", {7, 5000}, {1}, {1}},
        {"layernorm rows of 40000 (longer than a chunk)", {2, 40000}, {1}, {1}},
        {"rmsnorm rows of 768", {48, 768}, {1}, {1}, false},
        {"rmsnorm rows of 40000", {2, 40000}, {1}, {1}, false},
        {"instancenorm (N,C,H,W)", {4, 6, 20, 20}, {2, 3}, {1}},
        {"instancenorm (N,H,W,C)", {4, 20, 20, 6}, {1, 2}, {3}},
        {"groupnorm (N,G,C/G,H,W)", {4, 3, 2, 15, 15}, {2, 3, 4}, {1, 2}},
        {"groupnorm (N,H,W,G,C/G)", {4, 15, 15, 3, 2}, {1, 2, 4}, {3, 4}},
        {"batchnorm (N,C,H,W)", {16, 6, 20, 20}, {0, 2, 3}, {1}},
        {"batchnorm (N,H,W,C)", {16, 20, 20, 6}, {0, 1, 2}, {3}},
        {"batchnorm planes of 20000, 3 per channel", {3, 2, 100, 200}, {0, 2, 3}, {1}},
        {"batchnorm (N,H,W,C), 64 channels over 2 blocks of rows", {8, 24, 24, 64}, {0, 1, 2}, {3}},
        {"instancenorm (N,H,W,C), 64 channels, one sample at a time", {4, 30, 30, 64}, {1, 2}, {3}},
        {"groupnorm (N,H,W,G,C/G), 64 channels", {4, 20, 20, 32, 2}, {1, 2, 4}, {3, 4}},
        {"batchnorm (B,T,D), 20 channels", {16, 50, 20}, {0, 1}, {2}},
    };
}

// Flat offset into the keep-dims array of `dims` (1 where reduced) for multi-index idx.
std::size_t offset(const std::vector<std::size_t>& idx, const Shape& dims) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < dims.size(); ++d) o = o * dims[d] + (dims[d] == 1 ? 0 : idx[d]);
    return o;
}

/// Per element of a layout: the index of its statistic and of its parameter.
struct Index {
    std::vector<std::size_t> stat, param;
    std::size_t stats = 0;
};

Index index_of(const Layout& l) {
    const Shape& xs = l.shape;
    Shape ss = keepdims_shape(xs, l.reduced), ps = xs;
    for (std::size_t d = 0; d < xs.size(); ++d)
        if (std::find(l.params.begin(), l.params.end(), d) == l.params.end()) ps[d] = 1;
    Index ix;
    ix.stats = num_elements(ss);
    std::vector<std::size_t> idx(xs.size(), 0);
    for (std::size_t i = 0; i < num_elements(xs); ++i) {
        ix.stat.push_back(offset(idx, ss));
        ix.param.push_back(offset(idx, ps));
        for (std::size_t d = xs.size(); d-- > 0;)
            if (++idx[d] < xs[d]) break;
            else idx[d] = 0;
    }
    return ix;
}

/// Sets the first element of every statistic to the float nearest the mean of the others,
/// so each statistic has an element within half a float ulp of its mean, often far closer:
/// |x̂| of 1e-6 and less, where a mean carried to too few bits shows.
void plant_near_mean(Tensor& x, const Index& ix) {
    std::vector<long double> sum(ix.stats, 0), count(ix.stats, 0);
    std::vector<std::size_t> first(ix.stats, x.size());
    float* xv = x.f32.data();
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t s = ix.stat[i];
        if (first[s] == x.size()) first[s] = i;
        else sum[s] += xv[i], count[s] += 1;
    }
    for (std::size_t s = 0; s < ix.stats; ++s) {
        float p = static_cast<float>(sum[s] / count[s]);
        // Exactly at the mean of the whole statistic (it happens: with 900 values, about one
        // time in 900), x̂ is 0 and the contract's ulp is that of 0: only an exact mean
        // would meet it. One float further keeps |x̂| at a spacing over the count.
        if ((sum[s] + p) / (count[s] + 1) == p) p = std::nextafter(p, std::numeric_limits<float>::infinity());
        xv[first[s]] = p;
    }
}

/// Worst error of one forward over all elements, in the contract's ulps.
struct Worst {
    double ulps = 0;
    std::string where;
};

/// Statistics and output in long double from y's own float32 inputs, and for each output
/// in `ys` the worst |y - ref| / ulp32(max(|x̂·w|, |b|, |ref|)), the reference formed once for
/// all of them. The mean is carried as two long doubles (each sum by TwoSum, Knuth, TAOCP
/// vol. 2, 4.2.2; the division's remainder by an fma): next to the mean, |x̂| of 1e-11 asks
/// for the mean to about 2^-70 of its size, past one long double, and past a corrected
/// two-pass where a few values lie 1000 std from the rest (4e-15 off on a mean of -203 there,
/// against the exact rational mean).
std::vector<Worst> contract_errors(const Tensor& x, const Index& ix, bool center, double eps,
                                   const xt::xarray<double>* w, const xt::xarray<double>* b,
                                   const std::vector<const Tensor*>& ys) {
    const std::size_t n = x.size(), stats = ix.stats;
    const std::vector<std::size_t>& sidx = ix.stat;
    std::vector<long double> hi(stats, 0), lo(stats, 0), m2(stats, 0), count(stats, 0), rstd(stats);
    const float* xv = x.f32.data();
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t s = sidx[i];
        const long double v = center ? xv[i] : 0.0L, t = hi[s] + v, bb = t - hi[s];
        lo[s] += (hi[s] - (t - bb)) + (v - bb);
        hi[s] = t;
        count[s] += 1;
    }
    for (std::size_t s = 0; s < stats; ++s) {
        const long double q = hi[s] / count[s];
        lo[s] = (std::fmal(-q, count[s], hi[s]) + lo[s]) / count[s];
        hi[s] = q;
    }
    // x - mean: x - hi is exact next to the mean (Sterbenz), then the low part.
    auto centred = [&](std::size_t i) { return (xv[i] - hi[sidx[i]]) - lo[sidx[i]]; };
    for (std::size_t i = 0; i < n; ++i) {
        const long double c = centred(i);
        m2[sidx[i]] += c * c;
    }
    for (std::size_t s = 0; s < stats; ++s) rstd[s] = 1.0L / std::sqrt(m2[s] / count[s] + static_cast<long double>(eps));
    std::vector<Worst> worst(ys.size());
    for (std::size_t i = 0; i < n; ++i) {
        const long double xw = centred(i) * rstd[sidx[i]] * (w ? w->data()[ix.param[i]] : 1.0);
        const long double bias = b ? b->data()[ix.param[i]] : 0.0;
        const double ref = static_cast<double>(xw + bias);
        const double basis = std::max({std::fabs(static_cast<double>(xw)), std::fabs(static_cast<double>(bias)),
                                       std::fabs(ref)});
        for (std::size_t k = 0; k < ys.size(); ++k) {
            const float yi = ys[k]->f32.data()[i];
            const double e = std::fabs(static_cast<double>(yi) - ref) / ulp(DType::float32, basis);
            if (!(e <= worst[k].ulps)) {  // NaN is worst of all
                std::ostringstream os;
                os << "element " << i << ": x " << xv[i] << ", y " << yi << ", ref " << ref;
                worst[k] = {e, os.str()};
            }
        }
    }
    return worst;
}

/// contract_errors for one output.
Worst contract_error(const Tensor& x, const Index& ix, bool center, double eps, const xt::xarray<double>* w,
                     const xt::xarray<double>* b, const Tensor& y) {
    return contract_errors(x, ix, center, eps, w, b, {&y}).front();
}

/// Worst errors of each path over every layout, row type and affine setting.
struct Summary {
    double float_max = 0, double_max = 0;
};

/// Layouts whose output is 8 MiB or more (kStreamBytes), written with streaming stores past
/// the caches (the register writers on AVX-512): writers the smaller layouts above do not
/// reach. Run on two threads, each taking its share of the samples.
std::vector<Layout> streamed_layouts() {
    return {
        {"layernorm 2752 rows of 768, streamed", {2752, 768}, {1}, {1}},
        {"groupnorm (N,G,C/G,H,W), streamed", {8, 32, 2, 64, 65}, {2, 3, 4}, {1, 2}},
        {"groupnorm (N,H,W,G,C/G), 64 channels, streamed, samples shared out", {8, 64, 65, 32, 2}, {1, 2, 4}, {3, 4}},
        {"batchnorm (N,H,W,C), 64 channels, streamed", {8, 64, 65, 64}, {0, 1, 2}, {3}},
    };
}

/// LayerNorm and RMSNorm with the weight and bias on some of the normalized axes
/// (param_axes): the row kernels take parameters along whole rows only, so these run the
/// walk's kernels with parameter runs shorter than a statistic.
std::vector<Layout> param_axes_layouts() {
    return {
        {"layernorm (N,H,W,C) over H,W,C, params on C", {8, 16, 16, 12}, {1, 2, 3}, {3}},
        {"layernorm (B,T,D) over T,D, params on D", {8, 24, 64}, {1, 2}, {2}},
        {"layernorm (N,H,W,C) over H,W,C, params on H,W", {8, 16, 16, 12}, {1, 2, 3}, {1, 2}},
        {"layernorm rows of 24000 (longer than a chunk), params on the last axis", {2, 40, 30, 20}, {1, 2, 3}, {3}},
        {"rmsnorm (N,H,W,C) over H,W,C, params on C", {8, 16, 16, 12}, {1, 2, 3}, {3}, false},
    };
}

/// Runs every layout x row type x (affine off, on) through both paths: the float path
/// within 3 ulps, the double path within half an ulp (plus double's own error). With
/// `plant`, only the rows whose mean is far from 0 in units of std take part, and each
/// statistic first gets an element next to its mean (plant_near_mean).
Summary check_contract(bool plant, const std::vector<Layout>& all = layouts()) {
    Summary sum;
    for (const Layout& l : all) {
        CAPTURE(l.norm);
        Shape pshape = select_dims(l.shape, l.params);
        const Index ix = index_of(l);
        for (const RowType& row : kRows) {
            if (plant && std::fabs(row.mean) < 5 * row.std) continue;
            CAPTURE(row.name);
            xt::xarray<double> v = xt::random::randn<double>(l.shape) * row.std + row.mean;
            Tensor x = Tensor::from_double(v, DType::float32);
            if (plant) plant_near_mean(x, ix);
            const xt::xarray<double> w = xt::random::randn<double>(pshape) * 0.5 + 1.0;
            const xt::xarray<double> b = xt::random::randn<double>(pshape);
            for (bool affine : {false, true}) {
                CAPTURE(affine);
                ForwardInputs in;
                if (affine) in.weight = &w, in.bias = l.center ? &b : nullptr;
                NormSpec spec;
                // Copies moved in: GCC 12's -Wnonnull misfires on a copy-assignment of these
                // vectors here (a memmove to a null vector that the copy never reaches).
                spec.reduction_axes = Axes(l.reduced);
                spec.param_axes = Axes(l.params);
                spec.center = l.center;
                spec.compute = Compute::float32;
                const Tensor yf = forward(x, spec, in).y;
                spec.compute = Compute::float64;
                const Tensor yd = forward(x, spec, in).y;
                const std::vector<Worst> e = contract_errors(x, ix, l.center, spec.eps, in.weight, in.bias, {&yf, &yd});
                const Worst &f = e[0], &d = e[1];
                CAPTURE(f.where);
                CHECK(f.ulps <= 3.0);
                CAPTURE(d.where);
                // Rounding once from a double result: half an ulp, plus double's own error.
                CHECK(d.ulps <= 0.5 + 1e-3);
                sum.float_max = std::max(sum.float_max, f.ulps);
                sum.double_max = std::max(sum.double_max, d.ulps);
                MESSAGE(l.norm << " | " << row.name << " | affine " << affine << " | float " << f.ulps
                               << " | double " << d.ulps);
            }
        }
    }
    return sum;
}

}  // namespace

TEST_CASE("precision contract on the precision analysis' rows: float path <= 3 ulps, double path <= 0.5") {
    xt::random::seed(2024);
    Summary s = check_contract(false);
    MESSAGE("worst: float path " << s.float_max << " ulps, double path " << s.double_max << " ulps");
}

TEST_CASE("precision contract with parameters on some of the normalized axes (param_axes)") {
    xt::random::seed(2027);
    const std::vector<Layout> all = param_axes_layouts();
    Summary s = check_contract(false, all);
    MESSAGE("worst: float path " << s.float_max << " ulps, double path " << s.double_max << " ulps");
    Summary near = check_contract(true, all);
    MESSAGE("next to the mean: float path " << near.float_max << " ulps, double path " << near.double_max << " ulps");
}

TEST_CASE("precision contract on outputs of 8 MiB and more, streamed past the caches, on two threads") {
    const norm_test::EngineSetting threads(2, 0);  // samples shared out over two threads, whatever the machine has
    for (const Layout& l : streamed_layouts())
        REQUIRE(num_elements(l.shape) * sizeof(float) >= kStreamBytes);
    xt::random::seed(2026);
    Summary s = check_contract(false, streamed_layouts());
    MESSAGE("worst: float path " << s.float_max << " ulps, double path " << s.double_max << " ulps");
}

TEST_CASE("precision contract next to the mean, on rows whose mean is far from 0 in units of std") {
    // These are the rows where float32 arithmetic cancels. The planted element lies within
    // half a float spacing of the data from the mean, |x̂| down to 1e-8 and below, where a
    // mean carried to too few bits (one double: 2^-53 of 1e4) would show. Rows around mean
    // 0 take no part: there the spacing at the mean is 1e-9 std and |x̂| would reach 1e-15,
    // below the rounding of any double sum of the data (about 2^-55 std).
    xt::random::seed(2025);
    Summary s = check_contract(true);
    MESSAGE("worst: float path " << s.float_max << " ulps, double path " << s.double_max << " ulps");
}

TEST_CASE("channels-last moments when the rows that set each block's shift are far from its mean") {
    // The channels-last moments sum x - K in one pass, K the mean of the first 16 rows of a
    // block of rows (about 256 Ki values: the 4608 rows of 64 channels here are two blocks of
    // 2304). Their error grows with |mean - K| (Chan, Golub and LeVeque 1983): here those
    // rows sit `far` standard deviations above the rest of the data, so K is far from each
    // block's mean, and every statistic has an element planted next to its mean, where a
    // mean error shows most. The far rows: the first 16 of every 256 (each block's among
    // them), or each block's first 16 alone (a smaller spread, so the same error in the mean
    // is more ulps of y).
    const Layout l{"batchnorm (N,H,W,C)", {8, 24, 24, 64}, {0, 1, 2}, {3}};
    const Index ix = index_of(l);
    const std::size_t C = 64;
    double worst = 0, worst_d = 0;
    for (std::size_t every : {std::size_t{256}, std::size_t{2304}})
        for (const RowType& row : kRows)
            for (double far : {8.0, 1e3}) {
                // Each variant draws from its own seed, so the first keeps the data it always had.
                if (&row == &kRows[0] && far == 8.0) xt::random::seed(every == 256 ? 2026 : 2027);
                CAPTURE(row.name);
                CAPTURE(far);
                CAPTURE(every);
                xt::xarray<double> v = xt::random::randn<double>(l.shape) * row.std + row.mean;
                for (std::size_t i = 0; i < v.size(); ++i)
                    if ((i / C) % every < 16) v.data()[i] += far * row.std;
                Tensor x = Tensor::from_double(v, DType::float32);
                if (std::fabs(row.mean) >= 5 * row.std) plant_near_mean(x, ix);  // as the test above
                const xt::xarray<double> w = xt::random::randn<double>(Shape{C}) * 0.5 + 1.0;
                const xt::xarray<double> b = xt::random::randn<double>(Shape{C});
                for (bool affine : {false, true}) {
                    CAPTURE(affine);
                    ForwardInputs in;
                    if (affine) in.weight = &w, in.bias = &b;
                    NormSpec spec;
                    spec.reduction_axes = {0, 1, 2};
                    spec.param_axes = {3};
                    const Tensor yf = forward(x, spec, in).y;
                    // The double path rounds once from its result: an error of the moments past
                    // double's own would show here first.
                    spec.compute = Compute::float64;
                    const Tensor yd = forward(x, spec, in).y;
                    const std::vector<Worst> e = contract_errors(x, ix, true, spec.eps, in.weight, in.bias, {&yf, &yd});
                    const Worst &f = e[0], &d = e[1];
                    CAPTURE(f.where);
                    CHECK(f.ulps <= 3.0);
                    CAPTURE(d.where);
                    CHECK(d.ulps <= 0.5 + 1e-3);
                    MESSAGE(row.name << " | far " << far << " every " << every << " | affine " << affine << " | float "
                                     << f.ulps << " | double " << d.ulps);
                    worst = std::max(worst, f.ulps);
                    worst_d = std::max(worst_d, d.ulps);
                }
            }
    MESSAGE("worst: float path " << worst << " ulps, double path " << worst_d << " ulps");
}

TEST_CASE("float path on a row where (((x - hi) - lo) - lo2) * a + b came to 3.04 ulps") {
    // A LayerNorm row of 3 with weights and biases, found by scripts/float_path_stress.cpp.
    // The earlier float formula rounded x - hi and then - lo at the ulp of x - mean (x far
    // from the mean, where x - hi is not exact), then the product and the sum: four roundings
    // that here add up past 3 ulps. The formula now, fma(x - hi, a, fma(-lo, a, b)), rounds
    // x - hi and the fma only.
    const Layout l{"layernorm row of 3", {1, 3}, {1}, {1}};
    const Index ix = index_of(l);
    xt::xarray<double> v = {{-70.545845, -220.788208, -328.759735}};
    const Tensor x = Tensor::from_double(v, DType::float32);
    const xt::xarray<double> w = {0.76425673698691976, 0.9870481901128586, 0.78484879775778771};
    const xt::xarray<double> b = {0.0099919244812679709, 0.37420765086668928, -0.023311457304207951};
    NormSpec spec;
    spec.reduction_axes = Axes(1, 1);  // moved in: copying a constant vector here trips GCC 12's -Wnonnull
    spec.param_axes = Axes(1, 1);
    ForwardInputs in;
    in.weight = &w;
    in.bias = &b;
    const ForwardResult r = forward(x, spec, in);
    const Worst now = contract_error(x, ix, true, spec.eps, &w, &b, r.y);
    CAPTURE(now.where);
    CHECK(now.ulps <= 3.0);
    // The earlier formula on the engine's own statistics: the row still shows what it is here
    // for.
    Tensor before = r.y;
    const double m = r.batch.mean.data()[0];
    const float hi = static_cast<float>(m);
    const double rest = (m - hi) + r.batch.mean_lo.data()[0];
    const float lo = static_cast<float>(rest), lo2 = static_cast<float>(rest - lo);
    for (std::size_t k = 0; k < 3; ++k) {
        const float a = static_cast<float>(r.rstd.data()[0] * w(k)), bf = static_cast<float>(b(k));
        volatile float d = x.f32.data()[k] - hi;  // each operation rounded to float, in order
        d = d - lo;
        d = d - lo2;
        volatile float p = d * a;
        before.f32.data()[k] = p + bf;
    }
    const Worst old = contract_error(x, ix, true, spec.eps, &w, &b, before);
    CAPTURE(old.where);
    CHECK(old.ulps > 3.0);
    MESSAGE("float path " << now.ulps << " ulps; the earlier formula " << old.ulps);
}

TEST_CASE("float path at the edges of float32's range: statistics it cannot carry take the double arithmetic") {
    // Rows whose float constants would overflow or lose their digits (float_range.hpp):
    // subnormal values (with eps 0 the float path gave -inf; with 1e-5, x - mean lost digits
    // to float's subnormal floor), values near FLT_MAX (-inf), and a spread of 1e-20 under
    // weights of 1e20 (NaN). Each sits beside an ordinary row, which
    // keeps the bits it has alone: a value depends on its own row only.
    const Layout l{"rows of 4", {2, 4}, {1}, {1}};
    const Index ix = index_of(l);
    const std::vector<double> ordinary = {1, 2, 3, 5};
    const std::vector<std::pair<std::vector<double>, double>> rows = {
        {{1e-39, 2e-39, 3e-39, 4e-39}, 1.0},
        {{3.4e38, 3.4e38, 3.4e38, -3.4e38}, 1.0},
        {{-0.7e-20, 1.3e-20, 0.2e-20, -1.1e-20}, 1e20},
    };
    for (const bool center : {true, false})
        for (const double eps : {0.0, 1e-5})
        for (const auto& [row, weight] : rows) {
            xt::xarray<double> v = xt::zeros<double>({std::size_t{2}, std::size_t{4}});
            for (std::size_t k = 0; k < 4; ++k) v(0, k) = row[k], v(1, k) = ordinary[k];
            const Tensor x = Tensor::from_double(v, DType::float32);
            const xt::xarray<double> w = {weight, 0.75 * weight, 1.25 * weight, weight};
            NormSpec spec;
            spec.reduction_axes = Axes(1, 1);
            spec.param_axes = Axes(1, 1);
            spec.center = center;
            spec.eps = eps;
            spec.compute = Compute::float32;
            ForwardInputs in;
            in.weight = &w;
            const ForwardResult r = forward(x, spec, in);
            const Worst e = contract_error(x, ix, center, spec.eps, &w, nullptr, r.y);
            CAPTURE(center);
            CAPTURE(eps);
            CAPTURE(row[0]);
            CAPTURE(e.where);
            CHECK(e.ulps <= 3.0);
            // The ordinary row alone: the same bits.
            const Tensor alone = Tensor::from_double(xt::xarray<double>{{1, 2, 3, 5}}, DType::float32);
            const ForwardResult ra = forward(alone, spec, in);
            for (std::size_t k = 0; k < 4; ++k) CHECK(r.y.f32.data()[4 + k] == ra.y.f32.data()[k]);
        }
}

TEST_CASE("float path: a mean whose low part falls below float's normal range takes the double arithmetic") {
    // Rows of normal floats whose mean leaves a remainder below 2^-126 that a float cannot
    // hold, so the float path's lo would round it away, whatever the spread. The reference
    // is the double path (the float64 result): a long double one differs from both paths
    // here by deviations below double's resolution of the values, which neither carries.
    const double t = std::ldexp(1.0, -126), s = std::ldexp(1.0, -149);
    const std::vector<std::pair<std::vector<double>, double>> rows = {
        {{std::ldexp(1.0, -90), 3 * std::ldexp(1.0, -90), std::ldexp(1.0, -90), t + s, -t}, 1.0},
        {{std::ldexp(1.0, -100), -std::ldexp(1.0, -100), 0, t + s, -t}, 1.0},
        {{1, -1, 0, t + s, -t}, 1e20},
        {{3 * s, 0, 0, 0, 0}, 1.0},
    };
    const std::vector<double> ordinary = {1, 2, 3, 5, 8};
    for (const double eps : {0.0, 1e-5})
        for (const auto& [row, weight] : rows) {
            xt::xarray<double> v = xt::zeros<double>({std::size_t{2}, std::size_t{5}});
            for (std::size_t k = 0; k < 5; ++k) v(0, k) = row[k], v(1, k) = ordinary[k];
            const Tensor x = Tensor::from_double(v, DType::float32);
            const xt::xarray<double> w = xt::ones<double>({std::size_t{5}}) * weight;
            NormSpec spec;
            spec.reduction_axes = Axes(1, 1);
            spec.param_axes = Axes(1, 1);
            spec.eps = eps;
            ForwardInputs in;
            in.weight = &w;
            spec.compute = Compute::float64;
            const ForwardResult rd = forward(x, spec, in);
            spec.compute = Compute::float32;
            const ForwardResult rf = forward(x, spec, in);
            CAPTURE(eps);
            CAPTURE(row[0]);
            for (std::size_t k = 0; k < 5; ++k) {
                const double yd = rd.y.f32.data()[k], yf = rf.y.f32.data()[k];
                CAPTURE(k);
                CAPTURE(yd);
                CAPTURE(yf);
                CHECK(std::fabs(yf - yd) <= 3 * ulp(DType::float32, std::fabs(yd)));
            }
        }
}

TEST_CASE("float path: a weight out of range for one channel sends that channel alone to the double arithmetic") {
    // BatchNorm over (N, C) with weights 1 and 1e-36: rstd * 1e-36 is no normal float, so
    // channel 1 takes the double arithmetic; channel 0 keeps the bits it has under weight 1,
    // which differ from the double arithmetic's in some elements (checked, so that the
    // comparison shows which arithmetic channel 0 took). Channel 1 spreads over about 700:
    // rstd * 1e-36 is about 1.4e-39, whose half a subnormal ulp is about 5e-7 of it, 4 to 8
    // ulps of its y, which is a normal float.
    xt::xarray<double> v = norm_test::gaussian({256, 2}, 3.0, 0.7, 41);
    for (std::size_t n = 0; n < 256; ++n) v(n, 1) *= 1000;
    const Tensor x = Tensor::from_double(v, DType::float32);
    NormSpec spec;
    spec.reduction_axes = Axes(1, 0);
    spec.param_axes = Axes(1, 1);
    spec.compute = Compute::float32;
    const xt::xarray<double> tiny = {1.0, 1e-36}, ones = {1.0, 1.0};
    ForwardInputs a, b;
    a.weight = &tiny;
    b.weight = &ones;
    const ForwardResult ra = forward(x, spec, a), rb = forward(x, spec, b);
    NormSpec dspec = spec;
    dspec.compute = Compute::float64;
    const ForwardResult rd = forward(x, dspec, b);
    const Index ix = index_of({"(N, C)", {256, 2}, {0}, {1}});
    const Worst e = contract_error(x, ix, true, spec.eps, &tiny, nullptr, ra.y);
    CAPTURE(e.where);
    CHECK(e.ulps <= 3.0);
    std::size_t differ = 0;
    for (std::size_t n = 0; n < 256; ++n) {
        CHECK(ra.y.f32.data()[2 * n] == rb.y.f32.data()[2 * n]);
        differ += rb.y.f32.data()[2 * n] != rd.y.f32.data()[2 * n];
    }
    CHECK(differ > 0);
}

TEST_CASE("float path: a padded position far from the real positions' mean takes the double arithmetic") {
    // Mask [1, 1, 0]: the statistics of 2^110 and 2^110 + 2^87 bound x - mean for the real
    // positions only; the padded -FLT_MAX is normalised with them too, and x - hi overflowed.
    const double big = std::ldexp(1.0, 110), flt_max = std::numeric_limits<float>::max();
    xt::xarray<double> v = {{big, big + std::ldexp(1.0, 87), -flt_max}};
    const Tensor x = Tensor::from_double(v, DType::float32);
    const xt::xarray<std::uint8_t> mask = {{1, 1, 0}};
    NormSpec spec;
    spec.reduction_axes = Axes(1, 1);
    spec.param_axes = Axes(1, 1);
    spec.compute = Compute::float32;
    ForwardInputs in;
    in.mask = &mask;
    const ForwardResult r = forward(x, spec, in);
    // The reference in long double from the two real values.
    const long double x0 = x.f32.data()[0], x1 = x.f32.data()[1], x2 = x.f32.data()[2];
    const long double mean = (x0 + x1) / 2, var = ((x0 - mean) * (x0 - mean) + (x1 - mean) * (x1 - mean)) / 2;
    const double ref = static_cast<double>((x2 - mean) / std::sqrt(var + static_cast<long double>(spec.eps)));
    CAPTURE(ref);
    CHECK(std::isfinite(r.y.f32.data()[2]));
    CHECK(std::fabs(r.y.f32.data()[2] - ref) <= 3 * ulp(DType::float32, std::fabs(ref)));
}

TEST_CASE("float path: rows out of float32's range are found in every block of statistics, the last one partial") {
    // The range check screens the statistics in blocks of a few thousand and applies its rules
    // only in the blocks where the screen finds something; a row of subnormal values (the
    // float path gave -inf with eps 0) sits in the second block and in the last, partial one,
    // among ordinary rows. Each must come within 3 ulps of the double path, and so must an
    // ordinary row of each block.
    const std::size_t rows = 2 * 4096 + 100, n = 4;
    const std::vector<std::size_t> odd = {4096 + 7, rows - 1};
    xt::xarray<double> v = norm_test::gaussian({rows, n}, 1.0, 2.0, 7);
    for (const std::size_t r : odd)
        for (std::size_t k = 0; k < n; ++k) v(r, k) = (k + 1) * 1e-39;
    const Tensor x = Tensor::from_double(v, DType::float32);
    NormSpec spec;
    spec.reduction_axes = Axes(1, 1);
    spec.param_axes = Axes(1, 1);
    spec.eps = 0.0;
    spec.compute = Compute::float32;
    const ForwardResult rf = forward(x, spec, {});
    spec.compute = Compute::float64;
    const ForwardResult rd = forward(x, spec, {});
    for (const std::size_t r : {std::size_t{5}, odd[0], odd[0] + 1, odd[1] - 1, odd[1]})
        for (std::size_t k = 0; k < n; ++k) {
            const double yd = rd.y.f32.data()[r * n + k], yf = rf.y.f32.data()[r * n + k];
            CAPTURE(r);
            CAPTURE(k);
            CAPTURE(yd);
            CAPTURE(yf);
            CHECK(std::fabs(yf - yd) <= 3 * ulp(DType::float32, std::fabs(yd)));
        }
}

TEST_CASE("float path: a bias beyond float32's range that the mean's low part cancels takes the double arithmetic") {
    // Given statistics (eval mode) with a mean of 2^90 + 2^65: the float path splits it into
    // hi = 2^90 and lo = 2^65 and folds c = b - lo * a in float, but b = 2^130 is no float
    // (it would be inf), while y = (x - mean) * w + b at x = hi is exactly 0 with w = 2^65.
    // Channel 0 is ordinary.
    const double hi = std::ldexp(1.0, 90), lo = std::ldexp(1.0, 65);
    const xt::xarray<double> v = {{1.0, hi}, {2.0, hi}, {4.0, hi}};
    const Tensor x = Tensor::from_double(v, DType::float32);
    const xt::xarray<double> mean = {{2.0, hi + lo}}, var = {{1.0, 1.0}};
    const xt::xarray<double> w = {1.0, lo}, b = {0.5, std::ldexp(1.0, 130)};
    NormSpec spec;
    spec.reduction_axes = Axes(1, 0);
    spec.param_axes = Axes(1, 1);
    spec.eps = 0.0;
    spec.compute = Compute::float32;
    ForwardInputs in;
    in.weight = &w;
    in.bias = &b;
    in.given_mean = &mean;
    in.given_var = &var;
    const ForwardResult r = forward(x, spec, in);
    for (std::size_t n = 0; n < 3; ++n) {
        CAPTURE(n);
        CHECK(r.y.f32.data()[2 * n] == static_cast<float>(v(n, 0) - 2.0 + 0.5));
        CHECK(r.y.f32.data()[2 * n + 1] == 0.0f);
    }
}
