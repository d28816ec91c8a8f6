// Conventions from public reports, through the user route (a config run by the built binary,
// saved arrays and CSV tables compared with the case files' independently computed numbers):
// B16 (RMSNorm's default eps follows the compute type), B17 (data-parallel BatchNorm,
// synchronised or not), B18 (GroupNorm affine parameters per group, ONNX opset 18), B19
// (rounding order of the affine step in bfloat16), and padding masks that broadcast.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "analysis/analysis.hpp"
#include "analysis_util.hpp"
#include "config/config.hpp"
#include "case_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// `analyses`: a list, or one analysis object (a braced list of one object is that object).
json config(const json& data, const json& norms, const json& analyses, const std::string& dtype) {
    const json list = analyses.is_array() ? analyses : json::array({analyses});
    return json{{"name", "t"}, {"seed", 0}, {"dtype", dtype}, {"data", data}, {"norms", norms}, {"analyses", list}};
}

json values_source(const json& values) { return json{{"source", "values"}, {"values", values}}; }

json apply(const std::vector<std::string>& data, const std::vector<std::string>& norms,
           const std::vector<std::string>& save) {
    return json{{"type", "apply"}, {"data", data}, {"norms", norms}, {"save", save}};
}

xt::xarray<double> saved(const RunResult& r, const std::string& data, const std::string& norm, const std::string& what) {
    const fs::path p = r.out / "arrays" / data / norm / (what + ".npy");
    REQUIRE_MESSAGE(fs::exists(p), "normlab did not save " << p.string());
    return normlab::read_npy(p).values;
}

std::vector<std::size_t> shape_of(const xt::xarray<double>& a) { return {a.shape().begin(), a.shape().end()}; }

/// `normlab validate` on a config written to a fresh folder.
CliResult validate(const std::string& name, const json& cfg, const std::map<std::string, std::string>& files = {}) {
    const auto dir = fresh_dir(name);
    write_text(dir / "cfg.json", cfg.dump(2));
    for (const auto& [f, text] : files) write_text(dir / f, text);
    return run_normlab("validate " + (dir / "cfg.json").string());
}

/// Both `run` and `validate` refuse the config with exit 2 and a message holding every
/// one of `mentions`.
void check_refused(const std::string& name, const json& cfg, const std::vector<std::string>& mentions,
                   const std::map<std::string, std::string>& files = {}) {
    CAPTURE(name);
    const RunResult r = run_config(name, cfg, files);
    const CliResult v = validate(name + "_v", cfg, files);
    for (const CliResult* c : {&r.cli, &v}) {
        CHECK(c->exit_code == 2);
        CHECK(std::count(c->err.begin(), c->err.end(), '\n') == 1);
        for (const auto& m : mentions) CHECK_MESSAGE(c->err.find(m) != std::string::npos, "missing \"" << m << "\" in " << c->err);
    }
    CHECK_FALSE(fs::exists(r.out));
}

}  // namespace

TEST_CASE("B16: RMSNorm's default eps on bfloat16 and float16 data is float32's, so the output RMS is 1") {
    const json c = load_case<json>("B16");
    const json& ex = c["expected"];
    const Tol tol = tolerance(c);
    REQUIRE(c["input"]["norm"]["eps"].is_null());
    const double f32_eps = std::numeric_limits<float>::epsilon();
    REQUIRE(ex["resolved_eps"].get<double>() == f32_eps);
    const std::size_t row = c["input"]["norm"]["normalized_shape"][0].get<std::size_t>();
    const double bf16_eps = std::ldexp(1.0, -7);

    for (const char* dtype : {"bfloat16", "float16"}) {
        CAPTURE(dtype);
        json norms = {{"rms", {{"type", "rmsnorm"}, {"normalized_shape", {row}}, {"affine", false}}},
                      {"rms_bf16_eps", {{"type", "rmsnorm"}, {"normalized_shape", {row}}, {"affine", false}, {"eps", bf16_eps}}}};
        json cfg = config({{"x", values_source(c["input"]["values"])}}, norms,
                          {apply({"x"}, {"rms", "rms_bf16_eps"}, {"output"}),
                           {{"type", "stats_shapes"}, {"data", {"x"}}, {"norms", {"rms"}}}},
                          dtype);
        const RunResult r = run_config(std::string("b16_") + dtype, cfg);
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        const auto y = saved(r, "x", "rms", "output");
        CHECK(shape_of(y) == c["input"]["shape"].get<std::vector<std::size_t>>());
        check_close(y, flatten(ex["output_float64_of_rounded_inputs"]), tol, "output");
        // Output RMS per row: 1 within bfloat16 rounding with the default, far below with
        // bfloat16's own epsilon (the old rule).
        const auto yw = saved(r, "x", "rms_bf16_eps", "output");
        double lo = 1e9, hi = 0, lo_w = 1e9, hi_w = 0;
        for (std::size_t i = 0; i < y.size(); i += row) {
            double s = 0, sw = 0;
            for (std::size_t k = 0; k < row; ++k) s += y.data()[i + k] * y.data()[i + k], sw += yw.data()[i + k] * yw.data()[i + k];
            const double rms = std::sqrt(s / row), rms_w = std::sqrt(sw / row);
            lo = std::min(lo, rms), hi = std::max(hi, rms), lo_w = std::min(lo_w, rms_w), hi_w = std::max(hi_w, rms_w);
        }
        MESSAGE(std::string(dtype) << ": output RMS per row " << lo << " .. " << hi << " (default eps), " << lo_w << " .. " << hi_w
                      << " (eps 0.0078125)");
        CHECK(std::fabs(lo - 1) < 0.01);
        CHECK(std::fabs(hi - 1) < 0.01);
        CHECK(lo_w > 0.40);  // the report's "rms per row about 0.41-0.63"
        CHECK(hi_w < 0.64);
        // The resolved eps in the CSVs and in report.json.
        CHECK(num(one(r.csv("apply"), {{"norm", "rms"}}), "eps") == f32_eps);
        CHECK(num(one(r.csv("stats_shapes"), {{"norm", "rms"}}), "eps") == f32_eps);
        const json rep = json::parse(read_text(r.out / "report.json"));
        CHECK(rep["analyses"][0]["rows"][0]["eps"].get<double>() == f32_eps);
    }
}

TEST_CASE("B16: the epsilon analysis shows each dtype's default eps beside the listed ones") {
    const json c = load_case<json>("B16");
    const std::size_t row = c["input"]["norm"]["normalized_shape"][0].get<std::size_t>();
    json norms = {{"rms", {{"type", "rmsnorm"}, {"normalized_shape", {row}}, {"affine", false}}},
                  {"ln", {{"type", "layernorm"}, {"normalized_shape", {row}}, {"eps", 1e-3}}}};
    json cfg = config({{"x", values_source(c["input"]["values"])}}, norms,
                      {{{"type", "epsilon"}, {"data", {"x"}}, {"norms", {"rms", "ln"}}, {"eps", {0.0078125}},
                        {"dtypes", {"bfloat16", "float16", "float32", "float64"}}}},
                      "bfloat16");
    const RunResult r = run_config("b16_epsilon", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("epsilon");
    CHECK(rows.size() == 16);  // 2 norms x 4 dtypes x (the listed eps + the default)
    // PyTorch's rule: torch.finfo(opmath_type).eps, opmath float32 for half types.
    const std::map<std::string, double> rms_default = {{"bfloat16", std::numeric_limits<float>::epsilon()},
                                                       {"float16", std::numeric_limits<float>::epsilon()},
                                                       {"float32", std::numeric_limits<float>::epsilon()},
                                                       {"float64", std::numeric_limits<double>::epsilon()}};
    for (const auto& [dt, eps] : rms_default) {
        CAPTURE(dt);
        const auto d = one(rows, {{"norm", "rms"}, {"dtype", dt}, {"eps_source", "default"}});
        CHECK(num(d, "eps") == eps);
        const auto l = one(rows, {{"norm", "rms"}, {"dtype", dt}, {"eps_source", "list"}});
        CHECK(num(l, "eps") == 0.0078125);
        // The default keeps the output RMS at 1 within the dtype's rounding; bfloat16's own
        // epsilon swamps a mean square of 0.0034.
        CHECK(num(d, "std_err_max") < 0.01);
        CHECK(num(l, "std_err_max") > 0.35);
        // LayerNorm's default does not depend on the dtype; its own eps is not a default.
        CHECK(num(one(rows, {{"norm", "ln"}, {"dtype", dt}, {"eps_source", "default"}}), "eps") == 1e-5);
    }
    // Without an eps list: the norm's own eps (if any) and the default.
    cfg["analyses"][0].erase("eps");
    const RunResult r2 = run_config("b16_epsilon_nolist", cfg);
    REQUIRE_MESSAGE(r2.cli.exit_code == 0, r2.cli.err);
    const auto rows2 = r2.csv("epsilon");
    CHECK(select(rows2, {{"norm", "rms"}}).size() == 4);  // default only
    CHECK(select(rows2, {{"norm", "ln"}, {"eps_source", "norm"}, {"eps", "0.001"}}).size() == 4);
    CHECK(select(rows2, {{"norm", "ln"}, {"eps_source", "default"}}).size() == 4);
}

TEST_CASE("B17: data-parallel BatchNorm - synchronised statistics weight each replica by its count") {
    const json c = load_case<json>("B17");
    const json& in = c["input"];
    const json& ex = c["expected"];
    const Tol tol = tolerance(c);
    REQUIRE(in["layout"] == "NC");
    const std::vector<long long> sizes = in["replica_sizes"].get<std::vector<long long>>();
    const double eps = in["eps"].get<double>(), momentum = in["momentum"].get<double>();
    auto bn = [&](bool sync) {
        return json{{"type", "batchnorm"}, {"eps", eps}, {"momentum", momentum}, {"convention", in["convention"]},
                    {"replicas", sizes}, {"sync", sync}};
    };
    json cfg = config({{"x", values_source(in["values"])}}, {{"synced", bn(true)}, {"unsynced", bn(false)}},
                      {apply({"x"}, {"synced", "unsynced"}, {"output", "mean", "var", "rstd", "running_mean", "running_var"}),
                       {{"type", "stats_shapes"}, {"data", {"x"}}, {"norms", {"synced", "unsynced"}}}},
                      "float64");
    const RunResult r = run_config("b17", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const std::vector<double> x = flatten(in["values"]);
    const std::size_t C = in["values"][0].size(), N = in["values"].size();

    SUBCASE("synced: the whole batch's statistics, running_var from the global unbiased variance") {
        const json& s = ex["synced"];
        const auto mean = saved(r, "x", "synced", "mean");
        CHECK(shape_of(mean) == std::vector<std::size_t>{1, C});
        check_close(mean, flatten(s["mean"]), tol, "synced mean");
        check_close(saved(r, "x", "synced", "var"), flatten(s["var_biased"]), tol, "synced var");
        check_close(saved(r, "x", "synced", "running_mean"), flatten(s["running_mean"]), tol, "synced running_mean");
        check_close(saved(r, "x", "synced", "running_var"), flatten(s["running_var"]), tol, "synced running_var");
        // Not the equal-weight average of the replicas' statistics (the reported bug).
        const auto wrong = flatten(ex["wrong_equal_weight_average"]["mean"]);
        for (std::size_t k = 0; k < C; ++k) CHECK(std::fabs(mean.data()[k] - wrong[k]) > 0.1);
        std::vector<double> want;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t k = i % C;
            want.push_back((x[i] - s["mean"][k].get<double>()) / std::sqrt(s["var_biased"][k].get<double>() + eps));
        }
        check_close(saved(r, "x", "synced", "output"), want, tol, "synced output");
    }

    SUBCASE("unsynced: each replica's own statistics (R, 1, C); running statistics follow replica 0") {
        const json& u = ex["unsynced"];
        const auto mean = saved(r, "x", "unsynced", "mean");
        CHECK(shape_of(mean) == std::vector<std::size_t>{sizes.size(), 1, C});
        check_close(mean, flatten(json::array({u["replica0"]["mean"], u["replica1"]["mean"]})), tol, "unsynced mean");
        check_close(saved(r, "x", "unsynced", "var"), flatten(json::array({u["replica0"]["var"], u["replica1"]["var"]})), tol,
                    "unsynced var");
        CHECK(shape_of(saved(r, "x", "unsynced", "rstd")) == std::vector<std::size_t>{sizes.size(), 1, C});
        // Running statistics from replica 0 (n = sizes[0]), as DataParallel/DDP keep them:
        // torch momentum, unbiased variance, from the initial zeros/ones.
        const double n0 = static_cast<double>(sizes[0]);
        std::vector<double> rm, rv;
        for (std::size_t k = 0; k < C; ++k) {
            rm.push_back(momentum * u["replica0"]["mean"][k].get<double>());
            rv.push_back((1 - momentum) + momentum * u["replica0"]["var"][k].get<double>() * n0 / (n0 - 1));
        }
        check_close(saved(r, "x", "unsynced", "running_mean"), rm, tol, "unsynced running_mean");
        check_close(saved(r, "x", "unsynced", "running_var"), rv, tol, "unsynced running_var");
        std::vector<double> want;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t n = i / C, k = i % C;
            const json& rep = n < static_cast<std::size_t>(sizes[0]) ? u["replica0"] : u["replica1"];
            want.push_back((x[i] - rep["mean"][k].get<double>()) / std::sqrt(rep["var"][k].get<double>() + eps));
        }
        check_close(saved(r, "x", "unsynced", "output"), want, tol, "unsynced output");
        const auto shapes = r.csv("stats_shapes");
        CHECK(one(shapes, {{"norm", "unsynced"}}).at("stats_shape") == "[2,1,2]");
        CHECK(num(one(shapes, {{"norm", "unsynced"}}), "elems_per_stat") == static_cast<double>(sizes[0]));
        CHECK(one(shapes, {{"norm", "synced"}}).at("stats_shape") == "[1,2]");
        CHECK(num(one(shapes, {{"norm", "synced"}}), "elems_per_stat") == static_cast<double>(N));
    }

    SUBCASE("equal slices: replicas 2 is [4, 4]; inference ignores the split") {
        json cfg2 = cfg;
        cfg2["norms"]["unsynced"]["replicas"] = 2;
        cfg2["norms"]["listed"] = bn(false);
        cfg2["norms"]["listed"]["replicas"] = {4, 4};
        cfg2["norms"]["eval"] = bn(false);
        cfg2["norms"]["eval"]["training"] = false;
        cfg2["norms"]["eval"]["running_mean"] = {1, 2};
        cfg2["norms"]["eval"]["running_var"] = {4, 9};
        cfg2["analyses"] = {apply({"x"}, {"unsynced", "listed", "eval"}, {"output", "mean"})};
        const RunResult r2 = run_config("b17_equal", cfg2);
        REQUIRE_MESSAGE(r2.cli.exit_code == 0, r2.cli.err);
        CHECK(saved(r2, "x", "unsynced", "mean") == saved(r2, "x", "listed", "mean"));
        CHECK(saved(r2, "x", "unsynced", "output") == saved(r2, "x", "listed", "output"));
        const auto ye = saved(r2, "x", "eval", "output");
        for (std::size_t i = 0; i < x.size(); ++i)
            CHECK(ye.data()[i] == doctest::Approx((x[i] - (i % C == 0 ? 1 : 2)) / std::sqrt((i % C == 0 ? 4 : 9) + eps)));
    }
}

TEST_CASE("B17: bad replicas are refused by run and validate, naming what is wrong") {
    const json c = load_case<json>("B17");
    const json data = {{"x", values_source(c["input"]["values"])}};
    auto cfg = [&](const json& bn) { return config(data, {{"bn", bn}}, {apply({"x"}, {"bn"}, {"output"})}, "float64"); };
    const json bn = {{"type", "batchnorm"}};
    json b = bn;
    b["replicas"] = {2, 5};
    check_refused("rep_sum", cfg(b), {"/norms/bn/replicas", "[2, 5]", "sum to 7", "N = 8"});
    b["replicas"] = {std::numeric_limits<long long>::max(), std::numeric_limits<long long>::max()};
    check_refused("rep_huge", cfg(b), {"/norms/bn/replicas", "sum to more than 8", "N = 8"});
    b["replicas"] = 3;
    check_refused("rep_divide", cfg(b), {"/norms/bn/replicas", "replicas 3 does not divide", "N = 8"});
    b["replicas"] = {1, 7};
    check_refused("rep_one", cfg(b), {"/norms/bn/replicas", "replica 0", "one value per channel"});
    b["sync"] = true;  // synchronised: 8 values per channel in all, as SyncBatchNorm counts
    CHECK(run_config("rep_one_sync", cfg(b)).cli.exit_code == 0);
    b = bn;
    b["replicas"] = 0;
    check_refused("rep_zero", cfg(b), {"/norms/bn/replicas", ">= 1"});
    b["replicas"] = json::array();
    check_refused("rep_empty", cfg(b), {"/norms/bn/replicas", "empty"});
    b["replicas"] = {4, 0, 4};
    check_refused("rep_zero_size", cfg(b), {"/norms/bn/replicas/1", "at least 1"});
    b["replicas"] = "two";
    check_refused("rep_string", cfg(b), {"/norms/bn/replicas", "list of per-replica sample counts"});
    b = bn;
    b["sync"] = true;
    check_refused("sync_alone", cfg(b), {"/norms/bn/sync", "replicas"});
    b = {{"type", "layernorm"}, {"normalized_shape", {2}}, {"replicas", 2}};
    check_refused("rep_layernorm", cfg(b), {"/norms/bn", "replicas"});
    // precision recomputes one batch's statistics: per-replica ones are refused, by validate too.
    b = {{"type", "batchnorm"}, {"replicas", 2}};
    json prec = config(data, {{"bn", b}}, {{"type", "precision"}, {"data", {"x"}}, {"norms", {"bn"}}}, "float64");
    check_refused("rep_precision", prec, {"/analyses/0/norms", "each of its replicas with its own statistics"});
    b["sync"] = true;
    prec["norms"]["bn"] = b;
    CHECK(run_config("rep_precision_sync", prec).cli.exit_code == 0);
}

TEST_CASE("B17: gradients through replicas pass the finite-difference check; jacobian refuses per-replica groups") {
    const json c = load_case<json>("B17");
    const json data = {{"x", values_source(c["input"]["values"])}};
    const json sizes = c["input"]["replica_sizes"];
    json norms = {{"unsynced", {{"type", "batchnorm"}, {"replicas", sizes}, {"weight", {1.5, 0.5}}}},
                  {"synced", {{"type", "batchnorm"}, {"replicas", sizes}, {"sync", true}}},
                  {"whole", {{"type", "batchnorm"}}}};
    const RunResult r = run_config(
        "b17_gradients", config(data, norms, {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"unsynced", "synced", "whole"}}}, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("gradients");
    for (const char* n : {"unsynced", "synced", "whole"}) {
        CAPTURE(std::string(n));
        CHECK(num(one(rows, {{"norm", n}}), "fd_max_rel_err") < 1e-6);
        // Each replica's statistics are centred: dx sums to 0 over each (replica, channel).
        CHECK(num(one(rows, {{"norm", n}}), "grad_sum_abs_max") < 1e-9);
    }
    CHECK(num(one(rows, {{"norm", "synced"}}), "grad_input_rms") == num(one(rows, {{"norm", "whole"}}), "grad_input_rms"));
    check_refused("b17_jacobian", config(data, norms, {{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"unsynced"}}}, "float64"),
                  {"/analyses/0/norms", "each of its replicas normalises with its own statistics"});
}

TEST_CASE("B17: batch_dependence shows synced vs unsynced outputs for several replica counts") {
    const json c = load_case<json>("B17");
    json cfg = config({{"x", values_source(c["input"]["values"])}},
                      {{"bn", {{"type", "batchnorm"}, {"replicas", {2, 6}}}},
                       {"ln", {{"type", "layernorm"}, {"normalized_shape", {2}}}}},
                      {{{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"bn", "ln"}}, {"sizes", {2, 8}},
                        {"replicas", {1, 2, 4, 8}}}},
                      "float64");
    const RunResult r = run_config("b17_batch_dependence", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("batch_dependence");
    CHECK(rows.size() == 2 * (2 + 4 * 2));
    auto at = [&](const std::string& norm, const std::string& R, const std::string& sync) {
        return one(rows, {{"norm", norm}, {"replicas", R}, {"kind", sync == "true" ? "synced" : "unsynced"}});
    };
    // One replica is the whole batch; synchronised replicas see the whole batch's statistics.
    CHECK(num(at("bn", "1", "false"), "max_abs_diff") == 0);
    for (const char* R : {"1", "2", "4"}) CHECK(num(at("bn", R, "true"), "max_abs_diff") == 0);
    // Unsynchronised, the sample's output follows its replica's statistics: smaller
    // per-replica batches move it further from the one-device output here.
    const double d2 = num(at("bn", "2", "false"), "max_abs_diff"), d4 = num(at("bn", "4", "false"), "max_abs_diff");
    MESSAGE("BatchNorm sample 0, unsynchronised: max_abs_diff " << d2 << " (2 replicas of 4), " << d4 << " (4 of 2)");
    CHECK(d2 > 0.1);
    CHECK(d4 > 0.1);
    CHECK(at("bn", "2", "false").at("batch_dependent") == "true");
    CHECK(num(at("bn", "2", "false"), "batch_size") == 4);
    CHECK(num(at("bn", "4", "false"), "batch_size") == 2);
    // 8 replicas of one (N, C) sample have one value per channel: the layer refuses them, a row.
    CHECK(at("bn", "8", "false").at("status").find("one value per channel") != std::string::npos);
    CHECK(at("bn", "8", "true").at("status") == "ok");
    // LayerNorm's statistics are per sample: no split changes anything.
    for (const char* R : {"1", "2", "4", "8"})
        for (const char* s : {"false", "true"}) CHECK(num(at("ln", R, s), "max_abs_diff") == 0);
    // A replica count that does not divide N = 8 is the config's error, not a dependence
    // on the batch: refused by run and validate alike, for every norm.
    json uneven = cfg;
    uneven["analyses"][0]["replicas"] = {1, 2, 3, 4};
    check_refused("b17_bd_uneven", uneven,
                  {"/analyses/0/replicas/2", "data \"x\"", "replicas 3 does not divide", "N = 8"});
    // A sample outside the batch is refused by run and validate alike.
    json bad = cfg;
    bad["analyses"][0]["sample"] = 8;
    check_refused("b17_bd_sample", bad, {"/analyses/0/sample", "sample 8 out of range for a batch of 8"});
    // The size rows run the norm on one device (its own replicas set aside).
    CHECK(one(rows, {{"norm", "bn"}, {"batch_size", "8"}, {"kind", "size"}}).at("status") == "ok");
    CHECK(one(rows, {{"norm", "bn"}, {"batch_size", "8"}, {"kind", "size"}}).at("replicas") == "1");
}

TEST_CASE("B18: GroupNorm with per-group affine parameters (ONNX opset 18) and its per-channel equivalent") {
    const json c = load_case<json>("B18");
    const json& in = c["input"];
    const json& ex = c["expected"];
    const Tol tol = tolerance(c);
    REQUIRE(in["layout"] == "NCL");
    const long long G = in["num_groups"].get<long long>();
    auto gn = [&](const char* per, const json& w, const json& b) {
        return json{{"type", "groupnorm"}, {"num_groups", G}, {"eps", in["eps"]}, {"affine_per", per}, {"weight", w}, {"bias", b}};
    };
    // A port that tiles the per-group values over the channels instead of repeating each.
    json tiled_w = json::array(), tiled_b = json::array();
    const std::size_t C = in["shape"][1].get<std::size_t>();
    for (std::size_t k = 0; k < C; ++k) {
        tiled_w.push_back(in["scale_per_group"][k % G]);
        tiled_b.push_back(in["bias_per_group"][k % G]);
    }
    json norms = {{"opset18", gn("group", in["scale_per_group"], in["bias_per_group"])},
                  {"opset21", gn("channel", ex["equivalent_opset21_scale"], ex["equivalent_opset21_bias"])},
                  {"tiled", gn("channel", tiled_w, tiled_b)}};
    json cfg = config({{"x", values_source(in["values"])}}, norms,
                      {apply({"x"}, {"opset18", "opset21"}, {"output"}),
                       {{"type", "port_check"}, {"data", {"x"}}, {"norms", {"opset18", "opset21", "tiled"}}},
                       {{"type", "stats_shapes"}, {"data", {"x"}}, {"norms", {"opset18"}}}},
                      "float64");
    const RunResult r = run_config("b18", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    check_close(saved(r, "x", "opset18", "output"), flatten(ex["output_opset18"]), tol, "opset 18 (per group)");
    check_close(saved(r, "x", "opset21", "output"), flatten(ex["output_opset18"]), tol, "opset 21 equivalent (per channel)");
    CHECK(one(r.csv("stats_shapes"), {{"norm", "opset18"}}).at("param_shape") == "[" + std::to_string(G) + "]");
    CHECK(one(r.csv("stats_shapes"), {{"norm", "opset18"}}).at("param_axes") == "[1]");  // per group, on C

    const auto pc = r.csv("port_check");
    const auto same = one(pc, {{"port", "opset21"}});
    CHECK(num(same, "differing_count") == 0);
    CHECK(same.at("differing_positions") == "[]");
    CHECK(num(same, "max_abs_diff") == 0);
    // Tiling swaps the values of channels 1 and 2 (of 4, 2 groups): every position of those
    // channels differs, none of channels 0 and 3.
    const auto wrong = one(pc, {{"port", "tiled"}});
    const std::size_t L = in["shape"][2].get<std::size_t>();
    CHECK(num(wrong, "differing_count") == 2 * L);
    std::string want = "[";
    for (std::size_t k : {1, 2})
        for (std::size_t l = 0; l < L; ++l) want += std::string(want.size() > 1 ? "," : "") + "[0," + std::to_string(k) + "," + std::to_string(l) + "]";
    CHECK(wrong.at("differing_positions") == want + "]");
    CHECK(num(wrong, "max_abs_diff") > 1);
}

TEST_CASE("B18: a GroupNorm weight of the wrong length names both possible shapes") {
    const json c = load_case<json>("B18");
    const json& in = c["input"];
    const json data = {{"x", values_source(in["values"])}};
    auto cfg = [&](const json& gn) { return config(data, {{"gn", gn}}, {apply({"x"}, {"gn"}, {"output"})}, "float64"); };
    json gn = {{"type", "groupnorm"}, {"num_groups", in["num_groups"]}, {"affine_per", "group"},
               {"weight", c["expected"]["equivalent_opset21_scale"]}};
    check_refused("gn_group_len_c", cfg(gn),
                  {"/norms/gn/weight", "expected shape [2] (one value per group", "but got [4]", "[4] with affine_per \"channel\"",
                   "[2] with affine_per \"group\""});
    gn["affine_per"] = "channel";
    gn["weight"] = in["scale_per_group"];
    check_refused("gn_channel_len_g", cfg(gn),
                  {"/norms/gn/weight", "expected shape [4] (one value per channel", "but got [2]", "[2] with affine_per \"group\""});
    gn.erase("weight");
    gn["bias"] = c["expected"]["equivalent_opset21_bias"];
    gn["affine_per"] = "group";
    check_refused("gn_group_bias", cfg(gn), {"/norms/gn/bias", "[2] with affine_per \"group\""});
    gn.erase("bias");
    gn["affine_per"] = "groups";
    check_refused("gn_bad_per", cfg(gn), {"/norms/gn/affine_per", "\"groups\""});
    json ln = {{"type", "layernorm"}, {"normalized_shape", {4}}, {"affine_per", "group"}};
    check_refused("ln_affine_per", cfg(ln), {"/norms/gn", "affine_per"});
}

TEST_CASE("B19: bfloat16 RMSNorm rounds the affine step once (fused) or twice (Llama reference)") {
    const json c = load_case<json>("B19");
    const json& in = c["input"];
    const json& ex = c["expected"];
    const Tol tol = tolerance(c);
    REQUIRE(in["dtype"] == "bfloat16");
    const std::size_t D = in["shape"][1].get<std::size_t>();
    auto rms = [&](const char* rounding) {
        return json{{"type", "rmsnorm"}, {"normalized_shape", {D}}, {"eps", in["eps"]}, {"weight", in["weight"]},
                    {"affine_rounding", rounding}};
    };
    json cfg = config({{"x", values_source(in["values"])}}, {{"fused", rms("once")}, {"llama", rms("twice")}},
                      {apply({"x"}, {"fused", "llama"}, {"output"}),
                       {{"type", "port_check"}, {"data", {"x"}}, {"norms", {"fused", "llama"}}}},
                      "bfloat16");
    const RunResult r = run_config("b19", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    check_close(saved(r, "x", "fused", "output"), flatten(ex["weight_then_round"]), tol, "once (weight then round)");
    check_close(saved(r, "x", "llama", "output"), flatten(ex["round_then_weight"]), tol, "twice (round then weight)");
    const auto pc = one(r.csv("port_check"), {{"port", "llama"}});
    std::string want = "[";
    for (const auto& p : ex["differing_positions"]) want += std::string(want.size() > 1 ? "," : "") + "[0," + std::to_string(p.get<int>()) + "]";
    CHECK(pc.at("differing_positions") == want + "]");
    CHECK(num(pc, "differing_count") == ex["differing_positions"].size());
    CHECK(num(pc, "max_abs_diff") == ex["max_abs_diff"].get<double>());
    const json rep = json::parse(read_text(r.out / "report.json"));
    CHECK(rep["notes"].empty());

    SUBCASE("float32 and float64: twice changes nothing and the report says so") {
        for (const char* dtype : {"float32", "float64"}) {
            CAPTURE(dtype);
            json c32 = cfg;
            c32["dtype"] = dtype;
            const RunResult r32 = run_config(std::string("b19_") + dtype, c32);
            REQUIRE_MESSAGE(r32.cli.exit_code == 0, r32.cli.err);
            CHECK(saved(r32, "x", "fused", "output") == saved(r32, "x", "llama", "output"));
            const json rep32 = json::parse(read_text(r32.out / "report.json"));
            // On a CPU without FMA a float32 run also notes its default arithmetic (the test below).
            const bool compute_note = std::string(dtype) == "float32" && normlab::default_compute() == normlab::Compute::float64;
            REQUIRE(rep32["notes"].size() == 1 + compute_note);
            const std::string note = rep32["notes"][0].get<std::string>();
            CHECK(note.find("/norms/llama/affine_rounding") != std::string::npos);
            CHECK(note.find(std::string("this ") + dtype + " run") != std::string::npos);
            // validate and a run without -q print it as a note, not an error.
            const CliResult v = validate(std::string("b19_v_") + dtype, c32);
            CHECK(v.exit_code == 0);
            CHECK(v.err.find("normlab: note: ") == 0);
        }
    }
    SUBCASE("a bad value is an input error") {
        json bad = cfg;
        bad["norms"]["llama"]["affine_rounding"] = "thrice";
        check_refused("b19_bad", bad, {"/norms/llama/affine_rounding", "\"thrice\""});
    }
}

namespace {

// Expands a mask of shape `ms` to `ws` with numpy's rules after padding ms with trailing
// 1s to ws's rank (leading alignment): written independently of normlab's fit_mask.
std::vector<double> expand(const std::vector<double>& m, std::vector<std::size_t> ms, const std::vector<std::size_t>& ws) {
    ms.resize(ws.size(), 1);
    std::size_t n = 1;
    for (auto d : ws) n *= d;
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::size_t rest = i, off = 0, stride = 1;
        std::vector<std::size_t> idx(ws.size());
        for (std::size_t d = ws.size(); d-- > 0;) idx[d] = rest % ws[d], rest /= ws[d];
        for (std::size_t d = ws.size(); d-- > 0;) {
            off += (ms[d] == 1 ? 0 : idx[d]) * stride;
            stride *= ms[d];
        }
        out[i] = m[off];
    }
    return out;
}

std::string npy(const std::vector<double>& v, const std::vector<std::size_t>& shape) {
    xt::xarray<double> a = xt::xarray<double>::from_shape(shape);
    std::copy(v.begin(), v.end(), a.begin());
    return normlab::npy_bytes(a, normlab::DType::float64);
}

}  // namespace

TEST_CASE("masks broadcast: every broadcastable shape gives the statistics of the expanded mask") {
    // Data (2, 3, 4, 5) with channels last: the shape without the channel axis is (2, 3, 4).
    const std::vector<std::size_t> xs = {2, 3, 4, 5}, ws = {2, 3, 4};
    std::mt19937_64 gen(7);
    std::normal_distribution<double> normal(3.0, 2.0);
    std::vector<double> x(2 * 3 * 4 * 5);
    for (auto& v : x) v = normal(gen);
    std::map<std::string, std::string> files = {{"x.npy", npy(x, xs)}};
    // Every shape of rank 0..3 whose dims are W's leading dims or 1.
    std::vector<std::vector<std::size_t>> shapes;
    for (std::size_t rank = 0; rank <= ws.size(); ++rank)
        for (std::size_t bits = 0; bits < (1u << rank); ++bits) {
            std::vector<std::size_t> s;
            for (std::size_t d = 0; d < rank; ++d) s.push_back(bits >> d & 1 ? ws[d] : 1);
            shapes.push_back(s);
        }
    // And some of the data's own rank (channel axis 1 or C).
    shapes.push_back({2, 1, 4, 1});
    shapes.push_back({1, 3, 1, 5});
    json data = json::object();
    std::vector<std::string> names;
    std::bernoulli_distribution real(0.7);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const auto& s = shapes[i];
        std::size_t n = 1;
        for (auto d : s) n *= d;
        std::vector<double> m(n);
        for (auto& v : m) v = real(gen) ? 1 : 0;
        m[0] = 1;  // at least one real position
        const bool full_rank = s.size() == xs.size();
        const std::vector<std::size_t> target = full_rank ? xs : ws;
        const std::string k = std::to_string(i);
        files["m" + k + ".npy"] = npy(m, s);
        files["e" + k + ".npy"] = npy(expand(m, s, target), target);
        data["m" + k] = {{"source", "npy"}, {"path", "x.npy"}, {"channel_axis", -1}, {"mask", "m" + k + ".npy"}};
        data["e" + k] = {{"source", "npy"}, {"path", "x.npy"}, {"channel_axis", -1}, {"mask", "e" + k + ".npy"}};
        names.push_back("m" + k);
        names.push_back("e" + k);
    }
    json norms = {{"bn", {{"type", "batchnorm"}, {"mask", true}}},
                  {"in", {{"type", "instancenorm"}, {"mask", true}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 1}, {"mask", true}}},
                  {"ln", {{"type", "layernorm"}, {"axes", {1, 2, 3}}, {"mask", true}}}};
    json cfg = config(data, norms,
                      json::array({apply(names, {"bn", "in", "gn", "ln"}, {"output", "mean", "var"}),
                                   apply(names, {"bn"}, {"running_mean", "running_var"})}),
                      "float64");
    const RunResult r = run_config("mask_broadcast", cfg, files);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    // Equal, NaN for NaN, within `rel` of |b| (at least 1).
    auto same = [](const xt::xarray<double>& a, const xt::xarray<double>& b, double rel) {
        if (a.shape() != b.shape()) return false;
        for (std::size_t i = 0; i < a.size(); ++i) {
            const double u = a.data()[i], v = b.data()[i];
            if (std::isnan(u) || std::isnan(v)) {
                if (std::isnan(u) != std::isnan(v)) return false;
            } else if (std::fabs(u - v) > rel * std::max(1.0, std::fabs(v))) {
                return false;
            }
        }
        return true;
    };
    const json rep = json::parse(read_text(r.out / "report.json"));
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const std::string k = std::to_string(i);
        std::ostringstream shape;
        for (auto d : shapes[i]) shape << d << ' ';
        CAPTURE(shape.str());
        // A mask without the channel axis is stored like its expansion: the same bits. One of
        // the data's rank with 1 at the channel axis is compared with its expansion to the
        // full shape, whose strides make the statistics walk sum in another order (an ulp).
        const double rel = shapes[i].size() == xs.size() && shapes[i][3] == 1 ? 8 * std::numeric_limits<double>::epsilon() : 0.0;
        for (const char* nn : {"bn", "in", "gn", "ln"})
            for (const char* what : {"output", "mean", "var"}) {
                CAPTURE(std::string(nn));
                CAPTURE(std::string(what));
                CHECK(same(saved(r, "m" + k, nn, what), saved(r, "e" + k, nn, what), rel));
            }
        CHECK(same(saved(r, "m" + k, "bn", "running_var"), saved(r, "e" + k, "bn", "running_var"), rel));
        CHECK(rep["data"]["m" + k]["pad_fraction"] == rep["data"]["e" + k]["pad_fraction"]);
    }
}

TEST_CASE("masks broadcast: a (1, 2, 1) mask for (1, 2, 3, 4) channels last counts the positions it covers") {
    // All-ones data: whatever the count, a correct mean is 1 and the output 0; dividing the
    // sum of 3 positions per mask entry by the number of entries would not give 1.
    std::map<std::string, std::string> files = {{"x.npy", npy(std::vector<double>(24, 1.0), {1, 2, 3, 4})},
                                                 {"m.npy", npy({1, 0}, {1, 2, 1})},
                                                 {"seq.npy", npy({1, 0}, {1, 2})}};
    json data = {{"x", {{"source", "npy"}, {"path", "x.npy"}, {"channel_axis", -1}, {"mask", "m.npy"}}},
                 {"s", {{"source", "npy"}, {"path", "x.npy"}, {"channel_axis", -1}, {"mask", "seq.npy"}}}};
    json norms = {{"bn", {{"type", "batchnorm"}, {"mask", true}, {"eps", 0.5}}}};
    const RunResult r = run_config("mask_121", config(data, norms, {apply({"x", "s"}, {"bn"}, {"output", "mean", "var"})}, "float32"),
                                   files);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    for (const char* d : {"x", "s"}) {
        CAPTURE(d);
        for (double v : saved(r, d, "bn", "mean")) CHECK(v == 1);
        for (double v : saved(r, d, "bn", "var")) CHECK(v == 0);
        for (double v : saved(r, d, "bn", "output")) CHECK(v == 0);
    }
    const json rep = json::parse(read_text(r.out / "report.json"));
    CHECK(rep["data"]["x"]["pad_fraction"].get<double>() == 0.5);

    // A mask that broadcasts neither way is refused, naming the shapes accepted.
    files["bad.npy"] = npy({1, 0, 1, 1}, {1, 4});
    data["x"]["mask"] = "bad.npy";
    check_refused("mask_bad", config(data, norms, {apply({"x"}, {"bn"}, {"output"})}, "float32"),
                  {"/data/x/mask", "mask of shape [1, 4]", "[1, 2, 3, 4]", "without its channel axis [1, 2, 3]",
                   "fewer axes that match the leading ones"},
                  files);
}

TEST_CASE("compute: a norm that does not choose takes this CPU's default, and the run says when that is double") {
    // Values far from their mean in a row of 512: the float path and the double path round
    // differently somewhere, so the default's bits tell which one ran.
    json row = json::array();
    for (int i = 0; i < 512; ++i) row.push_back(1000.0 + 0.37 * i + (i % 7) * 1e-3);
    const json data = {{"x", values_source(json::array({row}))}};
    const json norms = {{"dflt", {{"type", "layernorm"}, {"axes", {-1}}}},
                        {"f", {{"type", "layernorm"}, {"axes", {-1}}, {"compute", "float"}}},
                        {"d", {{"type", "layernorm"}, {"axes", {-1}}, {"compute", "double"}}}};
    const json cfg = config(data, norms, apply({"x"}, {"dflt", "f", "d"}, {"output"}), "float32");
    const RunResult r = run_config("compute_default", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto yf = saved(r, "x", "f", "output"), yd = saved(r, "x", "d", "output");
    REQUIRE(yf != yd);
    const bool float_default = normlab::default_compute() == normlab::Compute::float32;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__FMA__)
    // From the build and the CPU, not from the engine: GCC's x86-64 builds carry the float
    // kernels' FMA versions unless NORMLAB_FMA_CLONES is off, and the loader picks one on
    // CPUs of x86-64-v3 and up. So the main build (clones on, on this CI's CPU) and the
    // sanitizer build (clones off) each check one side.
    __builtin_cpu_init();
    CHECK(float_default == (NORMLAB_TEST_FMA_CLONES && __builtin_cpu_supports("x86-64-v3")));
#endif
    CHECK(saved(r, "x", "dflt", "output") == (float_default ? yf : yd));
    const json rep = json::parse(read_text(r.out / "report.json"));
    CHECK(rep["notes"].size() == (float_default ? 0u : 1u));
    CHECK(rep["default_compute"] == (float_default ? "float" : "double"));

    // The note itself, as a CPU without FMA gives it; none where every norm chooses, or on
    // float64 data.
    const auto dir = fresh_dir("compute_note");
    const auto notes = [&](const json& c, normlab::Compute dflt) {
        std::vector<std::string> out;
        for (const auto& n : normlab::config_notes(normlab::parse_config(normlab::Json::parse(c.dump()), (dir / "cfg.json").string(), dir, normlab::analysis_catalog()), dflt))
            out.push_back(n.message());
        return out;
    };
    const auto without_fma = notes(cfg, normlab::Compute::float64);
    REQUIRE(without_fma.size() == 1);
    for (const char* m : {"cfg.json: /norms: ", "norms without \"compute\" take the double path here",
                          "FMAs in software", "\"compute\": \"float\""})
        CHECK_MESSAGE(without_fma[0].find(m) != std::string::npos, "missing \"" << m << "\" in " << without_fma[0]);
    CHECK(notes(cfg, normlab::Compute::float32).empty());
    json chosen = cfg;
    chosen["norms"].erase("dflt");
    chosen["analyses"][0]["norms"] = {"f", "d"};
    CHECK(notes(chosen, normlab::Compute::float64).empty());
    // On float64 data "compute" changes nothing, and the run says so for each norm that gives it.
    json f64 = cfg;
    f64["dtype"] = "float64";
    const auto on_f64 = notes(f64, normlab::Compute::float64);
    REQUIRE(on_f64.size() == 2);
    // (nlohmann::json writes the norms in key order: d, dflt, f.)
    CHECK(on_f64[0].find("cfg.json: /norms/d/compute: \"compute\" chooses the arithmetic for float32 data only; "
                         "this float64 run always takes double arithmetic") != std::string::npos);
    CHECK(on_f64[1].find("cfg.json: /norms/f/compute: ") != std::string::npos);
}

TEST_CASE("momentum pasted from the other family of conventions is noted, with its counterpart") {
    // PyTorch's momentum weights the new batch, Keras's/Flax's/ONNX's the old value: a Keras
    // 0.99 pasted into a PyTorch BatchNorm makes the running statistics follow each batch.
    const json cfg = {{"name", "momenta"},
                      {"data", {{"x", {{"source", "gaussian"}, {"shape", {8, 3}}}}}},
                      {"norms", {{"pasted_torch", {{"type", "batchnorm"}, {"momentum", 0.99}}},
                                 {"pasted_keras", {{"type", "batchnorm"}, {"convention", "keras"}, {"momentum", 0.1}}},
                                 {"torch", {{"type", "batchnorm"}, {"momentum", 0.1}}},
                                 {"keras", {{"type", "batchnorm"}, {"convention", "keras"}, {"momentum", 0.99}}},
                                 // Where the momentum acts on nothing: no note.
                                 {"in_untracked", {{"type", "instancenorm"}, {"momentum", 0.9}}},
                                 {"bn_untracked", {{"type", "batchnorm"}, {"momentum", 0.9}, {"track_running_stats", false}}},
                                 {"bn_eval", {{"type", "batchnorm"}, {"momentum", 0.9}, {"training", false}}},
                                 // A choice of its own, said as what it does.
                                 {"last_batch", {{"type", "batchnorm"}, {"momentum", 1}}},
                                 {"last_batch_keras", {{"type", "batchnorm"}, {"convention", "keras"}, {"momentum", 0}}}}},
                      {"analyses", {{{"type", "apply"}, {"data", {"x"}}, {"norms", {"pasted_torch", "pasted_keras", "torch", "keras", "bn_untracked", "bn_eval", "last_batch", "last_batch_keras"}}}}}};
    const CliResult v = validate("momenta", cfg);
    CHECK(v.exit_code == 0);
    CHECK(v.err.find("/norms/pasted_torch/momentum: momentum 0.99 under the torch convention is the new batch's weight: "
                     "the running statistics take 0.99 of each new batch. Keras's, Flax's and ONNX's momentum 0.99 is PyTorch's 0.01\n") !=
          std::string::npos);
    CHECK(v.err.find("/norms/pasted_keras/momentum: momentum 0.1 under the keras convention is the old value's weight: "
                     "the running statistics take 0.9 of each new batch. PyTorch's momentum 0.1 is 0.9 under \"keras\"\n") !=
          std::string::npos);
    CHECK(v.err.find("/norms/last_batch/momentum: momentum 1 under the torch convention replaces the running statistics "
                     "with each new batch's (no average)\n") != std::string::npos);
    CHECK(v.err.find("/norms/last_batch_keras/momentum: momentum 0 under the keras convention replaces the running "
                     "statistics with each new batch's (no average)\n") != std::string::npos);
    CHECK(std::count(v.err.begin(), v.err.end(), '\n') == 4 + (normlab::default_compute() == normlab::Compute::float64));
}

TEST_CASE("a Keras or Flax BatchNorm, InstanceNorm or GroupNorm on channel axis 1 by default alone is noted") {
    // Keras's and Flax's layers take the last axis by default: ported to NHWC data without
    // channel_axis, normlab's default axis 1 normalises over H and says nothing else.
    const json cfg = {{"name", "axis_notes"},
                      {"data", {{"nhwc", {{"source", "gaussian"}, {"shape", {6, 5, 3, 4}}}},
                                {"nchw", {{"source", "gaussian"}, {"shape", {6, 4, 3, 5}}, {"channel_axis", 1}}},
                                {"rows", {{"source", "gaussian"}, {"shape", {6, 4}}}}}},
                      {"norms", {{"bn_keras", {{"type", "batchnorm"}, {"convention", "keras"}}},
                                 {"gn_flax", {{"type", "groupnorm"}, {"num_groups", 1}, {"convention", "flax"}}},
                                 // No note: PyTorch's own default, an axis given, a LayerNorm, rank 2.
                                 {"bn_torch", {{"type", "batchnorm"}}},
                                 {"bn_keras_last", {{"type", "batchnorm"}, {"convention", "keras"}, {"channel_axis", -1}}},
                                 {"ln_keras", {{"type", "layernorm"}, {"axes", {-1}}, {"convention", "keras"}}}}},
                      {"analyses", {{{"type", "stats_shapes"}, {"data", {"nhwc", "nchw", "rows"}},
                                     {"norms", {"bn_keras", "gn_flax", "bn_torch", "bn_keras_last", "ln_keras"}}},
                                    {{"type", "apply"}, {"data", {"nhwc"}}, {"norms", {"bn_keras"}}}}}};
    const CliResult v = validate("axis_notes", cfg);
    CHECK(v.exit_code == 0);
    CHECK(v.err.find("/norms/bn_keras/convention: batchnorm \"bn_keras\" on data \"nhwc\": channel axis 1 of input shape "
                     "[6, 5, 3, 4], normlab's default (channels first, as in PyTorch); Keras's and Flax's layers take the "
                     "last axis by default. Give \"channel_axis\" to the norm or the data (-1 for channels last, 1 to keep "
                     "this) to say which\n") != std::string::npos);
    CHECK(v.err.find("/norms/gn_flax/convention: groupnorm \"gn_flax\" on data \"nhwc\"") != std::string::npos);
    // Once per norm and input shape, whatever the analyses.
    CHECK(std::count(v.err.begin(), v.err.end(), '\n') == 2 + (normlab::default_compute() == normlab::Compute::float64));
    // One note names every batch of one shape a norm meets (training steps, say), and the
    // dry run gives the notes validate gives.
    json steps = cfg;
    steps["data"]["nhwc2"] = steps["data"]["nhwc"];
    steps["analyses"] = {{{"type", "apply"}, {"data", {"nhwc", "nhwc2"}}, {"norms", {"bn_keras"}}}};
    const CliResult s2 = validate("axis_notes_steps", steps);
    CHECK(s2.exit_code == 0);
    CHECK(s2.err.find("batchnorm \"bn_keras\" on data \"nhwc\" and \"nhwc2\": channel axis 1 of input shape "
                      "[6, 5, 3, 4],") != std::string::npos);
    CHECK(std::count(s2.err.begin(), s2.err.end(), '\n') == 1 + (normlab::default_compute() == normlab::Compute::float64));
    const auto dir = fresh_dir("axis_notes_dry");
    write_text(dir / "cfg.json", steps.dump(2));
    const CliResult dry = run_normlab("run " + (dir / "cfg.json").string() + " --dry-run");
    CHECK(dry.exit_code == 0);
    // The channel-axis note's line, after the config's path (each run has its own folder);
    // a machine without FMA adds a note on the arithmetic, which both give too.
    auto axis_line = [](const std::string& err) {
        const std::size_t at = err.find("/norms/bn_keras/convention: ");
        return at == std::string::npos ? std::string() : err.substr(at, err.find('\n', at) - at);
    };
    REQUIRE_FALSE(axis_line(s2.err).empty());
    CHECK(axis_line(dry.err) == axis_line(s2.err));
    CHECK(std::count(dry.err.begin(), dry.err.end(), '\n') == std::count(s2.err.begin(), s2.err.end(), '\n'));
}
