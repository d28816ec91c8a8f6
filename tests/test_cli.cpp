// End to end: the built binary on the quickstart config and on broken configs.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis_util.hpp"
#include "cli_util.hpp"
#include "data/npy.hpp"
#include "norm/engine.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

// Runs a config given as text; returns the result.
CliResult run_config_text(const std::string& name, const std::string& json, const std::string& extra = "") {
    fs::path dir = fresh_dir(name);
    write_text(dir / "cfg.json", json);
    return run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "out").string() + " " + extra);
}

std::string one_norm(const std::string& data, const std::string& norm, const std::string& analysis = "apply") {
    return R"({"name": "t", "data": {"x": )" + data + R"(}, "norms": {"n": )" + norm +
           R"(}, "analyses": [{"type": ")" + analysis + R"(", "data": ["x"], "norms": ["n"]}]})";
}

}  // namespace

TEST_CASE("quickstart: report, CSVs with the documented shapes, saved output readable") {
    fs::path out = fresh_dir("quickstart") / "out";
    CliResult r = run_normlab("run " + kSrc + "/configs/quickstart.json --out " + out.string() + " --quiet");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out.empty());
    std::string shapes = read_text(out / "stats_shapes.csv");
    CHECK(shapes.rfind("data,norm,type,input_shape,reduction_axes,stats_shape,num_stats,elems_per_stat,param_shape,param_axes,num_params", 0) == 0);
    CHECK(shapes.find("tokens,ln,layernorm,\"[32,64,512]\",\"[2]\",\"[32,64,1]\",2048,512") != std::string::npos);
    CHECK(shapes.find("images,bn,batchnorm,\"[32,3,64,64]\",\"[0,2,3]\",\"[1,3,1,1]\",3,131072") != std::string::npos);
    CHECK(shapes.find("images,ln_img,layernorm,\"[32,3,64,64]\",\"[1,2,3]\",\"[32,1,1,1]\",32,12288") != std::string::npos);
    CHECK(shapes.find("small,ln_last,layernorm,\"[2,3,4]\",\"[2]\",\"[2,3,1]\",6,4") != std::string::npos);
    CHECK(shapes.find("small,ln_two,layernorm,\"[2,3,4]\",\"[1,2]\",\"[2,1,1]\",2,12") != std::string::npos);
    // The axes the weight and bias lie along: BatchNorm's channel axis, LayerNorm's normalized ones.
    CHECK(shapes.find("images,bn,batchnorm,\"[32,3,64,64]\",\"[0,2,3]\",\"[1,3,1,1]\",3,131072,\"[3]\",\"[1]\",6,") != std::string::npos);
    CHECK(shapes.find("small,ln_two,layernorm,\"[2,3,4]\",\"[1,2]\",\"[2,1,1]\",2,12,\"[3,4]\",\"[1,2]\",24,") != std::string::npos);
    std::string apply = read_text(out / "apply.csv");
    CHECK(apply.rfind("data,norm,type,step,eps,out_mean_min,out_mean_max,out_std_min,out_std_max,out_rms_min,out_rms_max,in_min,in_max,out_min,out_max", 0) == 0);
    auto y = normlab::read_npy(out / "arrays/row/ln_row/output.npy");
    CHECK(y.dtype == "float32");
    REQUIRE(y.values.size() == 4);
    CHECK(y.values(0, 0) == doctest::Approx(-1.3416).epsilon(1e-4));
    CHECK(y.values(0, 1) == doctest::Approx(-0.4472).epsilon(1e-4));
    CHECK(y.values(0, 3) == doctest::Approx(1.3416).epsilon(1e-4));
    auto report = nlohmann::json::parse(read_text(out / "report.json"));
    CHECK(report["tool"] == "normlab");
    CHECK(report["data"]["images"]["shape"] == nlohmann::json::array({32, 3, 64, 64}));

    SUBCASE("same config, same bytes (apart from timings); a second run replaces the first") {
        fs::path out2 = fresh_dir("quickstart2") / "out";
        REQUIRE(run_normlab("run " + kSrc + "/configs/quickstart.json --out " + out2.string() + " -q").exit_code == 0);
        CHECK(read_text(out / "apply.csv") == read_text(out2 / "apply.csv"));
        CHECK(read_text(out / "arrays/row/ln_row/output.npy") == read_text(out2 / "arrays/row/ln_row/output.npy"));
        auto r2 = nlohmann::json::parse(read_text(out2 / "report.json"));
        report.erase("timings_ms");
        r2.erase("timings_ms");
        CHECK(report == r2);
        CHECK(run_normlab("run " + kSrc + "/configs/quickstart.json --out " + out2.string() + " -q").exit_code == 0);
    }
}

TEST_CASE("bad configs exit 2 with one line naming the file and the JSON path") {
    struct Case {
        const char* name;
        std::string json;
        const char* expect;
    };
    const std::string gauss = R"({"source": "gaussian", "shape": [2, 30, 8, 8]})";
    std::vector<Case> cases = {
        {"malformed", R"({"name": "t", "data": {)", "line 1, column"},
        {"unknown_key", one_norm(gauss, R"({"type": "layernorm", "normalized_shape": [8], "epsx": 1})"),
         "/norms/n/epsx: unknown key \"epsx\"; did you mean \"eps\"?"},
        {"wrong_type", one_norm(gauss, R"({"type": "layernorm", "normalized_shape": [8], "eps": "1e-5"})"),
         "/norms/n/eps: expected a number, but got string"},
        {"negative_eps", one_norm(gauss, R"({"type": "layernorm", "normalized_shape": [8], "eps": -1})"),
         "/norms/n/eps: eps must be >= 0"},
        {"groups", one_norm(gauss, R"({"type": "groupnorm", "num_groups": 4})"),
         "/norms/n/num_groups: groupnorm \"n\" on data \"x\": expected channels (C=30) to be divisible by num_groups (4)"},
        {"normalized_shape", one_norm(gauss, R"({"type": "layernorm", "normalized_shape": [512]})"),
         "/norms/n/normalized_shape: layernorm \"n\" on data \"x\": given normalized_shape=[512], expected input with shape [*, 512], but got input of shape [2, 30, 8, 8]"},
        {"axes_range", one_norm(gauss, R"({"type": "layernorm", "axes": [4]})"),
         "/norms/n/axes: layernorm \"n\" on data \"x\": axes: axis 4 out of range for input of rank 4"},
        {"axes_repeated", one_norm(gauss, R"({"type": "rmsnorm", "axes": [3, -1]})"), "axis -1 repeated"},
        {"weight_shape", one_norm(gauss, R"({"type": "batchnorm", "weight": [1, 2]})"),
         "/norms/n/weight: batchnorm \"n\" on data \"x\": weight: expected shape [30] (one value per channel: C = 30 at "
         "channel axis 1 of input shape [2, 30, 8, 8]), but got [2]"},
        {"running_shape", one_norm(gauss, R"({"type": "batchnorm", "training": false, "running_var": [1, 2, 3]})"),
         "/norms/n/running_var: batchnorm \"n\" on data \"x\": running_var: expected shape [30] (one value per channel"},
        {"bn_one_value", one_norm(R"({"source": "values", "values": [[0.5, -1.0, 2.0, 0.0]]})", R"({"type": "batchnorm"})"),
         "one value per channel (need more than 1), input shape [1, 4]"},
        {"undefined_data", R"({"data": {"x": {"source": "values", "values": [1, 2]}}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["y"], "norms": ["n"]}]})", "/analyses/0/data/0: no data entry named \"y\"; did you mean \"x\"? (/data has: x)"},
        {"unknown_analysis", R"({"data": {"x": {"source": "values", "values": [1, 2]}}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "aply", "data": ["x"], "norms": ["n"]}]})", "did you mean \"apply\"?"},
        {"empty_norms", R"({"data": {"x": {"source": "values", "values": [1, 2]}}, "norms": {}, "analyses": []})", "/norms: no norms defined"},
        {"unknown_type", one_norm(gauss, R"({"type": "layer_norm", "axes": [1]})"), "/norms/n/type: unknown value \"layer_norm\""},
        {"bad_save", R"({"data": {"x": {"source": "values", "values": [[1, 2]]}}, "norms": {"n": {"type": "layernorm", "axes": [-1]}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"], "save": ["running_mean"]}]})",
         "/analyses/0/save/0: layernorm \"n\" keeps no running statistics"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CliResult r = run_config_text(std::string("bad_") + c.name, c.json);
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(c.expect) != std::string::npos, r.err);
        CHECK(r.err.find("cfg.json") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK_FALSE(fs::exists(fs::path(fresh_dir(std::string("bad_") + c.name + "_x")).parent_path() / (std::string("bad_") + c.name) / "out"));
    }
}

TEST_CASE("param_axes: validate refuses each bad input with the entry's JSON pointer and why") {
    struct Case {
        const char* name;
        std::string norm;
        const char* expect;
    };
    // Channels last (N, H, W, C), as Flax's layers take images.
    const std::string img = R"({"source": "gaussian", "shape": [2, 8, 8, 3], "channel_axis": -1})";
    const std::string ln = R"("type": "layernorm", "axes": [1, 2, 3], )";
    const std::vector<Case> cases = {
        {"range", "{" + ln + R"("param_axes": [-1, 4]})",
         "cfg.json: /norms/n/param_axes/1: layernorm \"n\" on data \"x\": param_axes: axis 4 out of range for input of "
         "rank 4"},
        {"repeated", "{" + ln + R"("param_axes": [3, -1]})",
         "cfg.json: /norms/n/param_axes/1: layernorm \"n\" on data \"x\": param_axes: axis -1 repeated (it is axis 3 "
         "of input shape [2, 8, 8, 3], which entry 0 names already)"},
        {"repeated_as_written", "{" + ln + R"("param_axes": [-1, 2, -1]})",
         "cfg.json: /norms/n/param_axes/2: param_axes: axis -1 repeated (first at /norms/n/param_axes/0)"},
        {"not_normalized", R"({"type": "rmsnorm", "normalized_shape": [8, 3], "param_axes": [-1, 1]})",
         "cfg.json: /norms/n/param_axes/1: rmsnorm \"n\" on data \"x\": param_axes: axis 1 of input shape "
         "[2, 8, 8, 3] is not normalized: the normalized axes are 2 and 3 (normalized_shape [8, 3]), and the weight "
         "and bias span some of them"},
        {"empty", "{" + ln + R"("param_axes": []})",
         "cfg.json: /norms/n/param_axes: param_axes must not be empty (leave it out for parameters over every "
         "normalized axis)"},
        {"no_affine", "{" + ln + R"("param_axes": [-1], "affine": false})",
         "cfg.json: /norms/n/param_axes: param_axes given but affine is false (there is no weight or bias to place)"},
        {"other_type", R"({"type": "instancenorm", "affine": true, "param_axes": [-1]})",
         "cfg.json: /norms/n/param_axes: param_axes applies to layernorm and rmsnorm only; instancenorm's weight and "
         "bias lie on its channel axis, one value per channel"},
        {"weight_list", "{" + ln + R"("param_axes": [-1], "weight": [1, 2, 3, 4, 5, 6, 7, 8]})",
         "cfg.json: /norms/n/weight: layernorm \"n\" on data \"x\": weight: expected shape [3] (the dim at param axis "
         "3 of input shape [2, 8, 8, 3] (param_axes [-1]), broadcast along normalized axes 1 and 2), but got [8]"},
        {"bias_npy", "{" + ln + R"("param_axes": [1, 2], "bias": {"npy": "b.npy"}})",
         "cfg.json: /norms/n/bias: layernorm \"n\" on data \"x\": bias: expected shape [8, 8] (the dims at param axes "
         "1 and 2 of input shape [2, 8, 8, 3] (param_axes [1, 2]), broadcast along normalized axis 3), but got [3]"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        const fs::path dir = fresh_dir(std::string("param_axes_") + c.name);
        normlab::write_npy(dir / "b.npy", normlab::Tensor::from_double(xt::xarray<double>{1.0, 2.0, 3.0},
                                                                       normlab::DType::float64));
        write_text(dir / "cfg.json", one_norm(img, c.norm));
        const CliResult r = run_normlab("validate " + (dir / "cfg.json").string());
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find(c.expect) != std::string::npos, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    // The same layer is accepted, and list names the key.
    const fs::path ok = fresh_dir("param_axes_ok");
    write_text(ok / "cfg.json", one_norm(img, "{" + ln + R"("param_axes": [-1], "weight": [1, 2, 3]})"));
    const CliResult v = run_normlab("validate " + (ok / "cfg.json").string());
    CHECK_MESSAGE(v.exit_code == 0, v.err);
    const CliResult list = run_normlab("list");
    CHECK(list.out.find("param_axes (every normalized axis)") != std::string::npos);
    // stats_shapes: statistics over H, W, C, and a (C) weight and bias.
    const CliResult shapes = run_config_text("param_axes_shapes", one_norm(img, "{" + ln + R"("param_axes": [-1]})",
                                                                             "stats_shapes"), "-q");
    REQUIRE_MESSAGE(shapes.exit_code == 0, shapes.err);
    const std::string csv = read_text(fresh_dir("param_axes_probe").parent_path() / "param_axes_shapes" / "out" /
                                      "stats_shapes.csv");
    CHECK_MESSAGE(csv.find("x,n,layernorm,\"[2,8,8,3]\",\"[1,2,3]\",\"[2,1,1,1]\",2,192,\"[3]\",\"[3]\",6,") != std::string::npos,
                  csv);
}

TEST_CASE("a weight and bias of several dims as nested lists: the same output as from npy files") {
    // LayerNorm over (T, D) with a (T, D) weight and bias, as nested lists and as npy files.
    const fs::path dir = fresh_dir("nested_params");
    const xt::xarray<double> w{{1.5, -2.0}, {0.25, 3.0}, {-1.0, 0.5}}, b{{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.6}};
    normlab::write_npy(dir / "w.npy", normlab::Tensor::from_double(w, normlab::DType::float64));
    normlab::write_npy(dir / "b.npy", normlab::Tensor::from_double(b, normlab::DType::float64));
    const std::string data = R"({"source": "values", "values": [[[1, 4], [2, 8], [3, -1]], [[0, 1], [5, 5], [9, 2]]]})";
    const std::string norms = R"("ln_list": {"type": "layernorm", "normalized_shape": [3, 2],
                                   "weight": [[1.5, -2.0], [0.25, 3.0], [-1.0, 0.5]],
                                   "bias": [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]},
                               "ln_npy": {"type": "layernorm", "normalized_shape": [3, 2],
                                   "weight": {"npy": "w.npy"}, "bias": {"npy": "b.npy"}})";
    write_text(dir / "cfg.json", R"({"name": "nested", "dtype": "float64", "data": {"x": )" + data +
                                     R"(}, "norms": {)" + norms +
                                     R"(}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln_list", "ln_npy"],
                                     "save": ["output"]}]})");
    const CliResult r = run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto from_list = normlab::read_npy(dir / "out/arrays/x/ln_list/output.npy");
    const auto from_npy = normlab::read_npy(dir / "out/arrays/x/ln_npy/output.npy");
    REQUIRE(from_list.values.shape() == from_npy.values.shape());
    CHECK(from_list.values == from_npy.values);
    // A ragged list is refused at the sublist that differs.
    write_text(dir / "ragged.json", one_norm(R"({"source": "gaussian", "shape": [2, 3, 2]})",
                                             R"({"type": "layernorm", "normalized_shape": [3, 2], "weight": [[1, 2], [3, 4, 5], [6, 7]]})"));
    const CliResult ragged = run_normlab("validate " + (dir / "ragged.json").string());
    CHECK(ragged.exit_code == 2);
    CHECK_MESSAGE(ragged.err.find("ragged.json: /norms/n/weight/1: ragged nested list: this list has 3 elements, but "
                                  "/norms/n/weight/0 has 2") != std::string::npos,
                  ragged.err);
    // The right count, flat: the message says how to nest it.
    write_text(dir / "flat.json", one_norm(R"({"source": "gaussian", "shape": [2, 3, 2]})",
                                           R"({"type": "layernorm", "normalized_shape": [3, 2], "weight": [1, 2, 3, 4, 5, 6]})"));
    const CliResult flat = run_normlab("validate " + (dir / "flat.json").string());
    CHECK(flat.exit_code == 2);
    CHECK_MESSAGE(flat.err.find("weight: expected shape [3, 2] (the dims at normalized axes 1 and 2 of input shape "
                                "[2, 3, 2]), but got [6] (the right count, flat: as a list, nest it: a list of 3 "
                                "lists of 2 values)") != std::string::npos,
                  flat.err);
}

TEST_CASE("--set overrides any config value; --out folder rules") {
    const std::string cfg = one_norm(R"({"source": "values", "values": [[1, 2, 3, 4]]})",
                                     R"({"type": "layernorm", "normalized_shape": [4]})");
    CliResult r = run_config_text("set", cfg, "--set norms.n.eps=0.5 --set /data/x/values/0/0=0 -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string csv = read_text(fresh_dir("set_probe").parent_path() / "set" / "out" / "apply.csv");
    // show --where repeats: both conditions hold on the one row
    CliResult shown = run_normlab("show " + (fresh_dir("set_probe").parent_path() / "set" / "out").string() +
                                  " apply --where norm=n --where data=x");
    CHECK_MESSAGE(shown.exit_code == 0, shown.err);
    CHECK_MESSAGE(shown.out.rfind("== apply (1 of 1 row", 0) == 0, shown.out);
    CliResult none = run_normlab("show " + (fresh_dir("set_probe").parent_path() / "set" / "out").string() +
                                 " apply --where norm=n --where data=y");
    CHECK_MESSAGE(none.out.rfind("== apply (0 of 1 row", 0) == 0, none.out);
    CHECK(csv.find(",0.5,") != std::string::npos);
    CHECK(csv.find(",0,4,") != std::string::npos);  // in_min 0 after the override
    CliResult bad = run_config_text("set_bad", cfg, "--set norms.m.eps=1");
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("/norms/m does not exist") != std::string::npos);
    // --unset removes a key before the --set values: its default applies again, and the
    // key can be given anew (lengths replaced by a mask).
    const std::string eps_cfg = one_norm(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -1, "lengths": [3, 1]})",
                                         R"({"type": "layernorm", "normalized_shape": [4], "eps": 0.5})");
    CliResult unset = run_config_text("unset", eps_cfg, "--unset norms.n.eps -q");
    REQUIRE_MESSAGE(unset.exit_code == 0, unset.err);
    CHECK(read_text(fresh_dir("unset_probe").parent_path() / "unset" / "out" / "apply.csv").find(",1e-05,") != std::string::npos);
    const fs::path mdir = fresh_dir("unset_mask");
    normlab::write_file_bytes(mdir / "m.npy", normlab::npy_bytes_bool(xt::xarray<std::uint8_t>{{1, 1, 0}, {1, 1, 1}}));
    write_text(mdir / "cfg.json", eps_cfg);
    CliResult swapped = run_normlab("run " + (mdir / "cfg.json").string() + " --out " + (mdir / "out").string() +
                                    " --unset data.x.lengths --set data.x.mask=m.npy --set 'analyses.0.save=[\"mask\"]' -q");
    REQUIRE_MESSAGE(swapped.exit_code == 0, swapped.err);
    const auto saved = normlab::read_npy(mdir / "out" / "arrays" / "x" / "n" / "mask.npy").values;
    CHECK(saved(0, 2, 0) == 0);
    CHECK(saved(1, 2, 0) == 1);

    // --dry-run names the folder it would write, resolved, and writes nothing
    fs::path plan_dir = fresh_dir("dry_run_out");
    write_text(plan_dir / "cfg.json", cfg);
    CliResult plan = run_normlab("run " + (plan_dir / "cfg.json").string() + " --dry-run --out " + (plan_dir / "a" / ".." / "b").string());
    REQUIRE_MESSAGE(plan.exit_code == 0, plan.err);
    CHECK_MESSAGE(plan.out.find("\noutput: " + fs::weakly_canonical(plan_dir).string() + "/b (--out; the dry run writes nothing)\n") !=
                      std::string::npos, plan.out);
    CHECK_FALSE(fs::exists(plan_dir / "b"));
    // Each norm with its eps (and momentum) as they resolve.
    CHECK_MESSAGE(plan.out.find("\nnorm n: layernorm (torch: eps 1e-05)\n") != std::string::npos, plan.out);
    write_text(plan_dir / "bn.json", one_norm(R"({"source": "values", "values": [[1, 2], [3, 5]]})",
                                              R"({"type": "batchnorm", "convention": "keras"})"));
    CliResult keras = run_normlab("run " + (plan_dir / "bn.json").string() + " --dry-run");
    CHECK_MESSAGE(keras.out.find("\nnorm n: batchnorm (keras: eps 0.001, momentum 0.99)\n") != std::string::npos, keras.out);
    CliResult named = run_normlab("run " + (plan_dir / "cfg.json").string() + " --dry-run");
    CHECK_MESSAGE(named.out.find("\noutput: " + fs::current_path().string() + "/results/t (results/<name>;") != std::string::npos,
                  named.out);
    // An earlier result where the run would write: the dry run says the run replaces it.
    REQUIRE(run_normlab("run " + (plan_dir / "cfg.json").string() + " -q --out " + (plan_dir / "done").string()).exit_code == 0);
    CliResult over = run_normlab("run " + (plan_dir / "cfg.json").string() + " --dry-run --out " + (plan_dir / "done").string());
    CHECK_MESSAGE(over.out.find("/done (--out; holds an earlier result, which the run replaces; the dry run writes nothing)\n") !=
                      std::string::npos,
                  over.out);
    // A sweep: the paths that vary, each with its number of values, and whose plan is shown.
    CliResult sweep = run_normlab("run " + kSrc + "/configs/sweep.json --dry-run --shard 1/2");
    REQUIRE_MESSAGE(sweep.exit_code == 0, sweep.err);
    CHECK_MESSAGE(sweep.out.find("\nswept: norms.ln.eps (3 values), data.tokens.std (3 values); the plan below is point 1's\n") !=
                      std::string::npos,
                  sweep.out);
    CHECK(plan.out.find("swept:") == std::string::npos);
    // A shard without points prints no plan, and says so.
    CliResult empty = run_normlab("run " + kSrc + "/configs/sweep.json --dry-run --shard 9/10");
    REQUIRE_MESSAGE(empty.exit_code == 0, empty.err);
    CHECK_MESSAGE(empty.out.find("\nswept: norms.ln.eps (3 values), data.tokens.std (3 values); this shard runs no point\n") !=
                      std::string::npos,
                  empty.out);
    // An earlier result beside files of someone else's, replaced only with --force.
    write_text(plan_dir / "done" / "notes.txt", "mine");
    CliResult forced = run_normlab("run " + (plan_dir / "cfg.json").string() + " --dry-run --force --out " + (plan_dir / "done").string());
    CHECK_MESSAGE(forced.out.find("/done (--out; holds an earlier result and other files (\"notes.txt\"), which the run replaces "
                                  "(--force); the dry run writes nothing)\n") != std::string::npos,
                  forced.out);
    // A symbolic link is named as itself: the run replaces the link, not the folder it points to.
    fs::create_directories(plan_dir / "target");
    fs::create_directory_symlink(plan_dir / "target", plan_dir / "link");
    CliResult link = run_normlab("run " + (plan_dir / "cfg.json").string() + " --dry-run --out " + (plan_dir / "link").string());
    const std::string real = fs::weakly_canonical(plan_dir).string();
    REQUIRE_MESSAGE(link.exit_code == 0, link.err);
    CHECK_MESSAGE(link.out.find("\noutput: " + real + "/link (--out; a symbolic link to " + real +
                                "/target, which the run replaces with a folder of its own; the dry run writes nothing)\n") !=
                      std::string::npos,
                  link.out);

    fs::path dir = fresh_dir("foreign");
    write_text(dir / "cfg.json", cfg);
    write_text(dir / "out" / "mine.txt", "precious");
    CliResult refused = run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "out").string());
    CHECK(refused.exit_code == 2);
    CHECK(refused.err.find("not empty") != std::string::npos);
    CHECK(read_text(dir / "out" / "mine.txt") == "precious");
}

TEST_CASE("config from standard input: \"-\" reads it, relative paths from the current folder") {
    // A config piped from jq or a script. Its npy path is relative: with no config file to
    // stand beside, it resolves against the folder normlab runs in.
    const fs::path dir = fresh_dir("stdin_config");
    const xt::xarray<double> x = {{1, 2, 3, 4}, {5, 6, 7, 9}};
    normlab::write_file_bytes(dir / "x.npy", normlab::npy_bytes(x, normlab::DType::float64));
    write_text(dir / "cfg.txt", one_norm(R"({"source": "npy", "path": "x.npy"})", R"({"type": "layernorm", "axes": [-1]})"));
    const std::string bin = NORMLAB_BINARY;
    auto sh = [&](const std::string& cmd) {
        const int status = std::system(("cd " + dir.string() + " && " + cmd + " >out.txt 2>err.txt").c_str());
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    CHECK(sh(bin + " validate - < cfg.txt") == 0);
    CHECK(read_text(dir / "out.txt") == "-: ok\n");
    REQUIRE(sh(bin + " run - --out res -q < cfg.txt") == 0);
    const auto rows = parse_csv(read_text(dir / "res" / "apply.csv"));
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].at("in_max") == "9");
    // The same config from a file elsewhere resolves x.npy beside that file, not here.
    fs::create_directories(dir / "sub");
    fs::copy_file(dir / "cfg.txt", dir / "sub" / "cfg.json");
    CHECK(sh(bin + " validate sub/cfg.json") == 2);
    CHECK(read_text(dir / "err.txt").find("x.npy") != std::string::npos);
    CHECK(sh(bin + " validate - - < cfg.txt") == 2);
    CHECK(read_text(dir / "err.txt") == "normlab: error: validate: - given more than once; standard input holds one config\n");
    // Nothing on standard input, or an empty file: said so, not a parse error at 1:1.
    CHECK(sh(bin + " validate - < /dev/null") == 2);
    CHECK(read_text(dir / "err.txt") == "normlab: error: - (standard input): is empty, expected a JSON object (a config)\n");
    write_text(dir / "empty.json", "  \n");
    CHECK(sh(bin + " run empty.json") == 2);
    CHECK(read_text(dir / "err.txt") == "normlab: error: empty.json: is empty, expected a JSON object (a config)\n");
    CHECK_FALSE(fs::exists(dir / "results"));
}

TEST_CASE("usage errors exit 2; validate and list") {
    CHECK(run_normlab("").exit_code == 2);
    CHECK(run_normlab("run").exit_code == 2);
    // Command-line errors read like every other error: one line, the prefix, the command.
    struct Usage {
        std::string args, expect;
    };
    const std::vector<Usage> usage = {
        {"", "normlab: error: a command is required: run, validate, list,"},
        {"frobnicate", "normlab: error: unknown command \"frobnicate\"; see normlab --help"},
        {"rnu x.json", "normlab: error: unknown command \"rnu\" (did you mean \"run\"?)"},
        {"run x.json --thread 2", "normlab: error: run: unknown option \"--thread\" (did you mean \"--threads\"?); see normlab run --help"},
        {"run x.json y.json", "normlab: error: run: unexpected argument \"y.json\""},
        {"run", "normlab: error: run: config is required"},
        {"merge m", "normlab: error: merge: SHARD_DIR is required; see normlab merge --help"},
        {"bench --repeet 3", "normlab: error: bench: unknown option \"--repeet\" (did you mean \"--repeat\"?)"},
        // Keras's "axis": the channel axis of a BatchNorm, the normalized axis of a LayerNorm.
        {"shapes --shape 2,3,4 --norm batchnorm --axis -1",
         "normlab: error: shapes: unknown option \"--axis\" (did you mean \"--channel-axis\" for batchnorm, "
         "instancenorm and groupnorm, or \"--axes\" for layernorm and rmsnorm?); see normlab shapes --help"},
        // CLI11's conversion and missing-value errors, in normlab's words
        {"run x.json --seed abc", "normlab: error: run --seed abc: expected an integer"},
        {"run x.json --seed 1.5", "normlab: error: run --seed 1.5: expected an integer"},
        {"run x.json --seed 99999999999999999999999", "normlab: error: run --seed 99999999999999999999999: expected an integer"},
        {"run x.json --out", "normlab: error: run --out: expected a value (a folder); see normlab run --help"},
        {"run x.json --seed", "normlab: error: run --seed: expected an integer; see normlab run --help"},
        {"validate x.json --set", "normlab: error: validate --set: expected a value (PATH=VALUE)"},
        {"init -o", "normlab: error: init --output: expected a value (a file)"},
        {"bench --stack --layers x", "normlab: error: bench --layers x: expected an integer >= 1"},
        {"run x.json --dry-run=maybe", "normlab: error: run --dry-run: expected no value (a flag) or true/false, but got \"maybe\""},
        // an option of one value given twice: the values were fine, the repeat is the error
        {"run x.json --out /tmp/q1 --out /tmp/q2", "normlab: error: run --out: given twice (/tmp/q1, /tmp/q2); give it once"},
        {"bench --stack --layers 2 --layers 3", "normlab: error: bench --layers: given twice (2, 3); give it once"},
        {"bench --norm a --norm b", "normlab: error: bench --norm: given twice (a, b); give it once"},
        {"bench --dtype x --dtype y --dtype z", "normlab: error: bench --dtype: given 3 times (x, y, z); give it once"},
        {"init -o a.json -o b.json", "normlab: error: init --output: given twice (a.json, b.json); give it once"},
        {"shapes --shape 2,3 --shape 4,5 --norm layernorm", "normlab: error: shapes --shape: given twice (\"2,3\", \"4,5\"); give it once"},
    };
    for (const auto& u : usage) {
        CAPTURE(u.args);
        CliResult r = run_normlab(u.args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK_MESSAGE(r.err.rfind(u.expect, 0) == 0, r.err);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    // Options meant to repeat still take every value.
    CliResult repeated = run_normlab("validate " + kSrc + "/configs/quickstart.json --set seed=3 --set norms.ln.eps=1e-3");
    CHECK_MESSAGE(repeated.exit_code == 0, repeated.err);
    CliResult help = run_normlab("run --help");
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("--threads") != std::string::npos);
    CHECK(help.out.find("writes report.json, report.html and one CSV per analysis") != std::string::npos);
    CliResult top = run_normlab("--help");
    CHECK(top.exit_code == 0);
    CHECK(top.out.find("norm types and their keys, stacks,") != std::string::npos);
    CHECK(top.out.find("--stack: a residual stack's forward and backward") != std::string::npos);
    CHECK(run_normlab("run /nonexistent/cfg.json").exit_code == 2);
    CHECK(run_normlab("--version").exit_code == 0);
    CliResult v = run_normlab("validate " + kSrc + "/configs/quickstart.json");
    CHECK(v.exit_code == 0);
    CliResult l = run_normlab("list");
    CHECK(l.exit_code == 0);
    // Each convention with its defaults, as the frameworks document them (PyTorch's
    // BatchNorm2d: eps 1e-5, momentum 0.1 on the new batch, unbiased running_var; Keras's
    // BatchNormalization: epsilon 1e-3, momentum 0.99 on the old value; ONNX's
    // BatchNormalization: epsilon 1e-5, momentum 0.9).
    CHECK(l.out.find("\n  torch: eps 1e-05 (rmsnorm 2.22e-16 for float64 data, 1.19e-07 for the others), momentum 0.1 "
                     "(the new batch's weight), running_var from the unbiased batch variance\n") != std::string::npos);
    CHECK(l.out.find("\n  keras: eps 0.001 (rmsnorm 1e-06), momentum 0.99 (the old value's weight), running_var from "
                     "the biased batch variance\n") != std::string::npos);
    CHECK(l.out.find("\n  onnx: eps 1e-05, momentum 0.9 (the old value's weight)") != std::string::npos);

    // Several configs: each is checked and reported, a bad one does not stop the rest.
    fs::path dir = fresh_dir("validate_many");
    const std::string good = one_norm(R"({"source": "values", "values": [[1, 2, 3, 4]]})",
                                      R"({"type": "layernorm", "normalized_shape": [4]})");
    write_text(dir / "a.json", good);
    write_text(dir / "bad1.json", R"({"name": "t", "data": {)");
    write_text(dir / "bad2.json", one_norm(R"({"source": "values", "values": [[1, 2, 3, 4]]})",
                                           R"({"type": "layernorm", "normalized_shape": [4], "epsx": 1})"));
    write_text(dir / "c.json", good);
    CliResult many = run_normlab("validate " + (dir / "a.json").string() + " " + (dir / "bad1.json").string() + " " +
                                 (dir / "bad2.json").string() + " " + (dir / "c.json").string());
    CHECK(many.exit_code == 2);
    CHECK(many.out == (dir / "a.json").string() + ": ok\n" + (dir / "c.json").string() + ": ok\n");
    // The error lines: on a CPU without FMA instructions each good config also gets a note
    // (its norms take the double path by default).
    std::string errors;
    std::istringstream err_lines(many.err);
    for (std::string line; std::getline(err_lines, line);)
        if (line.rfind("normlab: note: ", 0) != 0) errors += line + "\n";
    CHECK(std::count(errors.begin(), errors.end(), '\n') == 2);
    CHECK_MESSAGE(errors.rfind("normlab: error: " + (dir / "bad1.json").string() + ":", 0) == 0, many.err);
    CHECK_MESSAGE(errors.find("\nnormlab: error: " + (dir / "bad2.json").string() + ": /norms/n/epsx: unknown key") !=
                      std::string::npos, many.err);
    // An error that names no config (a --set refusal) is prefixed with its config's path
    // when several are given, and left as run gives it for one.
    const std::string set = " --set norms.n.typo=1";
    CliResult two = run_normlab("validate " + (dir / "a.json").string() + " " + (dir / "c.json").string() + set);
    CHECK(two.exit_code == 2);
    CHECK_MESSAGE(two.err.find("normlab: error: " + (dir / "a.json").string() + ": --set norms.n.typo=1: unknown key") !=
                      std::string::npos, two.err);
    CHECK_MESSAGE(two.err.find("normlab: error: " + (dir / "c.json").string() + ": --set norms.n.typo=1: unknown key") !=
                      std::string::npos, two.err);
    // A config's own error, which starts with its path (or "- (standard input)"), is not prefixed again.
    CliResult piped = run_normlab("validate - " + (dir / "a.json").string() + " < /dev/null");
    CHECK_MESSAGE(piped.err.rfind("normlab: error: - (standard input): ", 0) == 0, piped.err);
    CliResult one = run_normlab("validate " + (dir / "a.json").string() + set);
    CHECK_MESSAGE(one.err.rfind("normlab: error: --set norms.n.typo=1: unknown key", 0) == 0, one.err);
    CHECK(l.out.find("groupnorm") != std::string::npos);
    CHECK(l.out.find("stats_shapes") != std::string::npos);
    // normalized_shape has no default: the listing must not read like one
    CHECK(l.out.find("layernorm: normalized_shape (required unless axes: the trailing dims), axes (or normalized_shape)") !=
          std::string::npos);
    CHECK(l.out.find("rmsnorm: normalized_shape (required unless axes") != std::string::npos);
}

TEST_CASE("bench: one JSON object per case with the documented fields; bad options exit 2") {
    CliResult r = run_normlab("bench --norm layernorm,batchnorm --shape 4,8,16 --shape 2,6,5 --threads 1,2 "
                              "--repeat 3 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::istringstream lines(r.out);
    std::string line;
    std::vector<nlohmann::json> rows;
    while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
    REQUIRE(rows.size() == 2 * 2 * 2);  // norms x shapes x thread counts
    for (const auto& j : rows) {
        CAPTURE(j.dump());
        for (const char* k : {"norm", "shape", "dtype", "compute", "threads", "median_ms", "q1_ms", "q3_ms", "timed_calls", "ns_per_elem", "gb_per_s",
                              "copy_gb_per_s", "fraction_of_copy", "moments_ns_per_elem", "moments_of_copy",
                              "normalize_ns_per_elem", "normalize_of_copy", "state", "cold_ms", "peak_rss_mib", "data_mean"})
            CHECK(j.contains(k));
        CHECK(j["state"] == "steady");
        CHECK(j["data_mean"] == 0);
        CHECK(j["timed_calls"] == 3);  // --repeat alone
        CHECK(j["dtype"] == "float32");
        CHECK(j["compute"] == (normlab::default_compute() == normlab::Compute::float32 ? "float" : "double"));
        // per element: median_ms over the element count; each phase was timed, and its
        // fraction of the copy is the copy's time over the phase's (moments read once)
        const double elems = j["shape"] == nlohmann::json{4, 8, 16} ? 4 * 8 * 16 : 2 * 6 * 5;
        CHECK(j["ns_per_elem"].get<double>() == doctest::Approx(j["median_ms"].get<double>() * 1e6 / elems).epsilon(1e-4));
        CHECK(j["moments_ns_per_elem"].get<double>() > 0);
        CHECK(j["normalize_ns_per_elem"].get<double>() > 0);
        const double copy_ms = 2 * elems * 4 / (j["copy_gb_per_s"].get<double>() * 1e6);
        CHECK(j["normalize_of_copy"].get<double>() ==
              doctest::Approx(copy_ms / (j["normalize_ns_per_elem"].get<double>() * elems / 1e6)).epsilon(1e-3));
        CHECK(j["moments_of_copy"].get<double>() ==
              doctest::Approx(copy_ms / (2 * j["moments_ns_per_elem"].get<double>() * elems / 1e6)).epsilon(1e-3));
        CHECK(j["median_ms"].get<double>() > 0);
        CHECK(j["q1_ms"].get<double>() <= j["median_ms"].get<double>());
        CHECK(j["median_ms"].get<double>() <= j["q3_ms"].get<double>());
        CHECK(j["copy_gb_per_s"].get<double>() > 0);
        // GB/s counts one read and one write of the batch: 2 * bytes / time
        const double bytes = j["shape"] == nlohmann::json{4, 8, 16} ? 4 * 8 * 16 * 4 : 2 * 6 * 5 * 4;
        CHECK(j["gb_per_s"].get<double>() ==
              doctest::Approx(2 * bytes / (j["median_ms"].get<double>() * 1e6)).epsilon(1e-4));
    }
    CHECK(rows[0]["norm"] == "layernorm");
    CHECK(rows[0]["shape"] == nlohmann::json{4, 8, 16});
    CHECK(rows[0]["threads"] == 1);
    CHECK(rows[1]["threads"] == 2);
    CHECK(rows[7]["norm"] == "batchnorm");

    // --min-time-ms keeps timing past --repeat: 20 ms of calls that take microseconds
    CliResult longer = run_normlab("bench --norm layernorm --shape 4,8 --threads 1 --repeat 1 --min-time-ms 20 --json");
    REQUIRE_MESSAGE(longer.exit_code == 0, longer.err);
    const nlohmann::json lj = nlohmann::json::parse(longer.out);
    CHECK(lj["timed_calls"].get<long long>() > 10);

    CliResult last = run_normlab("bench --norm batchnorm --shape 2,5,3 --channel-axis -1 --threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(last.exit_code == 0, last.err);
    CHECK(nlohmann::json::parse(last.out)["channel_axis"] == 2);
    CliResult dbl = run_normlab("bench --norm layernorm --shape 4,8 --compute double --dtype float64 --threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(dbl.exit_code == 0, dbl.err);
    CHECK(nlohmann::json::parse(dbl.out)["compute"] == "double");
    CHECK(nlohmann::json::parse(dbl.out)["dtype"] == "float64");
    // float64 data always takes double arithmetic, whatever --compute says, and bench says so.
    CliResult f64 = run_normlab("bench --norm layernorm --shape 4,8 --compute float --dtype float64 --threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(f64.exit_code == 0, f64.err);
    CHECK(nlohmann::json::parse(f64.out)["compute"] == "double");
    CliResult half = run_normlab("bench --norm layernorm --shape 4,8 --dtype float16 --threads 1 --repeat 1");
    CHECK(half.exit_code == 2);
    CHECK_MESSAGE(half.err.find("bench --dtype: expected float32 or float64, but got \"float16\"") != std::string::npos, half.err);
    CliResult rank1 = run_normlab("bench --norm layernorm,rmsnorm --shape 64 --threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(rank1.exit_code == 0, rank1.err);
    CHECK(rank1.out.find("\"channel_axis\": null") != std::string::npos);
    // channel_axis and num_groups: those the norm used, null for a norm that takes none
    CliResult used = run_normlab("bench --norm layernorm,rmsnorm,groupnorm,instancenorm --shape 2,4,3 --num-groups 2 "
                                 "--threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(used.exit_code == 0, used.err);
    std::istringstream used_lines(used.out);
    std::map<std::string, nlohmann::json> by_norm;
    for (std::string l; std::getline(used_lines, l);) by_norm[nlohmann::json::parse(l)["norm"]] = nlohmann::json::parse(l);
    REQUIRE(by_norm.size() == 4);
    CHECK(by_norm["layernorm"]["channel_axis"].is_null());
    CHECK(by_norm["rmsnorm"]["channel_axis"].is_null());
    CHECK(by_norm["groupnorm"]["channel_axis"] == 1);
    CHECK(by_norm["instancenorm"]["channel_axis"] == 1);
    CHECK(by_norm["groupnorm"]["num_groups"] == 2);
    for (const char* n : {"layernorm", "rmsnorm", "instancenorm"}) {
        CAPTURE(n);
        REQUIRE(by_norm[n].contains("num_groups"));
        CHECK(by_norm[n]["num_groups"].is_null());
    }

    CliResult far = run_normlab("bench --norm layernorm --shape 4,256 --threads 1 --repeat 1 --data-mean -1e3 --json");
    REQUIRE_MESSAGE(far.exit_code == 0, far.err);
    CHECK(nlohmann::json::parse(far.out)["data_mean"] == -1000);
    CliResult text = run_normlab("bench --norm rmsnorm --shape 3,7 --threads 1 --repeat 1");
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.rfind("norm ", 0) == 0);
    CHECK(text.out.find("rmsnorm      [3,7]") != std::string::npos);
    CHECK(text.out.find("steady state") != std::string::npos);

    struct Bad { const char* args; const char* message; };
    for (const Bad& b : {Bad{"--norm foo", "bench --norm: unknown norm type \"foo\" (expected batchnorm, layernorm,"},
                         Bad{"--norm layrnorm", "bench --norm: unknown norm type \"layrnorm\" (did you mean \"layernorm\"?)"},
                         Bad{"--norm layernorm --shape 0,3", "bench --shape 0: expected an integer >= 1"},
                         Bad{"--norm layernorm --shape 2,3 --repeat 0", "bench --repeat 0: expected an integer from 1 to 1000000"},
                         Bad{"--norm layernorm --shape 2,3 --repeat -1", "bench --repeat -1: expected an integer from 1"},
                         Bad{"--norm layernorm --shape 2,3 --threads 0", "bench --threads 0: expected an integer from 1 to 1024"},
                         Bad{"--norm layernorm --shape 2,3 --min-time-ms -5", "bench --min-time-ms -5: expected an integer from 0 to 600000"},
                         Bad{"--norm layernorm --shape 2,3 --min-time-ms 1.5", "bench --min-time-ms 1.5: expected an integer"},
                         Bad{"--norm layernorm --shape 2,3 --threads 1,x", "bench --threads x: expected an integer"},
                         Bad{"--norm groupnorm --shape 2,4,3 --num-groups 0", "bench --num-groups 0: expected an integer from 1"},
                         Bad{"--norm groupnorm --shape 2,4,3 --num-groups -1", "bench --num-groups -1: expected an integer from 1"},
                         Bad{"--norm layernorm --shape ''", "bench --shape: expected comma-separated dims"},
                         Bad{"--norm groupnorm --shape 2,3,4 --num-groups 2",
                             "normlab: error: bench --num-groups 2: expected channels (C=3) to be divisible by num_groups (2)"},
                         Bad{"--norm groupnorm --shape 2,3,4", "bench --num-groups (default 32): expected channels (C=3)"},
                         Bad{"--norm layernorm,groupnorm --shape 64,128,768 --num-groups 5 --threads 1",
                             "bench --num-groups 5: expected channels (C=128) to be divisible by num_groups (5)"},
                         Bad{"--norm batchnorm --shape 3,4 --channel-axis 2", "bench --channel-axis: 2 is outside a shape of rank 2"},
                         Bad{"--norm layernorm --shape 2,3 --compute half", "bench --compute: expected float or double"},
                         Bad{"--norm layernorm --shape 2,3 --compute ''", "bench --compute: expected float or double, but got \"\""},
                         Bad{"--norm '' --shape 2,3", "bench --norm: expected comma-separated norm types, but got \"\""},
                         Bad{"--norm layernorm --shape 2,3 --data-mean x", "bench --data-mean x: expected a number from -1e+30 to 1e+30"},
                         Bad{"--norm layernorm --shape 2,3 --data-mean inf", "bench --data-mean inf: expected a number from -1e+30"},
                         Bad{"--norm layernorm --shape 2,3 --data-mean 0x1p3", "bench --data-mean 0x1p3: expected a number from -1e+30"},
                         Bad{"--stack --data-mean 3", "bench --stack: --data-mean does not apply to the stack benchmark"},
                         Bad{"--stack --layers -3", "bench --layers -3: expected an integer >= 1"},
                         Bad{"--stack --rows 0", "bench --rows 0: expected an integer >= 1"},
                         Bad{"--norm layernorm --shape 100000,100000,100", "bench --shape 100000,100000,100 (the batch, its output and the copy) needs about 10.9 TiB, more than half of this machine's memory"},
                         Bad{"--norm layernorm --shape 100000000000,100000000000", "bench --shape 100000000000,100000000000 (the batch, its output and the copy) needs more than 16 EiB, more than half"},
                         Bad{"--stack --norm groupnorm", "bench --stack: --norm does not apply to the stack benchmark (its norm: --stack-norm)"},
                         Bad{"--norm layernorm --shape 2,3 --layers 4", "bench --layers: applies to the stack benchmark only (add --stack)"},
                         Bad{"--stack --dtype ''", "bench --dtype: expected float32 or float64, but got \"\""},
                         Bad{"--norm layernorm --shape 2,3 --dtype float32,float64",
                             "bench --dtype float32,float64: expected float32 or float64 (a comma-separated list is taken with --stack only"},
                         Bad{"--norm layernorm --shape 2,3 --num-groups 3", "bench --num-groups: only groupnorm takes it, and --norm is layernorm"},
                         Bad{"--norm layernorm,rmsnorm --shape 2,3 --channel-axis 0", "bench --channel-axis: only batchnorm, instancenorm and groupnorm take it, and --norm is layernorm,rmsnorm"},
                         Bad{"--stack --rows 100000000 --dtype float32", "in float32 needs about 58.5 TiB, more than half of this machine's memory"}}) {
        CAPTURE(b.args);
        CliResult e = run_normlab(std::string("bench ") + b.args);
        CHECK(e.exit_code == 2);
        CHECK(e.err.find(b.message) != std::string::npos);
        CHECK(e.out.empty());
    }
    // The bad last case is refused before the good first one is timed: timing it would take
    // ten minutes, and `timeout` would end the process after one with status 124.
    const int status = std::system((std::string("timeout 60 ") + NORMLAB_BINARY +
                                    " bench --norm layernorm,groupnorm --shape 64,128,768 --num-groups 5 --threads 1"
                                    " --min-time-ms 600000 >/dev/null 2>&1").c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
}

TEST_CASE("bench --stack: each placement counts only the work and memory it has; the header names only what it has") {
    // Tiny sizes: this checks what is counted and printed, not how fast it runs.
    const std::string sizes = "bench --stack --layers 2 --rows 16 --features 8 --hidden 32 --repeat 1 --dtype float32";
    const double mib = 1024.0 * 1024.0;
    auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };

    // norm_only is a chain of norms: no block, so no products, no weights, no hidden size.
    CliResult nj = run_normlab(sizes + " --placement norm_only --json");
    REQUIRE_MESSAGE(nj.exit_code == 0, nj.err);
    const auto n = nlohmann::json::parse(nj.out);
    for (const char* k : {"gflops", "dot_gflops", "fraction", "hidden"}) {
        INFO(k);
        REQUIRE(n.contains(k));
        CHECK(n.at(k).is_null());
    }
    CHECK(n.at("weights_mib") == 0);
    CHECK(n.at("norm") == "layernorm");
    CHECK(n.at("median_s").get<double>() > 0);
    CHECK(n.at("activations_mib").get<double>() > 0);
    CliResult nt = run_normlab(sizes + " --placement norm_only");
    REQUIRE_MESSAGE(nt.exit_code == 0, nt.err);
    CHECK(first_line(nt.out) == "stack norm_only layernorm: L=2 N=16 D=8, forward+backward, 1 timed pass");
    std::istringstream lines(nt.out);
    std::string line;
    std::getline(lines, line);
    std::getline(lines, line);
    std::getline(lines, line);  // the float32 row
    std::istringstream cells(line);
    std::vector<std::string> c;
    for (std::string w; cells >> w;) c.push_back(w);
    REQUIRE(c.size() == 10);
    CHECK(c[0] == "float32");
    CHECK(c[3] == "-");  // gflops
    CHECK(c[4] == "-");  // dot_gflops
    CHECK(c[5] == "-");  // fraction
    CHECK(c[7] == "0");  // weights_mib
    CHECK(nt.out.find("norm_only runs norms only: no products") != std::string::npos);

    // none has the block and its products but no norm.
    CliResult zj = run_normlab(sizes + " --placement none --json");
    REQUIRE_MESSAGE(zj.exit_code == 0, zj.err);
    const auto z = nlohmann::json::parse(zj.out);
    CHECK(z.at("norm").is_null());
    CHECK(z.at("hidden") == 32);
    CHECK(z.at("gflops").get<double>() > 0);
    CHECK(z.at("weights_mib").get<double>() == doctest::Approx(2 * 2 * 8 * 32 * 4 / mib));
    CliResult zt = run_normlab(sizes + " --placement none");
    REQUIRE_MESSAGE(zt.exit_code == 0, zt.err);
    CHECK(first_line(zt.out) == "stack none ffn: L=2 N=16 D=8 H=32, forward+backward, 1 timed pass");

    // pre has both: 12 L N D H per pass, the weights W1 (L, D, H) and W2 (L, H, D).
    CliResult pj = run_normlab(sizes + " --placement pre --json");
    REQUIRE_MESSAGE(pj.exit_code == 0, pj.err);
    const auto p = nlohmann::json::parse(pj.out);
    CHECK(p.at("norm") == "layernorm");
    CHECK(p.at("weights_mib").get<double>() == doctest::Approx(2 * 2 * 8 * 32 * 4 / mib));
    CHECK(p.at("fraction").get<double>() == doctest::Approx(p.at("gflops").get<double>() / p.at("dot_gflops").get<double>()).epsilon(2e-3));
    CHECK(p.at("gflops").get<double>() == doctest::Approx(12.0 * 2 * 16 * 8 * 32 / p.at("median_s").get<double>() / 1e9).epsilon(2e-3));
    CliResult pt = run_normlab(sizes + " --placement pre --stack-norm rmsnorm");
    REQUIRE_MESSAGE(pt.exit_code == 0, pt.err);
    CHECK(first_line(pt.out) == "stack pre ffn rmsnorm: L=2 N=16 D=8 H=32, forward+backward, 1 timed pass");
    // The footnote says what each column is, the two times included.
    CHECK(pt.out.find("median_s: the median of the timed passes; cold_s: the first pass, timed on its own and left out "
                      "of the median") != std::string::npos);
    CHECK(pt.out.find("so peak/activations measures the stack only when the activations are far larger") != std::string::npos);
    CHECK(pt.out.find("gflops: 12 L N D H per pass") != std::string::npos);
}

TEST_CASE("bench --help says which --dtype takes a list") {
    CliResult h = run_normlab("bench --help");
    REQUIRE(h.exit_code == 0);
    CHECK(h.out.find("float32 or float64 (default float32); --stack: also a comma-separated list") != std::string::npos);
    // --stack takes the list and times each dtype (the plain bench's refusal of a list is a
    // row of the bad options in "bench: one JSON object per case ...")
    CliResult two = run_normlab("bench --stack --layers 1 --rows 8 --features 4 --hidden 8 --repeat 1 --dtype float32,float64 --json");
    REQUIRE_MESSAGE(two.exit_code == 0, two.err);
    CHECK(std::count(two.out.begin(), two.out.end(), '\n') == 2);
}
