// The shared cases from public bug reports (tests/cases/Bxx.json, copied from the project's
// shared cases folder; README there), each run through the user route: a config with a
// `values` (or `gaussian`) source and the `apply` analysis with `save`, the built binary,
// and the saved arrays / CSV compared with the case's `expected` numbers within its
// `tolerance`. Inputs and expected numbers are read from the case files, not retyped.
//
// Covered here: B01, B02, B05, B08 (apply part), B09 and B10 (fp32_stats part), B12;
// B16 to B19 (conventions: eps defaults, replicas, per-group affine, rounding order) in
// test_cases_conventions.cpp.
// B03, B04, B13 belong to the epsilon/padding analyses; the precision-mode expectations of
// B08/B09/B10/B12 (naive variance, fp16-emulated arithmetic, bf16 add) to the precision
// analysis.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "case_util.hpp"
#include "cli_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

/// A normlab run: exit code, stderr, and the output folder.
struct Run {
    CliResult r;
    fs::path out;
};

/// Writes `cfg` to a fresh folder and runs `normlab run cfg.json --out <folder>/out -q`.
Run run_config(const std::string& name, const Json& cfg) {
    fs::path dir = fresh_dir("case_" + name);
    write_text(dir / "cfg.json", cfg.dump(1));
    Run run;
    run.out = dir / "out";
    run.r = run_normlab("run " + (dir / "cfg.json").string() + " --out " + run.out.string() + " -q");
    return run;
}

/// A config with the given data and norms, one apply analysis over all of them saving `save`.
Json apply_config(const std::string& name, const std::string& dtype, const Json& data, const Json& norms,
                  const std::vector<std::string>& save, bool sequential = false) {
    Json a = {{"type", "apply"}, {"data", Json::array()}, {"norms", Json::array()}, {"save", save}};
    for (auto it = data.begin(); it != data.end(); ++it) a["data"].push_back(it.key());
    for (auto it = norms.begin(); it != norms.end(); ++it) a["norms"].push_back(it.key());
    if (sequential) a["sequential"] = true;
    return Json{{"name", name}, {"dtype", dtype}, {"data", data}, {"norms", norms}, {"analyses", Json::array({a})}};
}

/// A `values` data source.
Json values_source(const Json& values) { return Json{{"source", "values"}, {"values", values}}; }

/// A saved array of a run.
normlab::NpyArray saved(const Run& run, const std::string& data, const std::string& norm, const std::string& what) {
    fs::path p = run.out / "arrays" / data / norm / (what + ".npy");
    REQUIRE_MESSAGE(fs::exists(p), "normlab did not save " << p.string());
    return normlab::read_npy(p);
}

/// Rows of a CSV without quoted fields (apply.csv has none), as maps column -> value.
std::vector<std::map<std::string, std::string>> read_csv_rows(const fs::path& p) {
    std::vector<std::map<std::string, std::string>> rows;
    std::istringstream in(read_text(p));
    std::string line;
    std::vector<std::string> header;
    auto split = [](const std::string& s) {
        std::vector<std::string> f;
        std::string cur;
        std::istringstream ss(s);
        while (std::getline(ss, cur, ',')) f.push_back(cur);
        return f;
    };
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (header.empty()) {
            header = split(line);
            continue;
        }
        auto f = split(line);
        std::map<std::string, std::string> row;
        for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
        rows.push_back(row);
    }
    return rows;
}

/// The apply.csv value of `column` for (data, norm); fails if the row is missing.
std::string apply_cell(const Run& run, const std::string& data, const std::string& norm, const std::string& column) {
    for (const auto& row : read_csv_rows(run.out / "apply.csv"))
        if (row.at("data") == data && row.at("norm") == norm) return row.at(column);
    FAIL("no apply.csv row for data " << data << ", norm " << norm);
    return "";
}

/// A norm entry from a case's `params` object: method -> type, mode -> training, and the
/// case's "added_to_std" spelling -> normlab's "add_to_std".
Json norm_from_params(const Json& p) {
    Json n;
    n["type"] = p.at("method");
    if (p.contains("axes")) n["axes"] = p["axes"];
    if (p.contains("eps")) n["eps"] = p["eps"];
    if (p.contains("mode")) n["training"] = p["mode"] == "train";
    if (p.contains("momentum")) n["momentum"] = p["momentum"];
    if (p.contains("affine")) n["affine"] = p["affine"];
    if (p.contains("variance")) n["variance"] = p["variance"];
    if (p.contains("eps_placement"))
        n["eps_placement"] = p["eps_placement"] == "added_to_std" ? "add_to_std" : p["eps_placement"].get<std::string>();
    if (p.contains("running_mean_init")) n["running_mean"] = p["running_mean_init"];
    if (p.contains("running_var_init")) n["running_var"] = p["running_var_init"];
    if (p.contains("running_mean")) n["running_mean"] = p["running_mean"];
    if (p.contains("running_var")) n["running_var"] = p["running_var"];
    return n;
}

/// The number in a description such as "all 1234.0 (float32)".
double all_value(const Json& description) {
    std::string s = description.get<std::string>();
    REQUIRE(s.rfind("all ", 0) == 0);
    return std::stod(s.substr(4));
}

/// A (rows, cols) nested list with every element `v`.
Json constant_rows(std::size_t rows, std::size_t cols, double v) {
    return Json(std::vector<std::vector<double>>(rows, std::vector<double>(cols, v)));
}

}  // namespace

TEST_CASE("B01: BatchNorm training with one value per channel is an error - two values train - eval is fine") {
    Json c = load_case("B01");
    const Json& in = c["input"];
    const Json& p = c["params"];
    const Json& ex = c["expected"];
    Tol tol = tolerance(c);

    for (const char* k : {"a", "b"}) {
        CAPTURE(k);
        REQUIRE(ex[k]["behaviour"] == "error");
        Json cfg = apply_config("b01", "float32", Json{{"x", values_source(in[k]["values"])}},
                                Json{{"bn", norm_from_params(p[k])}}, {"output", "running_mean", "running_var"});
        Run run = run_config(std::string("b01_") + k, cfg);
        CHECK(run.r.exit_code == 2);
        for (const auto& m : ex[k]["error_mentions"])
            CHECK_MESSAGE(run.r.err.find(m.get<std::string>()) != std::string::npos, "missing \"" << m << "\" in " << run.r.err);
        CHECK(std::count(run.r.err.begin(), run.r.err.end(), '\n') == 1);
        // running_stats_changed false: a failed run writes nothing, no running statistics either.
        CHECK_FALSE(ex[k]["running_stats_changed"].get<bool>());
        CHECK_FALSE(fs::exists(run.out));
    }

    SUBCASE("c: two values per channel train; d: one value per channel in eval") {
        for (const char* dtype : {"float32", "float64"}) {
            CAPTURE(dtype);
            Json cfg = apply_config("b01", dtype, Json{{"c", values_source(in["c"]["values"])}},
                                    Json{{"bn", norm_from_params(p["c"])}},
                                    {"output", "mean", "var", "running_mean", "running_var"});
            Json eval = {{"type", "apply"}, {"data", {"d"}}, {"norms", {"bn_eval"}}, {"save", {"output"}}};
            cfg["data"]["d"] = values_source(in["d"]["values"]);
            cfg["norms"]["bn_eval"] = norm_from_params(p["d"]);
            cfg["analyses"].push_back(eval);
            Run run = run_config(std::string("b01_cd_") + dtype, cfg);
            REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
            const Json& e = ex["c"];
            auto mean = saved(run, "c", "bn", "mean").values;
            // stat_shape [2]: one statistic per channel, kept at the channel axis of (1,2,2,1).
            CHECK(std::vector<std::size_t>(mean.shape().begin(), mean.shape().end()) == std::vector<std::size_t>{1, 2, 1, 1});
            CHECK(mean.size() == e["stat_shape"][0].get<std::size_t>());
            CHECK(flatten(in["c"]["values"]).size() / mean.size() == e["values_per_channel"].get<std::size_t>());
            check_close(mean, flatten(e["batch_mean"]), tol, "c batch_mean");
            check_close(saved(run, "c", "bn", "var").values, flatten(e["batch_var_biased"]), tol, "c batch_var_biased");
            check_close(saved(run, "c", "bn", "output").values, flatten(e["output"]), tol, "c output");
            check_close(saved(run, "c", "bn", "running_mean").values, flatten(e["running_mean"]), tol, "c running_mean");
            check_close(saved(run, "c", "bn", "running_var").values, flatten(e["running_var"]), tol, "c running_var");
            check_close(saved(run, "d", "bn_eval", "output").values, flatten(ex["d"]["output"]), tol, "d output");
        }
    }

    SUBCASE("the check is on values per channel, not on N: [1,3,2,2] trains") {
        Json cfg = apply_config("b01", "float32", Json{{"x", {{"source", "gaussian"}, {"shape", {1, 3, 2, 2}}}}},
                                Json{{"bn", {{"type", "batchnorm"}}}}, {"output"});
        Run run = run_config("b01_n1", cfg);
        CHECK_MESSAGE(run.r.exit_code == 0, run.r.err);
    }
}

TEST_CASE("B02: LayerNorm ports: unbiased std and eps added to the std") {
    Json c = load_case("B02");
    const Json& ex = c["expected"];
    Tol tol = tolerance(c);
    const std::vector<std::string> variants = {"standard", "annotated", "biased_eps_outside"};
    for (const char* dtype : {"float32", "float64"}) {
        CAPTURE(dtype);
        Json norms;
        for (const auto& v : variants) norms[v] = norm_from_params(c["params"][v]);
        Json cfg = apply_config("b02", dtype, Json{{"x", values_source(c["input"]["values"])}}, norms, {"output"});
        Run run = run_config(std::string("b02_") + dtype, cfg);
        REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
        for (const auto& v : variants) check_close(saved(run, "x", v, "output").values, flatten(ex[v]), tol, v);
    }

    SUBCASE("with eps 0 the gap is sqrt(n/(n-1)): 4 features and 768 features") {
        Json standard = norm_from_params(c["params"]["standard"]);
        Json annotated = norm_from_params(c["params"]["annotated"]);
        standard["eps"] = 0;
        annotated["eps"] = 0;
        Json data = {{"x", values_source(c["input"]["values"])},
                     {"wide", {{"source", "gaussian"}, {"shape", {1, 768}}, {"mean", 3}, {"std", 2}}}};
        Json cfg = apply_config("b02", "float64", data, Json{{"standard", standard}, {"annotated", annotated}}, {"output"});
        Run run = run_config("b02_ratio", cfg);
        REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
        struct R {
            const char* data;
            const char* key;
        };
        for (R r : {R{"x", "ratio_standard_over_annotated_eps0"}, R{"wide", "ratio_for_n_768"}}) {
            CAPTURE(r.data);
            auto s = saved(run, r.data, "standard", "output").values;
            auto a = saved(run, r.data, "annotated", "output").values;
            std::vector<double> ratios;
            for (std::size_t i = 0; i < s.size(); ++i)
                if (std::abs(a.data()[i]) > 1e-3) ratios.push_back(s.data()[i] / a.data()[i]);
            REQUIRE(!ratios.empty());
            xt::xarray<double> ratio = xt::zeros<double>({ratios.size()});
            std::copy(ratios.begin(), ratios.end(), ratio.begin());
            check_close(ratio, std::vector<double>(ratios.size(), ex[r.key].get<double>()), tol, r.key);
        }
    }
}

TEST_CASE("B05: running_var takes the unbiased variance while the output uses the biased one") {
    Json c = load_case("B05");
    const Json& p = c["params"];
    const Json& ex = c["expected"];
    Tol tol = tolerance(c);
    for (const char* dtype : {"float32", "float64"}) {
        CAPTURE(dtype);
        Json norms;
        std::vector<std::string> names;
        for (const auto& m : p["momentum_sweep"]) {
            Json n = norm_from_params(p);
            n["momentum"] = m;
            std::string name = "bn_" + std::to_string(names.size());
            norms[name] = n;
            names.push_back(name);
        }
        Json cfg = apply_config("b05", dtype, Json{{"x", values_source(c["input"]["values"])}}, norms,
                                {"output", "mean", "var", "running_mean", "running_var"});
        Run run = run_config(std::string("b05_") + dtype, cfg);
        REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
        std::size_t i = 0;
        for (const auto& m : p["momentum_sweep"]) {
            const std::string& nn = names[i++];
            std::ostringstream key;
            key << "momentum_" << std::fixed << std::setprecision(1) << m.get<double>();
            CAPTURE(key.str());
            REQUIRE(ex.contains(key.str()));
            check_close(saved(run, "x", nn, "mean").values, flatten(ex["batch_mean"]), tol, "batch_mean");
            check_close(saved(run, "x", nn, "var").values, flatten(ex["batch_var_biased_used_for_output"]), tol, "var");
            check_close(saved(run, "x", nn, "output").values, flatten(ex["train_output"]), tol, "train_output");
            check_close(saved(run, "x", nn, "running_mean").values, flatten(ex[key.str()]["running_mean"]), tol, "running_mean");
            check_close(saved(run, "x", nn, "running_var").values, flatten(ex[key.str()]["running_var"]), tol, "running_var");
        }
    }
}

TEST_CASE("B08: a constant row gives zeros and never NaN - with eps 0 the 0/0 is reported") {
    Json c = load_case("B08");
    const Json& p = c["params"];
    const Json& ex = c["expected"];
    Tol tol = tolerance(c);
    auto shape = c["input"]["shape"].get<std::vector<std::size_t>>();
    const double v = all_value(c["input"]["values"]);
    REQUIRE(all_value(ex["output"]) == 0.0);
    for (const char* dtype : {"float32", "float64"}) {
        CAPTURE(dtype);
        Json ln = norm_from_params(p);
        ln["weight"] = p["gamma"];
        ln["bias"] = p["beta"];
        Json ln0 = ln;
        ln0["eps"] = p["extra_variant"]["eps"];
        // The same fault on other constant rows: large, negative, tiny magnitudes.
        Json data = {{"x", values_source(constant_rows(shape[0], shape[1], v))},
                     {"others", values_source(Json::array({Json(std::vector<double>(shape[1], -7.5e5)),
                                                           Json(std::vector<double>(shape[1], 3.3e-3)),
                                                           Json(std::vector<double>(shape[1], 1e4))}))}};
        Json cfg = apply_config("b08", dtype, data, Json{{"ln", ln}, {"ln_eps0", ln0}}, {"output", "mean", "var"});
        cfg["analyses"][0]["data"] = {"x", "others"};
        cfg["analyses"][0]["norms"] = {"ln"};
        cfg["analyses"].push_back(Json{{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln_eps0"}}, {"save", {"output"}}});
        Run run = run_config(std::string("b08_") + dtype, cfg);
        REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
        auto y = saved(run, "x", "ln", "output").values;
        check_close(y, std::vector<double>(y.size(), 0.0), tol, "output (= beta)");
        check_close(saved(run, "x", "ln", "mean").values, {ex["mean"].get<double>()}, tol, "mean");
        check_close(saved(run, "x", "ln", "var").values, {ex["var"].get<double>()}, tol, "var");
        CHECK(apply_cell(run, "x", "ln", "nonfinite_count") == std::to_string(ex["nan_count"].get<int>()));
        auto yo = saved(run, "others", "ln", "output").values;
        check_close(yo, std::vector<double>(yo.size(), 0.0), tol, "other constant rows");
        CHECK(apply_cell(run, "others", "ln", "nonfinite_count") == "0");
        // eps 0: 0/0 is not an error; every output is NaN and apply.csv counts them.
        auto y0 = saved(run, "x", "ln_eps0", "output").values;
        CHECK(std::all_of(y0.begin(), y0.end(), [](double e) { return std::isnan(e); }));
        CHECK(apply_cell(run, "x", "ln_eps0", "nonfinite_count") == std::to_string(y0.size()));
    }
}

TEST_CASE("B09: float16 zeros with eps 1e-12 give zeros (statistics kept in float32 or wider)") {
    Json c = load_case("B09");
    const Json& p = c["params"];
    const Json& ex = c["expected"]["fp32_stats"];
    Tol tol = tolerance(c);
    auto shape = c["input"]["shape"].get<std::vector<std::size_t>>();
    REQUIRE(c["input"]["dtype"] == "float16");
    Json ln = norm_from_params(p);
    ln["weight"] = p["gamma"];
    ln["bias"] = p["beta"];
    Json cfg = apply_config("b09", "float16", Json{{"x", values_source(constant_rows(shape[0], shape[1], all_value(c["input"]["values"])))}},
                            Json{{"ln", ln}}, {"output"});
    Run run = run_config("b09", cfg);
    REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
    auto y = saved(run, "x", "ln", "output");
    CHECK(y.dtype == "float16");
    REQUIRE(all_value(ex["output"]) == 0.0);
    check_close(y.values, std::vector<double>(y.values.size(), 0.0), tol, "fp32_stats output");
    CHECK(apply_cell(run, "x", "ln", "nonfinite_count") == std::to_string(ex["nan_count"].get<int>()));
}

TEST_CASE("B10: float16 data whose variance exceeds the float16 range normalises to +-1") {
    Json c = load_case("B10");
    const Json& p = c["params"];
    Tol tol = tolerance(c);
    Json ln = norm_from_params(p);
    ln["weight"] = p["gamma"];
    ln["bias"] = p["beta"];
    Json data;
    for (const char* k : {"a", "b"}) {
        REQUIRE(c["input"][k]["dtype"] == "float16");
        data[k] = values_source(Json::array({c["input"][k]["values"]}));
    }
    Json cfg = apply_config("b10", "float16", data, Json{{"ln", ln}}, {"output"});
    Run run = run_config("b10", cfg);
    REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
    for (const char* k : {"a", "b"}) {
        CAPTURE(k);
        auto y = saved(run, k, "ln", "output");
        CHECK(y.dtype == "float16");
        // The listed fp32_stats output; for b only the first two are listed and the pattern repeats.
        std::vector<double> want = flatten(c["expected"][k]["fp32_stats_output"]);
        std::vector<double> full;
        for (std::size_t i = 0; i < y.values.size(); ++i) full.push_back(want[i % want.size()]);
        check_close(y.values, full, tol, std::string("fp32_stats_output ") + k);
        CHECK(apply_cell(run, k, "ln", "nonfinite_count") == "0");
    }
}

TEST_CASE("B12: RMSNorm with a Gemma-style weight offset (1 + w) vs a plain weight") {
    Json c = load_case("B12");
    const Json& p = c["params"];
    const Json& ex = c["expected"];
    Tol tol = tolerance(c);
    for (const char* dtype : {"float32", "float64"}) {
        CAPTURE(dtype);
        Json base = norm_from_params(p);
        Json norms;
        norms["x_hat"] = base;
        norms["x_hat"]["affine"] = false;
        auto weighted = [&](const Json& w, double offset) {
            Json n = base;
            n["weight"] = w;
            n["weight_offset"] = offset;
            return n;
        };
        const Json zeros = Json(std::vector<double>(p["stored_weight"].size(), 0.0));
        norms["plain"] = weighted(p["stored_weight"], 0);
        norms["unit_offset"] = weighted(p["stored_weight"], 1);
        norms["zero_plain"] = weighted(zeros, 0);
        norms["zero_unit_offset"] = weighted(zeros, 1);
        Json cfg = apply_config("b12", dtype, Json{{"x", values_source(c["input"]["values"])}}, norms, {"output"});
        Run run = run_config(std::string("b12_") + dtype, cfg);
        REQUIRE_MESSAGE(run.r.exit_code == 0, run.r.err);
        check_close(saved(run, "x", "x_hat", "output").values, flatten(ex["x_hat"]), tol, "x_hat");
        check_close(saved(run, "x", "plain", "output").values, flatten(ex["plain (LLaMA)"]), tol, "plain (LLaMA)");
        check_close(saved(run, "x", "unit_offset", "output").values, flatten(ex["unit_offset (Gemma)"]), tol, "unit_offset (Gemma)");
        check_close(saved(run, "x", "zero_plain", "output").values, flatten(ex["zero_weight"]["plain"]), tol, "zero weight, plain");
        check_close(saved(run, "x", "zero_unit_offset", "output").values, flatten(ex["zero_weight"]["unit_offset"]), tol,
                    "zero weight, unit offset");
    }
}
