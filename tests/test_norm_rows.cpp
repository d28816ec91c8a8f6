// The one-pass shifted moments of float runs (src/norm/moments_rows.hpp) and the streaming
// writer of large outputs (src/norm/normalize_stream.hpp), through the engine's public
// functions: against a long double reference, with the shift at its worst (an outlier as
// the first element), rows that do not fill the last block of 16 lanes, masks, single
// elements, and outputs large enough to be streamed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include "norm/channels_last.hpp"
#include "norm/engine.hpp"
#include "norm/lanes.hpp"
#include "norm/line_vector.hpp"
#include "norm/moments_rows.hpp"
#include "norm/normalize_stream.hpp"

#include "norm_util.hpp"

using namespace normlab;

namespace {

/// Mean and biased variance of one float row in long double, two-pass with correction.
struct Ref {
    long double mean = 0, var = 0;
};
Ref reference(const float* x, std::size_t n, const std::uint8_t* m = nullptr) {
    long double sum = 0, count = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (!m || m[i]) sum += x[i], count += 1;
    Ref r;
    r.mean = sum / count;
    long double dev = 0;
    for (std::size_t i = 0; i < n; ++i)
        if (!m || m[i]) dev += x[i] - r.mean;
    r.mean += dev / count;
    for (std::size_t i = 0; i < n; ++i)
        if (!m || m[i]) r.var += (x[i] - r.mean) * (x[i] - r.mean);
    r.var /= count;
    return r;
}

/// Rows of n values, mean mu and std sd, whose first element is mu + outlier * sd.
Tensor rows(std::size_t count, std::size_t n, double mu, double sd, double outlier) {
    xt::xarray<double> v = xt::random::randn<double>({count, n}) * sd + mu;
    for (std::size_t r = 0; r < count; ++r) v(r, 0) = mu + outlier * sd;
    return Tensor::from_double(v, DType::float32);
}

/// Standard normal values v, in rows of `last`, turned into rows of three kinds in turn: std
/// sd about 0 (the moments' shift 0), std sd about `far` (the first value as the shift), and
/// std 0.2 about 1 starting with 0, whose first values do not look far from 0 though the
/// mean lies 5 std away (shift 0, then the second sum about the mean).
void mix_rows(xt::xarray<double>& v, std::size_t last, double sd, double far) {
    for (std::size_t i = 0; i < v.size(); ++i) {
        double& e = v.data()[i];
        const std::size_t kind = (i / last) % 3;
        e = kind == 0 ? e * sd : kind == 1 ? e * sd + far : (i % last == 0 ? 0.0 : 1.0 + 0.2 * e);
    }
}

NormSpec row_spec(bool center) {
    NormSpec s;
    s.reduction_axes = {1};
    s.param_axes = {1};
    s.center = center;
    return s;
}

}  // namespace

TEST_CASE("LineVector's data starts on a 64-byte line whatever its size, after growth and when copied") {
    // The row writers load the scale and shift a register at a time; malloc's blocks sit 16
    // bytes into a line, so among these sizes plain vectors would start mid-line.
    std::vector<LineVector<float>> fs;
    std::vector<LineVector<double>> ds;
    for (std::size_t n = 1; n <= 4096; n = n * 3 / 2 + 1) {
        fs.emplace_back(n, 1.0f);
        ds.emplace_back(n, 1.0);
    }
    for (const auto& v : fs) CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % 64 == 0);
    for (const auto& v : ds) CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % 64 == 0);
    LineVector<float> grown;
    for (int i = 0; i < 1000; ++i) {
        grown.push_back(static_cast<float>(i));
        REQUIRE(reinterpret_cast<std::uintptr_t>(grown.data()) % 64 == 0);
    }
    const LineVector<double> copy(ds.back());
    CHECK(reinterpret_cast<std::uintptr_t>(copy.data()) % 64 == 0);
    CHECK(copy == ds.back());
}

TEST_CASE("one-pass moments: an outlier as the first element (the shift) keeps mean and variance") {
    // The shift K is 0, or the row's first element where its first values look far from 0
    // (moments_rows.cpp, pilot_shift). Where it lies more than 4 std from the mean,
    // the row is summed again about its mean rounded to float, so s2 <= 17 m2 and m2 loses
    // a few bits to cancellation, never the factor n an outlier first would cost. Bounds:
    // the variance within 8 n 2^-53 of itself, the mean within 8 2^-53 (|mean| + std).
    // Summed about the outlier alone, rows like these miss both (mean 1e4 std 1 with a first
    // element 1e4 std out, n = 5000: variance off by 1.7e-11, twice the bound).
    xt::random::seed(31);
    struct Row { double mu, sd; };
    // Means of 3 and 6 std take the shift 0 (their first values do not look far from 0): 3 std
    // keeps it, 6 std is summed again about the mean.
    for (Row row : {Row{1e4, 1}, Row{0, 1}, Row{5, 1e-3}, Row{-300, 30}, Row{1e3, 1e-2}, Row{3, 1}, Row{-6, 1}})
        for (double outlier : {0.0, 50.0, 1e4, -1e6})
            for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{16}, std::size_t{17},
                                  std::size_t{768}, std::size_t{5000}, std::size_t{40000}}) {
                CAPTURE(row.mu);
                CAPTURE(row.sd);
                CAPTURE(outlier);
                CAPTURE(n);
                Tensor x = rows(3, n, row.mu, row.sd, outlier);
                Moments m = compute_moments(x, {1}, true);
                const double eps = std::numeric_limits<double>::epsilon();
                for (std::size_t r = 0; r < 3; ++r) {
                    const Ref ref = reference(x.f32.data() + r * n, n);
                    const long double mean = static_cast<long double>(m.mean(r, 0)) + m.mean_lo(r, 0);
                    const long double scale = std::fabs(ref.mean) + std::sqrt(ref.var);
                    CHECK(std::fabs(static_cast<double>(mean - ref.mean)) <= 8 * eps * static_cast<double>(scale));
                    CHECK(std::fabs(static_cast<double>(m.var(r, 0) - ref.var)) <=
                          8 * static_cast<double>(n) * eps * static_cast<double>(ref.var));
                    CHECK(m.count(r, 0) == static_cast<double>(n));
                }
                // and the forward's float path stays within the contract on every element
                if (n < 2) continue;
                ForwardResult f = forward(x, row_spec(true));
                for (std::size_t r = 0; r < 3; ++r) {
                    const Ref ref = reference(x.f32.data() + r * n, n);
                    const long double rstd = 1.0L / std::sqrt(ref.var + 1e-5L);
                    double worst = 0;
                    for (std::size_t i = 0; i < n; ++i) {
                        const double want = static_cast<double>((x.f32(r, i) - ref.mean) * rstd);
                        const double ulp = std::nextafter(static_cast<float>(std::fabs(want)), INFINITY) -
                                           static_cast<float>(std::fabs(want));
                        worst = std::max(worst, std::fabs(f.y.f32(r, i) - want) / ulp);
                    }
                    CHECK(worst <= 3.0);
                }
            }
}

TEST_CASE("one-pass moments: a mask of ones gives the bits of no mask; a partial mask the real elements'") {
    xt::random::seed(32);
    for (std::size_t n : {std::size_t{5}, std::size_t{16}, std::size_t{33}, std::size_t{768}}) {
        CAPTURE(n);
        Tensor x = rows(4, n, 1e3, 2, 0);
        for (bool center : {true, false}) {
            CAPTURE(center);
            xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>({std::size_t{4}, n});
            Moments plain = compute_moments(x, {1}, center), masked = compute_moments(x, {1}, center, &ones);
            CHECK(plain.mean == masked.mean);
            CHECK(plain.mean_lo == masked.mean_lo);
            CHECK(plain.var == masked.var);
            // Row 0: every other element; row 1: the first three padded, so the shift is the
            // fourth; row 2: all padding (count 0, NaN); row 3: only the last element.
            xt::xarray<std::uint8_t> mk = xt::zeros<std::uint8_t>({std::size_t{4}, n});
            for (std::size_t i = 0; i < n; ++i) {
                mk(0, i) = i % 2 == 0;
                mk(1, i) = i >= 3;
            }
            mk(3, n - 1) = 1;
            Moments m = compute_moments(x, {1}, center, &mk);
            for (std::size_t r : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
                CAPTURE(r);
                Ref ref = reference(x.f32.data() + r * n, n, mk.data() + r * n);
                if (!center) {  // the mean square: the "variance" without centring
                    long double sq = 0, cnt = 0;
                    for (std::size_t i = 0; i < n; ++i)
                        if (mk(r, i)) sq += static_cast<long double>(x.f32(r, i)) * x.f32(r, i), cnt += 1;
                    ref = {0, sq / cnt};
                }
                CHECK(m.mean(r, 0) + m.mean_lo(r, 0) == doctest::Approx(static_cast<double>(ref.mean)).epsilon(1e-15));
                CHECK(m.var(r, 0) == doctest::Approx(static_cast<double>(ref.var)).epsilon(1e-12));
            }
            CHECK(m.count(2, 0) == 0);
            CHECK(std::isnan(m.mean(2, 0)));
            CHECK(std::isnan(m.var(2, 0)));
            CHECK(m.count(3, 0) == 1);
            if (center) {
                CHECK(m.mean(3, 0) == x.f32(3, n - 1));
                CHECK(m.var(3, 0) == 0);
            }
        }
    }
}

TEST_CASE("one-pass moments: a single element and a constant row give their value and variance 0") {
    xt::random::seed(33);
    xt::xarray<double> values = xt::zeros<double>({std::size_t{3}, std::size_t{1}});
    values(0, 0) = 1e4 + 0.25;
    values(1, 0) = -3.5;
    Tensor one = Tensor::from_double(values, DType::float32);
    Moments m = compute_moments(one, {1}, true);
    for (std::size_t r = 0; r < 3; ++r) {
        CHECK(m.mean(r, 0) == one.f32(r, 0));
        CHECK(m.mean_lo(r, 0) == 0);
        CHECK(m.var(r, 0) == 0);
    }
    Tensor flat = Tensor::from_double(xt::ones<double>({std::size_t{2}, std::size_t{37}}) * 12345.678, DType::float32);
    Moments c = compute_moments(flat, {1}, true);
    CHECK(c.mean(0, 0) == flat.f32(0, 0));
    CHECK(c.var(1, 0) == 0);
    ForwardResult f = forward(flat, row_spec(true));
    for (float y : f.y.f32) CHECK(y == 0.0f);
}

TEST_CASE("outputs of 8 MiB and more (written with streaming stores) have the bits of the cached writer") {
    // Each statistic's output depends on its own elements alone, so a slice of a large batch,
    // normalised on its own (a small output, plain stores), must give the same bits as the
    // same elements inside the large one. Rows of 1000 (no multiple of the 16-float store)
    // with LayerNorm and an affine; GroupNorm planes; and the two-phase walk with given
    // statistics (BatchNorm in eval mode, (N, C, H, W)).
    xt::random::seed(34);
    {
        const std::size_t rows_n = 2200, d = 1000;  // 8.4 MB of float32
        Tensor big = Tensor::from_double(xt::random::randn<double>({rows_n, d}) * 3.0 + 7.0, DType::float32);
        xt::xarray<double> w = xt::random::randn<double>({d}), b = xt::random::randn<double>({d});
        ForwardInputs in;
        in.weight = &w;
        in.bias = &b;
        NormSpec spec = row_spec(true);
        ForwardResult fb = forward(big, spec, in);
        Tensor small = Tensor::from_double(xt::view(big.to_double(), xt::range(1100, 1200), xt::all()), DType::float32);
        ForwardResult fs = forward(small, spec, in);
        CHECK(std::memcmp(fs.y.f32.data(), fb.y.f32.data() + 1100 * d, 100 * d * sizeof(float)) == 0);
    }
    {
        const Shape xs{260, 4, 2, 32, 32};  // GroupNorm's (N, G, C/G, H, W) view, 8.5 MB
        Tensor big = Tensor::from_double(xt::random::randn<double>(xs) - 2.0, DType::float32);
        NormSpec spec;
        spec.reduction_axes = {2, 3, 4};
        spec.param_axes = {1, 2};
        xt::xarray<double> w = xt::random::randn<double>({std::size_t{4}, std::size_t{2}});
        ForwardInputs in;
        in.weight = &w;
        ForwardResult fb = forward(big, spec, in);
        Tensor small = Tensor::from_double(xt::view(big.to_double(), xt::range(5, 6)), DType::float32);
        ForwardResult fs = forward(small, spec, in);
        const std::size_t per = 4 * 2 * 32 * 32;
        CHECK(std::memcmp(fs.y.f32.data(), fb.y.f32.data() + 5 * per, per * sizeof(float)) == 0);
    }
    {
        const Shape xs{50, 3, 130, 130};  // BatchNorm planes, given statistics: 10 MB
        Tensor big = Tensor::from_double(xt::random::randn<double>(xs) * 0.5, DType::float32);
        NormSpec spec;
        spec.reduction_axes = {0, 2, 3};
        spec.param_axes = {1};
        xt::xarray<double> mean = xt::zeros<double>({1, 3, 1, 1}), var = xt::ones<double>({1, 3, 1, 1});
        mean(0, 0, 0, 0) = 0.1, mean(0, 1, 0, 0) = -0.2, var(0, 2, 0, 0) = 2.5;
        ForwardInputs in;
        in.given_mean = &mean;
        in.given_var = &var;
        ForwardResult fb = forward(big, spec, in);
        Tensor small = Tensor::from_double(xt::view(big.to_double(), xt::range(17, 19)), DType::float32);
        ForwardResult fs = forward(small, spec, in);
        const std::size_t per = 3 * 130 * 130;
        CHECK(std::memcmp(fs.y.f32.data(), fb.y.f32.data() + 17 * per, 2 * per * sizeof(float)) == 0);
    }
    // The double arithmetic streams too: float64 LayerNorm rows (8.8 MB), float32 data with
    // compute double (9.2 MB), float64 BatchNorm planes with given statistics (10 MB).
    for (int kind = 0; kind < 3; ++kind) {
        CAPTURE(kind);
        const DType dt = kind == 1 ? DType::float32 : DType::float64;
        const Shape xs = kind == 0 ? Shape{1100, 1000} : kind == 1 ? Shape{2300, 1000} : Shape{25, 3, 130, 130};
        Tensor big = Tensor::from_double(xt::random::randn<double>(xs) * 2.0 + 5.0, dt);
        NormSpec spec;
        ForwardInputs in;
        xt::xarray<double> w = xt::random::randn<double>({xs[1]}), b = xt::random::randn<double>({xs[1]});
        xt::xarray<double> mean = xt::zeros<double>({1, 3, 1, 1}), var = xt::ones<double>({1, 3, 1, 1});
        if (kind < 2) {
            spec = row_spec(true);
            spec.compute = Compute::float64;
        } else {
            spec.reduction_axes = {0, 2, 3};
            spec.param_axes = {1};
            mean(0, 1, 0, 0) = 0.3, var(0, 2, 0, 0) = 1.7;
            in.given_mean = &mean;
            in.given_var = &var;
        }
        in.weight = &w;
        in.bias = &b;
        const ForwardResult fb = forward(big, spec, in);
        Tensor small = Tensor::from_double(xt::view(big.to_double(), xt::range(10, 12)), dt);
        const ForwardResult fs = forward(small, spec, in);
        const std::size_t per = big.size() / xs[0], bytes = dt == DType::float64 ? 8 : 4;
        const char* pb = dt == DType::float64 ? reinterpret_cast<const char*>(fb.y.f64.data())
                                              : reinterpret_cast<const char*>(fb.y.f32.data());
        const char* ps = dt == DType::float64 ? reinterpret_cast<const char*>(fs.y.f64.data())
                                              : reinterpret_cast<const char*>(fs.y.f32.data());
        CHECK(std::memcmp(ps, pb + 10 * per * bytes, 2 * per * bytes) == 0);
    }
}

namespace {

// Writes with `write(y)` into a buffer at each of the `lanes` element offsets within a
// cache line, and checks the n values there against `ref` and that nothing around them
// changed.
template <class T, class Write>
void check_every_offset(std::size_t lanes, const std::vector<T>& ref, Write&& write) {
    const std::size_t n = ref.size();
    for (std::size_t off = 0; off < lanes; ++off) {
        CAPTURE(off);
        std::vector<T> buf(n + 2 * lanes, T(-12345));
        // off elements past the buffer's own place in its line: every offset in turn.
        const std::size_t skew = reinterpret_cast<std::uintptr_t>(buf.data()) % 64 / sizeof(T);
        const std::size_t at = (lanes - skew + off) % lanes;
        write(buf.data() + at);
        CHECK(std::memcmp(buf.data() + at, ref.data(), n * sizeof(T)) == 0);
        std::size_t touched = 0;
        for (std::size_t i = 0; i < buf.size(); ++i)
            if ((i < at || i >= at + n) && buf[i] != T(-12345)) ++touched;
        CHECK(touched == 0);
    }
}

// The n values of y from every chunk of walk wk over x: the cached writer with `ref_args`,
// against the streaming writer with `args` at every offset of y (check_every_offset); on
// the float path (`f32`, float data only) or the double arithmetic.
template <class T>
void check_stream_chunks(const std::vector<T>& x, std::size_t n, const Walk& wk, bool f32, const NormalizeArgs& ref_args,
                         const NormalizeArgs& args) {
    std::vector<T> want(n);
    for (std::size_t c = 0; c < wk.num_chunks(); ++c) {
        if constexpr (std::is_same_v<T, float>) {
            if (f32) normalize_chunk_f32(x.data(), want.data(), wk, c, ref_args);
            else normalize_chunk(x.data(), want.data(), wk, c, ref_args);
        } else {
            normalize_chunk(x.data(), want.data(), wk, c, ref_args);
        }
    }
    check_every_offset<T>(64 / sizeof(T), want, [&](T* y) {
        for (std::size_t c = 0; c < wk.num_chunks(); ++c) {
            if constexpr (std::is_same_v<T, float>) {
                if (f32) normalize_chunk_f32_stream(x.data(), y, wk, c, args);
                else normalize_chunk_stream(x.data(), y, wk, c, args);
            } else {
                normalize_chunk_stream(x.data(), y, wk, c, args);
            }
        }
    });
}
}  // namespace

TEST_CASE("the streaming writers give the cached writers' bits wherever y starts in a cache line") {
    // The streaming writers cut a run's output at y's cache lines, so where y starts in a
    // line decides which elements take scalar stores and where the blocks end: each of the
    // 16 float offsets (8 double), runs longer than a block (rows of 3000: blocks cut mid-
    // run) and shorter (768), runs whose rest shorter than a line joins the last block (rows
    // of 2056 in the rows' writer, runs of 1030 in the walk's where the first block is cut
    // fewer than 10 values short), both arithmetics, against the cached writers.
    xt::random::seed(35);
    const std::size_t rows_n = 5, n = 3000, total = rows_n * n;
    const Shape xs{rows_n, n};
    const Axes reduced{1}, params{1};
    const Walk w(xs, broadcast_strides(xs, keepdims_shape(xs, reduced)), param_strides(xs, params), kChunk);
    const xt::xarray<double> xv = xt::random::randn<double>({total}) * 3.0 + 7.0;
    std::vector<float> xf(total);
    std::vector<double> xd(total);
    for (std::size_t i = 0; i < total; ++i) xd[i] = xf[i] = static_cast<float>(xv(i));
    std::vector<double> mean(rows_n), lo(rows_n, 0.0), rstd(rows_n), scale(n), shift(n);
    std::vector<float> shift_f(n);
    for (std::size_t r = 0; r < rows_n; ++r) mean[r] = 7.0 + 0.1 * r, rstd[r] = 1.0 / (3.0 + r);
    const xt::xarray<double> pw = xt::random::randn<double>({2 * n});
    for (std::size_t k = 0; k < n; ++k) scale[k] = pw(k), shift[k] = pw(n + k), shift_f[k] = static_cast<float>(shift[k]);
    NormalizeArgs a;
    a.mean = mean.data(), a.mean_lo = lo.data(), a.rstd = rstd.data();
    a.scale = scale.data(), a.shift = shift.data(), a.shift_f = shift_f.data();
    // Every writer at each width this CPU has: an AVX-512 machine runs the block writer of
    // AVX2 and SSE2 too, the one those CPUs stream every run with.
    for (int width : {0, 4, 2}) {
        CAPTURE(width);
        set_lane_width(width);

        check_stream_chunks(xf, total, w, true, a, a);
        std::vector<float> ref(total);
        for (std::size_t c = 0; c < w.num_chunks(); ++c) normalize_chunk_f32(xf.data(), ref.data(), w, c, a);
        check_every_offset<float>(16, ref,
                                  [&](float* y) { normalize_rows_f32_stream(xf.data(), y, rows_n, n, 0, 1, a); });
        std::vector<float> ref768(rows_n * 768);
        normalize_rows_f32(xf.data(), ref768.data(), rows_n, 768, 0, 1, a);
        check_every_offset<float>(16, ref768,
                                  [&](float* y) { normalize_rows_f32_stream(xf.data(), y, rows_n, 768, 0, 1, a); });
        // The rows' writer on AVX-512 and AVX2 forms rows of 256 values or more in registers:
        // each of its branches against the cached writer, at every offset: the mean's low part
        // non-zero, uncentred (mean +0), weight alone, bias alone, neither (one parameter per
        // row: pstep 0). Rows of 2064 on AVX-512 are written four at a time, the fifth alone.
        if (width == 0 && lane_width() < 8)
            MESSAGE("no AVX-512 on this CPU: the AVX-512 register writers are not run here");
        {
            std::vector<double> zero(rows_n, 0.0), lo_set(rows_n);
            for (std::size_t r = 0; r < rows_n; ++r) lo_set[r] = 3e-9 * (r + 1.0);
            for (int variant = 0; variant < 10; ++variant) {
                CAPTURE(variant);
                const std::size_t len = variant < 5 ? 768 : 2064;
                CAPTURE(len);
                NormalizeArgs v = a;
                v.mean_lo = lo_set.data();
                if (variant % 5 == 1) v.mean = zero.data(), v.mean_lo = zero.data();
                if (variant % 5 == 2) v.uniform_shift = true;
                if (variant % 5 == 3) v.uniform_scale = true;
                const std::size_t pstep = variant % 5 == 4 ? 0 : 1;
                std::vector<float> want(rows_n * len);
                normalize_rows_f32(xf.data(), want.data(), rows_n, len, 0, pstep, v);
                check_every_offset<float>(
                    16, want, [&](float* y) { normalize_rows_f32_stream(xf.data(), y, rows_n, len, 0, pstep, v); });
            }
        }

        // Rows of 64 (AVX2 streams them from the registers) and of 100 (ends outside whole lines).
        for (std::size_t len : {std::size_t{64}, std::size_t{100}}) {
            CAPTURE(len);
            std::vector<float> want(rows_n * len);
            normalize_rows_f32(xf.data(), want.data(), rows_n, len, 0, 1, a);
            check_every_offset<float>(16, want,
                                      [&](float* y) { normalize_rows_f32_stream(xf.data(), y, rows_n, len, 0, 1, a); });
        }
        std::vector<float> ref2056(2 * 2056);
        normalize_rows_f32(xf.data(), ref2056.data(), 2, 2056, 0, 1, a);
        check_every_offset<float>(16, ref2056,
                                  [&](float* y) { normalize_rows_f32_stream(xf.data(), y, 2, 2056, 0, 1, a); });
        const Shape xs1030{rows_n, 1030};
        const Walk w1030(xs1030, broadcast_strides(xs1030, keepdims_shape(xs1030, reduced)),
                         param_strides(xs1030, params), kChunk);
        check_stream_chunks(xf, rows_n * 1030, w1030, true, a, a);
        // Planes: one parameter per run (along the kept axis 0, as a channel's), which the walk's
        // writer streams from the registers on AVX-512 and AVX2; centred, and uncentred (mean +0).
        const Walk planes(xs, broadcast_strides(xs, keepdims_shape(xs, reduced)), param_strides(xs, Axes{0}), kChunk);
        for (bool centred : {true, false}) {
            CAPTURE(centred);
            std::vector<double> pmean(rows_n, 0.0), plo(rows_n, 0.0);
            if (centred)
                for (std::size_t r = 0; r < rows_n; ++r) pmean[r] = 7.0 + 0.1 * r, plo[r] = 1e-9 * (r + 1.0);
            NormalizeArgs pa = a;
            pa.mean = pmean.data(), pa.mean_lo = plo.data();
            check_stream_chunks(xf, total, planes, true, pa, pa);
        }
        // Runs along which the parameters step but none is given (uniform): one a and one c, as
        // planes. Uniform means every scale is 1 and every shift 0 (NormalizeArgs), as the engine
        // passes them: the block writer of AVX2 and SSE2 reads the scale at each block's start.
        const std::vector<double> ones(n, 1.0), zeros(n, 0.0);
        const std::vector<float> zeros_f(n, 0.0f);
        NormalizeArgs u = a;
        u.scale = ones.data(), u.shift = zeros.data(), u.shift_f = zeros_f.data();
        u.uniform_scale = u.uniform_shift = true;
        check_stream_chunks(xf, total, w, true, u, u);

        check_stream_chunks(xf, total, w, false, a, a);
        check_stream_chunks(xd, total, w, false, a, a);
        // The double arithmetic's writer forms runs of 256 values or more with a fixed statistic
        // in registers on AVX-512: rows with a weight and bias, rows without them, planes, each
        // with the mean's low part, for float and double data; float16 and bfloat16 outputs
        // (rounded once from double to their format, which the register writer does not do) keep
        // the block writer.
        std::vector<double> lo_rows(rows_n);
        for (std::size_t r = 0; r < rows_n; ++r) lo_rows[r] = 3e-9 * (r + 1.0);
        NormalizeArgs dl = a;
        dl.mean_lo = lo_rows.data();
        NormalizeArgs du = dl, dh = dl, db16 = dl;
        du.scale = ones.data(), du.shift = zeros.data(), du.shift_f = zeros_f.data();
        du.uniform_scale = du.uniform_shift = true;
        dh.dtype = DType::float16;
        db16.dtype = DType::bfloat16;
        struct DoubleCase {
            const char* name;
            const Walk* walk;
            const NormalizeArgs* args;
        };
        for (const DoubleCase& dc : {DoubleCase{"rows", &w, &dl}, DoubleCase{"rows without parameters", &w, &du},
                                     DoubleCase{"planes", &planes, &dl}, DoubleCase{"float16 rows", &w, &dh},
                                     DoubleCase{"bfloat16 rows", &w, &db16}}) {
            const std::string name = dc.name;
            CAPTURE(name);
            const Walk& dw = *dc.walk;
            check_stream_chunks(xf, total, dw, false, *dc.args, *dc.args);
            if (dc.args->dtype != DType::float32) continue;
            check_stream_chunks(xd, total, dw, false, *dc.args, *dc.args);
        }
        // Float64 runs from 32 values take the register writer too (float data from 256): rows
        // of 32, 64 and 100 (ends outside whole lines), with and without parameters, float64
        // and float32 data.
        for (std::size_t len : {std::size_t{32}, std::size_t{64}, std::size_t{100}}) {
            CAPTURE(len);
            const Shape xsl{rows_n, len};
            const Walk wl(xsl, broadcast_strides(xsl, keepdims_shape(xsl, reduced)), param_strides(xsl, params),
                          kChunk);
            for (const NormalizeArgs* args : {&dl, &du}) {
                check_stream_chunks(xd, rows_n * len, wl, false, *args, *args);
                check_stream_chunks(xf, rows_n * len, wl, false, *args, *args);
            }
        }

        // The streaming writers bring x + prefetch into L2 as they go (the one-pass forwards'
        // next chunk): past x's end for the last chunk, here by a chunk and by far more. No
        // fault, no read under ASan, and not a bit changed: rows, planes, the double
        // arithmetic, with the register writers (AVX-512) and the block writer (AVX2, SSE2).
        for (std::size_t ahead : {total, std::size_t{1} << 40}) {
            CAPTURE(ahead);
            NormalizeArgs p = dl;
            p.prefetch = ahead;
            std::vector<float> want(total);
            normalize_rows_f32(xf.data(), want.data(), rows_n, n, 0, 1, dl);
            check_every_offset<float>(16, want,
                                      [&](float* y) { normalize_rows_f32_stream(xf.data(), y, rows_n, n, 0, 1, p); });
            check_stream_chunks(xf, total, planes, true, dl, p);
            check_stream_chunks(xf, total, w, false, dl, p);
        }
        set_lane_width(0);
    }
}

TEST_CASE("the channels-last forward gives the same bits on one and two threads wherever y starts in a cache line") {
    // Each thread takes its samples' moments, then their output, streamed from the first
    // whole line of y on: each of the 16 float offsets, on two threads (2 samples each)
    // against one thread. InstanceNorm over (4, 200, 140, 20): 20 channels, rows that are
    // not whole lines, 9 MB, so streamed.
    xt::random::seed(36);
    const Shape xs{4, 200, 140, 20};
    const std::size_t n = num_elements(xs), C = 20, stats = 4 * C;
    const auto l = channels_last_layout(xs, Axes{1, 2}, Axes{3});
    REQUIRE(l);
    REQUIRE(n * sizeof(float) >= kStreamBytes);
    const xt::xarray<double> xv = xt::random::randn<double>({n}) * 2.0 + 50.0;
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(xv(i));
    const xt::xarray<double> pw = xt::random::randn<double>({2 * C});
    std::vector<double> scale(C), shift(C);
    std::vector<float> shift_f(C);
    for (std::size_t c = 0; c < C; ++c) scale[c] = pw(c), shift[c] = pw(C + c), shift_f[c] = static_cast<float>(shift[c]);
    auto forward_into = [&](float* y) {
        std::vector<double> count(stats, 0.0), mean(stats, 0.0), lo(stats, 0.0), m2(stats, 0.0), rstd(stats);
        NormalizeArgs a;
        a.mean = mean.data(), a.mean_lo = lo.data(), a.rstd = rstd.data();
        a.scale = scale.data(), a.shift = shift.data(), a.shift_f = shift_f.data();
        const RawMoments raw{count.data(), mean.data(), lo.data(), m2.data()};
        channels_last_forward(x.data(), y, *l, true, raw, a, true, [&](std::size_t first, std::size_t k) {
            for (std::size_t i = first; i < first + k; ++i) rstd[i] = 1.0 / std::sqrt(m2[i] / count[i] + 1e-5);
        });
    };
    const unsigned saved = engine_threads();
    set_engine_threads(1);
    std::vector<float> ref(n);
    forward_into(ref.data());
    set_engine_threads(2);
    check_every_offset<float>(16, ref, forward_into);
    set_engine_threads(saved);
}

TEST_CASE("rows that are whole statistics (LayerNorm/RMSNorm over trailing axes) have the bits of the walk's path") {
    // Without a mask, rows of up to 16 Ki values take the row kernels (one row's moments,
    // then its output, no walk); with a mask of ones the same forward takes the masked
    // moments and the walk's output kernels, whose bits the mask of ones does not change.
    // Both must agree to the bit: y and every statistic, with the row sums at each register
    // width set_lane_width chooses (the output and the statistics' finish are compiled per
    // instruction set and follow the CPU), centred or not, with and without parameters,
    // rows of mix_rows' three kinds (shift 0, a shift, shift 0 then the second sum) and
    // outliers first, rows that fill no whole block of 16 lanes, and
    // outputs large enough to be streamed (short rows and rows longer than the 1024-value
    // block the streamed output is formed in). Parameters over part of the row, or along a
    // kept axis, take the walk in both forwards.
    xt::random::seed(35);
    struct Case {
        Shape xs;
        Axes reduced, params;
        bool weight, bias;
    };
    const std::vector<Case> cases = {
        {{6, 2}, {1}, {1}, true, true},          {{9, 5}, {1}, {1}, true, false},
        {{7, 56}, {1}, {1}, true, true},         {{3, 5, 64}, {2}, {2}, true, true},
        {{40, 100}, {1}, {1}, false, false},     {{4, 1000}, {1}, {1}, true, true},
        {{3, 1500}, {1}, {1}, true, true},       {{2, 3, 7, 9}, {2, 3}, {2, 3}, true, true},
        {{5, 33}, {1}, {}, false, false},        {{5, 33}, {1}, {}, true, false},
        {{2, 1, 17}, {2}, {2}, true, true},      {{2, 3, 7, 9}, {2, 3}, {3}, true, true},
        {{4, 6, 50}, {2}, {1}, true, true},      {{36000, 64}, {1}, {1}, true, true},
        {{2100, 1100}, {1}, {1}, true, false},
    };
    for (const Case& c : cases)
        for (bool center : {true, false})
            for (int width : {8, 4, 2})
                for (int conv = 0; conv < 3; ++conv) {  // default; unbiased variance; eps added to the std
                    CAPTURE(format_shape(c.xs));
                    CAPTURE(center);
                    CAPTURE(width);
                    CAPTURE(c.weight);
                    CAPTURE(conv);
                    const bool big = c.xs[0] > 1000;
                    if (big && (width != 8 || conv)) continue;  // the large cases check the streamed output once
                    xt::xarray<double> v = xt::random::randn<double>(c.xs);
                    mix_rows(v, c.xs.back(), 3.0, 40.0);
                    for (std::size_t i = 0; i < v.size(); i += 7 * c.xs.back()) v.data()[i] = 1e5;  // outliers first
                    const Tensor x = Tensor::from_double(v, DType::float32);
                    NormSpec spec;
                    spec.reduction_axes = c.reduced;
                    spec.param_axes = c.params;
                    spec.center = center;
                    if (conv == 1) spec.variance = VarianceEstimator::unbiased;
                    if (conv == 2) spec.eps_placement = EpsPlacement::add_to_std, spec.eps = 0.25;
                    Shape ps;
                    for (std::size_t a : c.params) ps.push_back(c.xs[a]);
                    const xt::xarray<double> w = xt::random::randn<double>(ps) + 1.0, b = xt::random::randn<double>(ps);
                    const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(c.xs);
                    ForwardInputs plain, masked;
                    plain.weight = masked.weight = c.weight ? &w : nullptr;
                    plain.bias = masked.bias = c.bias ? &b : nullptr;
                    masked.mask = &ones;
                    set_lane_width(width);
                    const ForwardResult fr = forward(x, spec, plain), fw = forward(x, spec, masked);
                    set_lane_width(0);
                    norm_test::check_same_forward(fr, fw);
                }
}

TEST_CASE("compute_moments over trailing axes (row kernels) has the bits of the walk, for any thread count") {
    // Without a mask, statistics that are contiguous rows of up to 16 Ki values take the row
    // kernels; a mask of ones sends the same call through the walk. Row lengths around the
    // 16-lane blocks, mix_rows' three kinds of rows and outliers first, LayerNorm,
    // InstanceNorm and GroupNorm layouts, float16 data (float storage), each register
    // width, one and two threads.
    xt::random::seed(37);
    struct Case {
        Shape xs;
        Axes reduced;
        DType dtype;
    };
    const std::vector<Case> cases = {
        {{5, 2}, {1}, DType::float32},           {{4, 7}, {1}, DType::float32},
        {{3, 16}, {1}, DType::float32},          {{3, 17}, {1}, DType::float32},
        {{300, 64}, {1}, DType::float32},        {{9, 768}, {1}, DType::float32},
        {{2, 1500}, {1}, DType::float32},        {{2, 4, 5, 6}, {2, 3}, DType::float32},
        {{2, 4, 5, 6}, {1, 2, 3}, DType::float32}, {{2, 3, 4, 5, 6}, {2, 3, 4}, DType::float32},
        {{3, 1, 40}, {1, 2}, DType::float32},    {{6, 33}, {1}, DType::float16},
        {{40}, {0}, DType::float32},              {{4, 5, 1, 6}, {1, 3}, DType::float32},
    };
    for (const Case& c : cases)
        for (bool center : {true, false})
            for (int width : {8, 4, 2})
                for (unsigned threads : {1u, 2u}) {
                    CAPTURE(format_shape(c.xs));
                    CAPTURE(center);
                    CAPTURE(width);
                    CAPTURE(threads);
                    xt::xarray<double> v = xt::random::randn<double>(c.xs);
                    mix_rows(v, c.xs.back(), 0.5, 300.0);
                    std::size_t n = 1;  // values per statistic
                    for (std::size_t a : c.reduced) n *= c.xs[a];
                    for (std::size_t i = 0; i < v.size(); i += 3 * n) v.data()[i] = -2e4;  // outliers first
                    const Tensor x = Tensor::from_double(v, c.dtype);
                    const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(c.xs);
                    const unsigned saved = engine_threads();
                    set_lane_width(width);
                    set_engine_threads(threads);
                    const Moments rows = compute_moments(x, c.reduced, center),
                                  walk = compute_moments(x, c.reduced, center, &ones);
                    set_engine_threads(saved);
                    set_lane_width(0);
                    CHECK(rows.mean == walk.mean);
                    CHECK(rows.mean_lo == walk.mean_lo);
                    CHECK(rows.var == walk.var);
                    CHECK(rows.count == walk.count);
                }
}

TEST_CASE("RMSNorm's row sums of squares (an FMA on AVX2 and AVX-512) keep the walk's bits at the floats' limits") {
    // The row kernels form x * x + s as one FMA where the walk (masked moments) multiplies
    // and adds: the same double only because a float's square is exact in double. Rows of
    // subnormals, of floats near the largest, of values one ulp off 1, with infinities and
    // NaN, at each register width.
    const float tiny = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::vector<float>> rows = {
        std::vector<float>(37, tiny),
        {tiny, 3 * tiny, 1e-40f, 1.17549435e-38f, 2e-38f, tiny, 5e-39f, 7 * tiny, 1e-42f, 1e-44f, 3e-39f, 1e-41f,
         tiny, 2 * tiny, 9e-40f, 4e-45f, 1e-45f},
        std::vector<float>(40, big),
        {big, -big, 3e38f, -1e38f, 1.5e38f, big, 2e38f, -3.3e38f, 1e20f, -1e-20f, big, 1e38f, -big, 7e37f, 1, big, -2e38f},
        {1.0000001f, 0.99999994f, 1.0000002f, 1, -1.0000001f, 0.9999999f, 1.0000004f, 1.0000001f, -0.99999994f, 1,
         1.0000001f, 0.99999994f, 1.0000002f, 1, -1.0000001f, 0.9999999f, 1.0000004f, 1.0000001f, -0.99999994f},
        {1, 2, inf, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
        {1, 2, 3, nan, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18},
        {-inf, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33},
    };
    for (const auto& r : rows)
        for (int width : {8, 4, 2}) {
            CAPTURE(r[0]);
            CAPTURE(r.size());
            CAPTURE(width);
            Tensor x;
            x.dtype = DType::float32;
            x.f32 = xt::xarray<float>::from_shape({std::size_t{3}, r.size()});
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t j = 0; j < r.size(); ++j) x.f32(i, j) = r[(j + 5 * i) % r.size()];
            const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(x.f32.shape());
            set_lane_width(width);
            const Moments fast = compute_moments(x, {1}, false), walk = compute_moments(x, {1}, false, &ones);
            set_lane_width(0);
            REQUIRE(fast.var.size() == 3);
            for (std::size_t i = 0; i < 3; ++i) {
                const double a = fast.var.data()[i], b = walk.var.data()[i];
                CHECK_MESSAGE((a == b || (std::isnan(a) && std::isnan(b))), a << " against " << b);
            }
        }
}

TEST_CASE("given statistics over rows (the row writer) give the bits of the walk's output") {
    // With the statistics given and no mask, rows that are whole statistics are written by
    // the forward's row writer; a mask of ones sends the same forward through the walk. Rows
    // over several chunks of 64 Ki values, cached and streamed.
    xt::random::seed(38);
    struct Case {
        Shape xs;
        Axes reduced, params;
    };
    const std::vector<Case> cases = {{{6, 2}, {1}, {1}},       {{7, 56}, {1}, {1}},          {{3, 5, 64}, {2}, {2}},
                                     {{3, 1500}, {1}, {1}},    {{2, 3, 7, 9}, {2, 3}, {2, 3}}, {{5, 33}, {1}, {}},
                                     {{3000, 64}, {1}, {1}},   {{100, 1000}, {1}, {1}},      {{36000, 64}, {1}, {1}},
                                     {{2100, 1100}, {1}, {1}}};
    for (const Case& c : cases)
        for (bool center : {true, false}) {
            CAPTURE(format_shape(c.xs));
            CAPTURE(center);
            const xt::xarray<double> v = xt::random::randn<double>(c.xs) * 3.0 + 40.0;
            const Tensor x = Tensor::from_double(v, DType::float32);
            NormSpec spec;
            spec.reduction_axes = c.reduced;
            spec.param_axes = c.params;
            spec.center = center;
            const Shape ss = keepdims_shape(c.xs, c.reduced);
            const xt::xarray<double> mean = xt::random::randn<double>(ss) + 40.0,
                                     var = xt::random::rand<double>(ss) * 9.0 + 0.5;
            Shape ps;
            for (std::size_t a : c.params) ps.push_back(c.xs[a]);
            const xt::xarray<double> w = xt::random::randn<double>(ps) + 1.0, b = xt::random::randn<double>(ps);
            const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(c.xs);
            ForwardInputs plain, masked;
            plain.weight = masked.weight = c.params.empty() ? nullptr : &w;
            plain.bias = masked.bias = c.params.empty() ? nullptr : &b;
            plain.given_mean = masked.given_mean = &mean;
            plain.given_var = masked.given_var = &var;
            masked.mask = &ones;
            const ForwardResult fr = forward(x, spec, plain), fw = forward(x, spec, masked);
            norm_test::check_same_forward(fr, fw);
        }
}

TEST_CASE("RMSNorm's float path: y = fma(x, fl(rstd * w), fl(b)) to the bit, zeros and NaN included") {
    // Without centring hi and lo are +0 and c is fl(b), and the kernels leave out the
    // subtraction of fma(x - hi, a, c): x - (+0) is x for every float. With
    // and without affine parameters (then w = 1 and b = 0, one a for the row).
    xt::random::seed(36);
    for (std::size_t n : {std::size_t{7}, std::size_t{64}, std::size_t{300}}) {
        CAPTURE(n);
        xt::xarray<double> v = xt::random::randn<double>({std::size_t{3}, n}) * 2.0;
        v(0, 0) = -0.0;
        v(0, 1) = 0.0;
        v(1, 2) = std::numeric_limits<double>::quiet_NaN();
        const Tensor x = Tensor::from_double(v, DType::float32);
        const xt::xarray<double> w = xt::random::randn<double>({n}), b = xt::random::randn<double>({n});
        for (int affine = 0; affine < 3; ++affine) {  // none; weight; weight and bias
            CAPTURE(affine);
            const bool bias = affine == 2;
            ForwardInputs in;
            in.weight = affine ? &w : nullptr;
            in.bias = bias ? &b : nullptr;
            const ForwardResult f = forward(x, row_spec(false), in);
            for (std::size_t r = 0; r < 3; ++r)
                for (std::size_t k = 0; k < n; ++k) {
                    const float a = static_cast<float>(f.rstd(r, 0) * (affine ? w(k) : 1.0));
                    const float want = std::fma(x.f32(r, k), a, bias ? static_cast<float>(b(k)) : 0.0f);
                    const float got = f.y.f32(r, k);
                    if (r == 1) {  // the NaN's row: every output NaN
                        CHECK(std::isnan(got));
                        continue;
                    }
                    CHECK(std::memcmp(&got, &want, sizeof got) == 0);
                }
        }
    }
}

TEST_CASE("BatchNorm over an empty batch (an axis of size 0): empty output, count 0, no error") {
    // Channels first (planes) and channels last: each layout's kernels would read a batch
    // that is not there; the moments return counts of 0 first.
    struct Case {
        Shape xs;
        Axes reduced, params;
    };
    for (const Case& c : {Case{{2, 3, 0, 1024}, {0, 2, 3}, {1}}, Case{{0, 3, 32, 32}, {0, 2, 3}, {1}},
                          Case{{2, 0, 8, 3}, {0, 1, 2}, {3}}, Case{{0, 8, 8, 3}, {0, 1, 2}, {3}}}) {
        CAPTURE(format_shape(c.xs));
        const Tensor x = Tensor::from_double(xt::xarray<double>::from_shape(c.xs), DType::float32);
        NormSpec spec;
        spec.reduction_axes = c.reduced;
        spec.param_axes = c.params;
        const ForwardResult f = forward(x, spec);
        CHECK(f.y.f32.size() == 0);
        REQUIRE(f.rstd.size() == 3);
        for (std::size_t k = 0; k < 3; ++k) CHECK(f.batch.count.data()[k] == 0);
    }
}

TEST_CASE("rows of an empty batch: empty outputs, no statistics, no error") {
    for (const Shape& xs : {Shape{0, 64}, Shape{2, 0, 16}}) {
        CAPTURE(format_shape(xs));
        const Tensor x = Tensor::from_double(xt::xarray<double>::from_shape(xs), DType::float32);
        NormSpec spec = row_spec(true);
        spec.reduction_axes = spec.param_axes = {xs.size() - 1};
        const xt::xarray<double> w = xt::ones<double>({xs.back()});
        ForwardInputs in;
        in.weight = &w;
        const ForwardResult f = forward(x, spec, in);
        CHECK(f.y.f32.size() == 0);
        CHECK(f.rstd.size() == 0);
    }
}

TEST_CASE("BatchNorm's planes in (N, C, ...): each plane by the row kernels, merged per channel, any threads and width") {
    // Planes of 512 values and more take row_moments per plane, then a merge per statistic
    // in outer order. Against a long double two-pass per statistic, with outliers first in
    // some planes (their shift), size-1 axes, two kept axes, and planes of 256 (the walk) as
    // a control; the bits are those of one thread and AVX-512 for every width and count.
    xt::random::seed(41);
    struct Case {
        Shape xs;
        Axes reduced;
    };
    const std::vector<Case> cases = {
        {{4, 3, 32, 16}, {0, 2, 3}},      {{3, 2, 100, 200}, {0, 2, 3}}, {{5, 4, 1, 700}, {0, 2, 3}},
        {{2, 3, 4, 40, 20}, {0, 3, 4}},   {{3, 6, 1, 2, 600}, {0, 2, 3, 4}}, {{8, 4, 16, 16}, {0, 2, 3}},
    };
    const double eps = std::numeric_limits<double>::epsilon();
    for (const Case& c : cases)
        for (double mu : {1e4, 0.0, -300.0})
            for (bool center : {true, false}) {
                CAPTURE(format_shape(c.xs));
                CAPTURE(mu);
                CAPTURE(center);
                // Every case but the last (planes of 256) is a planes layout.
                CHECK(planes_layout(c.xs, c.reduced).has_value() == (&c != &cases.back()));
                xt::xarray<double> v = xt::random::randn<double>(c.xs) + mu;
                const std::size_t plane = c.xs.back() * c.xs[c.xs.size() - 2];
                for (std::size_t i = 0; i < v.size(); i += 5 * plane) v.data()[i] = mu + 1e4;  // outliers first
                const Tensor x = Tensor::from_double(v, DType::float32);
                const Moments first = compute_moments(x, c.reduced, center);
                for (int width : {8, 4, 2})
                    for (unsigned threads : {1u, 2u}) {
                        CAPTURE(width);
                        CAPTURE(threads);
                        const unsigned saved = engine_threads();
                        set_lane_width(width);
                        set_engine_threads(threads);
                        const Moments m = compute_moments(x, c.reduced, center);
                        set_engine_threads(saved);
                        set_lane_width(0);
                        CHECK(m.mean == first.mean);
                        CHECK(m.mean_lo == first.mean_lo);
                        CHECK(m.var == first.var);
                    }
                // The statistics are the kept axes in row-major order: gather each one's values.
                const Shape ss = keepdims_shape(c.xs, c.reduced);
                const Strides sa = broadcast_strides(c.xs, ss);
                std::vector<std::vector<float>> per(first.count.size());
                for (std::size_t i = 0; i < x.size(); ++i) {
                    std::size_t rem = i, s = 0;
                    for (std::size_t d = c.xs.size(); d-- > 0;) s += (rem % c.xs[d]) * sa[d], rem /= c.xs[d];
                    per[s].push_back(x.f32.data()[i]);
                }
                for (std::size_t s = 0; s < per.size(); ++s) {
                    CAPTURE(s);
                    const std::size_t n = per[s].size();
                    REQUIRE(first.count.data()[s] == static_cast<double>(n));
                    const Ref ref = reference(per[s].data(), n);
                    long double sq = 0;
                    for (float f : per[s]) sq += static_cast<long double>(f) * f;
                    const double want_var = center ? static_cast<double>(ref.var) : static_cast<double>(sq / n);
                    const double sd = std::sqrt(static_cast<double>(ref.var));
                    if (center)
                        CHECK(std::abs(first.mean.data()[s] + first.mean_lo.data()[s] - static_cast<double>(ref.mean)) <=
                              8 * eps * (std::abs(static_cast<double>(ref.mean)) + sd));
                    CHECK(std::abs(first.var.data()[s] - want_var) <= 8 * eps * std::sqrt(static_cast<double>(n)) * want_var);
                }
            }
}

namespace {

// Values about 3 with an infinity every 97 elements from `at`: of sign `sign` (1 or -1), or
// +inf followed by -inf (sign 0), or +inf and -inf in turn, 97 elements apart (sign 2: in a
// statistic over several blocks, in different blocks); sign 3: NaN, sign 4: -NaN. (NaN and
// -NaN in one statistic give whichever an addition's operand order passes on, which the
// register widths' code does not fix.)
xt::xarray<double> with_infinities(const Shape& xs, std::size_t at, double sign) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    xt::xarray<double> v = xt::xarray<double>::from_shape(xs);
    for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] = 3.0 + 0.001 * static_cast<double>(i % 7);
    bool plus = true;
    for (std::size_t i = at; i + 1 < v.size(); i += 97, plus = !plus) {
        if (sign >= 3) v.data()[i] = sign == 3 ? nan : -nan;
        else v.data()[i] = sign == 0 ? inf : sign == 2 ? (plus ? inf : -inf) : sign * inf;
        if (sign == 0) v.data()[i + 1] = -inf;
    }
    return v;
}

struct InfCase {
    Shape xs;
    Axes reduced;
};

// Short rows, long rows (the pilot), BatchNorm's planes, channels last (BatchNorm,
// InstanceNorm, GroupNorm with channels merged per group), and each over several chunks or
// blocks, whose partial means are merged.
const std::vector<InfCase> kInfCases = {
    {{3, 17}, {1}},          {{3, 300}, {1}},          {{2, 3, 8, 8}, {0, 2, 3}}, {{2, 8, 8, 3}, {0, 1, 2}},
    {{4, 40, 64}, {1}},      {{2, 150000}, {1}},       {{8, 2, 64, 64}, {0, 2, 3}}, {{16, 64, 64, 16}, {0, 1, 2}},
    {{4, 32, 32, 8}, {1, 2}}, {{2, 16, 16, 4, 2}, {1, 2, 4}}, {{4, 128, 128, 4, 2}, {1, 2, 4}}};

}  // namespace

TEST_CASE("a statistic with an infinity has that infinity as its mean on every path") {
    // float64 numpy (and PyTorch): mean([inf, 1, 2]) = inf, var = nan; mean([inf, -inf]) =
    // nan. The shift of the one-pass sums must then be finite, or x - K gives inf - inf = nan
    // for the mean too, and so must the merges of partial means.
    for (const InfCase& c : kInfCases)
        for (std::size_t at : {std::size_t{0}, std::size_t{5}})
            for (double sign : {1.0, -1.0, 0.0, 2.0, 3.0, 4.0}) {
                const xt::xarray<double> v = with_infinities(c.xs, at, sign), want = xt::mean(v, c.reduced);
                const xt::xarray<std::uint8_t> ones = xt::ones<std::uint8_t>(c.xs);
                for (DType dt : {DType::float32, DType::float64, DType::float16, DType::bfloat16})
                    for (bool masked : {false, true})
                        for (int width : {8, 4, 2}) {
                            CAPTURE(format_shape(c.xs));
                            CAPTURE(static_cast<int>(dt));
                            CAPTURE(at);
                            CAPTURE(sign);
                            CAPTURE(masked);
                            CAPTURE(width);
                            set_lane_width(width);
                            const Moments m =
                                compute_moments(Tensor::from_double(v, dt), c.reduced, true, masked ? &ones : nullptr);
                            set_lane_width(0);
                            for (std::size_t i = 0; i < want.size(); ++i) {
                                CAPTURE(i);
                                const double a = m.mean.data()[i], b = want.data()[i];
                                if (std::isinf(b)) CHECK_MESSAGE(a == b, a << " against " << b);
                                if (std::isinf(b)) CHECK(m.mean_lo.data()[i] == 0.0);
                                if (std::isnan(b)) CHECK_MESSAGE(std::isnan(a), a << " against nan");
                                if (!std::isfinite(b)) CHECK(std::isnan(m.var.data()[i]));
                            }
                        }
            }
}

TEST_CASE("data holding infinities: the forward's output and statistics have the same bits at every width and thread count") {
    // NaN has many encodings, and where an FMA meets two NaNs AVX and the baseline's fmaf
    // pass on different ones: the moments make every NaN by arithmetic, as the data's own.
    auto bytes = [](const void* p, std::size_t n) { return std::string(static_cast<const char*>(p), n); };
    for (const InfCase& c : kInfCases)
        for (double sign : {1.0, 0.0, 2.0, 3.0, 4.0})
            for (DType dt : {DType::float32, DType::float64}) {
                CAPTURE(format_shape(c.xs));
                CAPTURE(sign);
                CAPTURE(static_cast<int>(dt));
                const Tensor x = Tensor::from_double(with_infinities(c.xs, 3, sign), dt);
                NormSpec spec;
                // assign, not =: GCC 12 warns of a null memmove in the vector's operator= here
                spec.reduction_axes.assign(c.reduced.begin(), c.reduced.end());
                std::string first;
                const unsigned saved = engine_threads();
                for (int width : {8, 4, 2})
                    for (unsigned threads : {1u, 2u, 3u}) {
                        CAPTURE(width);
                        CAPTURE(threads);
                        set_lane_width(width);
                        set_engine_threads(threads);
                        const ForwardResult r = forward(x, spec);
                        set_engine_threads(saved);
                        set_lane_width(0);
                        const std::string got =
                            (dt == DType::float32 ? bytes(r.y.f32.data(), r.y.f32.size() * sizeof(float))
                                                  : bytes(r.y.f64.data(), r.y.f64.size() * sizeof(double))) +
                            bytes(r.mean.data(), r.mean.size() * sizeof(double)) +
                            bytes(r.mean_lo.data(), r.mean_lo.size() * sizeof(double)) +
                            bytes(r.var.data(), r.var.size() * sizeof(double));
                        if (first.empty()) first = got;
                        CHECK(got == first);
                    }
            }
}
