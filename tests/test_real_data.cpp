// The four real-data configs run from the command line and show the effects they are for.
#include <doctest/doctest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "analysis_util.hpp"
#include "cli_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

fs::path run_shipped(const std::string& name) {
    fs::path out = fresh_dir("real_" + name) / "out";
    CliResult r = run_normlab("run " + std::string(NORMLAB_SOURCE_DIR) + "/configs/" + name + ".json --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

}  // namespace

TEST_CASE("real photos: 32x32 tiles of two photographs") {
    fs::path out = run_shipped("real_photos");
    std::string shapes = read_text(out / "stats_shapes.csv");
    CHECK(shapes.find("photos,bn,batchnorm,\"[520,3,32,32]\",\"[0,2,3]\",\"[1,3,1,1]\",3,") != std::string::npos);
    CHECK(shapes.find("photos,ln,layernorm,\"[520,3,32,32]\",\"[1,2,3]\",\"[520,1,1,1]\",520,3072") != std::string::npos);
    CHECK(shapes.find("photos,in,instancenorm,\"[520,3,32,32]\",\"[2,3]\",\"[520,3,1,1]\",1560,1024") != std::string::npos);
    auto var = normlab::read_npy(out / "arrays/photos/in/var.npy").values;
    double lo = 1e9;
    for (double v : var) lo = std::min(lo, v);
    CHECK(lo >= 0);
}

TEST_CASE("real digits: constant border pixels are zero-variance groups for per-pixel BatchNorm") {
    fs::path out = run_shipped("real_digits");
    const auto apply = parse_csv(read_text(out / "apply.csv"));
    const auto bn = one(apply, {{"data", "digits_flat"}, {"norm", "bn_pixels"}});
    CHECK(num(bn, "out_std_min") == 0.0);  // a constant pixel stays constant (0)
    CHECK(num(bn, "out_rms_min") == 0.0);
    CHECK(num(bn, "out_std_max") > 0.99);
    // eps 0: PyTorch's BatchNorm takes rstd = 0 where the variance is 0 too, so a constant
    // pixel stays 0; Keras's divides 0 by 0.
    const auto eps0 = one(apply, {{"data", "digits_flat"}, {"norm", "bn_pixels_eps0"}});
    CHECK(num(eps0, "nonfinite_count") == 0);
    CHECK(num(eps0, "out_std_min") == 0.0);
    const auto eps0_keras = one(apply, {{"data", "digits_flat"}, {"norm", "bn_pixels_eps0_keras"}});
    CHECK(num(eps0_keras, "nonfinite_count") == 1797 * 3);  // 3 pixels are 0 in every digit
    auto var = normlab::read_npy(out / "arrays/digits_flat/bn_pixels/var.npy").values;
    REQUIRE(var.size() == 64);
    CHECK(var(0, 0) == 0.0);               // pixel (0,0) is 0 in every digit
    auto shapes = read_text(out / "stats_shapes.csv");
    CHECK(shapes.find("digits,in,instancenorm,\"[1797,1,8,8]\"") != std::string::npos);
}

TEST_CASE("real tabular: LayerNorm over wine features is dominated by proline (~1000x the others)") {
    fs::path out = run_shipped("real_tabular");
    auto y = normlab::read_npy(out / "arrays/wine/ln/output.npy").values;
    REQUIRE(y.shape()[0] == 178);
    REQUIRE(y.shape()[1] == 13);
    double proline_min = 1e9, others_max = 0;
    for (std::size_t i = 0; i < 178; ++i) {
        proline_min = std::min(proline_min, y(i, 12));
        for (std::size_t j = 0; j < 12; ++j) others_max = std::max(others_max, std::fabs(y(i, j)));
    }
    CHECK(proline_min > 3.0);   // proline always sits about sqrt(12) std above the row mean
    CHECK(others_max < 1.0);    // the other 12 features are squashed together
    auto bn = normlab::read_npy(out / "arrays/wine/bn/output.npy").values;
    double s = 0;
    for (std::size_t i = 0; i < 178; ++i) s += bn(i, 0) * bn(i, 0);
    CHECK(std::sqrt(s / 178) == doctest::Approx(1.0).epsilon(1e-4));  // BatchNorm standardises each feature
}

TEST_CASE("real text: padded sentences; masked BatchNorm statistics differ from unmasked ones") {
    fs::path out = run_shipped("real_text");
    auto report = nlohmann::json::parse(read_text(out / "report.json"));
    double pad = report["data"]["prose"]["pad_fraction"].get<double>();
    CHECK(pad > 0.5);
    // T is the longest of the 32 sentences (padding to more would only add padding).
    std::size_t longest = 0;
    for (const auto& l : report["data"]["prose"]["lengths"]) longest = std::max(longest, l.get<std::size_t>());
    CHECK(report["data"]["prose"]["shape"] == nlohmann::json::array({32, longest, 64}));
    auto m = normlab::read_npy(out / "arrays/prose/bn/mean.npy").values;
    auto mm = normlab::read_npy(out / "arrays/prose/bn_masked/mean.npy").values;
    // Zero padding pulls the unmasked mean toward 0 by the real fraction (1 - pad).
    CHECK(m(0, 0, 0) == doctest::Approx(mm(0, 0, 0) * (1 - pad)).epsilon(1e-5));
}
