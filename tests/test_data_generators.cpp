// The generator sources: "images" (per-channel mean/std, spatial smoothness), "tokens"
// (padded sequences with mask and lengths, embeddings, outlier dimensions) and "text"
// (real sentences). Shapes, statistics, determinism and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "data/sources.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

const std::string kData = NORMLAB_TEST_DATA;

Batch make(const std::string& json, const std::string& name = "x", std::uint64_t seed = 0) {
    DataContext c;
    c.base_dir = kData + "/text";
    c.seed = seed;
    c.dtype = DType::float64;
    return make_batch(name, Json::parse(json), JsonLocation{"cfg.json", "/data/" + name}, c);
}

struct Moments {
    double mean, std;
};
Moments channel_moments(const xt::xarray<double>& x, std::size_t c) {
    double s = 0, s2 = 0, n = 0;
    for (std::size_t i = 0; i < x.shape()[0]; ++i)
        for (std::size_t y = 0; y < x.shape()[2]; ++y)
            for (std::size_t z = 0; z < x.shape()[3]; ++z) {
                double v = x(i, c, y, z);
                s += v, s2 += v * v, n += 1;
            }
    return {s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
}
// Correlation of horizontally neighbouring pixels of channel c.
double lag1_correlation(const xt::xarray<double>& x, std::size_t c, double mean) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.shape()[0]; ++i)
        for (std::size_t y = 0; y < x.shape()[2]; ++y)
            for (std::size_t z = 0; z + 1 < x.shape()[3]; ++z) {
                num += (x(i, c, y, z) - mean) * (x(i, c, y, z + 1) - mean);
                den += (x(i, c, y, z) - mean) * (x(i, c, y, z) - mean);
            }
    return num / den;
}
std::vector<double> row(const Batch& b, std::size_t i, std::size_t t) {
    std::vector<double> v;
    for (std::size_t d = 0; d < b.x.shape()[2]; ++d) v.push_back(b.x.f64(i, t, d));
    return v;
}

}  // namespace

TEST_CASE("images: default RGB mean/std + i.i.d. pixels without smooth") {
    Batch b = make(R"({"source": "images", "shape": [8, 3, 32, 32]})");
    CHECK(b.x.shape() == Shape{8, 3, 32, 32});
    CHECK(b.channel_axis == 1);
    const double means[3] = {0.485, 0.456, 0.406}, stds[3] = {0.229, 0.224, 0.225};
    for (std::size_t c = 0; c < 3; ++c) {
        auto m = channel_moments(b.x.f64, c);
        CHECK(m.mean == doctest::Approx(means[c]).epsilon(0.03));  // se 0.0025 -> 5 sigma ~ 0.013
        CHECK(m.std == doctest::Approx(stds[c]).epsilon(0.04));
        CHECK(std::fabs(lag1_correlation(b.x.f64, c, m.mean)) < 0.05);
    }
    Batch g = make(R"({"source": "images", "shape": [4, 1, 16, 16]})");
    CHECK(channel_moments(g.x.f64, 0).mean == doctest::Approx(0.449).epsilon(0.05));
}

TEST_CASE("images: smooth keeps the channel statistics and correlates neighbours") {
    Batch b = make(R"({"source": "images", "shape": [16, 3, 64, 64], "channel_mean": [0.48, 0.46, 0.41], "channel_std": [0.23, 0.22, 0.23], "smooth": 4})");
    for (std::size_t c = 0; c < 3; ++c) {
        auto m = channel_moments(b.x.f64, c);
        const double mean = c == 0 ? 0.48 : c == 1 ? 0.46 : 0.41, sd = c == 1 ? 0.22 : 0.23;
        CHECK(std::fabs(m.mean - mean) < 0.06);        // ~330 independent blobs per channel
        CHECK(m.std == doctest::Approx(sd).epsilon(0.15));
        // Gaussian kernel sigma 4: neighbour correlation exp(-1 / (4 sigma^2)) = 0.984.
        CHECK(lag1_correlation(b.x.f64, c, m.mean) > 0.95);
    }
    Batch again = make(R"({"source": "images", "shape": [16, 3, 64, 64], "channel_mean": [0.48, 0.46, 0.41], "channel_std": [0.23, 0.22, 0.23], "smooth": 4})");
    CHECK(again.x.f64 == b.x.f64);
    Batch clipped = make(R"({"source": "images", "shape": [2, 3, 8, 8], "channel_std": [1, 1, 1], "clip": true})");
    for (double v : clipped.x.f64) REQUIRE((v >= 0 && v <= 1));
    // Larger sigma than the image: the folded ring kernel still gives unit variance.
    Batch wide = make(R"({"source": "images", "shape": [64, 1, 4, 4], "channel_mean": [0], "channel_std": [1], "smooth": 10})");
    CHECK(channel_moments(wide.x.f64, 0).std == doctest::Approx(1).epsilon(0.2));
}

TEST_CASE("images: errors") {
    CHECK_THROWS_WITH_AS(make(R"({"source": "images", "shape": [3, 32, 32]})"),
                         "cfg.json: /data/x/shape: images need a shape [N, C, H, W], but got [3, 32, 32]", InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "images", "shape": [1, 3, 4, 4], "channel_mean": [0.5, 0.5]})"),
                         "cfg.json: /data/x/channel_mean: expected 3 values (one per channel, C = 3), but got 2",
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "images", "shape": [1, 1, 4, 4], "channel_std": [-0.1]})"),
                         doctest::Contains("/data/x/channel_std/0: channel_std must be >= 0"), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "images", "shape": [1, 1, 4, 4], "smooth": -1})"),
                         doctest::Contains("/data/x/smooth: smooth (the correlation length in pixels) must be in"),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "images", "shape": [1, 1, 4, 4], "smoth": 1})"),
                         doctest::Contains("unknown key \"smoth\"; did you mean \"smooth\"?"), InputError);
    // Two channels: not RGB, so every channel gets the grey defaults.
    CHECK(make(R"({"source": "images", "shape": [1, 2, 4, 4]})").x.shape() == Shape{1, 2, 4, 4});
}

TEST_CASE("tokens: the documented example: shape + mask + lengths + zero padding") {
    Batch b = make(R"({"source": "tokens", "batch": 4, "max_len": 12, "dim": 16, "lengths": [3, 7, 12, 5], "vocab": 100, "pad_value": 0, "padding_side": "right"})");
    REQUIRE(b.x.shape() == Shape{4, 12, 16});
    CHECK(b.channel_axis == 2);
    CHECK(b.lengths == std::vector<std::size_t>{3, 7, 12, 5});
    REQUIRE(b.mask.shape() == std::vector<std::size_t>{4, 12, 1});
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t t = 0; t < 12; ++t) {
            const bool real = t < b.lengths[i];
            CHECK(b.mask(i, t, 0) == (real ? 1 : 0));
            if (!real)
                for (double v : row(b, i, t)) REQUIRE(v == 0.0);
        }
    CHECK(b.pad_fraction() == doctest::Approx(1.0 - 27.0 / 48.0));
    CHECK(row(b, 0, 0) != row(b, 0, 1));  // different tokens (1 chance in 100 of a clash)
}

TEST_CASE("tokens: drawn lengths + left padding + repeated tokens share a vector") {
    Batch r = make(R"({"source": "tokens", "batch": 32, "max_len": 64, "dim": 512, "min_len": 8})");
    CHECK(r.x.shape() == Shape{32, 64, 512});
    std::size_t distinct = 0, prev = 0;
    for (std::size_t l : r.lengths) {
        CHECK(l >= 8);
        CHECK(l <= 64);
        distinct += l != prev;
        prev = l;
    }
    CHECK(distinct > 10);
    CHECK(r.pad_fraction() > 0.2);
    CHECK(r.pad_fraction() < 0.8);
    CHECK(make(R"({"source": "tokens", "batch": 32, "max_len": 64, "dim": 512, "min_len": 8})").x.f64 == r.x.f64);
    CHECK(make(R"({"source": "tokens", "batch": 32, "max_len": 64, "dim": 512, "min_len": 8})", "y").x.f64 != r.x.f64);

    Batch l = make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "lengths": [1, 3], "padding_side": "left", "vocab": 1, "pad_value": "learned"})");
    CHECK(l.mask(0, 0, 0) == 0);
    CHECK(l.mask(0, 3, 0) == 1);
    CHECK(l.mask(1, 0, 0) == 0);
    CHECK(l.mask(1, 1, 0) == 1);
    // vocab 1: every real position is token 0, every pad position the learned pad vector.
    CHECK(row(l, 0, 3) == row(l, 1, 1));
    CHECK(row(l, 1, 1) == row(l, 1, 3));
    CHECK(row(l, 0, 0) == row(l, 1, 0));
    CHECK(row(l, 0, 0) != row(l, 0, 3));
    CHECK(row(l, 0, 0) != std::vector<double>{0, 0, 0});
    Batch v = make(R"({"source": "tokens", "batch": 1, "max_len": 2, "dim": 3, "lengths": [1], "pad_value": [1, 2, 3]})");
    CHECK(row(v, 0, 1) == std::vector<double>{1, 2, 3});
    Batch e = make(R"({"source": "tokens", "batch": 2, "max_len": 3, "dim": 2, "lengths": [0, 0]})");
    CHECK(e.pad_fraction() == 1.0);
}

TEST_CASE("tokens: scale + offset and outlier dimensions") {
    Batch b = make(R"({"source": "tokens", "batch": 64, "max_len": 32, "dim": 8, "vocab": 1000, "min_len": 32, "scale": 2, "offset": [0, 0, 0, 0, 0, 0, 5, -5], "outlier_dims": [-1], "outlier_scale": 10})");
    for (std::size_t d = 0; d < 8; ++d) {
        double s = 0, s2 = 0, n = 0;
        for (std::size_t i = 0; i < 64; ++i)
            for (std::size_t t = 0; t < 32; ++t) s += b.x.f64(i, t, d), s2 += b.x.f64(i, t, d) * b.x.f64(i, t, d), n += 1;
        const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
        CAPTURE(d);
        CHECK(sd == doctest::Approx(d == 7 ? 20.0 : 2.0).epsilon(0.15));  // ~870 distinct tokens
        CHECK(std::fabs(mean - (d == 6 ? 5 : d == 7 ? -5 : 0)) < 0.2 * sd);
    }
}

TEST_CASE("tokens: errors") {
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "lengths": [1]})"),
                         "cfg.json: /data/x/lengths: expected 2 lengths (one per sequence, batch = 2), but got 1",
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "lengths": [1, 5]})"),
                         "cfg.json: /data/x/lengths/1: a length must be in 0..4 (max_len), but got 5", InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "lengths": [1, 2], "min_len": 1})"),
                         doctest::Contains("/data/x: give either \"lengths\" or \"min_len\""), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "min_len": 5})"),
                         doctest::Contains("/data/x/min_len: min_len must be in 0..4"), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 0, "max_len": 4, "dim": 3})"),
                         doctest::Contains("/data/x/batch: batch must be a positive integer"), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4})"),
                         doctest::Contains("/data/x: missing required key \"dim\""), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "vocab": 0})"),
                         doctest::Contains("/data/x/vocab: vocab must be a positive integer"), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "mask": "m.npy"})"),
                         doctest::Contains("/data/x/mask: unknown key \"mask\""), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "scale": [1, 2]})"),
                         doctest::Contains("/data/x/scale: expected 3 numbers (one per dimension, dim = 3), but got 2"),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "outlier_dims": [3]})"),
                         doctest::Contains("/data/x/outlier_dims/0: outlier dimension 3 out of range for features of dim 3 (valid: -3 to 2)"),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "outlier_scale": 3})"),
                         doctest::Contains("/data/x/outlier_scale: \"outlier_scale\" applies to \"outlier_dims\""),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "pad_value": "zero"})"),
                         doctest::Contains("/data/x/pad_value: expected a number, \"learned\" or a list of 3 numbers"),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "tokens", "batch": 2, "max_len": 4, "dim": 3, "padding_side": "both"})"),
                         doctest::Contains("/data/x/padding_side: unknown value \"both\""), InputError);
}

TEST_CASE("text: sentences as padded sequences + vocabulary shared across sentences") {
    Batch b = make(R"({"source": "text", "path": "small.txt", "dim": 8})");
    REQUIRE(b.x.shape() == Shape{7, 6, 8});
    CHECK(b.channel_axis == 2);
    CHECK(b.lengths == std::vector<std::size_t>{2, 5, 2, 3, 4, 6, 5});
    CHECK(b.mask(5, 5, 0) == 1);
    CHECK(b.mask(0, 2, 0) == 0);
    CHECK(row(b, 1, 3) == row(b, 2, 0));  // "is" in sentences 2 and 3
    CHECK(row(b, 5, 0) == row(b, 5, 3));  // "a" twice in sentence 6
    CHECK(row(b, 1, 3) != row(b, 2, 1));
    for (double v : row(b, 0, 5)) CHECK(v == 0.0);  // padding
    Batch t = make(R"({"source": "text", "path": "small.txt", "dim": 4, "max_len": 3, "max_sentences": 2})");
    CHECK(t.x.shape() == Shape{2, 3, 4});
    CHECK(t.lengths == std::vector<std::size_t>{2, 3});
    Batch l = make(R"({"source": "text", "path": "small.txt", "dim": 4, "split": "lines", "padding_side": "left"})");
    CHECK(l.x.shape() == Shape{5, 7, 4});
    CHECK(l.mask(0, 0, 0) == 1);
    CHECK(l.mask(1, 0, 0) == 1);  // "is it? yes, e.g. this one": 7 words, no padding
    CHECK(l.mask(2, 4, 0) == 0);  // "spans lines.": 2 words, left padded
    CHECK(l.mask(2, 5, 0) == 1);
}

TEST_CASE("text: the real prose") {
    Batch p = make(R"({"source": "text", "path": "../../../configs/data/prose.txt", "dim": 64, "max_sentences": 32})");
    std::size_t shortest = 1000, longest = 0;
    for (auto l : p.lengths) shortest = std::min(shortest, l), longest = std::max(longest, l);
    CHECK(p.x.shape() == Shape{32, longest, 64});
    CHECK(shortest < 10);
    CHECK(longest > 20);
    CHECK(p.pad_fraction() > 0.2);
}

TEST_CASE("text: max_len caps T, it does not pad beyond the longest kept sentence") {
    // small.txt's first two sentences have 2 and 5 words.
    Batch big = make(R"({"source": "text", "path": "small.txt", "dim": 4, "max_sentences": 2, "max_len": 40})");
    CHECK(big.x.shape() == Shape{2, 5, 4});
    CHECK(big.lengths == std::vector<std::size_t>{2, 5});
    Batch cut = make(R"({"source": "text", "path": "small.txt", "dim": 4, "max_sentences": 2, "max_len": 2})");
    CHECK(cut.x.shape() == Shape{2, 2, 4});
    CHECK(cut.lengths == std::vector<std::size_t>{2, 2});
}

TEST_CASE("text: errors") {
    CHECK_THROWS_WITH_AS(make(R"({"source": "text", "path": "missing.txt", "dim": 4})"),
                         ("cfg.json: /data/x/path: " + kData + "/text/missing.txt: no such file").c_str(), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "text", "path": "no_words.txt", "dim": 4})"),
                         doctest::Contains(("/data/x/path: " + kData + "/text/no_words.txt: no words found").c_str()),
                         InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "text", "path": "small.txt", "dim": 4, "max_len": 0})"),
                         doctest::Contains("/data/x/max_len: max_len must be a positive integer"), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "text", "path": "small.txt", "dim": 4, "split": "words"})"),
                         doctest::Contains("/data/x/split: unknown value \"words\""), InputError);
    CHECK_THROWS_WITH_AS(make(R"({"source": "text", "path": ["small.txt"], "dim": 4})"),
                         doctest::Contains("/data/x/path: expected a file path string"), InputError);
}
