// Engine and presets under the conventions of other frameworks and setups: dtype-dependent
// defaults (PyTorch's opmath rule), the rounding order of the affine step in half
// precision, GroupNorm's per-group affine parameters, data-parallel BatchNorm replicas, and
// masks that broadcast. References are written here from the definitions, independently of
// the engine's code paths.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include <xtensor/xbroadcast.hpp>

#include "norm/presets.hpp"
#include "norm_util.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

using norm_test::gaussian;
using norm_test::values;

NormDef def(NormType t) {
    NormDef d;
    d.name = "n";
    d.type = t;
    return d;
}

}  // namespace

TEST_CASE("default eps: torch RMSNorm takes the machine epsilon of the compute type (PyTorch >= 2.6)") {
    // torch.finfo(at::opmath_type<T>).eps: float for Half and BFloat16, T otherwise.
    const double f32 = std::numeric_limits<float>::epsilon(), f64 = std::numeric_limits<double>::epsilon();
    CHECK(compute_dtype(DType::float16) == DType::float32);
    CHECK(compute_dtype(DType::bfloat16) == DType::float32);
    CHECK(compute_dtype(DType::float32) == DType::float32);
    CHECK(compute_dtype(DType::float64) == DType::float64);
    CHECK(default_eps(NormType::rmsnorm, Convention::torch, DType::float16) == f32);
    CHECK(default_eps(NormType::rmsnorm, Convention::torch, DType::bfloat16) == f32);
    CHECK(default_eps(NormType::rmsnorm, Convention::torch, DType::float32) == f32);
    CHECK(default_eps(NormType::rmsnorm, Convention::torch, DType::float64) == f64);
    // Every other default is a fixed number, the same for every dtype.
    for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64}) {
        for (NormType t : {NormType::batchnorm, NormType::layernorm, NormType::instancenorm, NormType::groupnorm}) {
            CHECK(default_eps(t, Convention::torch, d) == 1e-5);
            CHECK(default_eps(t, Convention::onnx, d) == 1e-5);
        }
        CHECK(default_eps(NormType::rmsnorm, Convention::onnx, d) == 1e-5);
        CHECK(default_eps(NormType::rmsnorm, Convention::keras, d) == 1e-6);
        CHECK(default_eps(NormType::rmsnorm, Convention::flax, d) == 1e-6);
    }
    // The layer resolves it per its dtype.
    NormDef d = def(NormType::rmsnorm);
    d.normalized_shape = std::vector<long long>{4};
    CHECK(NormLayer(d, DType::bfloat16).resolve({2, 4}, 1, "x").eps == f32);
    CHECK(NormLayer(d, DType::float64).resolve({2, 4}, 1, "x").eps == f64);
}

TEST_CASE("affine_rounding twice: half outputs are round(round(x_hat) * w + b); once rounds x_hat * w + b") {
    const xt::xarray<double> x = gaussian({3, 16}, 0.3, 1.7, 11);
    const xt::xarray<double> w = gaussian({16}, 1.0, 0.4, 12), b = gaussian({16}, 0.0, 0.5, 13);
    for (DType dt : {DType::bfloat16, DType::float16}) {
        CAPTURE(dtype_name(dt));
        const Tensor xt_ = Tensor::from_double(x, dt);
        // Weights as the dtype holds them (a framework's half parameters).
        xt::xarray<double> wd = w, bd = b;
        for (auto& v : wd) v = round_to(dt, v);
        for (auto& v : bd) v = round_to(dt, v);
        NormDef d = def(NormType::layernorm);
        d.normalized_shape = std::vector<long long>{16};
        d.weight = values(wd);
        d.bias = values(bd);
        const xt::xarray<double> once = NormLayer(d, dt).forward(xt_, 1, "x").fwd.y.to_double();
        d.affine_rounding = AffineRounding::twice;
        const xt::xarray<double> twice = NormLayer(d, dt).forward(xt_, 1, "x").fwd.y.to_double();
        const xt::xarray<double> xr = xt_.to_double();
        std::size_t differ = 0;
        for (std::size_t i = 0; i < 3; ++i) {
            double mean = 0, var = 0;
            for (std::size_t j = 0; j < 16; ++j) mean += xr(i, j) / 16;
            for (std::size_t j = 0; j < 16; ++j) var += (xr(i, j) - mean) * (xr(i, j) - mean) / 16;
            for (std::size_t j = 0; j < 16; ++j) {
                const double xhat = (xr(i, j) - mean) / std::sqrt(var + 1e-5);
                CHECK(once(i, j) == round_to(dt, xhat * wd(j) + bd(j)));
                CHECK(twice(i, j) == round_to(dt, round_to(dt, xhat) * wd(j) + bd(j)));
                differ += once(i, j) != twice(i, j);
            }
        }
        MESSAGE(dtype_name(dt) << ": " << differ << " of 48 LayerNorm outputs differ between once and twice");
        CHECK(differ > 0);  // the case exists on ordinary data, not only on a crafted row
    }
    SUBCASE("float32 and float64, and half without affine parameters: twice is once") {
        for (DType dt : {DType::float32, DType::float64, DType::bfloat16}) {
            NormDef d = def(NormType::rmsnorm);
            d.normalized_shape = std::vector<long long>{16};
            if (dt != DType::bfloat16) d.weight = values(w);
            else d.affine = false;
            const Tensor t = Tensor::from_double(x, dt);
            const xt::xarray<double> once = NormLayer(d, dt).forward(t, 1, "x").fwd.y.to_double();
            d.affine_rounding = AffineRounding::twice;
            CHECK(NormLayer(d, dt).forward(t, 1, "x").fwd.y.to_double() == once);
        }
    }
}

TEST_CASE("groupnorm affine_per group: each group's value over its C/G channels, as the repeated per-channel values") {
    const xt::xarray<double> x = gaussian({2, 6, 5}, 1.0, 2.0, 21);
    NormDef g = def(NormType::groupnorm);
    g.num_groups = 3;
    g.affine_per = AffinePer::group;
    g.weight = values({2.0, -0.5, 1.25});
    g.bias = values({0.5, 1.0, -3.0});
    NormDef c = def(NormType::groupnorm);
    c.num_groups = 3;
    c.weight = values({2.0, 2.0, -0.5, -0.5, 1.25, 1.25});
    c.bias = values({0.5, 0.5, 1.0, 1.0, -3.0, -3.0});
    for (DType dt : {DType::float64, DType::float32}) {
        const Tensor t = Tensor::from_double(x, dt);
        const StepResult rg = NormLayer(g, dt).forward(t, 1, "x");
        CHECK(rg.res.param_shape == Shape{3});
        CHECK(rg.res.num_params == 6);
        CHECK(rg.fwd.y.to_double() == NormLayer(c, dt).forward(t, 1, "x").fwd.y.to_double());
    }
    // Channels last too.
    NormDef gl = g, cl = c;
    gl.channel_axis = cl.channel_axis = -1;
    const Tensor tl = Tensor::from_double(gaussian({2, 5, 6}, 1.0, 2.0, 22), DType::float64);
    CHECK(NormLayer(gl, DType::float64).forward(tl, 2, "x").fwd.y.to_double() ==
          NormLayer(cl, DType::float64).forward(tl, 2, "x").fwd.y.to_double());
    // Gradients: a per-group weight's is the sum of its channels' per-channel gradients.
    {
        const Tensor t = Tensor::from_double(x, DType::float64);
        const xt::xarray<double> dy = gaussian({2, 6, 5}, 0.0, 1.0, 23);
        const StepGradients gg = step_backward(t, NormLayer(g, DType::float64).forward(t, 1, "x"), dy);
        const StepGradients gc = step_backward(t, NormLayer(c, DType::float64).forward(t, 1, "x"), dy);
        CHECK(gg.dweight.shape() == std::vector<std::size_t>{3});
        // The same values walked with other parameter strides: equal up to summation order.
        for (std::size_t i = 0; i < gc.dx.f64.size(); ++i)
            CHECK(gg.dx.f64.data()[i] == doctest::Approx(gc.dx.f64.data()[i]).epsilon(1e-13).scale(1));
        for (std::size_t k = 0; k < 3; ++k) {
            CHECK(gg.dweight(k) == doctest::Approx(gc.dweight(2 * k) + gc.dweight(2 * k + 1)).epsilon(1e-14));
            CHECK(gg.dbias(k) == doctest::Approx(gc.dbias(2 * k) + gc.dbias(2 * k + 1)).epsilon(1e-14));
        }
    }
    // A per-channel weight under affine_per group names both shapes.
    g.weight = c.weight;
    CHECK_THROWS_WITH_AS(NormLayer(g, DType::float64).resolve({2, 6, 5}, 1, "x"),
                         doctest::Contains("weight: expected shape [3] (one value per group, affine_per \"group\"), but "
                                           "got [6]; groupnorm takes [6] with affine_per \"channel\" (one value per "
                                           "channel) or [3] with affine_per \"group\" (one value per group of C/G = 2 channels)"),
                         NormError);
}

TEST_CASE("batchnorm replicas: unsynced = each slice on its own, synced = the whole batch") {
    const xt::xarray<double> x = gaussian({7, 3, 2}, 4.0, 3.0, 31);
    const Tensor t = Tensor::from_double(x, DType::float64);
    NormDef whole = def(NormType::batchnorm);
    NormDef un = whole;
    un.replica_sizes = {3, 4};
    NormDef sy = un;
    sy.sync = true;

    NormLayer lw(whole, DType::float64), ls(sy, DType::float64), lu(un, DType::float64);
    const StepResult rw = lw.forward(t, 1, "x"), rs = ls.forward(t, 1, "x"), ru = lu.forward(t, 1, "x");
    // Synchronised: the whole batch's statistics, running statistics included.
    CHECK(rs.fwd.y.to_double() == rw.fwd.y.to_double());
    CHECK(rs.fwd.mean == rw.fwd.mean);
    CHECK(ls.running_var() == lw.running_var());
    CHECK(rs.res.replicas.empty());

    // Unsynchronised: each slice is a batch of its own.
    CHECK(ru.res.replicas == std::vector<std::size_t>{3, 4});
    CHECK(ru.fwd.mean.shape() == std::vector<std::size_t>{2, 1, 3, 1});
    NormLayer first(whole, DType::float64), second(whole, DType::float64);
    xt::xarray<double> x0 = xt::xarray<double>::from_shape({3, 3, 2}), x1 = xt::xarray<double>::from_shape({4, 3, 2});
    std::copy_n(x.data(), x0.size(), x0.data());
    std::copy_n(x.data() + x0.size(), x1.size(), x1.data());
    const StepResult r0 = first.forward(Tensor::from_double(x0, DType::float64), 1, "x");
    const StepResult r1 = second.forward(Tensor::from_double(x1, DType::float64), 1, "x");
    const xt::xarray<double> yu = ru.fwd.y.to_double();
    CHECK(std::equal(r0.fwd.y.f64.begin(), r0.fwd.y.f64.end(), yu.data()));
    CHECK(std::equal(r1.fwd.y.f64.begin(), r1.fwd.y.f64.end(), yu.data() + x0.size()));
    for (std::size_t k = 0; k < 3; ++k) {
        CHECK(ru.fwd.mean(0, 0, k, 0) == r0.fwd.mean(0, k, 0));
        CHECK(ru.fwd.var(1, 0, k, 0) == r1.fwd.var(0, k, 0));
        CHECK(ru.fwd.rstd(1, 0, k, 0) == r1.fwd.rstd(0, k, 0));
    }
    // Running statistics follow replica 0 (DataParallel's replica 0, DDP's rank 0).
    CHECK(lu.running_mean() == first.running_mean());
    CHECK(lu.running_var() == first.running_var());

    SUBCASE("backward: each replica on its slice, parameter gradients summed") {
        NormDef aff = un, one = whole;
        aff.weight = one.weight = values({1.5, -0.5, 2.0});
        aff.bias = one.bias = values({0.1, 0.2, 0.3});
        const StepResult sa = NormLayer(aff, DType::float64).forward(t, 1, "x");
        const xt::xarray<double> dy = gaussian({7, 3, 2}, 0.0, 1.0, 32);
        const StepGradients g = step_backward(t, sa, dy);
        xt::xarray<double> dy0 = xt::xarray<double>::from_shape({3, 3, 2}), dy1 = xt::xarray<double>::from_shape({4, 3, 2});
        std::copy_n(dy.data(), dy0.size(), dy0.data());
        std::copy_n(dy.data() + dy0.size(), dy1.size(), dy1.data());
        const Tensor t0 = Tensor::from_double(x0, DType::float64), t1 = Tensor::from_double(x1, DType::float64);
        const StepGradients g0 = step_backward(t0, NormLayer(one, DType::float64).forward(t0, 1, "x"), dy0);
        const StepGradients g1 = step_backward(t1, NormLayer(one, DType::float64).forward(t1, 1, "x"), dy1);
        CHECK(std::equal(g0.dx.f64.begin(), g0.dx.f64.end(), g.dx.f64.data()));
        CHECK(std::equal(g1.dx.f64.begin(), g1.dx.f64.end(), g.dx.f64.data() + x0.size()));
        for (std::size_t k = 0; k < 3; ++k) {
            CHECK(g.dweight(k) == g0.dweight(k) + g1.dweight(k));
            CHECK(g.dbias(k) == g0.dbias(k) + g1.dbias(k));
        }
    }
    SUBCASE("a mask travels with its rows") {
        xt::xarray<std::uint8_t> m = xt::ones<std::uint8_t>({7, 1, 2});
        m(1, 0, 1) = m(5, 0, 0) = m(6, 0, 0) = 0;
        NormDef um = un, wm = whole;
        um.mask = wm.mask = true;
        const StepResult rm = NormLayer(um, DType::float64).forward(t, 1, "x", &m);
        xt::xarray<std::uint8_t> m1 = xt::xarray<std::uint8_t>::from_shape({4, 1, 2});
        std::copy_n(m.data() + 6, 8, m1.data());
        const StepResult s1 = NormLayer(wm, DType::float64).forward(Tensor::from_double(x1, DType::float64), 1, "x", &m1);
        for (std::size_t k = 0; k < 3; ++k) CHECK(rm.fwd.mean(1, 0, k, 0) == s1.fwd.mean(0, k, 0));
        CHECK(rm.fwd.batch.count(1, 0, 0, 0) == 6);  // 8 positions of replica 1, 2 padded
    }
    SUBCASE("errors: counts that do not cover N, R not dividing N, one value per channel") {
        NormDef bad = un;
        bad.replica_sizes = {3, 3};
        CHECK_THROWS_WITH_AS(NormLayer(bad, DType::float64).resolve({7, 3, 2}, 1, "x"),
                             doctest::Contains("per-replica sample counts [3, 3] sum to 6, but the batch has N = 7"), NormError);
        bad.replica_sizes.clear();
        bad.replica_count = 2;
        CHECK_THROWS_WITH_AS(NormLayer(bad, DType::float64).resolve({7, 3, 2}, 1, "x"),
                             doctest::Contains("replicas 2 does not divide the batch of N = 7"), NormError);
        bad.replica_count = 0;
        bad.replica_sizes = {1, 6};
        CHECK_NOTHROW(NormLayer(bad, DType::float64).resolve({7, 3, 2}, 1, "x"));  // 2 values per channel
        CHECK_THROWS_WITH_AS(NormLayer(bad, DType::float64).resolve({7, 3}, 1, "x"),
                             doctest::Contains("replica 0 (1 of the 7 samples"), NormError);
        bad.sync = true;
        CHECK_NOTHROW(NormLayer(bad, DType::float64).resolve({7, 3}, 1, "x"));
        bad.sync = false;
        bad.training = false;
        CHECK_NOTHROW(NormLayer(bad, DType::float64).resolve({7, 3}, 1, "x"));
    }
}

TEST_CASE("engine: a mask with size-1 axes gives the statistics of its expansion, counting positions") {
    const xt::xarray<double> xv = gaussian({2, 3, 4, 5}, 2.0, 1.5, 41);
    const Tensor x = Tensor::from_double(xv, DType::float64);
    xt::xarray<std::uint8_t> small = xt::ones<std::uint8_t>({1, 1, 4, 1});
    small(0, 0, 1, 0) = 0;
    xt::xarray<std::uint8_t> big = xt::broadcast(small, std::vector<std::size_t>{2, 3, 4, 5});
    // The two masks walk the data with different strides, so sums may take another order:
    // equal within a few ulps, counts exactly.
    auto close = [](const xt::xarray<double>& a, const xt::xarray<double>& b) {
        if (a.shape() != b.shape()) return false;
        for (std::size_t i = 0; i < a.size(); ++i)
            if (std::fabs(a.data()[i] - b.data()[i]) > 8 * std::numeric_limits<double>::epsilon() * std::fabs(b.data()[i]))
                return false;
        return true;
    };
    for (const Axes& axes : {Axes{0, 1, 2}, Axes{1, 2, 3}, Axes{2, 3}, Axes{0, 2}}) {
        const Moments a = compute_moments(x, axes, true, &small), b = compute_moments(x, axes, true, &big);
        CHECK(close(a.mean, b.mean));
        CHECK(close(a.var, b.var));
        CHECK(a.count == b.count);
    }
    // Counts are positions after broadcasting: over (1, 2, 3) each sample has 3 x 3 x 5 real.
    const Moments m = compute_moments(x, {1, 2, 3}, true, &small);
    CHECK(m.count(0, 0, 0, 0) == 45);
    // All-ones data is normalised to 0 at every position.
    const Tensor ones = Tensor::from_double(xt::ones<double>({2, 3, 4, 5}), DType::float64);
    NormSpec spec;
    spec.reduction_axes = {0, 2, 3};
    ForwardInputs in;
    in.mask = &small;
    const ForwardResult r = forward(ones, spec, in);
    for (double v : r.mean) CHECK(v == 1);
    for (double v : r.y.f64) CHECK(v == 0);
}
