// The engine's backward pass (norm/backward.hpp) against references normlab did not write:
// PyTorch 1.13 autograd goldens (tests/golden/grad_*, scripts/make_grad_golden.py) read at
// the engine level through each case's engine.json; central finite differences of the
// forward for every preset and option; the closed-form singular values of the Jacobian
// (LayerNorm, RMSNorm) through xt::linalg::svd. Also: bit-identical results for every thread
// count, and dx rounded once to float32/float16/bfloat16.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>
#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xview.hpp>

#include "data/npy.hpp"
#include "json/text.hpp"
#include "norm/backward.hpp"
#include "norm/presets.hpp"
#include "tensor/errors.hpp"

#include "norm_util.hpp"

using namespace normlab;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = NORMLAB_GOLDEN_DIR;

Shape shape_of(const xt::xarray<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

/// Everything the engine needs for one forward/backward pair, in the view's layout: the
/// input, the spec, and the optional inputs as a step keeps them (StepInputs).
struct Setup : StepInputs {
    Tensor x;   ///< view shape
    NormSpec spec;
    Shape param_shape() const { return select_dims(x.shape(), spec.param_axes); }
};

/// Forward then backward of `s` with upstream gradient dy (view shape).
BackwardResult grads(const Setup& s, const xt::xarray<double>& dy) {
    ForwardResult f = forward(s.x, s.spec, s.pointers());
    return backward(s.x, s.spec, s.pointers(), f, dy);
}

/// sum(dy * y) for the forward of `s`: the loss whose gradient backward() returns.
double loss(const Setup& s, const xt::xarray<double>& dy) {
    auto y = forward(s.x, s.spec, s.pointers()).y.to_double();
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += dy.data()[i] * y.data()[i];
    return l;
}

/// Seeded standard normal draws of `shape`, scaled and shifted.
xt::xarray<double> normal(const Shape& shape, std::uint64_t seed, double mean = 0, double std = 1) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(mean, std);
    xt::xarray<double> a = xt::xarray<double>::from_shape(shape);
    for (auto& v : a) v = nd(rng);
    return a;
}

/// Worst error of `a` against the reference `e`, relative to the larger of |e_i| and a
/// floor of 1e-3 max|e| (gradients cancel: an element near 0 is only known to the
/// precision of the array's scale). Reports the element.
struct Err {
    double rel = 0;
    std::size_t at = 0;
};
Err rel_err(const xt::xarray<double>& a, const xt::xarray<double>& e) {
    REQUIRE(a.size() == e.size());
    double scale = 0;
    for (double v : e) scale = std::max(scale, std::abs(v));
    Err out;
    for (std::size_t i = 0; i < e.size(); ++i) {
        double d = std::abs(a.data()[i] - e.data()[i]) / std::max(std::abs(e.data()[i]), 1e-3 * scale);
        if (std::isnan(d)) return {d, i};  // NaN on either side is the worst
        if (d > out.rel) out.rel = d, out.at = i;
    }
    return out;
}

xt::xarray<double> load(const fs::path& p) { return read_npy(p).values; }

// ------------------------------------------------------------------ goldens

/// The Setup an engine.json entry describes, with the case's files and dtype.
Setup golden_setup(const fs::path& dir, const nlohmann::json& e, DType dtype, xt::xarray<double>& dy) {
    Setup s;
    Shape view = e.at("view_shape").get<Shape>();
    xt::xarray<double> x = load(dir / (e.at("data").get<std::string>() + ".npy"));
    x.reshape(view);
    s.x = Tensor::from_double(x, dtype);
    dy = load(dir / (e.at("data").get<std::string>() + ".dy.npy"));
    dy.reshape(view);
    s.spec.reduction_axes = e.at("reduction_axes").get<Axes>();
    s.spec.param_axes = e.at("param_axes").get<Axes>();
    s.spec.center = e.at("center").get<bool>();
    s.spec.eps = e.at("eps").get<double>();
    s.spec.eps_placement = e.at("eps_placement") == "add_to_std" ? EpsPlacement::add_to_std : EpsPlacement::inside_sqrt;
    s.spec.variance = e.at("variance") == "unbiased" ? VarianceEstimator::unbiased : VarianceEstimator::biased;
    s.spec.weight_offset = e.at("weight_offset").get<double>();
    s.spec.zero_rstd_at_zero_var = e.at("zero_rstd_at_zero_var").get<bool>();
    const Shape ps = s.param_shape();
    if (!e.at("weight").is_null()) {
        s.has_weight = true;
        s.weight = load(dir / e.at("weight").get<std::string>());
        s.weight.reshape(ps);
    }
    if (!e.at("bias").is_null()) {
        s.has_bias = true;
        s.bias = load(dir / e.at("bias").get<std::string>());
        s.bias.reshape(ps);
    }
    if (!e.at("mask").is_null()) {
        s.has_mask = true;
        xt::xarray<double> m = load(dir / e.at("mask").get<std::string>());
        m.reshape(e.at("mask_view_shape").get<Shape>());
        s.mask = xt::cast<std::uint8_t>(m);
    }
    if (!e.at("given_mean").is_null()) {
        s.given = true;
        const Shape ss = keepdims_shape(view, s.spec.reduction_axes);
        s.given_mean = xt::xarray<double>::from_shape(ss);
        s.given_var = xt::xarray<double>::from_shape(ss);
        const auto gm = e.at("given_mean").get<std::vector<double>>(), gv = e.at("given_var").get<std::vector<double>>();
        REQUIRE(gm.size() == s.given_mean.size());
        REQUIRE(gv.size() == s.given_var.size());
        std::copy(gm.begin(), gm.end(), s.given_mean.begin());
        std::copy(gv.begin(), gv.end(), s.given_var.begin());
    }
    return s;
}

/// Every grad_* case folder, sorted.
std::vector<fs::path> grad_cases() {
    std::vector<fs::path> out;
    for (const auto& d : fs::directory_iterator(kGolden))
        if (d.path().filename().string().rfind("grad_", 0) == 0) out.push_back(d.path());
    std::sort(out.begin(), out.end());
    return out;
}

std::string read_text(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// ------------------------------------------------------------------ finite differences

/// A small engine-level configuration for the finite-difference and thread tests: by
/// default centred, biased variance, eps 1e-3 inside the square root, weight and bias,
/// batch statistics, no mask; the setters change one option each.
struct Config {
    std::string name;
    Shape view;
    Axes reduced, params;
    bool center = true;
    VarianceEstimator variance = VarianceEstimator::biased;
    EpsPlacement placement = EpsPlacement::inside_sqrt;
    double eps = 1e-3, offset = 0;
    bool weight = true, bias = true, given = false;
    Shape mask;  ///< empty: no mask; else the mask's view shape

    Config(std::string n, Shape v, Axes r, Axes p)
        : name(std::move(n)), view(std::move(v)), reduced(std::move(r)), params(std::move(p)) {}
    Config& rms() { center = false, bias = false; return *this; }
    Config& unbiased() { variance = VarianceEstimator::unbiased; return *this; }
    Config& eps_to_std() { placement = EpsPlacement::add_to_std; return *this; }
    Config& with_eps(double e) { eps = e; return *this; }
    Config& with_offset(double o) { offset = o; return *this; }
    Config& no_affine() { weight = bias = false; return *this; }
    Config& given_stats() { given = true; return *this; }
    Config& masked(Shape m) { mask = std::move(m); return *this; }
};

/// A padding mask of `shape` (rank of the view; exactly one axis after axis 0 longer than
/// 1 holds positions): sample i keeps its first L - i positions, at least 2.
xt::xarray<std::uint8_t> lengths_mask(const Shape& shape) {
    xt::xarray<std::uint8_t> m = xt::zeros<std::uint8_t>(shape);
    std::size_t pos_axis = 0;
    for (std::size_t a = 1; a < shape.size(); ++a)
        if (shape[a] > 1) pos_axis = a;
    const std::size_t L = shape[pos_axis], inner = num_elements(shape) / shape[0];
    for (std::size_t i = 0; i < m.size(); ++i) {
        std::size_t n = i / inner, rest = i % inner;
        std::size_t stride = 1;
        for (std::size_t a = pos_axis + 1; a < shape.size(); ++a) stride *= shape[a];
        std::size_t t = (rest / stride) % L;
        m.data()[i] = t < (n + 2 <= L ? L - n : 2) ? 1 : 0;
    }
    return m;
}

Setup make_setup(const Config& c, DType dtype, std::uint64_t seed) {
    Setup s;
    s.x = Tensor::from_double(normal(c.view, seed, 0.7, 1.6), dtype);
    s.spec.reduction_axes = c.reduced;
    s.spec.param_axes = c.params;
    s.spec.center = c.center;
    s.spec.variance = c.variance;
    s.spec.eps_placement = c.placement;
    s.spec.eps = c.eps;
    s.spec.weight_offset = c.offset;
    const Shape ps = s.param_shape();
    s.has_weight = c.weight;
    s.has_bias = c.bias;
    if (c.weight) s.weight = normal(ps, seed + 1, c.offset ? 0.0 : 1.0, 0.5);
    if (c.bias) s.bias = normal(ps, seed + 2, 0.0, 0.5);
    if (!c.mask.empty()) {
        s.has_mask = true;
        s.mask = lengths_mask(c.mask);
    }
    if (c.given) {
        s.given = true;
        const Shape ss = keepdims_shape(c.view, c.reduced);
        s.given_mean = normal(ss, seed + 3, 0.5, 1.0);
        s.given_var = xt::abs(normal(ss, seed + 4, 1.0, 0.5)) + 0.2;
    }
    return s;
}

/// Every preset and option the engine has, on small shapes.
std::vector<Config> fd_configs() {
    using C = Config;
    return {
        // LayerNorm: trailing, two trailing, non-trailing axes; both estimators and eps placements.
        C("layernorm [5]", {3, 4, 5}, {2}, {2}),
        C("layernorm [4,5] no affine", {2, 4, 5}, {1, 2}, {1, 2}).no_affine().with_eps(1e-5),
        C("layernorm axes [0,2]", {3, 4, 5}, {0, 2}, {0, 2}),
        C("layernorm unbiased", {3, 6}, {1}, {1}).unbiased(),
        C("layernorm eps added to std", {3, 6}, {1}, {1}).eps_to_std().with_eps(0.1),
        C("layernorm unbiased, eps added to std", {3, 6}, {1}, {1}).unbiased().eps_to_std().with_eps(0.05),
        // RMSNorm: no centring, weight only; Gemma's offset; the variants.
        C("rmsnorm [6]", {4, 6}, {1}, {1}).rms().with_eps(1e-4),
        C("rmsnorm weight_offset 1", {4, 6}, {1}, {1}).rms().with_eps(1e-4).with_offset(1.0),
        C("rmsnorm axes [1] of 3d", {2, 5, 3}, {1}, {1}).rms(),
        C("rmsnorm unbiased, eps added to rms", {4, 6}, {1}, {1}).rms().unbiased().eps_to_std().with_eps(0.1),
        // BatchNorm: training, eval with given statistics, channels last.
        C("batchnorm training (N,C,L)", {4, 3, 5}, {0, 2}, {1}),
        C("batchnorm eval (given statistics)", {4, 3, 5}, {0, 2}, {1}).given_stats(),
        C("batchnorm channels last", {4, 5, 3}, {0, 1}, {2}),
        C("batchnorm unbiased, eps added to std", {6, 3}, {0}, {1}).unbiased().eps_to_std().with_eps(0.01),
        // InstanceNorm and GroupNorm (the (N, G, C/G, ...) view), channels first and last.
        C("instancenorm", {2, 3, 6}, {2}, {1}),
        C("instancenorm eval (given statistics)", {2, 3, 6}, {2}, {1}).given_stats(),
        C("groupnorm (2,[2,3],5)", {2, 2, 3, 5}, {2, 3}, {1, 2}),
        C("groupnorm channels last (2,5,[2,3])", {2, 5, 2, 3}, {1, 3}, {2, 3}),
        // Padding masks: statistics over real positions, every position normalised.
        C("batchnorm masked (B,T,D)", {3, 5, 4}, {0, 1}, {2}).masked({3, 5, 1}),
        C("layernorm [T,D] masked", {3, 5, 4}, {1, 2}, {1, 2}).masked({3, 5, 1}),
        C("layernorm masked, unbiased, eps added to std", {3, 5, 4}, {1, 2}, {1, 2}).masked({3, 5, 1}).unbiased().eps_to_std().with_eps(0.05),
        C("rmsnorm [T,D] masked", {3, 5, 4}, {1, 2}, {1, 2}).rms().masked({3, 5, 1}),
        C("instancenorm masked", {3, 4, 6}, {2}, {1}).masked({3, 1, 6}),
        C("groupnorm masked", {3, 2, 2, 6}, {2, 3}, {1, 2}).masked({3, 1, 1, 6}),
        C("batchnorm eval masked (mask unused)", {3, 5, 4}, {0, 1}, {2}).given_stats().masked({3, 5, 1}),
    };
}

/// Central differences of loss() in float64 with respect to every element of `a` (x's
/// values, the weight or the bias of `s`), step h * max(1, |a_i|).
xt::xarray<double> finite_differences(Setup& s, xt::xarray<double>& a, const xt::xarray<double>& dy, double h) {
    xt::xarray<double> fd = xt::zeros<double>(shape_of(a));
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double v = a.data()[i], step = h * std::max(1.0, std::abs(v));
        a.data()[i] = v + step;
        const double up = loss(s, dy);
        a.data()[i] = v - step;
        const double down = loss(s, dy);
        a.data()[i] = v;
        fd.data()[i] = (up - down) / (2 * step);
    }
    return fd;
}

// ------------------------------------------------------------------ Jacobian

/// The exact Jacobian dy/dx (n x n) of a norm without affine over one row `x` (length n),
/// through the engine's backward: n identical rows, upstream gradient the identity, so row
/// i of dx is the gradient of output i. Also returns the row's rstd and variance.
xt::xarray<double> row_jacobian(const xt::xarray<double>& row, bool center, double eps, double& rstd, double& var) {
    const std::size_t n = row.size();
    Setup s;
    s.x.dtype = DType::float64;
    s.x.f64 = xt::xarray<double>::from_shape({n, n});
    for (std::size_t i = 0; i < n; ++i) std::copy(row.begin(), row.end(), s.x.f64.begin() + static_cast<std::ptrdiff_t>(i * n));
    s.spec.reduction_axes = {1};
    s.spec.param_axes = {1};
    s.spec.center = center;
    s.spec.eps = eps;
    ForwardResult f = forward(s.x, s.spec, s.pointers());
    rstd = f.rstd(0, 0);
    var = f.var(0, 0);
    xt::xarray<double> eye = xt::eye<double>(n);
    return backward(s.x, s.spec, s.pointers(), f, eye).dx.f64;
}

/// Singular values of `j`, descending (xt::linalg::svd, LAPACK gesdd without U and V).
std::vector<double> singular_values(const xt::xarray<double>& j) {
    auto usv = xt::linalg::svd(j, false, false);
    xt::xarray<double> s = std::get<1>(usv);
    std::vector<double> out(s.begin(), s.end());
    std::sort(out.rbegin(), out.rend());
    return out;
}

}  // namespace

TEST_CASE("backward: PyTorch autograd goldens at the engine level (float64 1e-10, float32 1e-5)") {
    auto cases = grad_cases();
    REQUIRE(cases.size() >= 12);
    std::map<std::string, double> worst;
    std::size_t pairs = 0, arrays = 0;
    for (const auto& dir : cases) {
        const std::string name = dir.filename().string();
        CAPTURE(name);
        const auto cfg = nlohmann::json::parse(read_text(dir / "config.json"));
        const std::string dtype_s = cfg.at("dtype");
        const DType dtype = parse_dtype(dtype_s);
        const double tol = dtype == DType::float64 ? 1e-10 : 1e-5;
        const auto engine = nlohmann::json::parse(read_text(dir / "engine.json"));
        REQUIRE(engine.size() > 0);
        for (const auto& e : engine) {
            const std::string data = e.at("data"), norm = e.at("norm");
            CAPTURE(data);
            CAPTURE(norm);
            xt::xarray<double> dy;
            Setup s = golden_setup(dir, e, dtype, dy);
            BackwardResult g = grads(s, dy);
            const fs::path exp = dir / "expected" / data / norm;
            auto check = [&](const char* what, const xt::xarray<double>& got) {
                NpyArray ref = read_npy(exp / (std::string(what) + ".npy"));
                CHECK(ref.dtype == dtype_s);
                CHECK(ref.values.size() == got.size());
                if (ref.values.size() != got.size()) return;
                Err err = rel_err(got, ref.values);
                CHECK_MESSAGE(err.rel <= tol, what << ": relative error " << err.rel << " at flat index " << err.at
                                                   << ": normlab " << got.data()[err.at] << ", PyTorch "
                                                   << ref.values.data()[err.at]);
                worst[dtype_s + " " + what] = std::max(worst[dtype_s + " " + what], err.rel);
                ++arrays;
            };
            // dx rounded to the dtype, as normlab saves it.
            check("grad_input", g.dx.to_double());
            // Parameter gradients rounded to the dtype as saved (they are double in the engine).
            auto rounded = [&](const xt::xarray<double>& a) { return Tensor::from_double(a, dtype).to_double(); };
            CHECK(s.has_weight == fs::exists(exp / "grad_weight.npy"));
            CHECK(s.has_bias == fs::exists(exp / "grad_bias.npy"));
            if (s.has_weight) check("grad_weight", rounded(g.dweight));
            if (s.has_bias) check("grad_bias", rounded(g.dbias));
            ++pairs;
        }
    }
    std::cout << "backward goldens: " << cases.size() << " cases, " << pairs << " pairs, " << arrays
              << " arrays; worst relative errors:";
    for (const auto& [k, v] : worst) std::cout << " " << k << " " << v << ";";
    std::cout << "\n";
    CHECK(pairs >= 80);
}

namespace {

/// float32's spacing at |v| (its ulp; the smallest subnormal's at 0).
double ulp32(double v) {
    int e = 0;
    std::frexp(std::abs(v), &e);
    return v == 0 ? std::ldexp(1.0, -149) : std::ldexp(1.0, std::max(e - 24, -149));
}

/// `p` (x's dims at `axes`, in order) with x's rank, 1 off those axes: it broadcasts to x.
xt::xarray<double> spread(xt::xarray<double> p, const Shape& xs, const Axes& axes) {
    Shape s(xs.size(), 1);
    for (std::size_t a : axes) s[a] = xs[a];
    p.reshape(s);
    return p;
}

}  // namespace

TEST_CASE("forward: the goldens' outputs within the precision contract (float path <= 3 ulps, double <= 0.5)") {
    // PyTorch's output in float64 on the float32 inputs, rounded once: within half an ulp of
    // the exact one, so normlab's float path is within 3.5 of it and its double path 1.0.
    // The ulp is float32's at the largest of |x̂·w|, |b| and |y| (DESIGN.md).
    std::size_t arrays = 0;
    double worst_float = 0, worst_double = 0, worst_f64 = 0;
    for (const auto& dir : grad_cases()) {
        const std::string name = dir.filename().string();
        CAPTURE(name);
        const DType dtype = parse_dtype(nlohmann::json::parse(read_text(dir / "config.json")).at("dtype"));
        for (const auto& e : nlohmann::json::parse(read_text(dir / "engine.json"))) {
            const fs::path out = dir / "expected" / e.at("data").get<std::string>() / e.at("norm").get<std::string>() /
                                 "output.npy";
            if (!fs::exists(out)) continue;
            CAPTURE(e.at("norm").get<std::string>());
            xt::xarray<double> dy;
            Setup s = golden_setup(dir, e, dtype, dy);
            const xt::xarray<double> ref = load(out);
            const Shape xs = s.x.shape();
            const xt::xarray<double> x = s.x.to_double();
            for (Compute c : {Compute::float32, Compute::float64}) {
                s.spec.compute = c;
                const ForwardResult f = forward(s.x, s.spec, s.pointers());
                const xt::xarray<double> y = f.y.to_double();
                const xt::xarray<double> scale =
                    s.has_weight ? xt::eval(s.spec.weight_offset + spread(s.weight, xs, s.spec.param_axes))
                                 : xt::xarray<double>(xt::ones<double>(Shape(xs.size(), 1)));
                const xt::xarray<double> xw = (x - f.mean) * f.rstd * scale;
                const xt::xarray<double> b = s.has_bias ? spread(s.bias, xs, s.spec.param_axes)
                                                        : xt::xarray<double>(xt::zeros<double>(Shape(xs.size(), 1)));
                const xt::xarray<double> bb = xt::broadcast(b, xs);
                double worst = 0;
                for (std::size_t i = 0; i < y.size(); ++i) {
                    const double r = ref.data()[i];
                    if (dtype == DType::float64) {
                        worst = std::max(worst, std::abs(y.data()[i] - r));
                        continue;
                    }
                    const double basis = std::max({std::abs(xw.data()[i]), std::abs(bb.data()[i]), std::abs(r)});
                    const double u = std::abs(y.data()[i] - r) / ulp32(basis);
                    worst = std::isnan(u) ? INFINITY : std::max(worst, u);
                }
                if (dtype == DType::float64) {
                    CHECK(worst <= 1e-13);
                    worst_f64 = std::max(worst_f64, worst);
                    break;  // one arithmetic for float64
                }
                CHECK(worst <= (c == Compute::float32 ? 3.5 : 1.0));
                (c == Compute::float32 ? worst_float : worst_double) =
                    std::max(c == Compute::float32 ? worst_float : worst_double, worst);
            }
            ++arrays;
        }
    }
    CHECK(arrays >= 12);
    std::cout << "forward goldens: " << arrays << " outputs; float32 float path " << worst_float << " ulps, double path "
              << worst_double << " ulps; float64 max |diff| " << worst_f64 << "\n";
}

TEST_CASE("backward: the golden comparison catches a wrong gradient") {
    // Guards the comparison above: one PyTorch array perturbed by 3e-10 relative at its
    // largest element must fail the float64 tolerance, and a NaN must be the worst element.
    auto cases = grad_cases();
    REQUIRE(!cases.empty());
    const fs::path dir = kGolden / "grad_layernorm_f64";
    const auto engine = nlohmann::json::parse(read_text(dir / "engine.json"));
    xt::xarray<double> dy;
    Setup s = golden_setup(dir, engine.at(0), DType::float64, dy);
    auto got = grads(s, dy).dx.to_double();
    auto ref = load(dir / "expected" / engine.at(0).at("data").get<std::string>() /
                    engine.at(0).at("norm").get<std::string>() / "grad_input.npy");
    CHECK(rel_err(got, ref).rel <= 1e-10);
    const std::size_t big = static_cast<std::size_t>(std::distance(
        ref.begin(), std::max_element(ref.begin(), ref.end(), [](double a, double b) { return std::abs(a) < std::abs(b); })));
    auto bad = ref;
    bad.data()[big] *= 1 + 3e-10;
    CHECK(rel_err(got, bad).rel > 1e-10);
    CHECK(rel_err(got, bad).at == big);
    bad = ref;
    bad.data()[9] = std::nan("");
    CHECK(rel_err(got, bad).at == 9);
    CHECK(std::isnan(rel_err(got, bad).rel));
}

TEST_CASE("backward: central finite differences in float64 for every preset and option") {
    double worst_x = 0, worst_p = 0;
    std::string worst_x_at, worst_p_at;
    for (const Config& c : fd_configs()) {
        CAPTURE(c.name);
        Setup s = make_setup(c, DType::float64, 1234);
        xt::xarray<double> dy = normal(c.view, 99);
        BackwardResult g = grads(s, dy);
        const double h = 1e-5;
        Err ex = rel_err(g.dx.f64, finite_differences(s, s.x.f64, dy, h));
        CHECK_MESSAGE(ex.rel < 1e-6, "dx relative error " << ex.rel << " at " << ex.at);
        if (ex.rel > worst_x) worst_x = ex.rel, worst_x_at = c.name;
        // The parameter gradients, or their absence without the parameter.
        auto check_param = [&](bool has, xt::xarray<double>& p, const xt::xarray<double>& grad, const char* what) {
            if (!has) {
                CHECK(grad.size() == 0);
                return;
            }
            Err e = rel_err(grad, finite_differences(s, p, dy, h));
            CHECK_MESSAGE(e.rel < 1e-6, what << " relative error " << e.rel);
            if (e.rel > worst_p) worst_p = e.rel, worst_p_at = c.name + " (" + what + ")";
        };
        check_param(s.has_weight, s.weight, g.dweight, "dweight");
        check_param(s.has_bias, s.bias, g.dbias, "dbias");
    }
    std::cout << "backward finite differences: " << fd_configs().size() << " configurations, worst relative error dx "
              << worst_x << " (" << worst_x_at << "), parameters " << worst_p << " (" << worst_p_at << ")\n";
}

TEST_CASE("backward: padded positions get only the direct term, real ones the statistics terms too") {
    // A masked row and the same row without its padded tail: the real positions' statistics
    // are the same, so dx at a padded position is rstd * dy * w, and dx at a real position
    // differs from the unpadded row's exactly by the padded outputs' pull on the statistics.
    Config c = Config("layernorm masked", {1, 1, 6}, {2}, {2}).no_affine();
    Setup s = make_setup(c, DType::float64, 5);
    s.has_mask = true;
    s.mask = xt::xarray<std::uint8_t>{{{1, 1, 1, 1, 0, 0}}};
    xt::xarray<double> dy = normal(c.view, 6);
    ForwardResult f = forward(s.x, s.spec, s.pointers());
    BackwardResult g = backward(s.x, s.spec, s.pointers(), f, dy);
    for (std::size_t j = 4; j < 6; ++j) CHECK(g.dx.f64(0, 0, j) == f.rstd(0, 0, 0) * dy(0, 0, j));
    // With zero upstream gradient at the padded positions, the real positions get what the
    // four-element row gets.
    xt::xarray<double> dy0 = dy;
    dy0(0, 0, 4) = dy0(0, 0, 5) = 0;
    BackwardResult g0 = backward(s.x, s.spec, s.pointers(), f, dy0);
    Setup r = s;
    r.has_mask = false;
    r.x.f64 = xt::xarray<double>::from_shape({1, 1, 4});
    xt::xarray<double> dyr = xt::xarray<double>::from_shape({1, 1, 4});
    for (std::size_t j = 0; j < 4; ++j) r.x.f64(0, 0, j) = s.x.f64(0, 0, j), dyr(0, 0, j) = dy(0, 0, j);
    BackwardResult gr = grads(r, dyr);
    for (std::size_t j = 0; j < 4; ++j) CHECK(g0.dx.f64(0, 0, j) == doctest::Approx(gr.dx.f64(0, 0, j)).epsilon(1e-14));
    CHECK(g.dx.f64(0, 0, 0) != doctest::Approx(gr.dx.f64(0, 0, 0)).epsilon(1e-6));
}

namespace {

/// Pads the (N, T, D) batch of `s` to `lengths` (sample n keeps its first lengths[n]
/// tokens): a mask of shape (N, T, 1) and dy 0 at the padded tokens (a masked loss).
void pad_tokens(Setup& s, xt::xarray<double>& dy, const std::vector<std::size_t>& lengths) {
    const std::size_t N = dy.shape()[0], T = dy.shape()[1], D = dy.shape()[2];
    s.has_mask = true;
    s.mask = xt::xarray<std::uint8_t>::from_shape({N, T, 1});
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t t = 0; t < T; ++t) {
            s.mask(n, t, 0) = t < lengths[n];
            for (std::size_t d = 0; d < D && t >= lengths[n]; ++d) dy(n, t, d) = 0;
        }
}

}  // namespace

TEST_CASE("backward: a group without real positions under a masked loss adds nothing, as in PyTorch") {
    // LayerNorm over D with padded tokens: a padded token's row has no real position, so its
    // statistics and outputs are NaN. With d loss / d y = 0 there (a masked loss) the weight
    // gradient and the real rows' dx are those of the same LayerNorm run on every row, which
    // is what PyTorch computes (it normalises a padded row over its own values; checked
    // against torch.nn.functional.layer_norm by hand to 1.3e-16), and dx is 0 at padding.
    Config c = Config("layernorm [D] masked", {3, 4, 5}, {2}, {2});
    Setup s = make_setup(c, DType::float64, 11);
    const std::vector<std::size_t> len = {4, 2, 1};
    xt::xarray<double> dy = normal(c.view, 12);
    pad_tokens(s, dy, len);
    const ForwardResult f = forward(s.x, s.spec, s.pointers());
    REQUIRE(std::isnan(f.rstd(2, 3, 0)));
    const BackwardResult g = backward(s.x, s.spec, s.pointers(), f, dy);
    Setup all = s;
    all.has_mask = false;
    const BackwardResult ga = grads(all, dy);
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(g.dweight(i) == doctest::Approx(ga.dweight(i)).epsilon(1e-14));
        CHECK(g.dbias(i) == ga.dbias(i));
    }
    for (std::size_t n = 0; n < 3; ++n)
        for (std::size_t t = 0; t < 4; ++t)
            for (std::size_t d = 0; d < 5; ++d) {
                if (t < len[n]) CHECK(g.dx.f64(n, t, d) == doctest::Approx(ga.dx.f64(n, t, d)).epsilon(1e-14));
                else CHECK(g.dx.f64(n, t, d) == 0);
            }
    // An upstream gradient inside such a group reaches the loss through NaN outputs: that
    // group's dx and the weight gradient stay NaN; the other padded rows' dx stays 0.
    dy(2, 3, 1) = 0.5;
    const BackwardResult gn = backward(s.x, s.spec, s.pointers(), f, dy);
    CHECK(std::isnan(gn.dweight(1)));
    CHECK(std::isnan(gn.dx.f64(2, 3, 1)));
    CHECK(gn.dx.f64(2, 2, 1) == 0);
    CHECK(gn.dx.f64(1, 3, 0) == 0);
}

TEST_CASE("backward: channels last, a sample without real positions under a masked loss adds nothing") {
    // InstanceNorm over T on (N, T, C) with channels last: the statistics run along C (the
    // channels-last loops). Sample 2 is all padding, so its C groups have no statistics; with
    // dy 0 there the gradients are those of samples 0 and 1 alone.
    Config c = Config("instancenorm channels last", {3, 4, 5}, {1}, {2});
    Setup s = make_setup(c, DType::float64, 21);
    xt::xarray<double> dy = normal(c.view, 22);
    pad_tokens(s, dy, {4, 2, 0});
    const BackwardResult g = grads(s, dy);
    Setup two = s;
    two.x.f64 = xt::view(s.x.f64, xt::range(0, 2), xt::all(), xt::all());
    two.mask = xt::view(s.mask, xt::range(0, 2), xt::all(), xt::all());
    const xt::xarray<double> dy2 = xt::view(dy, xt::range(0, 2), xt::all(), xt::all());
    const BackwardResult g2 = grads(two, dy2);
    for (std::size_t i = 0; i < 5; ++i) {
        CHECK(g.dweight(i) == doctest::Approx(g2.dweight(i)).epsilon(1e-14));
        CHECK(g.dbias(i) == doctest::Approx(g2.dbias(i)).epsilon(1e-14));
    }
    for (std::size_t t = 0; t < 4; ++t)
        for (std::size_t d = 0; d < 5; ++d) {
            for (std::size_t n = 0; n < 2; ++n) CHECK(g.dx.f64(n, t, d) == doctest::Approx(g2.dx.f64(n, t, d)).epsilon(1e-14));
            CHECK(g.dx.f64(2, t, d) == 0);
        }
}

TEST_CASE("backward: bit-identical for 1, 2, 3 and 8 threads") {
    const norm_test::EngineSetting restore;
    std::vector<Config> configs = {
        Config("layernorm rows", {96, 1000}, {1}, {1}),
        Config("layernorm rows longer than a chunk", {2, 40000}, {1}, {1}),
        Config("batchnorm (N,C,H,W)", {16, 8, 30, 30}, {0, 2, 3}, {1}),
        Config("batchnorm channels last", {64, 50, 24}, {0, 1}, {2}),
        Config("batchnorm channels last, masked", {64, 50, 24}, {0, 1}, {2}).masked({64, 50, 1}),
        Config("groupnorm channels last", {8, 10, 10, 4, 4}, {1, 2, 4}, {3, 4}),
        Config("rmsnorm", {64, 700}, {1}, {1}).rms().with_eps(1e-6),
        Config("instancenorm eval", {8, 16, 500}, {2}, {1}).given_stats(),
    };
    for (const Config& c : configs) {
        CAPTURE(c.name);
        Setup s = make_setup(c, DType::float32, 77);
        xt::xarray<double> dy = normal(c.view, 78);
        set_engine_threads(1);
        BackwardResult ref = grads(s, dy);
        for (unsigned t : {2u, 3u, 8u}) {
            CAPTURE(t);
            set_engine_threads(t);
            BackwardResult g = grads(s, dy);
            CHECK(std::memcmp(g.dx.f32.data(), ref.dx.f32.data(), ref.dx.f32.size() * sizeof(float)) == 0);
            REQUIRE(g.dweight.size() == ref.dweight.size());
            REQUIRE(g.dbias.size() == ref.dbias.size());
            // memcmp must not see the null data() of an empty array (no affine parameters).
            if (ref.dweight.size() > 0)
                CHECK(std::memcmp(g.dweight.data(), ref.dweight.data(), ref.dweight.size() * sizeof(double)) == 0);
            if (ref.dbias.size() > 0)
                CHECK(std::memcmp(g.dbias.data(), ref.dbias.data(), ref.dbias.size() * sizeof(double)) == 0);
        }
    }
}

TEST_CASE("backward: dx is computed in double and rounded once to float32, float16, bfloat16") {
    for (const Config& c : {Config("layernorm", {8, 64}, {1}, {1}), Config("batchnorm", {16, 4, 9}, {0, 2}, {1}),
                            Config("groupnorm masked", {3, 2, 2, 6}, {2, 3}, {1, 2}).masked({3, 1, 1, 6})}) {
        for (DType d : {DType::float32, DType::float16, DType::bfloat16}) {
            CAPTURE(c.name);
            CAPTURE(dtype_name(d));
            Setup low = make_setup(c, d, 31);
            Setup wide = low;  // the same (representable) values held in float64
            wide.x = Tensor::from_double(low.x.to_double(), DType::float64);
            xt::xarray<double> dy = normal(c.view, 32);
            BackwardResult gl = grads(low, dy), gw = grads(wide, dy);
            CHECK(gl.dx.dtype == d);
            // The two dtypes' statistics agree to double's rounding, not bit for bit (float
            // data take one-pass shifted moments, float64 data a corrected two-pass), so each
            // dx must be the rounding of a double within 1e-12 of float64's: rounding is
            // monotonic, hence between the roundings of the two ends of that interval.
            std::size_t mismatches = 0;
            for (std::size_t i = 0; i < gw.dx.f64.size(); ++i) {
                const double v = gw.dx.f64.data()[i], slack = 1e-12 * std::fabs(v);
                const double got = static_cast<double>(gl.dx.f32.data()[i]);
                mismatches += !(got >= round_to(d, v - slack) && got <= round_to(d, v + slack));
            }
            CHECK(mismatches == 0);
            if (gw.dweight.size() > 0)
                CHECK(xt::amax(xt::abs(gl.dweight - gw.dweight))() <= 1e-12 * xt::amax(xt::abs(gw.dweight))());
        }
    }
}

TEST_CASE("backward: bad shapes are input errors") {
    Setup s = make_setup(Config("ln", {3, 4}, {1}, {1}), DType::float64, 1);
    ForwardResult f = forward(s.x, s.spec, s.pointers());
    CHECK_THROWS_WITH_AS(backward(s.x, s.spec, s.pointers(), f, xt::zeros<double>({4, 3})),
                         "upstream gradient: expected shape [3, 4], but got [4, 3]", InputError);
    xt::xarray<double> w = xt::ones<double>({3});
    ForwardInputs in = s.pointers();
    in.weight = &w;
    CHECK_THROWS_WITH_AS(backward(s.x, s.spec, in, f, xt::zeros<double>({3, 4})),
                         "weight: expected shape [4], but got [3]", InputError);
    xt::xarray<std::uint8_t> m = xt::ones<std::uint8_t>({2, 4});
    in = s.pointers();
    in.mask = &m;
    CHECK_THROWS_AS(backward(s.x, s.spec, in, f, xt::zeros<double>({3, 4})), InputError);
}

namespace {

/// Checks the singular values of the exact Jacobian of a row of n elements (LayerNorm when
/// `center`, else RMSNorm; no affine, eps 0.25) against the closed forms, to 1e-9 relative:
/// LayerNorm: J = rstd (I - 11'/n - xhat xhat'/n), symmetric, with J 1 = 0,
/// J xhat = rstd eps/(var+eps) xhat and J u = rstd u for u orthogonal to both, so the
/// singular values are {0, rstd eps/(var+eps), rstd (n-2 times)}. RMSNorm (var = the mean
/// square): J = rstd (I - xhat xhat'/n), singular values {rstd eps/(ms+eps), rstd (n-1 times)}.
void check_closed_form_svd(std::size_t n, bool center) {
    CAPTURE(n);
    CAPTURE(center);
    const double eps = 0.25;
    xt::xarray<double> row = normal({n}, 4000 + n, 1.5, 2.0);
    double rstd = 0, var = 0;
    auto t0 = std::chrono::steady_clock::now();
    auto j = row_jacobian(row, center, eps, rstd, var);
    auto t1 = std::chrono::steady_clock::now();
    auto sv = singular_values(j);
    auto t2 = std::chrono::steady_clock::now();
    const double scale_sv = rstd * eps / (var + eps);
    REQUIRE(sv.size() == n);
    const std::size_t bulk = center ? n - 2 : n - 1;
    double worst = 0;
    for (std::size_t i = 0; i < bulk; ++i) worst = std::max(worst, std::abs(sv[i] - rstd) / rstd);
    const double scale_err = std::abs(sv[bulk] - scale_sv) / scale_sv;
    CHECK(worst <= 1e-9);
    CHECK(scale_err <= 1e-9);
    if (center) CHECK(sv[n - 1] <= 1e-9 * rstd);
    std::cout << "jacobian svd " << (center ? "layernorm" : "rmsnorm") << " n=" << n << ": rstd direction rel err "
              << worst << ", scale direction rel err " << scale_err;
    if (center) std::cout << ", smallest / rstd " << sv[n - 1] / rstd;
    std::cout << "; J built in " << std::chrono::duration<double>(t1 - t0).count() << " s, svd "
              << std::chrono::duration<double>(t2 - t1).count() << " s\n";
}

/// |a - b| / |b| for vectors.
double vec_rel(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    double d = 0, nb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += (a.data()[i] - b.data()[i]) * (a.data()[i] - b.data()[i]), nb += b.data()[i] * b.data()[i];
    return std::sqrt(d / nb);
}

double dot(const xt::xarray<double>& a, const xt::xarray<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a.data()[i] * b.data()[i];
    return s;
}

/// The same closed forms as check_closed_form_svd through products J v (backward with
/// upstream gradient v; J is symmetric, which is checked too): J 1 = 0 (LayerNorm),
/// J xhat = rstd eps/(var+eps) xhat, and J u = rstd u for random u orthogonal to 1 (LayerNorm)
/// and xhat. Together they pin every eigenvalue of the symmetric J.
void check_closed_form_products(std::size_t n, bool center) {
    CAPTURE(n);
    CAPTURE(center);
    const double eps = 0.25;
    Setup s;
    s.x = Tensor::from_double(normal({1, n}, 4000 + n, 1.5, 2.0), DType::float64);
    s.spec.reduction_axes = {1};
    s.spec.param_axes = {1};
    s.spec.center = center;
    s.spec.eps = eps;
    ForwardResult f = forward(s.x, s.spec, s.pointers());
    const double rstd = f.rstd(0, 0), var = f.var(0, 0);
    auto jv = [&](const xt::xarray<double>& v) { return backward(s.x, s.spec, s.pointers(), f, v).dx.f64; };
    xt::xarray<double> xhat = (s.x.f64 - f.mean(0, 0)) * rstd;
    xt::xarray<double> ones = xt::ones<double>({std::size_t{1}, n});
    if (center) {
        double r = std::sqrt(dot(jv(ones), jv(ones)) / static_cast<double>(n));
        CHECK(r <= 1e-12 * rstd);
    }
    CHECK(vec_rel(jv(xhat), xhat * (rstd * eps / (var + eps))) <= 1e-9);
    double worst = 0;
    for (std::uint64_t k = 0; k < 4; ++k) {
        xt::xarray<double> u = normal({1, n}, 77 + k);
        if (center) u -= dot(u, ones) / static_cast<double>(n);  // orthogonal to 1 (xhat sums to 0)
        u -= xhat * (dot(u, xhat) / dot(xhat, xhat));
        worst = std::max(worst, vec_rel(jv(u), u * rstd));
        xt::xarray<double> w = normal({1, n}, 99 + k);
        CHECK(std::abs(dot(u, jv(w)) - dot(w, jv(u))) <= 1e-12 * rstd * std::sqrt(dot(u, u) * dot(w, w)));
    }
    CHECK(worst <= 1e-9);
    std::cout << "jacobian products " << (center ? "layernorm" : "rmsnorm") << " n=" << n
              << ": rstd direction rel err " << worst << "\n";
}

}  // namespace

TEST_CASE("jacobian: LayerNorm and RMSNorm singular values by xt::linalg::svd match the closed forms (n = 8, 512)") {
    for (std::size_t n : {std::size_t{8}, std::size_t{512}})
        for (bool center : {true, false}) check_closed_form_svd(n, center);
}

TEST_CASE("jacobian: the closed forms through J v products (n = 8, 512, 4096)") {
    for (std::size_t n : {std::size_t{8}, std::size_t{512}, std::size_t{4096}})
        for (bool center : {true, false}) check_closed_form_products(n, center);
}

// The SVD of a 4096 x 4096 Jacobian took 40 to 60 s per norm here (LAPACK gesdd, one
// OpenBLAS thread), too long for every test run; the products test above covers n = 4096.
// Run it with: build/tests/test_backward -tc="*4096*" --no-skip
TEST_CASE("jacobian: singular values by xt::linalg::svd for n = 4096" * doctest::skip()) {
    for (bool center : {true, false}) check_closed_form_svd(4096, center);
}
