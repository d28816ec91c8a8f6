// make_batch for the foundation sources (values, gaussian, npy) and the common keys
// (channel_axis, mask, lengths): shapes, determinism, and the error messages with their
// JSON pointers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>

#include "data/masks.hpp"
#include "data/npy.hpp"
#include "data/sources.hpp"
#include "tensor/errors.hpp"

using namespace normlab;

namespace {

DataContext test_ctx(DType d = DType::float32, std::uint64_t seed = 0) {
    DataContext c;
    c.base_dir = std::string(NORMLAB_TEST_DATA) + "/npy";
    c.seed = seed;
    c.dtype = d;
    return c;
}

Batch batch(const std::string& json, const DataContext& ctx = test_ctx(), const std::string& name = "x") {
    return make_batch(name, Json::parse(json), JsonLocation{"cfg.json", "/data/" + name}, ctx);
}

// "cfg.json: /data/x/<key>: <fixture dir>/<rest>": how loader errors are prefixed.
std::string at(const std::string& key, const std::string& rest) {
    return "cfg.json: /data/x/" + key + ": " + std::string(NORMLAB_TEST_DATA) + "/npy/" + rest;
}

xt::xarray<double> mask_of(const Batch& b) { return xt::cast<double>(b.mask); }

// (B, T) -> (B, T, 1): brace-initialising an xarray with {{{1}, ...}} is ambiguous.
xt::xarray<double> trailing_one(xt::xarray<double> m) {
    m.reshape({m.shape()[0], m.shape()[1], 1});
    return m;
}

}  // namespace

TEST_CASE("make_batch: source key") {
    CHECK_THROWS_WITH_AS(batch(R"({"shape": [2]})"), "cfg.json: /data/x: missing required key \"source\"",
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gausian"})"),
                         doctest::Contains("/data/x/source: unknown value \"gausian\" (expected one of: "
                                           "gaussian, values, images, tokens, text, npy, csv, image_files); did you mean \"gaussian\"?"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": 3})"), doctest::Contains("/data/x/source: expected a string"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shap": [2, 3]})"),
                         doctest::Contains("/data/x/shap: unknown key \"shap\"; did you mean \"shape\"?"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"([1, 2])"), doctest::Contains("/data/x: expected an object"), InputError);
    const auto& names = data_source_names();
    CHECK(std::find(names.begin(), names.end(), "gaussian") != names.end());
    CHECK(std::find(names.begin(), names.end(), "values") != names.end());
    CHECK(std::find(names.begin(), names.end(), "npy") != names.end());
}

TEST_CASE("values: shape is the nesting - values rounded to the run dtype") {
    Batch b = batch(R"({"source": "values", "values": [[1, 2, 3, 4]]})");
    CHECK(b.x.shape() == Shape{1, 4});
    CHECK(b.source == "values");
    CHECK(b.name == "x");
    CHECK(b.channel_axis == 1);
    CHECK(!b.has_mask());
    CHECK(b.x.dtype == DType::float32);
    Batch c = batch(R"({"source": "values", "values": [[[0.1], [2]], [[3], [4]]]})");
    CHECK(c.x.shape() == Shape{2, 2, 1});
    CHECK(c.x.to_double()(0, 0, 0) == static_cast<double>(0.1f));
    Batch d = batch(R"({"source": "values", "values": [[0.1]]})", test_ctx(DType::float64));
    CHECK(d.x.to_double()(0, 0) == 0.1);
    Batch h = batch(R"({"source": "values", "values": [[0.1]]})", test_ctx(DType::float16));
    CHECK(h.x.to_double()(0, 0) == round_to(DType::float16, 0.1));
    // Rank 1: the only axis holds the features.
    CHECK(batch(R"({"source": "values", "values": [1, 2, 3]})").channel_axis == 0);
}

TEST_CASE("values: errors at the pointer of the offending element") {
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[1, 2, 3], [4, 5]]})"),
                         "cfg.json: /data/x/values/1: ragged nested list: this list has 2 elements, "
                         "but /data/x/values/0 has 3",
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[1, 2], 3]})"),
                         doctest::Contains("/data/x/values/1: ragged nested list: expected a list of 2"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[1, [2]], [3, 4]]})"),
                         doctest::Contains("/data/x/values/0/1: ragged nested list: expected a number"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[1, "2"]]})"),
                         "cfg.json: /data/x/values/0/1: expected a number, but got string \"2\" (as a number, JSON "
                         "writes it 2, without quotes)",
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[1, true]]})"),
                         doctest::Contains("/data/x/values/0/1: expected a number, but got boolean"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": 3})"),
                         doctest::Contains("/data/x/values: expected a nested list of numbers, but got integer 3"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": []})"),
                         doctest::Contains("/data/x/values: empty list"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [[]]})"),
                         doctest::Contains("/data/x/values/0: empty list"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values"})"),
                         doctest::Contains("missing required key \"values\""), InputError);
}

TEST_CASE("gaussian: shape + moments + determinism per name and seed") {
    Batch b = batch(R"({"source": "gaussian", "shape": [32, 64, 50], "mean": 10, "std": 5, "channel_axis": -1})");
    CHECK(b.x.shape() == Shape{32, 64, 50});
    CHECK(b.channel_axis == 2);
    xt::xarray<double> v = b.x.to_double();
    double sum = 0, sum2 = 0;
    for (double x : v) sum += x, sum2 += x * x;
    double n = static_cast<double>(v.size()), mean = sum / n, var = sum2 / n - mean * mean;
    CHECK(mean == doctest::Approx(10).epsilon(0.01));
    CHECK(std::sqrt(var) == doctest::Approx(5).epsilon(0.01));

    const std::string spec = R"({"source": "gaussian", "shape": [4, 3]})";
    Batch a1 = batch(spec), a2 = batch(spec);
    CHECK(a1.x.f32 == a2.x.f32);
    CHECK(batch(spec, test_ctx(DType::float32, 0), "y").x.f32 != a1.x.f32);
    CHECK(batch(spec, test_ctx(DType::float32, 1)).x.f32 != a1.x.f32);
    // Recorded from one run: the first values of entry "x" under seed 0, float64.
    Batch f = batch(spec, test_ctx(DType::float64));
    CHECK(f.x.f64(0, 0) == 0.47249843206350928);
    CHECK(f.x.f64(0, 1) == -0.43170175550220607);
    // float32 is the float64 stream rounded.
    CHECK(a1.x.to_double()(0, 0) == static_cast<double>(static_cast<float>(f.x.f64(0, 0))));
    // std 0 is allowed and gives the mean.
    Batch z = batch(R"({"source": "gaussian", "shape": [2], "mean": 3, "std": 0})");
    CHECK(z.x.to_double() == xt::xarray<double>{3, 3});
}

TEST_CASE("gaussian: errors") {
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 0]})"),
                         "cfg.json: /data/x/shape/1: dimensions must be positive, but got 0", InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [-2]})"),
                         doctest::Contains("/data/x/shape/0: dimensions must be positive, but got -2"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": []})"),
                         doctest::Contains("/data/x/shape: expected at least one dimension"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2.5]})"),
                         doctest::Contains("/data/x/shape/0: expected an integer"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian"})"),
                         doctest::Contains("missing required key \"shape\""), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2], "std": -1})"),
                         doctest::Contains("/data/x/std: std must be >= 0"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2], "mean": "0"})"),
                         doctest::Contains("/data/x/mean: expected a number"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [4294967296, 4294967296, 4294967296]})"),
                         doctest::Contains("/data/x/shape: shape has too many elements"), InputError);
}

TEST_CASE("channel_axis: negative allowed + out of range is an error at its pointer") {
    CHECK(batch(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -2})").channel_axis == 1);
    CHECK(batch(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": 0})").channel_axis == 0);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 3], "channel_axis": 2})"),
                         "cfg.json: /data/x/channel_axis: channel_axis for data of shape [2, 3]: axis 2 "
                         "out of range for input of rank 2",
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 3], "channel_axis": -3})"),
                         doctest::Contains("/data/x/channel_axis:"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 3], "channel_axis": "1"})"),
                         doctest::Contains("/data/x/channel_axis: expected an integer"), InputError);
}

TEST_CASE("npy source: path against base_dir + dtype rounding + errors naming file and pointer") {
    Batch b = batch(R"({"source": "npy", "path": "hidden.npy", "channel_axis": -1})");
    CHECK(b.x.shape() == Shape{2, 3, 4});
    CHECK(b.channel_axis == 2);
    CHECK(b.x.to_double()(1, 2, 3) == 23.0 / 8);
    Batch abs = batch(R"({"source": "npy", "path": ")" + std::string(NORMLAB_TEST_DATA) + R"(/npy/float64.npy"})");
    CHECK(abs.x.shape() == Shape{2, 3});
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "missing.npy"})"),
                         doctest::Contains(at("path", "missing.npy: no such file").c_str()),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "complex64.npy"})"),
                         doctest::Contains(at("path", "complex64.npy: unsupported dtype '<c8'").c_str()),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "truncated.npy"})"),
                         doctest::Contains(at("path", "truncated.npy: truncated").c_str()), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "scalar.npy"})"),
                         doctest::Contains("/data/x: data must have at least one axis"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy"})"), doctest::Contains("missing required key \"path\""),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": 3})"),
                         doctest::Contains("/data/x/path: expected a file path string"), InputError);
}

TEST_CASE("mask: BT for BTD stored as BT1 - full shape accepted - broadcastable shapes expanded - others rejected") {
    Batch b = batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_bool.npy", "channel_axis": -1})");
    REQUIRE(b.has_mask());
    CHECK(b.mask.shape() == std::vector<std::size_t>{2, 3, 1});
    CHECK(mask_of(b) == trailing_one({{1, 1, 0}, {1, 0, 0}}));
    CHECK(b.pad_fraction() == doctest::Approx(0.5));
    Batch u = batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_u8.npy", "channel_axis": -1})");
    CHECK(mask_of(u) == trailing_one({{1, 1, 1}, {1, 1, 0}}));
    // With the channel axis 1 the mask (2, 3) does not fit (2, 3, 4): it would need (2, 4).
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_bool.npy"})"),
                         "cfg.json: /data/x/mask: mask of shape [2, 3] does not fit data of shape [2, 3, 4] "
                         "with channel axis 1: a mask must broadcast to the data's shape without its channel axis "
                         "[2, 4] (the same rank, with 1 where it does not vary, or fewer axes that match the leading "
                         "ones, as a (B, T) sequence mask does), or to the data's shape [2, 3, 4]",
                         InputError);
    CHECK(batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_wrong_shape.npy"})").mask.shape() ==
          std::vector<std::size_t>{2, 1, 4});
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_wrong_shape.npy", "channel_axis": -1})"),
                         doctest::Contains("mask of shape [2, 4] does not fit data of shape [2, 3, 4]"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "mask": "mask_bad_values.npy", "channel_axis": -1})"),
                         doctest::Contains("/data/x/mask: mask values must be 0 or 1 (or bool), but element 1"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "mask": "nope.npy", "channel_axis": -1})"),
                         doctest::Contains(at("mask", "nope.npy: no such file").c_str()),
                         InputError);
    // A full-shape mask on generated data.
    Batch g = batch(R"({"source": "gaussian", "shape": [2, 3], "mask": "bool.npy"})");
    CHECK(g.mask.shape() == std::vector<std::size_t>{2, 3});
}

TEST_CASE("mask: shapes that broadcast (numpy rules, lower ranks on the leading axes) are expanded") {
    // Data (1, 2, 3, 4) with channels last: without the channel axis (1, 2, 3).
    const Shape xs{1, 2, 3, 4};
    xt::xarray<double> m121 = xt::zeros<double>({1, 2, 1});  // one flag per time step
    m121(0, 0, 0) = 1;
    xt::xarray<std::uint8_t> e = fit_mask(m121, xs, 3);
    CHECK(e.shape() == std::vector<std::size_t>{1, 2, 3, 1});
    for (std::size_t h = 0; h < 3; ++h) CHECK((e(0, 0, h, 0) == 1 && e(0, 1, h, 0) == 0));
    xt::xarray<double> seq = xt::zeros<double>({1, 2});  // a (B, T) mask, read as (1, 2, 1)
    seq(0, 0) = 1;
    CHECK(fit_mask(seq, xs, 3) == e);
    xt::xarray<double> full = xt::ones<double>({1, 1, 1, 4});  // the data's rank, per channel
    full(0, 0, 0, 2) = 0;
    xt::xarray<std::uint8_t> ef = fit_mask(full, xs, 3);
    CHECK(ef.shape() == std::vector<std::size_t>{1, 2, 3, 4});
    CHECK(ef(0, 1, 2, 2) == 0);
    CHECK(ef(0, 1, 2, 3) == 1);
    // Not broadcastable: a size that is neither the data's nor 1, or too many axes.
    CHECK_THROWS_WITH_AS(fit_mask(xt::ones<double>({1, 3}), xs, 3),
                         doctest::Contains("mask of shape [1, 3] does not fit data of shape [1, 2, 3, 4]"), InputError);
    CHECK_THROWS_AS(fit_mask(xt::ones<double>({1, 2, 3, 4, 1}), xs, 3), InputError);
}

TEST_CASE("lengths: right and left padding masks for BTD") {
    Batch b = batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2, 0], "channel_axis": -1})");
    CHECK(mask_of(b) == trailing_one({{1, 1, 0}, {0, 0, 0}}));
    CHECK(b.lengths == std::vector<std::size_t>{2, 0});
    Batch l = batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [1, 3], "padding_side": "left", "channel_axis": -1})");
    CHECK(mask_of(l) == trailing_one({{0, 0, 1}, {1, 1, 1}}));
    // (N, C, L): lengths count along the last axis.
    Batch n = batch(R"({"source": "gaussian", "shape": [2, 4, 3], "lengths": [3, 1]})");
    xt::xarray<double> expected_n = {{1, 1, 1}, {1, 0, 0}};
    expected_n.reshape({2, 1, 3});
    CHECK(mask_of(n) == expected_n);

    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2, 4], "channel_axis": -1})"),
                         "cfg.json: /data/x/lengths: length 4 of sequence 1 exceeds the sequence axis of size 3",
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2], "channel_axis": -1})"),
                         doctest::Contains("/data/x/lengths: got 1 length for a batch of 2 sequences"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2, -1], "channel_axis": -1})"),
                         doctest::Contains("/data/x/lengths/1: a length must be >= 0"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 3], "lengths": [1, 1]})"),
                         doctest::Contains("/data/x/lengths: lengths need data with a sample axis 0"),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [1, 1], "mask": "mask_u8.npy", "channel_axis": -1})"),
                         doctest::Contains("/data/x: give either \"mask\" or \"lengths\", not both"), InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "padding_side": "left"})"),
                         doctest::Contains("/data/x/padding_side: \"padding_side\" applies to \"lengths\""),
                         InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [1, 1], "padding_side": "up", "channel_axis": -1})"),
                         doctest::Contains("/data/x/padding_side: unknown value \"up\""), InputError);
}

TEST_CASE("generated sources fill padded positions with pad_value (default 0), as tokens does") {
    // (B, T, D) with lengths: every value of a padded step is pad_value, real steps are drawn.
    Batch g = batch(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -1, "mean": 5, "lengths": [3, 1]})");
    for (std::size_t t = 1; t < 3; ++t)
        for (std::size_t d = 0; d < 4; ++d) CHECK(g.x.f32(1, t, d) == 0.0f);
    std::size_t zeros_in_real = 0;
    for (std::size_t d = 0; d < 4; ++d) zeros_in_real += g.x.f32(0, 2, d) == 0.0f;
    CHECK(zeros_in_real == 0);
    // The real values are those of the unpadded batch (padding does not shift the draws).
    Batch plain = batch(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -1, "mean": 5})");
    CHECK(g.x.f32(0, 2, 3) == plain.x.f32(0, 2, 3));
    CHECK(g.x.f32(1, 0, 1) == plain.x.f32(1, 0, 1));
    // pad_value and left padding, in float64.
    Batch l = batch(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -1, "lengths": [1, 3],
                        "padding_side": "left", "pad_value": -2.5})", test_ctx(DType::float64));
    CHECK(l.x.f64(0, 0, 0) == -2.5);
    CHECK(l.x.f64(0, 1, 3) == -2.5);
    CHECK(l.x.f64(0, 2, 0) != -2.5);
    // (N, C, L): padding runs along L for every channel.
    Batch n = batch(R"({"source": "gaussian", "shape": [2, 4, 3], "lengths": [3, 1], "pad_value": 7})");
    for (std::size_t c = 0; c < 4; ++c) CHECK(n.x.f32(1, c, 2) == 7.0f);
    // A mask file on generated images, (N, H, W): masked pixels get pad_value in every channel.
    const auto dir = std::filesystem::temp_directory_path() / ("normlab_pad_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    write_file_bytes(dir / "m.npy", npy_bytes_u8(xt::xarray<std::uint8_t>{{{1, 0, 1}}, {{0, 1, 1}}}));
    Batch im = batch(R"({"source": "images", "shape": [2, 3, 1, 3], "pad_value": 0.5, "mask": ")" + (dir / "m.npy").string() + "\"}");
    for (std::size_t c = 0; c < 3; ++c) {
        CHECK(im.x.f32(0, c, 0, 1) == 0.5f);
        CHECK(im.x.f32(1, c, 0, 0) == 0.5f);
        CHECK(im.x.f32(0, c, 0, 0) != 0.5f);
    }
    std::filesystem::remove_all(dir);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "gaussian", "shape": [2, 3], "pad_value": 1})"),
                         "cfg.json: /data/x/pad_value: \"pad_value\" applies to \"mask\" or \"lengths\", which is not given",
                         InputError);
    // Loaded data is the user's own: a mask does not change it, and pad_value is not a key there.
    Batch own = batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2, 0], "channel_axis": -1})");
    Batch own_plain = batch(R"({"source": "npy", "path": "hidden.npy", "channel_axis": -1})");
    CHECK(own.x.f32 == own_plain.x.f32);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "npy", "path": "hidden.npy", "lengths": [2, 0], "channel_axis": -1, "pad_value": 0})"),
                         doctest::Contains("/data/x/pad_value: unknown key \"pad_value\""), InputError);
}

TEST_CASE("values: \"nan\", \"inf\" and \"-inf\" are the non-finite numbers, as reports write them") {
    Batch v = batch(R"({"source": "values", "values": [["nan", "inf", "-inf", 2]]})", test_ctx(DType::float64));
    CHECK(std::isnan(v.x.f64(0, 0)));
    CHECK(v.x.f64(0, 1) == std::numeric_limits<double>::infinity());
    CHECK(v.x.f64(0, 2) == -std::numeric_limits<double>::infinity());
    CHECK(v.x.f64(0, 3) == 2.0);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "values", "values": [["Inf", 1]]})"),
                         "cfg.json: /data/x/values/0/0: expected a number, but got string \"Inf\" (JSON has no NaN or infinity: "
                         "write the strings \"nan\", \"inf\" or \"-inf\", which normlab reads as those numbers wherever a config "
                         "gives a number)",
                         InputError);
    // Read as numbers everywhere, but a generator's parameters must be finite: a token scale
    // or an image channel mean of inf would only draw a feature or channel of inf.
    CHECK_THROWS_WITH_AS(batch(R"({"source": "tokens", "batch": 1, "max_len": 2, "dim": 2, "scale": ["inf", 1], "lengths": [2]})"),
                         "cfg.json: /data/x/scale/0: scale must be finite, but got inf", InputError);
    CHECK_THROWS_WITH_AS(batch(R"({"source": "images", "shape": [1, 1, 2, 2], "channel_mean": ["-inf"]})"),
                         "cfg.json: /data/x/channel_mean/0: channel_mean must be finite, but got -inf", InputError);
}
