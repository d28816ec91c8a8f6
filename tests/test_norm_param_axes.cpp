// LayerNorm and RMSNorm with the weight and bias on some of the normalized axes (NormDef
// param_axes: Flax's feature_axes, an ONNX Scale broadcast along the normalized shape).
// References written here from the definition: the same layer with its parameters tiled
// along the other normalized axes, Flax's InstanceNorm identity, and the default layout.
// PyTorch autograd goldens of the same layers: tests/golden/grad_param_axes_*.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <xtensor/xbroadcast.hpp>

#include "norm/presets.hpp"
#include "norm_util.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

using norm_test::gaussian;
using norm_test::values;

NormDef def(NormType t, std::vector<long long> axes) {
    NormDef d;
    d.name = "n";
    d.type = t;
    d.axes = std::move(axes);
    return d;
}

// `p` (the data's dims at `axes` of `shape`) repeated along the other normalized axes
// `all`: the weight of the same layer with parameters on every normalized axis.
xt::xarray<double> tiled(const xt::xarray<double>& p, const Shape& shape, const Axes& all, const Axes& axes) {
    Shape keep, full;
    for (std::size_t a : all) {
        full.push_back(shape[a]);
        keep.push_back(std::find(axes.begin(), axes.end(), a) != axes.end() ? shape[a] : 1);
    }
    xt::xarray<double> k = p;
    k.reshape(keep);
    return xt::broadcast(k, full);
}

// Whether two tensors hold the same bits (NaN included), element by element.
bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.dtype != b.dtype || a.shape() != b.shape()) return false;
    if (a.dtype == DType::float64) return std::memcmp(a.f64.data(), b.f64.data(), a.size() * sizeof(double)) == 0;
    return std::memcmp(a.f32.data(), b.f32.data(), a.size() * sizeof(float)) == 0;
}

// The key of the NormError f() throws, or "(none)".
template <class F>
std::string key_of(F&& f) {
    try {
        f();
    } catch (const NormError& e) {
        return e.key();
    }
    return "(none)";
}

struct Arithmetic {
    const char* name;
    DType dtype;
    Compute compute;
};
const Arithmetic kArithmetics[] = {{"float32, float path", DType::float32, Compute::float32},
                                   {"float32, double", DType::float32, Compute::float64},
                                   {"float64", DType::float64, Compute::float64},
                                   {"float16", DType::float16, Compute::float64},
                                   {"bfloat16", DType::bfloat16, Compute::float64}};

}  // namespace

TEST_CASE("param_axes: the weight and bias take the data's dims at those axes, in axis order") {
    NormDef ln = def(NormType::layernorm, {1, 2, 3});
    ln.param_axes = std::vector<long long>{-1};
    Resolution r = NormLayer(ln, DType::float32).resolve({2, 3, 4, 5}, 3, "x");
    CHECK(r.reduction_axes == Axes{1, 2, 3});
    CHECK(r.spec.param_axes == Axes{3});
    CHECK(r.param_shape == Shape{5});
    CHECK(r.num_params == 10);
    CHECK(r.stats_shape == Shape{2, 1, 1, 1});
    ln.param_axes = std::vector<long long>{-2, 1};
    r = NormLayer(ln, DType::float32).resolve({2, 3, 4, 5}, 3, "x");
    CHECK(r.spec.param_axes == Axes{1, 2});
    CHECK(r.param_shape == Shape{3, 4});
    NormDef rms = def(NormType::rmsnorm, {});
    rms.axes.reset();
    rms.normalized_shape = std::vector<long long>{4, 5};
    rms.param_axes = std::vector<long long>{3};
    r = NormLayer(rms, DType::float32).resolve({2, 3, 4, 5}, 1, "x");
    CHECK(r.param_shape == Shape{5});
    CHECK(r.num_params == 5);  // weight only
    // Unset: every normalized axis, as before.
    rms.param_axes.reset();
    r = NormLayer(rms, DType::float32).resolve({2, 3, 4, 5}, 1, "x");
    CHECK(r.spec.param_axes == r.reduction_axes);
    CHECK(r.param_shape == Shape{4, 5});
}

TEST_CASE("param_axes: the same bits as the parameters tiled along the other normalized axes, in every arithmetic") {
    // Per element the output is (x - mean) * rstd * w + b with that element's w and b, whatever
    // layout they came in: the kernels that run differ (the row kernels take only parameters
    // along whole rows), the arithmetic of each element does not.
    struct Layout {
        const char* name;
        Shape shape;
        std::vector<long long> axes, param_axes;
    };
    const Layout layouts[] = {
        {"NHWC over H,W,C, params on C", {2, 3, 4, 5}, {1, 2, 3}, {-1}},
        {"(B,T,D) over T,D, params on D", {3, 4, 6}, {1, 2}, {2}},
        {"NHWC over H,W,C, params on H,W", {2, 3, 4, 5}, {1, 2, 3}, {1, 2}},
        {"rows of 24000, longer than a chunk, params on the last axis", {2, 40, 30, 20}, {1, 2, 3}, {-1}},
        {"over a middle axis and the last, params on the middle one", {3, 7, 2, 9}, {1, 3}, {1}},
    };
    for (const Layout& l : layouts) {
        CAPTURE(l.name);
        const xt::xarray<double> x = gaussian(l.shape, 3.0, 2.0, 31);
        for (NormType type : {NormType::layernorm, NormType::rmsnorm}) {
            CAPTURE(norm_type_name(type));
            for (double offset : {0.0, 1.0}) {
                if (offset != 0 && type != NormType::rmsnorm) continue;
                NormDef sub = def(type, l.axes);
                sub.param_axes = l.param_axes;
                sub.weight_offset = offset;
                const Resolution rs = NormLayer(sub, DType::float64).resolve(l.shape, 1, "x");
                const xt::xarray<double> w = gaussian(rs.param_shape, offset ? 0.0 : 1.0, 0.5, 32);
                const xt::xarray<double> b = gaussian(rs.param_shape, 0.0, 0.5, 33);
                sub.weight = values(w);
                NormDef full = def(type, l.axes);
                full.weight_offset = offset;
                full.weight = values(tiled(w, l.shape, rs.reduction_axes, rs.spec.param_axes));
                if (type == NormType::layernorm) {
                    sub.bias = values(b);
                    full.bias = values(tiled(b, l.shape, rs.reduction_axes, rs.spec.param_axes));
                }
                for (const Arithmetic& a : kArithmetics) {
                    CAPTURE(a.name);
                    sub.compute = full.compute = a.compute;
                    for (AffineRounding rounding : {AffineRounding::once, AffineRounding::twice}) {
                        sub.affine_rounding = full.affine_rounding = rounding;
                        const Tensor t = Tensor::from_double(x, a.dtype);
                        const StepResult ss = NormLayer(sub, a.dtype).forward(t, 1, "x");
                        const StepResult sf = NormLayer(full, a.dtype).forward(t, 1, "x");
                        CHECK(same_bits(ss.fwd.y, sf.fwd.y));
                        // A padding mask over the normalized axes: the same statistics on both sides.
                        Shape ms = l.shape;
                        ms.back() = 1;
                        xt::xarray<std::uint8_t> m = xt::ones<std::uint8_t>(ms);
                        m.data()[1] = 0;
                        m.data()[m.size() - 1] = 0;
                        sub.mask = full.mask = true;
                        CHECK(same_bits(NormLayer(sub, a.dtype).forward(t, 1, "x", &m).fwd.y,
                                        NormLayer(full, a.dtype).forward(t, 1, "x", &m).fwd.y));
                        sub.mask = full.mask = false;
                    }
                }
                // Gradients: dx as the tiled layer's (other runs, so up to summation order); the
                // parameter gradients are the tiled ones summed along the broadcast axes.
                const Tensor t = Tensor::from_double(x, DType::float64);
                const xt::xarray<double> dy = gaussian(l.shape, 0.0, 1.0, 34);
                const StepGradients gs = step_backward(t, NormLayer(sub, DType::float64).forward(t, 1, "x"), dy);
                const StepGradients gf = step_backward(t, NormLayer(full, DType::float64).forward(t, 1, "x"), dy);
                for (std::size_t i = 0; i < x.size(); ++i)
                    CHECK(gs.dx.f64.data()[i] == doctest::Approx(gf.dx.f64.data()[i]).epsilon(1e-12).scale(1));
                CHECK(Shape(gs.dweight.shape().begin(), gs.dweight.shape().end()) == rs.param_shape);
                auto summed = [&](const xt::xarray<double>& g) {
                    // Sum of the full (normalized-axes) gradient over the axes the parameters do not span.
                    xt::xarray<double> out = xt::zeros<double>(rs.param_shape);
                    const Shape fs(g.shape().begin(), g.shape().end());
                    std::vector<std::size_t> idx(fs.size(), 0);
                    for (std::size_t i = 0; i < g.size(); ++i) {
                        std::size_t o = 0;
                        for (std::size_t k = 0; k < fs.size(); ++k)
                            if (std::find(rs.spec.param_axes.begin(), rs.spec.param_axes.end(), rs.reduction_axes[k]) !=
                                rs.spec.param_axes.end())
                                o = o * fs[k] + idx[k];
                        out.data()[o] += g.data()[i];
                        for (std::size_t k = fs.size(); k-- > 0;)
                            if (++idx[k] < fs[k]) break;
                            else idx[k] = 0;
                    }
                    return out;
                };
                const xt::xarray<double> dw = summed(gf.dweight);
                for (std::size_t i = 0; i < dw.size(); ++i)
                    CHECK(gs.dweight.data()[i] == doctest::Approx(dw.data()[i]).epsilon(1e-12).scale(1));
                if (type == NormType::layernorm) {
                    const xt::xarray<double> db = summed(gf.dbias);
                    for (std::size_t i = 0; i < db.size(); ++i)
                        CHECK(gs.dbias.data()[i] == doctest::Approx(db.data()[i]).epsilon(1e-12).scale(1));
                } else {
                    CHECK(gs.dbias.size() == 0);
                }
            }
        }
    }
}

TEST_CASE("param_axes naming every normalized axis is the default, bit for bit") {
    const xt::xarray<double> x = gaussian({4, 6, 8}, -2.0, 3.0, 41);
    NormDef dflt = def(NormType::layernorm, {1, 2});
    dflt.weight = values(gaussian({6, 8}, 1.0, 0.5, 42));
    dflt.bias = values(gaussian({6, 8}, 0.0, 0.5, 43));
    NormDef given = dflt;
    given.param_axes = std::vector<long long>{-1, 1};  // any order and sign
    for (const Arithmetic& a : kArithmetics) {
        CAPTURE(a.name);
        dflt.compute = given.compute = a.compute;
        const Tensor t = Tensor::from_double(x, a.dtype);
        const StepResult sd = NormLayer(dflt, a.dtype).forward(t, 2, "x");
        const StepResult sg = NormLayer(given, a.dtype).forward(t, 2, "x");
        CHECK(sg.res.spec.param_axes == sd.res.spec.param_axes);
        CHECK(sg.res.param_shape == sd.res.param_shape);
        CHECK(same_bits(sg.fwd.y, sd.fwd.y));
    }
}

TEST_CASE("param_axes: Flax's LayerNorm with feature axes outside its statistics is refused, for instancenorm") {
    // flax/linen/normalization.py, InstanceNorm's docstring: equivalent to
    // LayerNorm(reduction_axes=[1, 2], feature_axes=-1) on (N, H, W, C). param_axes lie among
    // the normalized axes; the refusal names the norm that has such parameters, and that
    // norm computes the layer: LayerNorm over H, W without parameters, then * w + b per C.
    const xt::xarray<double> x = gaussian({3, 5, 4, 6}, 0.5, 1.5, 51);
    const xt::xarray<double> w = gaussian({6}, 1.0, 0.5, 52), b = gaussian({6}, 0.0, 0.5, 53);
    NormDef ln = def(NormType::layernorm, {1, 2});
    ln.param_axes = std::vector<long long>{-1};
    const Tensor t = Tensor::from_double(x, DType::float64);
    CHECK_THROWS_WITH_AS(NormLayer(ln, DType::float64).forward(t, 3, "x"),
                         doctest::Contains("(parameters on an axis the statistics are not taken over, one per channel: "
                                           "instancenorm or batchnorm)"),
                         NormError);
    ln.param_axes.reset();
    ln.affine = false;
    const xt::xarray<double> xhat = NormLayer(ln, DType::float64).forward(t, 3, "x").fwd.y.to_double();
    NormDef in;
    in.name = "n";
    in.type = NormType::instancenorm;
    in.affine = true;
    in.weight = values(w);
    in.bias = values(b);
    const xt::xarray<double> yi = NormLayer(in, DType::float64).forward(t, 3, "x").fwd.y.to_double();
    for (std::size_t i = 0; i < yi.size(); ++i) {
        const std::size_t c = i % 6;
        CHECK(yi.data()[i] == doctest::Approx(xhat.data()[i] * w(c) + b(c)).epsilon(1e-13).scale(1));
    }
}

TEST_CASE("param_axes: out of range, repeated, not normalized, empty, without affine, on a channel norm") {
    const Shape xs{2, 8, 8, 3};
    auto resolve = [&](const NormDef& d) { return NormLayer(d, DType::float32).resolve(xs, 1, "x"); };
    NormDef d = def(NormType::layernorm, {1, 2, 3});
    d.param_axes = std::vector<long long>{-1, 4};
    CHECK_THROWS_WITH_AS(resolve(d), "layernorm \"n\" on data \"x\": param_axes: axis 4 out of range for input of rank 4",
                         NormError);
    CHECK(key_of([&] { resolve(d); }) == "param_axes/1");
    d.param_axes = std::vector<long long>{3, 2, -1};
    CHECK_THROWS_WITH_AS(resolve(d),
                         "layernorm \"n\" on data \"x\": param_axes: axis -1 repeated (it is axis 3 of input shape "
                         "[2, 8, 8, 3], which entry 0 names already)",
                         NormError);
    CHECK(key_of([&] { resolve(d); }) == "param_axes/2");
    d.param_axes = std::vector<long long>{0};
    CHECK_THROWS_WITH_AS(resolve(d),
                         "layernorm \"n\" on data \"x\": param_axes: axis 0 of input shape [2, 8, 8, 3] is not "
                         "normalized: the normalized axes are 1, 2 and 3 (axes [1, 2, 3]), and the weight and bias "
                         "span some of them (parameters on an axis the statistics are not taken over, one per "
                         "channel: instancenorm or batchnorm)",
                         NormError);
    CHECK(key_of([&] { resolve(d); }) == "param_axes/0");
    NormDef r = def(NormType::rmsnorm, {});
    r.axes.reset();
    r.normalized_shape = std::vector<long long>{3};
    r.param_axes = std::vector<long long>{3, -2};
    CHECK_THROWS_WITH_AS(resolve(r), doctest::Contains("param_axes: axis -2 (axis 2 of input shape [2, 8, 8, 3]) is not "
                                                       "normalized: the normalized axis is 3 (normalized_shape [3])"),
                         NormError);
    CHECK(key_of([&] { resolve(r); }) == "param_axes/1");
    d.param_axes = std::vector<long long>{};
    CHECK_THROWS_WITH_AS(resolve(d), doctest::Contains("param_axes must not be empty"), NormError);
    CHECK(key_of([&] { resolve(d); }) == "param_axes");
    d.param_axes = std::vector<long long>{-1};
    d.affine = false;
    CHECK_THROWS_WITH_AS(resolve(d), doctest::Contains("param_axes given but affine is false"), NormError);
    CHECK(key_of([&] { resolve(d); }) == "param_axes");
    NormDef gn;
    gn.name = "n";
    gn.type = NormType::groupnorm;
    gn.num_groups = 2;
    gn.param_axes = std::vector<long long>{-1};
    CHECK_THROWS_WITH_AS(resolve(gn), doctest::Contains("param_axes applies to layernorm and rmsnorm only"), NormError);
    CHECK(key_of([&] { resolve(gn); }) == "param_axes");
}

TEST_CASE("param_axes: a weight or bias of another shape is refused with the shape the param axes give") {
    NormDef d = def(NormType::layernorm, {1, 2, 3});
    d.param_axes = std::vector<long long>{-1};
    d.weight = values(xt::ones<double>({8, 8, 3}));
    CHECK_THROWS_WITH_AS(NormLayer(d, DType::float32).resolve({2, 8, 8, 3}, 1, "x"),
                         "layernorm \"n\" on data \"x\": weight: expected shape [3] (the dim at param axis 3 of input "
                         "shape [2, 8, 8, 3] (param_axes [-1]), broadcast along normalized axes 1 and 2), but got "
                         "[8, 8, 3]",
                         NormError);
    d.weight.reset();
    d.param_axes = std::vector<long long>{1, 2};
    d.bias = values(xt::ones<double>({3}));
    CHECK_THROWS_WITH_AS(NormLayer(d, DType::float32).resolve({2, 8, 8, 3}, 1, "x"),
                         "layernorm \"n\" on data \"x\": bias: expected shape [8, 8] (the dims at param axes 1 and 2 "
                         "of input shape [2, 8, 8, 3] (param_axes [1, 2]), broadcast along normalized axis 3), but "
                         "got [3]",
                         NormError);
}
