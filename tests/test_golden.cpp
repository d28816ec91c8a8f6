// Golden tests: every case under tests/golden/ (written by scripts/make_golden.py from
// PyTorch 1.13, ONNX's backend test-case generators and float64 numpy) runs through the
// built binary the way users run it (`normlab run config.json --out DIR`), and every saved
// array is compared with the committed expected one. No framework is needed at test time.
// Also PyTorch's error cases that tests/test_cli.cpp does not already cover.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(NORMLAB_SOURCE_DIR) / "tests" / "golden";

/// Allowed difference |actual - expected| <= atol + rtol * |expected|, per saved dtype.
/// float32: the references round once from float32 arithmetic (PyTorch, ONNX) or from
/// float64 (numpy); normlab rounds once from double, so a few float32 ulps apart at most.
struct Tolerance {
    double rtol, atol;
};

/// The tolerance for arrays saved in `dtype` ("float32" or "float64").
Tolerance tolerance_for(const std::string& dtype) {
    if (dtype == "float64") return {1e-12, 1e-12};
    return {1e-5, 1e-6};
}

/// The largest error seen per dtype, for the summary line.
struct Worst {
    double ratio = 0;  ///< max |a-b| / (atol + rtol*|b|): <= 1 passes
    double abs = 0;    ///< max |a-b|
    double rel = 0;    ///< max |a-b| / |b| over elements with |b| >= 1e-3
    std::string where;
};
/// Worst errors per dtype over every comparison so far in this process.
std::map<std::string, Worst>& worst_errors() {
    static std::map<std::string, Worst> w;
    return w;
}

/// Case folders (holding a config.json) whose names start with one of `prefixes`, sorted.
std::vector<fs::path> golden_cases(const std::vector<std::string>& prefixes) {
    std::vector<fs::path> out;
    if (!fs::is_directory(kGolden)) return out;
    for (const auto& e : fs::directory_iterator(kGolden)) {
        std::string name = e.path().filename().string();
        bool match = std::any_of(prefixes.begin(), prefixes.end(),
                                 [&](const std::string& p) { return name.rfind(p, 0) == 0; });
        if (match && fs::exists(e.path() / "config.json")) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Every expected array of a case, as paths relative to its expected/ folder, sorted.
std::vector<fs::path> expected_arrays(const fs::path& case_dir) {
    std::vector<fs::path> out;
    fs::path root = case_dir / "expected";
    if (!fs::is_directory(root)) return out;
    for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file() && e.path().extension() == ".npy") out.push_back(fs::relative(e.path(), root));
    std::sort(out.begin(), out.end());
    return out;
}

/// A shape or index as "[a, b, ...]".
std::string shape_str(const std::vector<std::size_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

/// The shape of an array as a vector.
std::vector<std::size_t> shape_of(const xt::xarray<double>& a) {
    return {a.shape().begin(), a.shape().end()};
}

/// A flat row-major index as a multi-index string "[i, j, ...]".
std::string index_str(std::size_t flat, const std::vector<std::size_t>& shape) {
    std::vector<std::size_t> idx(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    return shape_str(idx);
}

/// Worst element of a comparison: ratio = |a-b| / (atol + rtol*|b|), > 1 fails; a NaN on
/// one side only or an infinite difference counts as infinitely bad.
struct Diff {
    double ratio = 0;
    std::size_t index = 0;
};

/// Compares `a` with `e` (same size) under `tol`; also folds the errors into `w`.
Diff diff_arrays(const xt::xarray<double>& a, const xt::xarray<double>& e, Tolerance tol, Worst& w) {
    Diff out;
    out.ratio = -1;
    for (std::size_t i = 0; i < e.size(); ++i) {
        double av = a.data()[i], ev = e.data()[i];
        double d = std::abs(av - ev);
        double ratio;
        if (std::isnan(av) || std::isnan(ev)) ratio = std::isnan(av) && std::isnan(ev) ? 0 : INFINITY;
        else if (!std::isfinite(d)) ratio = av == ev ? 0 : INFINITY;
        else ratio = d / (tol.atol + tol.rtol * std::abs(ev));
        if (ratio > out.ratio) out.ratio = ratio, out.index = i;
        if (std::isfinite(d)) {
            w.abs = std::max(w.abs, d);
            if (std::abs(ev) >= 1e-3) w.rel = std::max(w.rel, d / std::abs(ev));
        }
    }
    if (out.ratio > w.ratio) w.ratio = out.ratio;
    return out;
}

/// Compares one saved array with its expected array; records the worst error and reports
/// the worst element of a mismatch (case, array, index, values). Returns true if it passes.
bool compare_array(const std::string& case_name, const fs::path& rel, const fs::path& actual_path,
                   const fs::path& expected_path, const std::string& dtype) {
    std::string where = case_name + ": " + rel.string();
    if (!fs::exists(actual_path)) {
        FAIL_CHECK(where << ": normlab did not save " << actual_path.string());
        return false;
    }
    normlab::NpyArray a = normlab::read_npy(actual_path);
    normlab::NpyArray e = normlab::read_npy(expected_path);
    if (a.dtype != e.dtype) {
        FAIL_CHECK(where << ": saved dtype " << a.dtype << ", expected " << e.dtype);
        return false;
    }
    if (shape_of(a.values) != shape_of(e.values)) {
        FAIL_CHECK(where << ": saved shape " << shape_str(shape_of(a.values)) << ", expected "
                         << shape_str(shape_of(e.values)));
        return false;
    }
    Tolerance tol = tolerance_for(dtype);
    Worst& w = worst_errors()[dtype];
    double before = w.ratio;
    Diff d = diff_arrays(a.values, e.values, tol, w);
    if (w.ratio > before) w.where = where;
    if (d.ratio > 1) {
        double av = a.values.data()[d.index], ev = e.values.data()[d.index];
        std::ostringstream m;
        m.precision(17);
        m << where << ": mismatch at index " << index_str(d.index, shape_of(e.values)) << " of shape "
          << shape_str(shape_of(e.values)) << ": normlab " << av << ", expected " << ev << ", |diff| "
          << std::abs(av - ev) << " > allowed " << tol.atol + tol.rtol * std::abs(ev) << " (" << dtype
          << ": atol " << tol.atol << ", rtol " << tol.rtol << ")";
        FAIL_CHECK(m.str());
        return false;
    }
    return true;
}

/// Runs one case folder through the binary and compares every expected array. Returns
/// the number of arrays compared.
std::size_t check_case(const fs::path& case_dir) {
    const std::string name = case_dir.filename().string();
    INFO("golden case " << name);
    std::string reference = "(no meta.json)";
    if (fs::exists(case_dir / "meta.json"))
        reference = nlohmann::json::parse(read_text(case_dir / "meta.json")).value("reference", reference);
    INFO("reference: " << reference);
    auto cfg = nlohmann::json::parse(read_text(case_dir / "config.json"));
    const std::string dtype = cfg.value("dtype", "float32");
    auto arrays = expected_arrays(case_dir);
    CHECK_MESSAGE(!arrays.empty(), name << ": no expected arrays");
    fs::path out = fresh_dir("golden_" + name) / "out";
    CliResult r = run_normlab("run " + (case_dir / "config.json").string() + " --out " + out.string() + " -q");
    CHECK_MESSAGE(r.exit_code == 0, name << ": exit " << r.exit_code << ": " << r.err);
    if (r.exit_code != 0) return 0;
    std::size_t n = 0;
    for (const auto& rel : arrays) {
        compare_array(name, rel, out / "arrays" / rel, case_dir / "expected" / rel, dtype);
        ++n;
    }
    fs::remove_all(out.parent_path());
    return n;
}

/// Runs every case with one of the prefixes; requires at least `min_cases` of them.
void run_family(const std::vector<std::string>& prefixes, std::size_t min_cases) {
    auto cases = golden_cases(prefixes);
    REQUIRE_MESSAGE(cases.size() >= min_cases, "found " << cases.size() << " golden cases under "
                                                        << kGolden.string() << ", expected at least " << min_cases);
    std::size_t arrays = 0;
    for (const auto& c : cases) arrays += check_case(c);
    std::cout << "golden " << prefixes.front() << "*: " << cases.size() << " cases, " << arrays
              << " arrays compared\n";
    for (const auto& [dtype, w] : worst_errors())
        std::cout << "  worst so far, " << dtype << ": " << w.ratio << " of the tolerance (max |diff| " << w.abs
                  << ", max relative " << w.rel << ") at " << w.where << "\n";
}

// Runs a config given as text (paths inside resolve against its folder) and returns the result.
CliResult run_config_text(const std::string& name, const std::string& json) {
    fs::path dir = fresh_dir(name);
    write_text(dir / "cfg.json", json);
    return run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "out").string() + " -q");
}

/// A config applying one norm to one data entry, saving the output.
std::string one_pair(const std::string& data, const std::string& norm) {
    return R"({"name": "t", "data": {"x": )" + data + R"(}, "norms": {"n": )" + norm +
           R"(}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"], "save": ["output"]}]})";
}

/// A gaussian source of the given shape, as config text.
std::string gaussian(const std::string& shape) {
    return R"({"source": "gaussian", "shape": )" + shape + "}";
}

}  // namespace

TEST_CASE("golden: PyTorch 1.13 LayerNorm BatchNorm InstanceNorm GroupNorm in float32 and float64") {
    run_family({"torch_"}, 16);
}

TEST_CASE("golden: ONNX backend node cases for LayerNormalization BatchNormalization InstanceNormalization MVN") {
    run_family({"onnx_"}, 20);
}

TEST_CASE("golden: float64 numpy references for RMSNorm and the keras/onnx/flax/torch conventions") {
    run_family({"numpy_", "conv_"}, 6);
}

TEST_CASE("golden: PyTorch 1.13 autograd gradients through apply with an npy upstream and save grad_*") {
    // scripts/make_grad_golden.py; tests/test_backward.cpp checks the same cases at the
    // engine level.
    run_family({"grad_"}, 14);
}

TEST_CASE("golden: every case folder belongs to a family above") {
    auto all = golden_cases({""});
    auto known = golden_cases({"torch_", "onnx_", "numpy_", "conv_", "grad_"});
    CHECK(all.size() == known.size());
    CHECK(all.size() >= 40);
}

TEST_CASE("golden: the comparison catches a wrong array") {
    // Guards against a comparison that cannot fail: normlab's real output against an expected
    // array perturbed by 3 tolerances at one element, by a NaN, and by an infinity.
    auto cases = golden_cases({"torch_layernorm_f32"});
    REQUIRE(cases.size() == 1);
    fs::path out = fresh_dir("golden_perturbed") / "out";
    REQUIRE(run_normlab("run " + (cases[0] / "config.json").string() + " --out " + out.string() + " -q").exit_code == 0);
    auto a = normlab::read_npy(out / "arrays" / "x" / "ln1" / "output.npy").values;
    auto e = normlab::read_npy(cases[0] / "expected" / "x" / "ln1" / "output.npy").values;
    Tolerance tol = tolerance_for("float32");
    Worst scratch;
    CHECK(diff_arrays(a, e, tol, scratch).ratio <= 1);
    auto bad = e;
    bad.data()[7] += 3 * (tol.atol + tol.rtol * std::abs(bad.data()[7]));
    Diff d = diff_arrays(a, bad, tol, scratch);
    CHECK(d.ratio > 1.5);
    CHECK(d.index == 7);
    CHECK(index_str(d.index, shape_of(e)) == "[0, 0, 1, 2]");
    bad = e;
    bad.data()[11] = std::nan("");
    CHECK(diff_arrays(a, bad, tol, scratch).index == 11);
    CHECK(std::isinf(diff_arrays(a, bad, tol, scratch).ratio));
    bad = e;
    bad.data()[3] = INFINITY;
    CHECK(diff_arrays(a, bad, tol, scratch).ratio > 1);
    CHECK(diff_arrays(bad, bad, tol, scratch).ratio == 0);
}

TEST_CASE("PyTorch's error cases not covered by test_cli exit 2 with one clear line") {
    struct Case {
        const char* name;
        std::string json;
        std::vector<std::string> expect;
    };
    std::vector<Case> cases = {
        // nn.BatchNorm1d(3, track_running_stats=False).eval() on (1, 3): batch statistics are
        // still used, so PyTorch raises "Expected more than 1 value per channel when training".
        {"bn_notrack_eval_one_value",
         one_pair(gaussian("[1, 3]"), R"({"type": "batchnorm", "training": false, "track_running_stats": false})"),
         {"/norms/n: batchnorm \"n\" on data \"x\"", "one value per channel (need more than 1), input shape [1, 3]"}},
        // nn.InstanceNorm1d(3) on (2, 3, 1): "Expected more than 1 spatial element when training".
        {"in_one_spatial",
         one_pair(gaussian("[2, 3, 1]"), R"({"type": "instancenorm"})"),
         {"/norms/n: instancenorm \"n\" on data \"x\"", "one value per instance and channel", "input shape [2, 3, 1]"}},
        // nn.GroupNorm(6, 6) on (1, 6): "Expected more than 1 value per channel when training".
        {"gn_one_value_per_group",
         one_pair(gaussian("[1, 6]"), R"({"type": "groupnorm", "num_groups": 6})"),
         {"/norms/n: groupnorm \"n\" on data \"x\"", "one value per group (need more than 1)", "input shape [1, 6]"}},
        // nn.LayerNorm([3, 5]) on (2, 3, 4, 5): the rank fits, the trailing dims do not.
        {"ln_shape_not_trailing",
         one_pair(gaussian("[2, 3, 4, 5]"), R"({"type": "layernorm", "normalized_shape": [3, 5]})"),
         {"/norms/n/normalized_shape: layernorm \"n\" on data \"x\"",
          "given normalized_shape=[3, 5], expected input with shape [*, 3, 5], but got input of shape [2, 3, 4, 5]"}},
        // nn.LayerNorm([2, 3, 4, 5, 6]) on a rank-4 input.
        {"ln_shape_too_long",
         one_pair(gaussian("[2, 3, 4, 5]"), R"({"type": "layernorm", "normalized_shape": [1, 2, 3, 4, 5]})"),
         {"/norms/n/normalized_shape", "given normalized_shape=[1, 2, 3, 4, 5]", "got input of shape [2, 3, 4, 5]"}},
        // F.batch_norm with running statistics of 4 elements for 3 channels: "running_mean
        // should contain 3 elements not 4".
        {"bn_running_mean_size",
         one_pair(gaussian("[4, 3]"), R"({"type": "batchnorm", "running_mean": [0, 0, 0, 0]})"),
         {"/norms/n/running_mean", "running_mean: expected shape [3] (one value per channel: C = 3 at channel axis 1 of "
                                   "input shape [4, 3]), but got [4]"}},
        // A GroupNorm weight of the wrong size ("Expected weight to be a vector of size equal
        // to the number of channels in input").
        {"gn_weight_size",
         one_pair(gaussian("[2, 6, 4]"), R"({"type": "groupnorm", "num_groups": 3, "weight": [1, 1, 1]})"),
         {"/norms/n/weight", "weight: expected shape [6] (one value per channel, affine_per \"channel\"), but got [3]"}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CliResult r = run_config_text(std::string("golden_err_") + c.name, c.json);
        CHECK(r.exit_code == 2);
        for (const auto& e : c.expect) CHECK_MESSAGE(r.err.find(e) != std::string::npos, "missing \"" << e << "\" in: " << r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_FALSE(fs::exists(fresh_dir(std::string("golden_err_probe")).parent_path() / (std::string("golden_err_") + c.name) / "out"));
    }
}
