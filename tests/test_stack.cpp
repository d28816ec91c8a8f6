// Residual stacks: forward (and backward) against PyTorch autograd goldens written by
// scripts/make_stack_golden.py (tests/golden/stack/), and the stack's own checks.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>
#include <xtensor/xoperation.hpp>
#include <xtensor/xview.hpp>

#include "analysis/stack_weights.hpp"
#include "stack/model.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

const std::string kGolden = std::string(NORMLAB_SOURCE_DIR) + "/tests/golden/stack/";

nlohmann::json golden_meta() {
    std::ifstream in(kGolden + "meta.json");
    REQUIRE_MESSAGE(in.good(), "missing " << kGolden << "meta.json");
    return nlohmann::json::parse(in);
}

/// An .npy of float64 or float32 values, widened to double.
xt::xarray<double> load(const std::string& path) {
    std::ifstream probe(path, std::ios::binary);
    std::string head(128, '\0');
    probe.read(&head[0], 128);
    if (head.find("<f4") != std::string::npos) return xt::xarray<double>(xt::load_npy<float>(path));
    return xt::load_npy<double>(path);
}

ParamInit values_init(const xt::xarray<double>& v) {
    ParamInit p;
    p.kind = ParamInit::Kind::values;
    p.values = v;
    return p;
}

NormDef golden_norm(const nlohmann::json& n, std::size_t features) {
    NormDef d;
    d.name = "n";
    const std::string t = n.at("type");
    for (std::size_t i = 0; i < norm_type_names().size(); ++i)
        if (norm_type_names()[i] == t) d.type = static_cast<NormType>(i);
    d.eps = n.at("eps").get<double>();
    if (d.type == NormType::layernorm || d.type == NormType::rmsnorm)
        d.normalized_shape = std::vector<long long>{static_cast<long long>(features)};
    if (n.contains("num_groups")) d.num_groups = n.at("num_groups");
    if (n.contains("weight")) d.weight = values_init(xt::adapt(n.at("weight").get<std::vector<double>>()));
    if (n.contains("bias")) d.bias = values_init(xt::adapt(n.at("bias").get<std::vector<double>>()));
    return d;
}

struct GoldenCase {
    std::string name, dir;
    StackDef def;
    xt::xarray<double> x, r;
    std::vector<std::pair<std::string, xt::xarray<double>>> weights;
};

GoldenCase golden_case(const nlohmann::json& c) {
    GoldenCase g;
    g.name = c.at("name");
    g.dir = kGolden + g.name + "/";
    StackDef& d = g.def;
    d.name = g.name;
    d.layers = c.at("layers");
    d.hidden = c.at("hidden");
    for (std::size_t i = 0; i < placement_names().size(); ++i)
        if (placement_names()[i] == c.at("placement")) d.placement = static_cast<Placement>(i);
    for (std::size_t i = 0; i < block_names().size(); ++i)
        if (block_names()[i] == c.at("block")) d.block = static_cast<BlockKind>(i);
    for (std::size_t i = 0; i < activation_names().size(); ++i)
        if (activation_names()[i] == c.at("activation")) d.activation = static_cast<Activation>(i);
    d.norm = golden_norm(c.at("norm"), c.at("features"));
    g.x = load(g.dir + "x.npy");
    g.r = load(g.dir + "r.npy");
    for (const auto& n : weight_names(d.block, d.placement)) g.weights.push_back({n, load(g.dir + n + ".npy")});
    return g;
}

StackWeights to_weights(const GoldenCase& g, DType dt) {
    StackWeights w;
    for (const auto& [n, v] : g.weights) (n == "w" ? w.w : n == "w1" ? w.w1 : w.w2) = Tensor::from_double(v, dt);
    return w;
}

/// max |a - b| / max |b|: the error relative to the tensor's scale (elementwise relative
/// errors blow up where a value crosses zero).
double rel_err(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    REQUIRE(a.shape() == b.shape());
    double m = 0, s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        m = std::max(m, std::fabs(a.data()[i] - b.data()[i]));
        s = std::max(s, std::fabs(b.data()[i]));
    }
    return s > 0 ? m / s : m;
}

double tolerance(DType dt) { return dt == DType::float64 ? 1e-10 : 2e-5; }

}  // namespace

// d loss / d y for loss = sum(y * r) / rows, rounded as PyTorch's autograd forms it in the
// dtype: (1 / rows) first, then times r.
Tensor projection_grad(const xt::xarray<double>& r, std::size_t rows, DType dt) {
    const double inv = round_to(dt, 1.0 / static_cast<double>(rows));
    xt::xarray<double> g = r;
    for (auto& v : g) v = round_to(dt, inv * round_to(dt, v));
    return Tensor::from_double(g, dt);
}

TEST_CASE("stack forward and backward match the PyTorch golden for every placement, block and norm type") {
    const auto meta = golden_meta();
    REQUIRE(meta.at("cases").size() >= 17);
    for (DType dt : {DType::float64, DType::float32}) {
        const std::string dn = dtype_name(dt);
        double worst_fwd = 0, worst_bwd = 0;
        std::size_t compared = 0;
        for (const auto& c : meta.at("cases")) {
            GoldenCase g = golden_case(c);
            INFO("case " << g.name << " " << dn);
            const std::string ex = g.dir + "expected/" + dn + "/";
            Stack s(g.def, to_weights(g, dt), Shape(g.x.shape().begin(), g.x.shape().end()), dt, "x");
            StackTrace tr;
            s.forward(Tensor::from_double(g.x, dt), xt::xarray<std::uint8_t>::from_shape({0}), tr);
            StackGrads gr;
            s.backward(tr, projection_grad(g.r, s.rows(), dt), gr, {true, true});
            auto check = [&](const xt::xarray<double>& got, const xt::xarray<double>& want, const std::string& what,
                             double& worst) {
                INFO(what);
                const double e = rel_err(got, want);
                worst = std::max(worst, e);
                ++compared;
                CHECK(e <= tolerance(dt));
            };
            const xt::xarray<double> xs = load(ex + "xs.npy"), dxs = load(ex + "dxs.npy");
            REQUIRE(tr.x.size() == g.def.layers + 1);
            REQUIRE(gr.dx.size() == g.def.layers + 1);
            for (std::size_t l = 0; l <= g.def.layers; ++l) {
                check(tr.x[l].to_double(), xt::view(xs, l), "x_" + std::to_string(l), worst_fwd);
                check(gr.dx[l].to_double(), xt::view(dxs, l), "dx_" + std::to_string(l), worst_bwd);
            }
            check(tr.y().to_double(), load(ex + "y.npy"), "y", worst_fwd);
            for (const auto& [n, w] : g.weights) {
                const Tensor& d = n == "w" ? gr.dw : n == "w1" ? gr.dw1 : gr.dw2;
                check(d.to_double(), load(ex + "d" + n + ".npy"), "d" + n, worst_bwd);
            }
            const std::vector<std::pair<std::string, const xt::xarray<double>*>> params = {
                {"dgamma", &gr.dgamma}, {"dbeta", &gr.dbeta}, {"dgamma2", &gr.dgamma2},
                {"dbeta2", &gr.dbeta2}, {"dgamma_final", &gr.dgamma_final}, {"dbeta_final", &gr.dbeta_final}};
            for (const auto& [n, got] : params) {
                const bool expected = std::ifstream(ex + n + ".npy").good();
                INFO(n);
                REQUIRE(expected == (got->size() > 0));
                if (expected) check(*got, load(ex + n + ".npy"), n, worst_bwd);
            }
            for (std::size_t l = 0; l < g.def.layers; ++l) {
                CHECK(gr.grad_x_rms[l] > 0);
                if (gr.dgamma.size()) {
                    xt::xarray<double> row = xt::view(gr.dgamma, l);
                    double ss = 0;
                    for (double v : row) ss += v * v;
                    CHECK(gr.grad_gamma_norm[l] == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
                }
                // Sandwich's N2: its weight gradient's norm, NaN where there is no N2.
                if (gr.dgamma2.size()) {
                    xt::xarray<double> row = xt::view(gr.dgamma2, l);
                    double ss = 0;
                    for (double v : row) ss += v * v;
                    CHECK(gr.grad_gamma2_norm[l] == doctest::Approx(std::sqrt(ss)).epsilon(1e-12));
                } else {
                    CHECK(std::isnan(gr.grad_gamma2_norm[l]));
                }
            }
        }
        MESSAGE("stack golden " << dn << ": " << compared << " tensors, worst relative error forward "
                                << worst_fwd << ", backward " << worst_bwd);
    }
}

TEST_CASE("stack refuses data without a feature axis, wrong weight shapes and half precision") {
    StackDef d;
    d.name = "s";
    d.layers = 2;
    d.norm.name = "n";
    d.norm.type = NormType::layernorm;
    d.norm.axes = std::vector<long long>{-1};  // fits any feature size
    StackWeights w;
    w.w = Tensor::from_double(xt::zeros<double>({2, 4, 4}), DType::float64);
    auto key_of = [&](const Shape& shape, std::size_t channel_axis, DType dt) {
        try {
            Stack::check(d, shape, channel_axis, dt, "x");
        } catch (const StackError& e) {
            CHECK(e.stack() == "s");
            return e.key() + ": " + e.what();
        }
        return std::string("no error");
    };
    CHECK_THROWS_WITH_AS(Stack(d, w, {4}, DType::float64, "x"),
                         doctest::Contains("stack \"s\" on data \"x\": expected data of shape (N, D) or (B, T, D)"),
                         StackError);
    CHECK_THROWS_WITH_AS(Stack(d, w, {2, 3, 4, 4}, DType::float64, "x"),
                         doctest::Contains("features on the last axis, but got shape [2, 3, 4, 4]"), StackError);
    CHECK(key_of({3, 5, 4}, 1, DType::float64) ==
          ": stack \"s\" on data \"x\": the features must be the data's last axis, but the data's channel axis is 1 "
          "of shape [3, 5, 4] (give the data \"channel_axis\": -1)");
    CHECK_THROWS_WITH_AS(Stack(d, w, {3, 5}, DType::float64, "x"),
                         doctest::Contains("weight \"w\" must have shape [2, 5, 5]"), StackError);
    CHECK_THROWS_WITH_AS(Stack(d, w, {3, 4}, DType::float16, "x"), doctest::Contains("float32 or float64"), StackError);
    CHECK(key_of({3, 4}, 1, DType::bfloat16).rfind(": stack", 0) == 0);
    d.given.push_back({"w", xt::zeros<double>({2, 4, 5})});
    CHECK(key_of({3, 4}, 1, DType::float64) ==
          "weights/w: stack \"s\" on data \"x\": weight \"w\" must have shape [2, 4, 4] (layers, fan_in, fan_out) for "
          "data of shape [3, 4], but the given array has [2, 4, 5]");
    d.given.clear();
    d.block = BlockKind::ffn;
    CHECK(key_of({3, 4}, 1, DType::float64).rfind("hidden: ", 0) == 0);
    d.block = BlockKind::linear;
    d.norm.axes.reset();
    d.norm.normalized_shape = std::vector<long long>{5};
    CHECK_THROWS_WITH_AS(Stack(d, w, {3, 4}, DType::float64, "x"), doctest::Contains("normalized_shape=[5]"), NormError);
    d.norm.normalized_shape = std::vector<long long>{4};
    CHECK(key_of({3, 5, 4}, 2, DType::float64) == "no error");
    CHECK_NOTHROW(Stack(d, w, {3, 5, 4}, DType::float64, "x"));
}

TEST_CASE("a chain of 20 BatchNorms trained 2048 steps drifts like PyTorch's (eval/train rms and running statistics)") {
    const auto meta = golden_meta().at("bn_chain");
    const std::size_t layers = meta.at("layers"), steps = meta.at("steps");
    const xt::xarray<double> x = load(kGolden + "bn_chain/x.npy");
    StackDef d;
    d.name = "bn_chain";
    d.layers = layers;
    d.placement = Placement::norm_only;
    d.block = BlockKind::identity;
    d.norm.name = "bn";
    d.norm.type = NormType::batchnorm;
    d.norm.eps = meta.at("eps").get<double>();
    d.norm.momentum = meta.at("momentum").get<double>();
    d.norm.affine = false;
    for (DType dt : {DType::float64, DType::float32}) {
        const std::string dn = dtype_name(dt);
        INFO(dn);
        Stack s(d, {}, {64, 2}, dt, "x");
        const Tensor xt0 = Tensor::from_double(x, dt);
        const auto no_mask = xt::xarray<std::uint8_t>::from_shape({0});
        StackTrace train, eval;
        for (std::size_t k = 0; k < steps; ++k) s.forward(xt0, no_mask, train);
        Stack frozen = s.eval_copy();
        frozen.forward(xt0, no_mask, eval);
        const auto want_ratio = load(kGolden + "bn_chain/expected/" + dn + "/eval_train_ratio.npy");
        const auto want_mean = load(kGolden + "bn_chain/expected/" + dn + "/running_mean.npy");
        const auto want_var = load(kGolden + "bn_chain/expected/" + dn + "/running_var.npy");
        // float32: PyTorch keeps its running statistics in float32, normlab in double.
        const double tol = dt == DType::float64 ? 1e-10 : 1e-5;
        double worst = 0;
        for (std::size_t l = 0; l <= layers; ++l) {
            auto rms = [](const Tensor& t) {
                xt::xarray<double> v = t.to_double();
                double ss = 0;
                for (double e : v) ss += e * e;
                return std::sqrt(ss / static_cast<double>(v.size()));
            };
            const double ratio = rms(eval.x[l]) / rms(train.x[l]);
            worst = std::max(worst, std::fabs(ratio - want_ratio(l)) / want_ratio(l));
            CHECK(std::fabs(ratio - want_ratio(l)) <= tol * want_ratio(l));
            if (l == 0) continue;
            const NormLayer& n = s.norms()[l - 1];
            CHECK(n.num_batches_tracked() == static_cast<long long>(steps));
            for (std::size_t c = 0; c < 2; ++c) {
                // running means of the normalised layers are ~1e-17: compare on the scale of 1
                CHECK(std::fabs(n.running_mean()(c) - want_mean(l - 1, c)) <= tol * std::max(1.0, std::fabs(want_mean(l - 1, c))));
                CHECK(std::fabs(n.running_var()(c) - want_var(l - 1, c)) <= tol * want_var(l - 1, c));
            }
        }
        // The drift of the estimators: eval mode divides by the unbiased running variance
        // 64/63 where training divided by the biased batch variance, once per layer.
        CHECK(want_ratio(layers) == doctest::Approx(std::pow(63.0 / 64.0, layers / 2.0)).epsilon(1e-6));
        MESSAGE("BatchNorm chain " << dn << ": eval/train rms ratio after 20 layers "
                                   << want_ratio(layers) << ", worst relative error " << worst);
    }
}

TEST_CASE("stack weights: each init's distribution, DeepNorm's beta on drawn weights only, one stream per stack and weight") {
    StackDef d;
    d.name = "s";
    d.layers = 4;
    d.block = BlockKind::ffn;
    d.hidden = 96;
    d.placement = Placement::post;
    const std::size_t D = 64;
    auto stats = [](const Tensor& t) {
        const xt::xarray<double> v = t.to_double();
        double s = 0, ss = 0, mx = 0;
        for (double e : v) s += e, ss += e * e, mx = std::max(mx, std::fabs(e));
        const double n = static_cast<double>(v.size());
        return std::array<double, 3>{s / n, std::sqrt(ss / n), mx};
    };
    struct Want {
        InitKind kind;
        double std_w1, std_w2;  // fan_in, fan_out: w1 (64, 96), w2 (96, 64)
    };
    const double xavier = std::sqrt(2.0 / (64 + 96));
    for (const Want& w : {Want{InitKind::xavier_normal, xavier, xavier},
                          Want{InitKind::xavier_uniform, xavier, xavier},  // U(-a, a) has std a / sqrt(3)
                          Want{InitKind::kaiming_normal, std::sqrt(2.0 / 64), std::sqrt(2.0 / 96)},
                          Want{InitKind::normal, 0.3, 0.3}}) {
        INFO(init_name(w.kind));
        d.init.kind = w.kind;
        d.init.std = 0.3;
        const StackWeights sw = make_stack_weights(d, D, DType::float64, 11);
        REQUIRE(sw.w1.shape() == Shape{4, 64, 96});
        REQUIRE(sw.w2.shape() == Shape{4, 96, 64});
        const auto s1 = stats(sw.w1), s2 = stats(sw.w2);
        CHECK(std::fabs(s1[0]) < 0.02 * w.std_w1);
        CHECK(s1[1] == doctest::Approx(w.std_w1).epsilon(0.02));
        CHECK(s2[1] == doctest::Approx(w.std_w2).epsilon(0.02));
        if (w.kind == InitKind::xavier_uniform) {
            CHECK(s1[2] <= std::sqrt(6.0 / (64 + 96)));
            CHECK(s1[2] > 0.99 * std::sqrt(6.0 / (64 + 96)));
        }
        // the same seed gives the same weights; another stack name another stream
        CHECK(make_stack_weights(d, D, DType::float64, 11).w1.f64 == sw.w1.f64);
        StackDef other = d;
        other.name = "t";
        CHECK(make_stack_weights(other, D, DType::float64, 11).w1.f64 != sw.w1.f64);
        // float32 draws are the float64 draws rounded once
        const StackWeights f = make_stack_weights(d, D, DType::float32, 11);
        CHECK(f.w2.f32(3, 95, 63) == static_cast<float>(sw.w2.f64(3, 95, 63)));
    }
    d.init.kind = InitKind::xavier_normal;
    StackDef deep = d;
    deep.placement = Placement::deepnorm;
    const StackWeights plain = make_stack_weights(d, D, DType::float64, 5), scaled = make_stack_weights(deep, D, DType::float64, 5);
    CHECK(deepnorm_beta(4) == doctest::Approx(std::pow(32.0, -0.25)).epsilon(1e-15));
    CHECK(deepnorm_alpha(4) == doctest::Approx(std::pow(8.0, 0.25)).epsilon(1e-15));
    CHECK(xt::allclose(scaled.w1.f64, plain.w1.f64 * deepnorm_beta(4), 0, 1e-15));
    CHECK(xt::allclose(scaled.w2.f64, plain.w2.f64 * deepnorm_beta(4), 0, 1e-15));
    deep.beta = 0.5;
    CHECK(xt::allclose(make_stack_weights(deep, D, DType::float64, 5).w1.f64, plain.w1.f64 * 0.5, 0, 1e-15));
    // given weights are used as given, beta or not
    deep.given.push_back({"w1", plain.w1.f64});
    const StackWeights given = make_stack_weights(deep, D, DType::float64, 5);
    CHECK(given.w1.f64 == plain.w1.f64);
    CHECK(xt::allclose(given.w2.f64, plain.w2.f64 * 0.5, 0, 1e-15));
    deep.given.back().second = xt::zeros<double>({4, 64, 95});
    CHECK_THROWS_AS(make_stack_weights(deep, D, DType::float64, 5), StackError);
}

TEST_CASE("stack with a padding mask: real rows get what the stack gives the real rows alone") {
    // BatchNorm with mask: true takes its statistics from real rows only; the products act
    // row by row, so every real row's activations and gradients equal those of the stack on
    // the (real rows, D) batch, and padded rows do not reach the gradients. LayerNorm and
    // RMSNorm over the features have no statistics on a padded row if its padding is
    // skipped: the stack normalises it over its own values, so no NaN reaches the weight
    // gradients, which must still count real rows only.
    for (const NormType type : {NormType::batchnorm, NormType::layernorm, NormType::rmsnorm})
    for (Placement p : {Placement::pre, Placement::post, Placement::sandwich}) {
        INFO(placement_name(p) << " " << norm_type_name(type));
        StackDef d;
        d.name = "m";
        d.layers = 3;
        d.placement = p;
        d.block = BlockKind::ffn;
        d.hidden = 6;
        d.activation = Activation::gelu;
        d.norm.name = "n";
        d.norm.type = type;
        if (type != NormType::batchnorm) d.norm.normalized_shape = std::vector<long long>{5};
        d.norm.mask = true;
        const std::size_t B = 3, T = 4, D = 5;
        const std::vector<std::size_t> lengths = {4, 2, 3};
        xt::xarray<double> x = xt::xarray<double>::from_shape({B, T, D}), r = x;
        xt::xarray<std::uint8_t> mask = xt::zeros<std::uint8_t>({B, T, std::size_t(1)});
        std::size_t n_real = 0;
        for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(1.7 * static_cast<double>(i)) * 2 + 0.3;
        for (std::size_t i = 0; i < r.size(); ++i) r.data()[i] = std::cos(0.9 * static_cast<double>(i));
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t t = 0; t < lengths[b]; ++t) mask(b, t, 0) = 1, ++n_real;
        xt::xarray<double> xr = xt::xarray<double>::from_shape({n_real, D}), rr = xr;
        std::vector<std::size_t> real_rows;
        for (std::size_t b = 0, k = 0; b < B; ++b)
            for (std::size_t t = 0; t < lengths[b]; ++t, ++k) {
                real_rows.push_back(b * T + t);
                for (std::size_t j = 0; j < D; ++j) xr(k, j) = x(b, t, j), rr(k, j) = r(b, t, j);
            }
        StackDef dr = d;
        dr.norm.mask = false;
        const StackWeights w = make_stack_weights(d, D, DType::float64, 3);
        Stack padded(d, w, {B, T, D}, DType::float64, "x"), alone(dr, w, {n_real, D}, DType::float64, "xr");
        StackTrace tp, ta;
        padded.forward(Tensor::from_double(x, DType::float64), mask, tp);
        alone.forward(Tensor::from_double(xr, DType::float64), xt::xarray<std::uint8_t>::from_shape({0}), ta);
        xt::xarray<double> gp = r / static_cast<double>(n_real), ga = rr / static_cast<double>(n_real);
        for (std::size_t i = 0; i < gp.size(); ++i)
            if (!mask.data()[i / D]) gp.data()[i] = 0;
        StackGrads sp, sa;
        padded.backward(tp, Tensor::from_double(gp, DType::float64), sp, {true, true});
        alone.backward(ta, Tensor::from_double(ga, DType::float64), sa, {true, true});
        double worst = 0;
        for (std::size_t l = 0; l <= d.layers; ++l) {
            const xt::xarray<double> xp = tp.x[l].to_double(), xa = ta.x[l].to_double();
            const xt::xarray<double> dp = sp.dx[l].to_double(), da = sa.dx[l].to_double();
            for (std::size_t k = 0; k < n_real; ++k)
                for (std::size_t j = 0; j < D; ++j) {
                    worst = std::max(worst, std::fabs(xp.data()[real_rows[k] * D + j] - xa(k, j)));
                    worst = std::max(worst, std::fabs(dp.data()[real_rows[k] * D + j] - da(k, j)));
                }
        }
        CHECK(worst < 1e-12);
        CHECK(xt::allclose(sp.dw1.f64, sa.dw1.f64, 1e-12, 1e-14));
        CHECK(xt::allclose(sp.dw2.f64, sa.dw2.f64, 1e-12, 1e-14));
        CHECK(xt::allclose(sp.dgamma, sa.dgamma, 1e-12, 1e-14));
        for (std::size_t l = 0; l < d.layers; ++l) {
            CHECK(std::isfinite(sp.grad_w_norm[l]));
            CHECK(sp.grad_w_norm[l] == doctest::Approx(sa.grad_w_norm[l]).epsilon(1e-12));
            CHECK(sp.grad_gamma_norm[l] == doctest::Approx(sa.grad_gamma_norm[l]).epsilon(1e-12));
        }
        CHECK(padded.row_mask() == std::vector<unsigned char>{1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0});
    }
}

TEST_CASE("stack: a mask along the features of a real row still holds under a LayerNorm over the features") {
    // Only rows without any real position are normalised over all their values; a real row
    // keeps its mask: its LayerNorm statistics skip its masked features.
    StackDef d;
    d.name = "m";
    d.layers = 1;
    d.placement = Placement::norm_only;
    d.block = BlockKind::identity;
    d.norm.name = "ln";
    d.norm.type = NormType::layernorm;
    d.norm.normalized_shape = std::vector<long long>{4};
    d.norm.affine = false;
    d.norm.mask = true;
    xt::xarray<double> x = {{1.0, 2.0, 3.0, 100.0}, {5.0, 7.0, 9.0, 11.0}};
    xt::xarray<std::uint8_t> mask = {{1, 1, 1, 0}, {0, 0, 0, 0}};
    Stack s(d, make_stack_weights(d, 4, DType::float64, 1), {2, 4}, DType::float64, "x");
    StackTrace tr;
    s.forward(Tensor::from_double(x, DType::float64), mask, tr);
    const xt::xarray<double> y = tr.x[1].to_double();
    // Row 0: mean 2 and variance 2/3 of its three real values; row 1: its own four values.
    const double r0 = 1 / std::sqrt(2.0 / 3 + 1e-5), r1 = 1 / std::sqrt(5.0 + 1e-5);
    CHECK(y(0, 0) == doctest::Approx(-r0).epsilon(1e-12));
    CHECK(y(0, 3) == doctest::Approx(98 * r0).epsilon(1e-12));
    CHECK(y(1, 0) == doctest::Approx(-3 * r1).epsilon(1e-12));
    CHECK(y(1, 3) == doctest::Approx(3 * r1).epsilon(1e-12));
}

TEST_CASE("stack: a LayerNorm with param_axes is the stack with its weight and bias tiled") {
    // LayerNorm over (T, D) of (B, T, D) with weight and bias on D (ONNX LayerNormalization
    // axis=1 with a (D) Scale): each block's norm is the one with the (T, D) parameters that
    // repeat them along T, so the activations agree, and the (D) gradients are the (T, D)
    // ones summed over T.
    const std::size_t B = 2, T = 3, D = 4;
    xt::xarray<double> x = xt::xarray<double>::from_shape({B, T, D}), r = x;
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(1.3 * static_cast<double>(i)) * 2 + 0.5;
    for (std::size_t i = 0; i < r.size(); ++i) r.data()[i] = std::cos(0.7 * static_cast<double>(i));
    const xt::xarray<double> w = {1.5, 0.5, -1.0, 2.0}, b = {0.1, -0.2, 0.3, 0.0};
    xt::xarray<double> wt = xt::xarray<double>::from_shape({T, D}), bt = wt;
    for (std::size_t t = 0; t < T; ++t)
        for (std::size_t j = 0; j < D; ++j) wt(t, j) = w(j), bt(t, j) = b(j);
    for (Placement p : {Placement::pre, Placement::post, Placement::sandwich}) {
        INFO(placement_name(p));
        StackDef d;
        d.name = "s";
        d.layers = 2;
        d.placement = p;
        d.norm.name = "n";
        d.norm.type = NormType::layernorm;
        d.norm.axes = std::vector<long long>{1, 2};
        StackDef full = d;
        d.norm.param_axes = std::vector<long long>{-1};
        d.norm.weight = values_init(w);
        d.norm.bias = values_init(b);
        full.norm.weight = values_init(wt);
        full.norm.bias = values_init(bt);
        const StackWeights sw = make_stack_weights(d, D, DType::float64, 5);
        Stack sub(d, sw, {B, T, D}, DType::float64, "x"), tiled(full, sw, {B, T, D}, DType::float64, "x");
        StackTrace ts, tt;
        const xt::xarray<std::uint8_t> none = xt::xarray<std::uint8_t>::from_shape({0});
        sub.forward(Tensor::from_double(x, DType::float64), none, ts);
        tiled.forward(Tensor::from_double(x, DType::float64), none, tt);
        StackGrads gs, gt;
        sub.backward(ts, Tensor::from_double(r, DType::float64), gs, {true, true});
        tiled.backward(tt, Tensor::from_double(r, DType::float64), gt, {true, true});
        for (std::size_t l = 0; l <= d.layers; ++l) {
            CHECK(xt::allclose(ts.x[l].to_double(), tt.x[l].to_double(), 1e-13, 1e-13));
            CHECK(xt::allclose(gs.dx[l].to_double(), gt.dx[l].to_double(), 1e-12, 1e-13));
        }
        REQUIRE(gs.dgamma.shape() == std::vector<std::size_t>{d.layers, D});
        REQUIRE(gt.dgamma.shape() == std::vector<std::size_t>{d.layers, T, D});
        for (std::size_t l = 0; l < d.layers; ++l)
            for (std::size_t j = 0; j < D; ++j) {
                double sg = 0, sb = 0;
                for (std::size_t t = 0; t < T; ++t) sg += gt.dgamma(l, t, j), sb += gt.dbeta(l, t, j);
                CHECK(gs.dgamma(l, j) == doctest::Approx(sg).epsilon(1e-12));
                CHECK(gs.dbeta(l, j) == doctest::Approx(sb).epsilon(1e-12));
            }
    }
}
