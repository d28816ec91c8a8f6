// Engine and presets: values computed by hand, equivalences between presets, a float64
// reference, and the errors PyTorch raises.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <xtensor/xrandom.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xview.hpp>

#include "norm/channels_last.hpp"
#include "norm/lanes.hpp"
#include "norm/presets.hpp"
#include "tensor/errors.hpp"

#include "norm_util.hpp"

using namespace normlab;

namespace {

// An input as a layer takes it: values and their channel axis (named "x" in messages).
struct Input {
    Tensor x;
    std::size_t channel_axis = 1;
};

Input batch(const xt::xarray<double>& v, DType d = DType::float64, std::size_t ca = 1) {
    return {Tensor::from_double(v, d), ca};
}

// One forward step of a layer (a named one or a temporary) on `in`, without a padding mask.
template <class Layer>
StepResult step(Layer&& layer, const Input& in) {
    return layer.forward(in.x, in.channel_axis, "x");
}

NormDef def(NormType t) {
    NormDef d;
    d.name = "n";
    d.type = t;
    return d;
}

double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    REQUIRE(a.shape() == b.shape());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a.data()[i] - b.data()[i]));
    return m;
}

// Normal values of std 3 about 0 or about 1e3, by the first index i: i % 4 of 0 or 3, all
// about 0 (channels last: every block of channels at the moments' shift 0, the short loop);
// 1, all about 1e3 (shifts about 1e3); 2, about 1e3 in channels (last index) 16 to 23, 40 to
// 47, ... (blocks with both). Rows, planes and walks get statistics of each kind and mixed.
xt::xarray<double> mixed_offsets(const Shape& shape) {
    xt::xarray<double> v = xt::random::randn<double>(shape) * 3.0;
    const std::size_t last = shape.back(), first = v.size() / shape[0];
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::size_t kind = (i / first) % 4, c = i % last;
        if (kind == 1 || (kind == 2 && (c / 8) % 3 == 2)) v.data()[i] += 1e3;
    }
    return v;
}

}  // namespace

TEST_CASE("layernorm: the row [1,2,3,4]") {
    NormDef d = def(NormType::layernorm);
    d.normalized_shape = std::vector<long long>{4};
    NormLayer ln(d, DType::float32);
    auto r = step(ln, batch({{1, 2, 3, 4}}, DType::float32));
    auto y = r.fwd.y.to_double();
    const double s = std::sqrt(1.25 + 1e-5);
    CHECK(y(0, 0) == static_cast<double>(static_cast<float>(-1.5 / s)));
    CHECK(y(0, 3) == static_cast<double>(static_cast<float>(1.5 / s)));
    CHECK(y(0, 1) == doctest::Approx(-0.4472).epsilon(1e-4));
    CHECK(r.fwd.mean(0, 0) == 2.5);
    CHECK(r.fwd.var(0, 0) == 1.25);
    CHECK(r.res.stats_shape == Shape{1, 1});
}

TEST_CASE("layernorm: rows [1,2,3] and [10,20,30] normalise to the same row") {
    NormDef d = def(NormType::layernorm);
    d.axes = std::vector<long long>{-1};
    d.eps = 0.0;
    NormLayer ln(d, DType::float64);
    auto y = step(ln, batch({{1, 2, 3}, {10, 20, 30}})).fwd.y.to_double();
    for (int j = 0; j < 3; ++j) CHECK(y(0, j) == doctest::Approx(y(1, j)).epsilon(1e-15));
    CHECK(y(0, 0) == doctest::Approx(-std::sqrt(1.5)).epsilon(1e-15));
}

TEST_CASE("a constant row gives zeros, never NaN, even with a large mean in float32") {
    NormDef d = def(NormType::layernorm);
    d.axes = std::vector<long long>{-1};
    NormLayer ln(d, DType::float32);
    xt::xarray<double> row = xt::ones<double>({1, 256}) * 1234.0;  // case B08
    auto r = step(ln, batch(row, DType::float32));
    auto y = r.fwd.y.to_double();
    for (auto v : y) CHECK(v == 0.0);
    CHECK(r.fwd.var(0, 0) == 0.0);
}

TEST_CASE("batchnorm: two training steps, momentum 0.1 and null (cumulative average)") {
    xt::xarray<double> x1 = {{1, 10}, {3, 30}};    // means 2, 20; unbiased vars 2, 200
    xt::xarray<double> x2 = {{0, 0}, {4, -20}};    // means 2, -10; unbiased vars 8, 200
    SUBCASE("momentum 0.1") {
        NormLayer bn(def(NormType::batchnorm), DType::float64);
        auto r1 = step(bn, batch(x1));
        CHECK(r1.fwd.y.to_double()(0, 0) == doctest::Approx(-1 / std::sqrt(1 + 1e-5)).epsilon(1e-14));
        CHECK(r1.res.stats_shape == Shape{1, 2});
        CHECK(bn.running_mean()(0) == doctest::Approx(0.2).epsilon(1e-14));
        CHECK(bn.running_var()(1) == doctest::Approx(20.9).epsilon(1e-14));
        step(bn, batch(x2));
        CHECK(bn.running_mean()(0) == doctest::Approx(0.38).epsilon(1e-14));
        CHECK(bn.running_mean()(1) == doctest::Approx(0.8).epsilon(1e-14));
        CHECK(bn.running_var()(0) == doctest::Approx(1.79).epsilon(1e-14));
        CHECK(bn.running_var()(1) == doctest::Approx(38.81).epsilon(1e-14));
        CHECK(bn.num_batches_tracked() == 2);
    }
    SUBCASE("momentum null") {
        NormDef d = def(NormType::batchnorm);
        d.momentum_null = true;
        NormLayer bn(d, DType::float64);
        step(bn, batch(x1));
        CHECK(bn.running_mean()(1) == doctest::Approx(20).epsilon(1e-14));
        CHECK(bn.running_var()(0) == doctest::Approx(2).epsilon(1e-14));
        step(bn, batch(x2));
        CHECK(bn.running_mean()(0) == doctest::Approx(2).epsilon(1e-14));
        CHECK(bn.running_mean()(1) == doctest::Approx(5).epsilon(1e-14));
        CHECK(bn.running_var()(0) == doctest::Approx(5).epsilon(1e-14));
        CHECK(bn.running_var()(1) == doctest::Approx(200).epsilon(1e-14));
    }
    SUBCASE("keras convention: momentum is the weight of the old value, biased running_var") {
        NormDef d = def(NormType::batchnorm);
        d.convention = Convention::keras;
        NormLayer bn(d, DType::float64);
        auto r = step(bn, batch(x1));
        CHECK(r.res.eps == 1e-3);
        CHECK(bn.running_mean()(0) == doctest::Approx(0.02).epsilon(1e-14));
        CHECK(bn.running_var()(0) == doctest::Approx(0.99 + 0.01 * 1).epsilon(1e-14));
    }
}

TEST_CASE("batchnorm eval uses running statistics; one value per channel only fails in training") {
    xt::xarray<double> x = {{0.5, -1.0, 2.0, 0.0}};  // case B01
    NormDef d = def(NormType::batchnorm);
    d.affine = false;
    NormLayer train(d, DType::float64);
    CHECK_THROWS_WITH_AS(step(train, batch(x)),
                         doctest::Contains("one value per channel (need more than 1), input shape [1, 4]"),
                         InputError);
    CHECK(train.running_mean().size() == 0);
    d.training = false;
    NormLayer eval(d, DType::float64);
    auto y = step(eval, batch(x)).fwd.y.to_double();
    CHECK(y(0, 0) == doctest::Approx(0.5 / std::sqrt(1 + 1e-5)).epsilon(1e-14));
    CHECK(y(0, 2) == doctest::Approx(2 / std::sqrt(1 + 1e-5)).epsilon(1e-14));
}

TEST_CASE("rmsnorm: no centring, eps = machine epsilon of the dtype, weight offset") {
    NormDef d = def(NormType::rmsnorm);
    d.normalized_shape = std::vector<long long>{4};
    NormLayer rms(d, DType::float64);
    auto r = step(rms, batch({{1, 2, 3, 4}}));
    CHECK(r.res.eps == std::numeric_limits<double>::epsilon());
    CHECK(r.fwd.y.to_double()(0, 3) == doctest::Approx(4 / std::sqrt(7.5)).epsilon(1e-14));
    CHECK(r.res.num_params == 4);
    d.weight_offset = 1;
    ParamInit w;
    w.kind = ParamInit::Kind::values;
    w.values = {0.5, -0.5, 0.0, 1.0};
    d.weight = w;
    NormLayer gemma(d, DType::float64);
    auto y = step(gemma, batch({{1, 2, 3, 4}})).fwd.y.to_double();
    CHECK(y(0, 0) == doctest::Approx(1.5 / std::sqrt(7.5)).epsilon(1e-14));
    CHECK(y(0, 3) == doctest::Approx(8 / std::sqrt(7.5)).epsilon(1e-14));
}

TEST_CASE("presets agree where the literature says they must") {
    xt::random::seed(3);
    xt::xarray<double> x = xt::random::randn<double>({3, 6, 5, 7});
    auto run = [&](NormDef d) { return step(NormLayer(d, DType::float64), batch(x)).fwd.y.to_double(); };
    NormDef ln = def(NormType::layernorm);
    ln.normalized_shape = std::vector<long long>{6, 5, 7};
    ln.affine = false;
    NormDef gn1 = def(NormType::groupnorm);
    gn1.num_groups = 1;
    gn1.affine = false;
    CHECK(max_abs_diff(run(ln), run(gn1)) < 1e-13);
    NormDef gn6 = def(NormType::groupnorm);
    gn6.num_groups = 6;
    NormDef in = def(NormType::instancenorm);
    CHECK(max_abs_diff(run(gn6), run(in)) < 1e-13);
    NormDef gn3 = def(NormType::groupnorm);
    gn3.num_groups = 3;
    auto r = step(NormLayer(gn3, DType::float64), batch(x));
    CHECK(r.res.stats_shape == Shape{3, 3, 1, 1, 1});
    CHECK(r.res.elems_per_stat == 70);
    // group 1 of sample 2 = channels 2,3: check against a direct computation
    xt::xarray<double> g = xt::view(x, 2, xt::range(2, 4), xt::all(), xt::all());
    double mu = xt::mean(g)(), var = xt::variance(g)();
    CHECK(r.fwd.mean(2, 1, 0, 0, 0) == doctest::Approx(mu).epsilon(1e-13));
    CHECK(r.fwd.var(2, 1, 0, 0, 0) == doctest::Approx(var).epsilon(1e-13));
}

TEST_CASE("engine: any reduction axes and a mask, against an xtensor float64 reference") {
    xt::random::seed(5);
    xt::xarray<double> x = xt::random::randn<double>({3, 5, 7}) * 3.0 + 2.0;
    NormSpec spec;
    spec.reduction_axes = {0, 2};
    spec.param_axes = {1};
    xt::xarray<double> w = xt::random::randn<double>({5}), b = xt::random::randn<double>({5});
    ForwardInputs in;
    in.weight = &w;
    in.bias = &b;
    auto r = forward(Tensor::from_double(x, DType::float64), spec, in);
    xt::xarray<double> mu = xt::mean(x, {0, 2}, xt::keep_dims);
    xt::xarray<double> var = xt::mean(xt::square(x - mu), {0, 2}, xt::keep_dims);
    xt::xarray<double> ref = (x - mu) / xt::sqrt(var + 1e-5) * xt::view(w, xt::newaxis(), xt::all(), xt::newaxis()) +
                             xt::view(b, xt::newaxis(), xt::all(), xt::newaxis());
    CHECK(max_abs_diff(r.y.to_double(), ref) < 1e-13);
    CHECK(max_abs_diff(r.mean, mu) < 1e-14);

    SUBCASE("masked statistics ignore padded positions") {
        // mask (3,1,7): sample 0 has 4 real steps, the others 7; padded values are huge
        xt::xarray<std::uint8_t> m = xt::ones<std::uint8_t>({3, 1, 7});
        xt::view(m, 0, 0, xt::range(4, 7)) = 0;
        xt::xarray<double> xp = x;
        xt::view(xp, 0, xt::all(), xt::range(4, 7)) = 1e6;
        ForwardInputs mi;
        mi.mask = &m;
        auto rm = forward(Tensor::from_double(xp, DType::float64), spec, mi);
        xt::xarray<double> real = xt::concatenate(xt::xtuple(
            xt::reshape_view(xt::view(x, 0, xt::all(), xt::range(0, 4)), {5, 4}),
            xt::reshape_view(xt::transpose(xt::view(x, xt::range(1, 3), xt::all(), xt::all()), {1, 0, 2}), {5, 14})), 1);
        xt::xarray<double> mu1 = xt::mean(real, {1});
        xt::xarray<double> var1 = xt::variance(real, {1});
        for (std::size_t c = 0; c < 5; ++c) {
            CHECK(rm.mean(0, c, 0) == doctest::Approx(mu1(c)).epsilon(1e-13));
            CHECK(rm.var(0, c, 0) == doctest::Approx(var1(c)).epsilon(1e-13));
            CHECK(rm.batch.count(0, c, 0) == 18);
        }
    }
}

TEST_CASE("shape errors name the norm, the data and the key at fault") {
    // The key is what lets the config module point at file + JSON pointer; the engine itself
    // knows neither (test_cli checks the located messages a user reads).
    auto key_of = [](auto&& f) {
        try {
            f();
        } catch (const NormError& e) {
            return e.key();
        }
        return std::string("(no NormError)");
    };
    xt::xarray<double> x = xt::zeros<double>({2, 30, 8, 8});
    NormDef gn = def(NormType::groupnorm);
    gn.num_groups = 4;
    CHECK_THROWS_WITH_AS(step(NormLayer(gn, DType::float32), batch(x)),
                         "groupnorm \"n\" on data \"x\": expected channels "
                         "(C=30) to be divisible by num_groups (4), but got input of shape [2, 30, 8, 8]",
                         NormError);
    CHECK(key_of([&] { step(NormLayer(gn, DType::float32), batch(x)); }) == "num_groups");
    NormDef ln = def(NormType::layernorm);
    ln.normalized_shape = std::vector<long long>{512};
    CHECK_THROWS_WITH_AS(step(NormLayer(ln, DType::float32), batch(x)),
                         "layernorm \"n\" on data \"x\": given "
                         "normalized_shape=[512], expected input with shape [*, 512], but got "
                         "input of shape [2, 30, 8, 8]",
                         NormError);
    CHECK(key_of([&] { step(NormLayer(ln, DType::float32), batch(x)); }) == "normalized_shape");
    NormDef bn = def(NormType::batchnorm);
    ParamInit w;
    w.kind = ParamInit::Kind::values;
    w.values = {1.0, 2.0};
    bn.weight = w;
    CHECK_THROWS_WITH_AS(step(NormLayer(bn, DType::float32), batch(x)),
                         "batchnorm \"n\" on data \"x\": weight: expected shape [30] (one value per channel: C = 30 at "
                         "channel axis 1 of input shape [2, 30, 8, 8]), but got [2]",
                         NormError);
    CHECK(key_of([&] { step(NormLayer(bn, DType::float32), batch(x)); }) == "weight");
    NormDef ax = def(NormType::layernorm);
    ax.axes = std::vector<long long>{1, -3};
    CHECK(key_of([&] { step(NormLayer(ax, DType::float32), batch(x)); }) == "axes");
    NormDef in = def(NormType::instancenorm);
    CHECK_THROWS_WITH_AS(step(NormLayer(in, DType::float32), batch(xt::zeros<double>({2, 3, 1}))),
                         doctest::Contains("one value per instance and channel"), NormError);
    CHECK(key_of([&] { step(NormLayer(in, DType::float32), batch(xt::zeros<double>({2, 3, 1}))); }) == "");
    NormDef masked = def(NormType::layernorm);
    masked.axes = std::vector<long long>{-1};
    masked.mask = true;
    CHECK(key_of([&] { step(NormLayer(masked, DType::float32), batch(x)); }) == "mask");
}

TEST_CASE("a generated parameter is drawn for the shape the norm meets") {
    NormDef d = def(NormType::layernorm);
    d.normalized_shape = std::vector<long long>{4};
    ParamInit w;
    w.kind = ParamInit::Kind::generated;
    std::vector<std::size_t> asked;
    w.generate = [&asked](const Shape& s) {
        asked.assign(s.begin(), s.end());
        xt::xarray<double> a = xt::xarray<double>::from_shape(s);
        a.fill(2.0);
        return a;
    };
    d.weight = w;
    auto y = step(NormLayer(d, DType::float64), batch({{1, 2, 3, 4}})).fwd.y.to_double();
    REQUIRE(asked.size() == 1);
    CHECK(asked[0] == 4);
    CHECK(y(0, 3) == doctest::Approx(2 * 1.5 / std::sqrt(1.25 + 1e-5)).epsilon(1e-14));
}

TEST_CASE("instancenorm with track_running_stats: PyTorch's update, then eval") {
    // per-instance means: sample 0 ch 0: 1.5 (var_u 0.5), sample 1 ch 0: 3.5 (var_u 0.5)
    xt::xarray<double> x = {{{1, 2}}, {{3, 4}}};
    NormDef d = def(NormType::instancenorm);
    d.track_running_stats = true;
    NormLayer in(d, DType::float64);
    step(in, batch(x));
    CHECK(in.running_mean()(0) == doctest::Approx(0.1 * 2.5).epsilon(1e-14));
    CHECK(in.running_var()(0) == doctest::Approx(0.9 + 0.1 * 0.5).epsilon(1e-14));
}


TEST_CASE("results are bit-identical for every thread count, across chunk boundaries") {
    xt::random::seed(11);
    // Shapes chosen to cut runs into pieces (a 40000-element row), to put many runs in one
    // chunk (rows of 7), BatchNorm with channels last (every chunk touches every stat), and
    // GroupNorm with channels last, (N, H, W, G, C/G) over H, W, C/G (statistics per
    // channel first, merged over C/G).
    struct Case { Shape shape; Axes reduced, params; };
    std::vector<Case> cases = {{{3, 40000}, {1}, {1}}, {{5000, 7}, {1}, {1}}, {{64, 33, 17}, {0, 1}, {2}},
                               // several chunks of 64 Ki values: rows of 7 (the row kernels),
                               // InstanceNorm planes of 1600 (the one-pass walk)
                               {{30000, 7}, {1}, {1}}, {{8, 16, 40, 40}, {2, 3}, {1}},
                               {{4, 6, 50, 50}, {0, 2, 3}, {1}}, {{6, 30, 30, 4, 3}, {1, 2, 4}, {3, 4}},
                               // channels last with 64 channels: BatchNorm over 45 blocks of
                               // rows, InstanceNorm and GroupNorm one sample at a time (3
                               // samples: not a multiple of 2 threads, a multiple of 3)
                               {{8, 30, 48, 64}, {0, 1, 2}, {3}}, {{3, 40, 40, 64}, {1, 2}, {3}},
                               {{6, 40, 40, 32, 2}, {1, 2, 4}, {3, 4}},
                               // one element per statistic (GroupNorm with num_groups = C and
                               // spatial size 1): rows longer than a chunk
                               {{3, 10000, 1}, {2}, {1, 2}}, {{5, 5000, 1}, {2}, {1, 2}}};
    for (const auto& c : cases)
        for (bool mixed : {false, true}) {
            CAPTURE(format_shape(c.shape));
            CAPTURE(mixed);
            xt::xarray<double> x = mixed ? mixed_offsets(c.shape)
                                         : xt::xarray<double>(xt::random::randn<double>(c.shape) * 3.0 + 1e3);
            Tensor t = Tensor::from_double(x, DType::float32);
            NormSpec spec;
            spec.reduction_axes = c.reduced;
            spec.param_axes = c.params;
            xt::xarray<double> w = xt::random::randn<double>(select_dims(c.shape, c.params));
            ForwardInputs in;
            in.weight = &w;
            ForwardResult r1;
            {
                const norm_test::EngineSetting restore;
                for (Compute compute : {Compute::float64, Compute::float32}) {  // the default last: r1 below
                    CAPTURE(compute == Compute::float32);
                    spec.compute = compute;
                    set_engine_threads(1);
                    r1 = forward(t, spec, in);
                    for (unsigned th : {2u, 3u, 8u}) {
                        set_engine_threads(th);
                        ForwardResult rt = forward(t, spec, in);
                        norm_test::check_same_forward(rt, r1);
                    }
                }
            }
            // and the chunked merge agrees with a float64 two-pass reference
            xt::xarray<double> xd = t.to_double();
            xt::xarray<double> mu = xt::mean(xd, c.reduced, xt::keep_dims);
            xt::xarray<double> var = xt::mean(xt::square(xd - mu), c.reduced, xt::keep_dims);
            CHECK(max_abs_diff(r1.mean, mu) < 1e-9);
            CHECK(xt::all(xt::abs(r1.var - var) <= 1e-12 * var + 1e-12));  // var 0 (one value), 9 to 2e5
            Shape ws = c.shape;
            for (std::size_t d = 0; d < ws.size(); ++d)
                if (std::find(c.params.begin(), c.params.end(), d) == c.params.end()) ws[d] = 1;
            xt::xarray<double> ref = (xd - mu) / xt::sqrt(var + spec.eps) * xt::reshape_view(w, ws);
            CHECK(max_abs_diff(r1.y.to_double(), ref) < 1e-4);
        }
}

TEST_CASE("channels last: first rows unlike the rest of a block are summed again about the block's mean") {
    // InstanceNorm over (H, W) in (N, H, W, C): a sample's 1600 rows are one block of the
    // moments. Its first 16 rows (the pilot) alternate -1 and 1, so every channel's shift is
    // 0, and the rest lie at 1e3 + 1e-2 z: the shift sits about 10 standard deviations from
    // the mean, where the sums about it lose bits of the variance (6e-13 of it, against 1e-16
    // about the mean), and is taken again.
    // Against a long double two-pass, at every register width.
    xt::random::seed(41);
    const std::size_t N = 2, H = 40, W = 40, C = 64, R = H * W;
    xt::xarray<double> v = xt::random::randn<double>({N, H, W, C}) * 1e-2 + 1e3;
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t r = 0; r < 16; ++r)
            for (std::size_t c = 0; c < C; ++c) v.data()[(n * R + r) * C + c] = r % 2 ? 1.0 : -1.0;
    const Tensor t = Tensor::from_double(v, DType::float32);
    NormSpec spec;
    spec.reduction_axes = {1, 2};
    spec.param_axes = {3};
    for (int width : {8, 4, 2}) {
        CAPTURE(width);
        set_lane_width(width);
        const ForwardResult r = forward(t, spec, ForwardInputs{});
        set_lane_width(0);
        double worst = 0;
        for (std::size_t n = 0; n < N; ++n)
            for (std::size_t c = 0; c < C; ++c) {
                long double mean = 0, var = 0;
                for (std::size_t i = 0; i < R; ++i) mean += t.f32.data()[(n * R + i) * C + c];
                mean /= R;
                for (std::size_t i = 0; i < R; ++i) {
                    const long double d = t.f32.data()[(n * R + i) * C + c] - mean;
                    var += d * d;
                }
                var /= R;
                const double got = r.var.data()[n * C + c];
                worst = std::max(worst, static_cast<double>(std::fabs(got - var) / var));
            }
        CHECK(worst <= 8 * R * std::numeric_limits<double>::epsilon() / 16);
        MESSAGE("width " << width << ": worst relative error of the variance " << worst);
    }
}

TEST_CASE("every layout gives the same bits with every register width") {
    // The dispatched kernels at AVX-512, AVX2 and SSE2 widths, as far as this CPU has them,
    // in float32 and float64 with both arithmetics: the one-pass rows and their second pass
    // after an outlier first (LayerNorm rows short, long, larger than a chunk, masked, and
    // streamed; RMSNorm), the walk (GroupNorm and BatchNorm channels first, axes that are not
    // trailing), and the channels-last kernels on 64 channels, on 20 and 3 (registers that
    // end mid-row); data far from 0, and mixed_offsets (the moments' shift 0 and their
    // shifted sums side by side).
    xt::random::seed(15);
    struct Case { Shape shape; Axes reduced, params; bool center, masked; };
    const std::vector<Case> cases = {
        {{64, 768}, {1}, {1}, true, false},        {{3, 5001}, {1}, {1}, true, true},
        {{2, 40000}, {1}, {1}, true, false},       {{48, 130}, {1}, {1}, false, true},
        {{4, 8, 2, 30, 30}, {2, 3, 4}, {1, 2}, true, false}, {{8, 3, 40, 40}, {0, 2, 3}, {1}, true, false},
        {{6, 50, 7}, {0, 2}, {1}, true, false},    {{1500, 4096}, {1}, {1}, true, false},  // 23 MiB: streamed
        // channels last
        {{8, 30, 48, 64}, {0, 1, 2}, {3}, true, false}, {{4, 40, 40, 64}, {1, 2}, {3}, true, false},
        {{6, 40, 40, 32, 2}, {1, 2, 4}, {3, 4}, true, false}, {{6, 30, 30, 20}, {0, 1, 2}, {3}, true, false},
        {{5, 30, 30, 3}, {1, 2}, {3}, true, false}};
    for (const auto& c : cases)
        for (DType dtype : {DType::float32, DType::float64})
            for (Compute compute : {Compute::float32, Compute::float64})
                for (bool mixed : {false, true}) {
                    if (dtype == DType::float64 && c.shape[0] == 1500) continue;
                    CAPTURE(format_shape(c.shape));
                    CAPTURE(dtype_name(dtype));
                    CAPTURE(compute == Compute::float32);
                    CAPTURE(mixed);
                    xt::xarray<double> xd = mixed ? mixed_offsets(c.shape)
                                                  : xt::xarray<double>(xt::random::randn<double>(c.shape) * 3.0 + 1e3);
                    xd.data()[0] = 1e3 + 1e4;  // an outlier first: the rows' second pass
                    Tensor t = Tensor::from_double(xd, dtype);
                    xt::xarray<double> w = xt::random::randn<double>(select_dims(c.shape, c.params));
                    xt::xarray<std::uint8_t> m = xt::cast<std::uint8_t>(xt::random::rand<double>(c.shape) < 0.8);
                    ForwardInputs in;
                    in.weight = &w;
                    in.bias = &w;
                    if (c.masked) in.mask = &m;
                    NormSpec spec;
                    spec.reduction_axes.assign(c.reduced.begin(), c.reduced.end());
                    spec.param_axes.assign(c.params.begin(), c.params.end());
                    spec.center = c.center;
                    spec.compute = compute;
                    set_lane_width(0);
                    const ForwardResult ref = forward(t, spec, in);
                    for (int width : {4, 2}) {
                        CAPTURE(width);
                        set_lane_width(width);
                        const ForwardResult r = forward(t, spec, in);
                        norm_test::check_same_forward(r, ref);
                    }
                    set_lane_width(0);
                }
}

namespace {

struct OnePassCase {
    Shape shape;
    Axes reduced, params;
    bool center;
};

// Checks the forward of c's reduction (weight and bias, the unbiased variance) against
// compute_moments and the normalize formula of engine.hpp applied element by element, in
// both arithmetics: the statistics and every output bit equal.
void check_one_pass(const OnePassCase& c) {
    CAPTURE(format_shape(c.shape));
    CAPTURE(c.center);
    Tensor t = Tensor::from_double(xt::random::randn<double>(c.shape) * 2.0 + 50.0, DType::float32);
    xt::xarray<double> w = xt::random::randn<double>(select_dims(c.shape, c.params));
    xt::xarray<double> b = xt::random::randn<double>(select_dims(c.shape, c.params));
    ForwardInputs in;
    in.weight = &w;
    in.bias = &b;
    Moments m = compute_moments(t, c.reduced, c.center);
    xt::xarray<double> mean = xt::broadcast(m.mean, c.shape), lo = xt::broadcast(m.mean_lo, c.shape);
    xt::xarray<double> n = xt::broadcast(m.count, c.shape), var = xt::broadcast(m.var, c.shape);
    Shape ws = c.shape;
    for (std::size_t d = 0; d < ws.size(); ++d)
        if (std::find(c.params.begin(), c.params.end(), d) == c.params.end()) ws[d] = 1;
    xt::xarray<double> wb = xt::broadcast(xt::reshape_view(w, ws), c.shape);
    xt::xarray<double> bb = xt::broadcast(xt::reshape_view(b, ws), c.shape);
    for (Compute compute : {Compute::float64, Compute::float32}) {
        CAPTURE(compute == Compute::float32);
        NormSpec spec;
        spec.reduction_axes = c.reduced;
        spec.param_axes = c.params;
        spec.center = c.center;
        spec.variance = VarianceEstimator::unbiased;
        spec.compute = compute;
        ForwardResult r = forward(t, spec, in);
        CHECK(r.batch.mean == m.mean);
        CHECK(r.batch.mean_lo == m.mean_lo);
        CHECK(r.batch.var == m.var);
        CHECK(r.batch.count == m.count);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < t.size(); ++i) {
            const double rstd = 1.0 / std::sqrt(var.data()[i] * n.data()[i] / (n.data()[i] - 1) + spec.eps);
            const double mu = mean.data()[i], ml = lo.data()[i];
            const float x = t.f32.data()[i];
            float y;
            if (compute == Compute::float64) {
                y = static_cast<float>(((x - mu) - ml) * (rstd * wb.data()[i]) + bb.data()[i]);
            } else {  // hi, lo = fl(mean), fl(rest); a = fl(rstd * w); off = fl(b - lo * a)
                const float hi = static_cast<float>(mu);
                const float low = static_cast<float>((mu - hi) + ml);
                const float a = static_cast<float>(rstd * wb.data()[i]), bf = static_cast<float>(bb.data()[i]);
                const float off = low == 0 ? bf : std::fma(-low, a, bf);
                y = std::fma(x - hi, a, off);
            }
            differ += y != r.y.f32.data()[i];
        }
        CHECK(differ == 0);
    }
}

}  // namespace

TEST_CASE("the one-pass forward gives the bits of compute_moments plus the normalize formula") {
    // Statistics over trailing blocks (LayerNorm rows, RMSNorm, InstanceNorm planes,
    // GroupNorm's (N, G, C/G, H, W) view) are computed and applied chunk by chunk in one
    // pass; a 40000-element row is larger than a chunk and takes the two-phase path. So are
    // channels-last InstanceNorm and GroupNorm, one sample at a time. Both arithmetics of
    // engine.hpp, element by element.
    xt::random::seed(12);
    const std::vector<OnePassCase> cases = {
        {{200, 768}, {1}, {1}, true}, {{200, 768}, {1}, {1}, false}, {{4, 6, 50, 50}, {2, 3}, {1}, true},
        {{4, 3, 2, 30, 30}, {2, 3, 4}, {1, 2}, true}, {{2, 40000}, {1}, {1}, true},
        // channels last: one sample at a time (InstanceNorm, GroupNorm), and BatchNorm's two
        // phases, with 64 channels and with 20 (vectors that start mid-row)
        {{4, 30, 30, 64}, {1, 2}, {3}, true}, {{4, 20, 20, 16, 4}, {1, 2, 4}, {3, 4}, true},
        {{6, 30, 30, 20}, {0, 1, 2}, {3}, true}, {{4, 30, 30, 64}, {1, 2}, {3}, false}};
    for (const auto& c : cases) check_one_pass(c);
}

TEST_CASE("streamed outputs give the bits of compute_moments plus the formula") {
    // Outputs of 8 MiB and more are streamed past the caches. Channels first, the walk's
    // writer cuts runs into blocks that start on the output's cache lines (GroupNorm in one
    // pass; BatchNorm's output pass). Channels last, each thread takes its samples' moments,
    // then their output, on one and two threads (2 samples each). GroupNorm on 64 channels;
    // InstanceNorm on 20 channels (rows that are not whole cache lines), on 4 channels with
    // 136900 rows (3 blocks of rows per sample, merged), on 2400 channels (2 blocks of
    // channels), and without centring (RMSNorm-like sums of squares).
    xt::random::seed(16);
    const std::vector<OnePassCase> cases = {{{4, 32, 2, 96, 96}, {2, 3, 4}, {1, 2}, true},
                                            {{4, 64, 96, 96}, {0, 2, 3}, {1}, true},
                                            {{4, 96, 96, 32, 2}, {1, 2, 4}, {3, 4}, true},
                                            {{4, 200, 140, 20}, {1, 2}, {3}, true},
                                            {{4, 370, 370, 4}, {1, 2}, {3}, true},
                                            {{4, 15, 15, 2400}, {1, 2}, {3}, true},
                                            {{4, 96, 96, 64}, {1, 2}, {3}, false}};
    const norm_test::EngineSetting guard;
    for (unsigned th : {1u, 2u}) {
        CAPTURE(th);
        set_engine_threads(th);
        for (const auto& c : cases) {
            REQUIRE(sizeof(float) * num_elements(c.shape) >= (8u << 20));
            check_one_pass(c);
        }
    }
}

TEST_CASE("the same row gives the same bits wherever it sits, in both arithmetics") {
    // What makes re-padding invariance exact for LayerNorm over D and RMSNorm: a row's output
    // depends on the row alone, not on its batch-mates, its position or the chunking.
    xt::random::seed(13);
    for (std::size_t d : {std::size_t{7}, std::size_t{768}, std::size_t{20000}}) {
        CAPTURE(d);
        xt::xarray<double> small = xt::random::randn<double>(Shape{3, d}) * 0.5 + 1e3;
        xt::xarray<double> big = xt::random::randn<double>(Shape{9, d}) * 30.0 - 300.0;
        xt::view(big, 6, xt::all()) = xt::view(small, 1, xt::all());
        Tensor ts = Tensor::from_double(small, DType::float32), tb = Tensor::from_double(big, DType::float32);
        xt::xarray<double> w = xt::random::randn<double>(Shape{d}), b = xt::random::randn<double>(Shape{d});
        ForwardInputs in;
        in.weight = &w;
        in.bias = &b;
        for (Compute compute : {Compute::float64, Compute::float32})
            for (bool center : {true, false}) {
                CAPTURE(compute == Compute::float32);
                CAPTURE(center);
                NormSpec spec;
                spec.reduction_axes = {1};
                spec.param_axes = {1};
                spec.center = center;
                spec.compute = compute;
                xt::xarray<float> ys = xt::view(forward(ts, spec, in).y.f32, 1, xt::all());
                xt::xarray<float> yb = xt::view(forward(tb, spec, in).y.f32, 6, xt::all());
                CHECK(ys == yb);
            }
    }
}

TEST_CASE("buffers are reused across steps: no fresh output allocation") {
    NormDef d = def(NormType::groupnorm);
    d.num_groups = 2;
    NormLayer gn(d, DType::float32);
    xt::xarray<double> x = xt::random::randn<double>({2, 4, 3, 3});
    Input b = batch(x, DType::float32);
    StepResult s;
    gn.forward(b.x, b.channel_axis, "x", nullptr, s);
    const float* first = s.fwd.y.f32.data();
    gn.forward(b.x, b.channel_axis, "x", nullptr, s);
    CHECK(s.fwd.y.f32.data() == first);
    CHECK(s.fwd.y.shape() == Shape{2, 4, 3, 3});
    CHECK(s.res.stats_shape == Shape{2, 2, 1, 1, 1});
}

TEST_CASE("groupnorm: one value per group is refused only for the whole batch (PyTorch's check)") {
    NormDef d = def(NormType::groupnorm);
    d.num_groups = 6;
    CHECK_THROWS_WITH_AS(step(NormLayer(d, DType::float64), batch(xt::ones<double>({1, 6}))),
                         doctest::Contains("one value per group (need more than 1), input shape [1, 6]"), InputError);
    auto y = step(NormLayer(d, DType::float64), batch(xt::ones<double>({2, 6}) * 3.0)).fwd.y.to_double();
    for (double v : y) CHECK(v == 0.0);
}

TEST_CASE("statistics into the arrays of an earlier call: the bits of fresh ones, no new arrays") {
    // compute_moments into a Moments reused across shapes (rows, planes, channels last, the
    // walk with a mask), each against a fresh call; on a repeated shape the arrays stay the
    // same (no allocation, whose page faults cost more than the moments of small rows). The
    // forward with given statistics keeps its arrays the same way.
    xt::random::seed(21);
    const Tensor rows = Tensor::from_double(xt::random::randn<double>({300, 64}) * 3.0 + 9.0, DType::float32);
    const Tensor planes = Tensor::from_double(xt::random::randn<double>({4, 6, 30, 30}), DType::float32);
    const Tensor last = Tensor::from_double(xt::random::randn<double>({4, 10, 10, 20}), DType::float64);
    xt::xarray<std::uint8_t> mask = xt::ones<std::uint8_t>({300, 64});
    for (std::size_t i = 0; i < 300; ++i) xt::view(mask, i, xt::range(64 - i % 64, 64)) = 0;
    struct Case {
        const Tensor* x;
        Axes reduced;
        const xt::xarray<std::uint8_t>* mask;
    };
    const std::vector<Case> cases = {{&rows, {1}, nullptr},   {&planes, {0, 2, 3}, nullptr}, {&last, {1, 2}, nullptr},
                                     {&rows, {1}, &mask},     {&rows, {1}, nullptr},         {&rows, {0}, nullptr}};
    Moments m;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        CAPTURE(i);
        const Case& c = cases[i];
        const Moments fresh = compute_moments(*c.x, c.x->shape(), c.reduced, true, c.mask);
        compute_moments(*c.x, c.x->shape(), c.reduced, true, m, c.mask);
        CHECK(m.mean == fresh.mean);
        CHECK(m.mean_lo == fresh.mean_lo);
        CHECK(m.var == fresh.var);
        CHECK(m.count == fresh.count);
        const double* before = m.mean.data();
        compute_moments(*c.x, c.x->shape(), c.reduced, true, m, c.mask);
        CHECK(m.mean.data() == before);
        CHECK(m.var == fresh.var);
    }

    NormSpec spec;
    spec.reduction_axes = {0, 2, 3};
    spec.param_axes = {1};
    const xt::xarray<double> mean = xt::random::randn<double>({1, 6, 1, 1});
    const xt::xarray<double> var = xt::random::rand<double>({1, 6, 1, 1}) + 0.5;
    ForwardInputs in;
    in.given_mean = &mean;
    in.given_var = &var;
    ForwardResult out;
    forward(planes, planes.shape(), spec, in, out);
    const xt::xarray<float> first = out.y.f32;
    const double* before = out.mean.data();
    forward(planes, planes.shape(), spec, in, out);
    CHECK(out.mean.data() == before);
    CHECK(out.mean == mean);
    CHECK(out.var == var);
    CHECK(out.y.f32 == first);
    CHECK(xt::all(xt::equal(out.mean_lo, 0.0)));
}
