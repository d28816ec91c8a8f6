// What a new user reads when something is wrong: errors blame what set the bad value (the
// file, a --set override, a sweep point, an option), a misspelled required key is reported
// as the misspelling, numeric options refuse values the help does not give a meaning, and
// numbers read as the CSVs write them. End to end through the built binary.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;
const std::string kQuick = kSrc + "/configs/quickstart.json";

// Writes `json` as <test dir>/cfg.json and runs `normlab <command> cfg.json <extra>`.
CliResult on_config(const std::string& name, const std::string& json, const std::string& command,
                    const std::string& extra = "") {
    fs::path dir = fresh_dir(name);
    write_text(dir / "cfg.json", json);
    const std::string out = command == "run" ? " --out " + (dir / "out").string() : "";
    return run_normlab(command + " " + (dir / "cfg.json").string() + out + " " + extra);
}

// One data entry, one norm, one apply analysis.
std::string config(const std::string& data, const std::string& norm, const std::string& analysis_extra = "") {
    return R"({"name": "t", "data": {"x": )" + data + R"(}, "norms": {"n": )" + norm +
           R"(}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"])" + analysis_extra + "}]}";
}

// One data entry, one norm (or several: `norm` may go on with more entries), one analysis entry.
std::string analysis(const std::string& data, const std::string& norm, const std::string& entry) {
    return R"({"name": "t", "data": {"x": )" + data + R"(}, "norms": {"n": )" + norm + R"(}, "analyses": [)" + entry + "]}";
}

const std::string kGauss = R"({"source": "gaussian", "shape": [2, 6, 4]})";
const std::string kLn = R"({"type": "layernorm", "normalized_shape": [4]})";

// Writes `json` as <test dir>/c.json, checks that it validates as it is, and returns
// "validate <path> ": the start of the commands a test then runs on it with overrides.
std::string validate_command(const std::string& name, const std::string& json) {
    const fs::path dir = fresh_dir(name);
    write_text(dir / "c.json", json);
    const std::string v = "validate " + (dir / "c.json").string() + " ";
    const CliResult r = run_normlab(v);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return v;
}

// How many times `what` occurs in `text`.
std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

// Exit 2 and one line on stderr holding `expect`.
void check_refused(const CliResult& r, const std::string& expect) {
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find(expect) != std::string::npos, r.err);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace

TEST_CASE("an error at a value set by --set blames the override, not the config file") {
    struct Case {
        std::string args, expect;
    };
    const std::vector<Case> cases = {
        {"--set norms.ln.epsx=1e-3", "error: --set norms.ln.epsx=1e-3: unknown key \"epsx\" in /norms/ln (did you mean \"eps\"?)"},
        {"--set norms.ln.eps=abc", "error: --set norms.ln.eps=abc: /norms/ln/eps: expected a number, but got string \"abc\""},
        {"--set norms.ln.eps=-1", "error: --set norms.ln.eps=-1: /norms/ln/eps: eps must be >= 0 and finite, but got -1"},
        {"--set /norms/ln/convention=pytorch", "error: --set /norms/ln/convention=pytorch: /norms/ln/convention: unknown value \"pytorch\""},
        {R"(--set 'norms.ln={"type":"layernorm","epsx":1}')",
         "error: --set norms.ln={\"type\":\"layernorm\",\"epsx\":1}: unknown key \"epsx\" in /norms/ln (did you mean \"eps\"?)"},
        {"--set data.row.values=[[1,2],[3]]", "error: --set data.row.values=[[1,2],[3]]: /data/row/values/1: ragged nested list"},
        // a value that opens a list but does not parse is malformed JSON, not a string of the wrong type
        {"--set 'data.tokens.shape=[4,16,64,'", "error: --set data.tokens.shape=[4,16,64,: the value starts with '[' but is not valid JSON: parse error at line 1, column"},
        {"--set 'norms.ln={\"eps\": }'", "error: --set norms.ln={\"eps\": }: the value starts with '{' but is not valid JSON"},
        {"--set data.tokens.std=-1", "error: --set data.tokens.std=-1: /data/tokens/std: std must be >= 0 and finite, but got -1"},
        {"--set norms.bn.momentum=2", "error: --set norms.bn.momentum=2: /norms/bn/momentum: momentum must be in [0, 1]"},
        // found by the engine when the norm meets its data: still the override's fault
        {"--set norms.ln.normalized_shape=[7]", "error: --set norms.ln.normalized_shape=[7]: /norms/ln/normalized_shape: layernorm \"ln\""},
        {"--set analyses.0.typ=apply", "error: --set analyses.0.typ=apply: unknown key \"typ\" in /analyses/0 (did you mean \"type\"?)"},
        {"--set name=a/b", "error: --set name=a/b: /name: name (the default output folder is results/<name>) \"a/b\" must not contain"},
        {"--seed -1", "error: --seed -1: /seed: seed must be >= 0, but got -1"},
        // a misspelled step of the path itself: named, with a did-you-mean
        {"--set norms.lnn.eps=1", "error: --set norms.lnn.eps=1: /norms/lnn does not exist in the config (did you mean \"ln\"?)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        check_refused(run_normlab("run " + kQuick + " --dry-run " + c.args), c.expect);
        check_refused(run_normlab("validate " + kQuick + " " + c.args), c.expect);
    }
    // A dotted path into a sweep, whose keys hold dots: the pointer form that reaches the key.
    const std::string sweep = kSrc + "/configs/sweep.json";
    for (const std::string option : {"--unset sweep.norms.ln.eps", "--set 'sweep.norms.ln.eps=[1]'"}) {
        CAPTURE(option);
        check_refused(run_normlab("validate " + sweep + " " + option),
                      ": /sweep/norms does not exist in the config (the key \"norms.ln.eps\" holds dots: give the path as a "
                      "JSON pointer, /sweep/norms.ln.eps)");
    }
    // A path given as a pointer gets no such advice: it is one already.
    const CliResult pointer = run_normlab("validate " + sweep + " --unset /sweep/norms/ln.eps");
    check_refused(pointer, "--unset /sweep/norms/ln.eps: /sweep/norms does not exist in the config");
    CHECK(pointer.err.find("holds dots") == std::string::npos);
    // --unset removes a key: its default applies, and an error about the key names it.
    check_refused(run_normlab("validate " + kQuick + " --unset norms.ln.normalized_shape"),
                  "error: --unset norms.ln.normalized_shape: /norms/ln: missing \"normalized_shape\"");
    check_refused(run_normlab("validate " + kQuick + " --unset norms.ln.normalised_shape"),
                  "error: --unset norms.ln.normalised_shape: /norms/ln/normalised_shape does not exist in the config (did "
                  "you mean \"normalized_shape\"?)");
    check_refused(run_normlab("run " + kQuick + " --dry-run --unset data.tokens.shape.0"),
                  "error: --unset data.tokens.shape.0: /data/tokens/shape/0: only a key of an object can be removed");
    check_refused(on_config("unset_mask", config(R"({"source": "gaussian", "shape": [2, 3, 4], "channel_axis": -1, "lengths": [3, 1]})",
                                                 kLn, R"(, "save": ["mask"])"),
                            "validate", "--unset data.x.lengths"),
                  "error: --unset data.x.lengths: /analyses/0/save/0: apply on data \"x\": cannot save its padding mask, it "
                  "has none");
    // The file stays at fault for what the override did not touch.
    check_refused(run_normlab("run " + kQuick + " --dry-run --set norms.ln.eps=1e-3 --set norms.ln.epsy=1 --set norms.ln.epsy=2"),
                  "error: --set norms.ln.epsy=2: unknown key \"epsy\" in /norms/ln");
    CliResult file_fault = on_config("blame_file", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "epsx": 1})"),
                                     "validate", "--set norms.n.eps=1e-3");
    check_refused(file_fault, "cfg.json: /norms/n/epsx: unknown key \"epsx\"; did you mean \"eps\"?");
    // A later --set of a whole object takes over the blame for everything inside it.
    check_refused(run_normlab("run " + kQuick + " --dry-run --set norms.ln.eps=1 " +
                              R"(--set 'norms.ln={"type":"layernorm","normalized_shape":[512],"eps":-2}')"),
                  "error: --set norms.ln={\"type\":\"layernorm\",\"normalized_shape\":[512],\"eps\":-2}: /norms/ln/eps: eps must be >= 0 and finite, but got -2");
}

TEST_CASE("an error about a value read from a file that --set named blames that override") {
    // The file's path is the overridden key, but the error is about the data entry (its
    // shape) or the norm's running_var as a whole, found after the file was read.
    const fs::path dir = fresh_dir("blame_set_file");
    auto npy = [&](const std::string& name, const xt::xarray<double>& v) {
        normlab::write_file_bytes(dir / name, normlab::npy_bytes(v, normlab::DType::float64));
    };
    npy("x.npy", xt::ones<double>({2, 6, 4}));
    npy("scalar.npy", xt::xarray<double>(1.5));
    npy("empty.npy", xt::zeros<double>({0, 4}));
    npy("rv6.npy", xt::ones<double>({6}));
    npy("rv16.npy", xt::ones<double>({16}));
    write_text(dir / "cfg.json", config(R"({"source": "npy", "path": "x.npy"})",
                                        R"({"type": "batchnorm", "training": false, "running_var": {"npy": "rv6.npy"}})"));
    const std::string cfg = (dir / "cfg.json").string();
    struct Case {
        std::string args, expect;
    };
    const std::vector<Case> cases = {
        {"--set norms.n.running_var.npy=rv16.npy",
         "error: --set norms.n.running_var.npy=rv16.npy: /norms/n/running_var: batchnorm \"n\" on data \"x\": running_var: "
         "expected shape [6]"},
        {"--set data.x.path=scalar.npy",
         "error: --set data.x.path=scalar.npy: /data/x: data must have at least one axis, but got a scalar"},
        {"--set data.x.path=empty.npy", "error: --set data.x.path=empty.npy: /data/x: data has no elements (shape [0, 4])"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        check_refused(run_normlab("validate " + cfg + " " + c.args), c.expect);
        check_refused(run_normlab("run " + cfg + " --out " + (dir / "out").string() + " " + c.args), c.expect);
    }
    // The file's own path stays the file's fault beside an override of something else.
    write_text(dir / "scalar.json", config(R"({"source": "npy", "path": "scalar.npy"})", kLn));
    CliResult own = run_normlab("validate " + (dir / "scalar.json").string() + " --set norms.n.eps=1e-3");
    check_refused(own, "scalar.json: /data/x: data must have at least one axis, but got a scalar");
    CHECK(own.err.find("--set") == std::string::npos);
}

TEST_CASE("a param_axes entry that an override of the normalized axes leaves out blames that override") {
    // param_axes comes from the file, the axes it is checked against from --set: the
    // override made the entry wrong, so the message names it; without it the file is at
    // fault; with param_axes set too, that override.
    const std::string cfg = config(R"({"source": "gaussian", "shape": [2, 8, 8, 3]})",
                                   R"({"type": "layernorm", "axes": [1, 2, 3], "param_axes": [-1]})");
    check_refused(on_config("blame_axes", cfg, "validate", "--set norms.n.axes=[1,2]"),
                  "error: --set norms.n.axes=[1,2]: /norms/n/param_axes/0: layernorm \"n\" on data \"x\": param_axes: axis -1 "
                  "(axis 3 of input shape [2, 8, 8, 3]) is not normalized: the normalized axes are 1 and 2 (axes [1, 2])");
    const std::string file_only = config(R"({"source": "gaussian", "shape": [2, 8, 8, 3]})",
                                         R"({"type": "layernorm", "axes": [1, 2], "param_axes": [-1]})");
    CliResult own = on_config("blame_axes_file", file_only, "validate", "--set norms.n.eps=1e-3");
    check_refused(own, "cfg.json: /norms/n/param_axes/0: layernorm \"n\" on data \"x\": param_axes: axis -1");
    CHECK(own.err.find("--set") == std::string::npos);
    check_refused(on_config("blame_both", cfg, "validate", "--set norms.n.param_axes=[1] --set norms.n.axes=[2,3]"),
                  "error: --set norms.n.param_axes=[1]: /norms/n/param_axes/0: layernorm \"n\" on data \"x\": param_axes: "
                  "axis 1 of input shape [2, 8, 8, 3] is not normalized");
    // A repeated entry is param_axes' own fault, whoever set the axes.
    CliResult repeated = on_config("blame_repeat",
                                   config(R"({"source": "gaussian", "shape": [2, 8, 8, 3]})",
                                          R"({"type": "layernorm", "axes": [1, 2, 3], "param_axes": [3, -1]})"),
                                   "validate", "--set norms.n.axes=[2,3]");
    check_refused(repeated, "cfg.json: /norms/n/param_axes/1:");
    CHECK(repeated.err.find("--set") == std::string::npos);
}

TEST_CASE("an error at a value a sweep point set blames that sweep entry") {
    const std::string base = config(kGauss, kLn).substr(0, config(kGauss, kLn).size() - 1);
    const std::string sweep = base + R"(, "sweep": {"norms.n.eps": [1e-5, -1], "data.x.std": [1, 2]}})";
    CliResult r = on_config("blame_sweep", sweep, "validate");
    check_refused(r, "cfg.json: /sweep/norms.n.eps/1 (sweep point 2): /norms/n/eps: eps must be >= 0 and finite, but got -1");
    const std::string zip = base + R"(, "sweep": {"zip": {"norms.n.eps": [1e-5, 1e-3], "data.x.std": [1, "wide"]}}})";
    CliResult z = on_config("blame_zip", zip, "run");
    check_refused(z, "cfg.json: /sweep/zip/data.x.std/1 (sweep point 1): /data/x/std: expected a number, but got string \"wide\"");
    // A sweep path that does not exist was blamed on a --set that nobody wrote.
    const std::string bad_path = config(kGauss, kLn).substr(0, config(kGauss, kLn).size() - 1) +
                                 R"(, "sweep": {"norms.m.eps": [1e-5]}})";
    CliResult p = on_config("blame_sweep_path", bad_path, "validate");
    check_refused(p, "cfg.json: /sweep/norms.m.eps/0 (sweep point 0): /norms/m does not exist in the config (did you mean \"n\"?)");
    CHECK(p.err.find("--set") == std::string::npos);
    // A sweep path through a value that is neither an object nor a list shows that value: the
    // fault is the file's shape written as one string.
    const std::string flat = config(R"({"source": "gaussian", "shape": "8x4x5x5"})", kLn);
    check_refused(on_config("descend_string", flat.substr(0, flat.size() - 1) + R"(, "sweep": {"data.x.shape.0": [2, 4]}})", "validate"),
                  "cfg.json: /sweep/data.x.shape.0/0 (sweep point 0): /data/x/shape/0: cannot descend into /data/x/shape, which "
                  "is string \"8x4x5x5\", not an object or an array");
    // The sweep entry itself set by --set: the override is named.
    CliResult s = on_config("blame_set_sweep", bad_path, "validate", "--set '/sweep/norms.m.eps=[2]'");
    check_refused(s, "error: --set /sweep/norms.m.eps=[2]: /sweep/norms.m.eps/0 (sweep point 0): /norms/m does not exist");
}

TEST_CASE("an error or warning found at a value of the file names the override or sweep point that set a value it depends on") {
    const std::string base = config(kGauss, kLn).substr(0, config(kGauss, kLn).size() - 1);
    // A swept data shape that the file's LayerNorm does not fit: the error is found at
    // /norms/n/normalized_shape when the norm meets the point's data, which the file did not set.
    const std::string mismatch = "/norms/n/normalized_shape: layernorm \"n\" on data \"x\": given normalized_shape=[4], "
                                 "expected input with shape [*, 4], but got input of shape [2, 6, 3]";
    const std::string swept = base + R"(, "sweep": {"data.x.shape.2": [4, 3]}})";
    for (const std::string command : {"run", "validate"}) {
        CAPTURE(command);
        check_refused(on_config("blame_swept_shape_" + command, swept, command),
                      "cfg.json: /sweep/data.x.shape.2/1 (sweep point 1): " + mismatch);
        check_refused(on_config("blame_set_sweep_shape_" + command, config(kGauss, kLn), command,
                                R"(--set 'sweep={"data.x.shape.2":[4,3]}')"),
                      R"(error: --set sweep={"data.x.shape.2":[4,3]}: /sweep/data.x.shape.2/1 (sweep point 1): )" + mismatch);
        check_refused(on_config("blame_set_shape_" + command, config(kGauss, kLn), command,
                                "--set norms.n.eps=1e-3 --set data.x.shape.2=3"),
                      "error: --set data.x.shape.2=3: " + mismatch);
        // An override that gives the key the file's object already has the other of.
        check_refused(on_config("blame_set_conflict_" + command, config(kGauss, kLn), command,
                                "--set norms.n.axes=[-1]"),
                      "error: --set norms.n.axes=[-1]: /norms/n: give either normalized_shape or axes, not both");
        // An error under a whole object an override set names that override, not one that
        // set something else ...
        check_refused(on_config("blame_set_object_" + command, config(kGauss, kLn), command,
                                R"(--set norms.n.eps=1e-3 --set 'data.x={"source":"gaussian","shape":[2,6,3]}')"),
                      R"(error: --set data.x={"source":"gaussian","shape":[2,6,3]}: )" + mismatch);
        // ... and what the overrides and the sweep did not touch stays the file's.
        CliResult own_conflict = on_config("blame_file_conflict_" + command,
                                           config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "axes": [-1]})"),
                                           command, "--set norms.n.eps=1e-3 --set data.x.std=2");
        check_refused(own_conflict, "cfg.json: /norms/n: give either normalized_shape or axes, not both");
        CHECK(own_conflict.err.find("--set") == std::string::npos);
        const std::string narrow = config(R"({"source": "gaussian", "shape": [2, 6, 3]})", kLn);
        CliResult own_shape = on_config("blame_file_shape_" + command,
                                        narrow.substr(0, narrow.size() - 1) + R"(, "sweep": {"norms.n.eps": [1e-5, 1e-3]}})",
                                        command, "--set data.x.mean=1");
        check_refused(own_shape, "cfg.json: " + mismatch);
        CHECK(own_shape.err.find("sweep") == std::string::npos);
        CHECK(own_shape.err.find("--set") == std::string::npos);
        // An override or sweep of the data's values, not its shape, leaves the file at fault.
        CliResult values_set = on_config("blame_file_values_" + command, narrow, command,
                                         "--set data.x.mean=3 --set data.x.std=2");
        check_refused(values_set, "cfg.json: " + mismatch);
        CHECK(values_set.err.find("--set") == std::string::npos);
        CliResult values_swept = on_config("blame_file_values_swept_" + command,
                                           narrow.substr(0, narrow.size() - 1) + R"(, "sweep": {"data.x.std": [1, 2]}})",
                                           command);
        check_refused(values_swept, "cfg.json: " + mismatch);
        CHECK(values_swept.err.find("sweep") == std::string::npos);
        // An analysis' own check of its data, and the memory estimate, name the override or
        // sweep point that set the data's shape too.
        const std::string bd = R"({"name": "t", "data": {"x": )" + kGauss +
                               R"(}, "norms": {"n": {"type": "batchnorm"}}, "analyses": [{"type": "batch_dependence", "data": ["x"], "norms": ["n"]}]})";
        check_refused(on_config("blame_set_analysis_" + command, bd, command, "--set data.x.mean=2 --set data.x.shape=[6]"),
                      "error: --set data.x.shape=[6]: /analyses/0: batch_dependence on data \"x\": needs a batch axis 0");
        const std::string real_mates = R"({"name": "t", "data": {"x": )" + kGauss +
                                       R"(}, "norms": {"n": {"type": "batchnorm"}}, "analyses": [{"type": "batch_dependence", )"
                                       R"("data": ["x"], "norms": ["n"], "sizes": [2], "mates": "data"}]})";
        check_refused(on_config("blame_set_mates_" + command, real_mates, command, "--set data.x.shape.0=1"),
                      "error: --set data.x.shape.0=1: /analyses/0/sizes/0: batch_dependence on data \"x\": batch size 2 "
                      "with \"mates\": \"data\" needs 2 samples, but the data has a batch of N = 1");
        // "mates" set by an override is what makes the file's sizes too large.
        const std::string drawn_mates = R"({"name": "t", "data": {"x": )" + kGauss +
                                        R"(}, "norms": {"n": {"type": "batchnorm"}}, "analyses": [{"type": "batch_dependence", )"
                                        R"("data": ["x"], "norms": ["n"], "sizes": [1, 4]}]})";
        check_refused(on_config("blame_set_mates_key_" + command, drawn_mates, command, R"(--set 'analyses.0.mates="data"')"),
                      "error: --set analyses.0.mates=\"data\": /analyses/0/sizes/1: batch_dependence on data \"x\": batch size 4");
        // A save the norm cannot give is the file's fault whatever the data's shape: an
        // override or sweep of the shape is not named.
        const std::string saves = R"({"name": "t", "data": {"x": )" + kGauss +
                                  R"(}, "norms": {"n": {"type": "layernorm", "normalized_shape": [4]}}, )"
                                  R"("analyses": [{"type": "apply", "data": ["x"], "norms": ["n"], "save": ["output", "running_var"]}]})";
        const std::string no_stats = "/analyses/0/save/1: layernorm \"n\" keeps no running statistics";
        CliResult save_set = on_config("blame_file_save_" + command, saves, command, "--set data.x.shape.0=4");
        check_refused(save_set, "cfg.json: " + no_stats);
        CHECK(save_set.err.find("--set") == std::string::npos);
        CliResult save_swept = on_config("blame_file_save_swept_" + command, saves.substr(0, saves.size() - 1) +
                                         R"(, "sweep": {"data.x.shape.0": [2, 4]}})", command);
        check_refused(save_swept, "cfg.json: " + no_stats);
        CHECK(save_swept.err.find("sweep point") == std::string::npos);
        // Nor is an override or sweep of the norm's eps, which does not decide what it keeps.
        CliResult save_eps = on_config("blame_file_save_eps_" + command, saves, command, "--set norms.n.eps=1e-3");
        check_refused(save_eps, "cfg.json: " + no_stats);
        CHECK(save_eps.err.find("--set") == std::string::npos);
        CliResult save_eps_swept = on_config("blame_file_save_eps_swept_" + command, saves.substr(0, saves.size() - 1) +
                                             R"(, "sweep": {"norms.n.eps": [1e-5, 1e-3]}})", command);
        check_refused(save_eps_swept, "cfg.json: " + no_stats);
        CHECK(save_eps_swept.err.find("sweep point") == std::string::npos);
        // ... but an override that made the norm one without running statistics is.
        check_refused(on_config("blame_set_save_norm_" + command, saves, command,
                                R"(--set 'norms.n={"type":"rmsnorm","axes":[-1]}')"),
                      R"(error: --set norms.n={"type":"rmsnorm","axes":[-1]}: /analyses/0/save/1: rmsnorm "n" keeps no running statistics)");
        check_refused(on_config("blame_set_memory_" + command, config(kGauss, kLn), command,
                                "--set data.x.shape=[100000,60000,4] --set norms.n.eps=1e-3"),
                      "error: --set data.x.shape=[100000,60000,4]: /data/x: needs an estimated");
        const std::string st = R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [8, 16]}}, "norms": {"n": )"
                               R"({"type": "layernorm", "normalized_shape": [16]}}, "stacks": {"s": {"layers": 2, "norm": "n", "placement": "pre"}}, )"
                               R"("analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})";
        check_refused(on_config("blame_set_stack_dtype_" + command, st, command, "--set dtype=float16"),
                      "error: --set dtype=float16: /stacks/s: stack \"s\" on data \"x\": stacks run in float32 or float64");
        check_refused(on_config("blame_swept_memory_" + command, config(kGauss, kLn), command,
                                R"(--set 'sweep={"data.x.shape.0":[2,1000000000]}')"),
                      R"(error: --set sweep={"data.x.shape.0":[2,1000000000]}: /sweep/data.x.shape.0/1 (sweep point 1): /data/x: needs an estimated)");
    }
    // Warnings and notes too: the NaN is in the values the override gave, and the note on
    // "compute" holds because the override made the run float64.
    CliResult nan = on_config("blame_set_nan", config(kGauss, kLn), "run",
                              R"(--set 'data.x={"source":"values","values":[[1,"nan",3,4],[4,5,6,7]]}')");
    CHECK(nan.exit_code == 0);
    CHECK_MESSAGE(nan.err.find(R"(normlab: warning: --set data.x={"source":"values","values":[[1,"nan",3,4],[4,5,6,7]]}: /data/x: 1 of 8 values is NaN)") !=
                      std::string::npos, nan.err);
    const std::string computed = config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "compute": "float"})");
    for (const std::string command : {"run", "validate"}) {
        CliResult note = on_config("blame_set_note_" + command, computed, command, "--set dtype=float64");
        CHECK(note.exit_code == 0);
        CHECK_MESSAGE(note.err.find("normlab: note: --set dtype=float64: /norms/n/compute: \"compute\" chooses the arithmetic "
                                    "for float32 data only") != std::string::npos, note.err);
    }
}

TEST_CASE("an error in an entry whose type an override or sweep point changed names that override or point") {
    // The analysis' norms list is the file's, but it is wrong only for the type the
    // override gave: the override is what to name, as README says.
    const std::string two = config(kGauss, kLn);
    check_refused(on_config("blame_set_type", two, "validate", "--set analyses.0.type=equivalence"),
                  "error: --set analyses.0.type=equivalence: /analyses/0/norms: equivalence compares norms pairwise: list "
                  "at least two");
    const std::string swept = two.substr(0, two.size() - 1) + R"(, "sweep": {"analyses.0.type": ["apply", "equivalence"]}})";
    check_refused(on_config("blame_sweep_type", swept, "validate"),
                  "cfg.json: /sweep/analyses.0.type/1 (sweep point 1): /analyses/0/norms: equivalence compares norms "
                  "pairwise: list at least two");
    // Found when the analysis meets its data: still the type's doing.
    check_refused(on_config("blame_set_type_data", two, "validate", "--set analyses.0.type=padding"),
                  "error: --set analyses.0.type=padding: /analyses/0/data: padding on data \"x\": needs data with a padding mask");
    // A norm's keys are read as its type says: normalized_shape is unknown to a BatchNorm.
    check_refused(on_config("blame_set_norm_type", two, "validate", "--set norms.n.type=batchnorm"),
                  "error: --set norms.n.type=batchnorm: unknown key \"normalized_shape\" in /norms/n");
    // A data entry's keys are read as its source says.
    check_refused(on_config("blame_set_source", two, "validate", "--set data.x.source=tokens"),
                  "error: --set data.x.source=tokens: unknown key \"shape\" in /data/x (did you mean \"scale\"?)");
    // Without an override of the type, the file stays at fault.
    const std::string one_norm = R"({"name": "t", "data": {"x": )" + kGauss + R"(}, "norms": {"n": )" + kLn +
                                 R"(}, "analyses": [{"type": "equivalence", "data": ["x"], "norms": ["n"]}]})";
    CliResult own = on_config("blame_file_type", one_norm, "validate", "--set norms.n.eps=1e-3");
    check_refused(own, "cfg.json: /analyses/0/norms: equivalence compares norms pairwise");
    CHECK(own.err.find("--set") == std::string::npos);
}

TEST_CASE("an index past a size names the size, not a rank") {
    check_refused(on_config("outlier_dim", config(R"({"source": "tokens", "batch": 2, "max_len": 3, "dim": 8, "outlier_dims": [100]})",
                                                  R"({"type": "layernorm", "axes": [-1]})"),
                            "validate"),
                  "/data/x/outlier_dims/0: outlier dimension 100 out of range for features of dim 8 (valid: -8 to 7)");
    const fs::path dir = fresh_dir("csv_column_index");
    write_text(dir / "t.csv", "1,2,3\n4,5,6\n");
    write_text(dir / "cfg.json", config(R"({"source": "csv", "path": "t.csv", "columns": [7]})", R"({"type": "layernorm", "axes": [-1]})"));
    check_refused(run_normlab("validate " + (dir / "cfg.json").string()),
                  "/data/x/columns/0: column 7 out of range for a table with 3 columns (valid: -3 to 2)");
}

TEST_CASE("a NUL or newline in a name or a CSV cell is escaped in the message, which stays one whole line") {
    CliResult nul = on_config("name_nul", R"({"name": "a\u0000b", "data": {"x": )" + kGauss + R"(}, "norms": {"n": )" + kLn +
                                              R"(}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
                              "validate");
    check_refused(nul, R"(/name: name (the default output folder is results/<name>) "a\u0000b" must not contain control characters: it )"
                       "names a folder of the output, which must stay inside the folder the results go to");
    CliResult nl = on_config("name_newline", R"({"name": "t", "data": {"a\nb": )" + kGauss + R"(}, "norms": {"n": )" + kLn +
                                                 R"(}, "analyses": [{"type": "apply", "data": ["a\nb"], "norms": ["n"]}]})",
                             "validate");
    check_refused(nl, R"(cfg.json: "/data/a\nb": data name "a\nb" must not contain control characters)");
    const fs::path dir = fresh_dir("csv_nul");
    write_text(dir / "t.csv", std::string("1,2\0,3\n4,5,6\n", 13));
    write_text(dir / "cfg.json", config(R"({"source": "csv", "path": "t.csv"})", R"({"type": "layernorm", "axes": [-1]})"));
    check_refused(run_normlab("validate " + (dir / "cfg.json").string()), R"(column 2: "2\u0000" is not a number)");
}

TEST_CASE("a name or value a config, --set or the command line gives is escaped where a message quotes it") {
    const std::string two = R"({"type": "layernorm", "normalized_shape": [4]})";
    auto with_norms = [&](const std::string& analysis) {
        return R"({"name": "t", "data": {"x": )" + kGauss + R"(}, "norms": {"a": )" + two + R"(, "b": )" + two +
               R"(}, "analyses": [)" + analysis + "]}";
    };
    struct Case {
        std::string name, json, expect;
    };
    const std::vector<Case> cases = {
        {"train_data_newline", with_norms(R"({"type": "port_check", "data": ["x"], "norms": ["a", "b"], "train_data": ["x\ny"]})"),
         R"(/analyses/0/train_data/0: no data entry named "x\ny"; did you mean "x"? (/data has: x))"},
        {"port_nul", with_norms(R"({"type": "port_check", "data": ["x"], "norms": ["a", "b"], "ports": ["b\u0000"]})"),
         R"(/analyses/0/ports/0: "b\u0000" is not among this analysis' norms (list it under "norms"); did you mean "b"?)"},
        {"data_list_quote", with_norms(R"({"type": "apply", "data": ["x\"y"], "norms": ["a"]})"),
         R"(/analyses/0/data/0: no data entry named "x\"y"; did you mean "x"? (/data has: x))"},
        {"norms_list_control", with_norms(R"({"type": "apply", "data": ["x"], "norms": ["a\u001b[2J"]})"),
         R"(/analyses/0/norms/0: no norms entry named "a\u001b[2J" (/norms has: a, b))"},
        {"unknown_key_newline", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "e\nps": 1})"),
         R"(: unknown key "e\nps")"},
        {"unknown_value_tab", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "convention": "tor\tch"})"),
         R"(/norms/n/convention: unknown value "tor\tch" (expected one of: )"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        check_refused(on_config("escaped_" + c.name, c.json, "validate"), c.expect);
    }
    // From the command line: a newline in what was typed for a command.
    check_refused(run_normlab("\"$(printf 'ru\\nn')\" " + kQuick), R"(unknown command "ru\nn")");
}

TEST_CASE("NaN and Infinity literals are answered with the strings a config accepts") {
    for (const std::string literal : {"NaN", "Infinity", "-Infinity"}) {
        CAPTURE(literal);
        CliResult r = on_config("literal", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "eps": )" + literal + "}"),
                                "validate");
        check_refused(r, "malformed JSON: parse error at line 1, column");
        CHECK_MESSAGE(r.err.find(R"(write the strings "nan", "inf" or "-inf")") != std::string::npos, r.err);
    }
    // Another malformed value gets no such note.
    CliResult other = on_config("literal_other", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "eps": True})"),
                                "validate");
    check_refused(other, "malformed JSON");
    CHECK(other.err.find("\"nan\"") == std::string::npos);
}

TEST_CASE("NaN and Infinity given by --set are answered with the strings a config accepts") {
    const std::string note = R"( (JSON has no NaN or infinity: write the strings "nan", "inf" or "-inf", which normlab reads as )"
                             "those numbers wherever a config gives a number)";
    // Not JSON, so a string: refused where a number goes, with the note.
    for (const std::string literal : {"NaN", "Infinity", "-Infinity"}) {
        CAPTURE(literal);
        for (const std::string& command : {"validate " + kQuick, "run " + kQuick + " --dry-run"}) {
            CliResult r = run_normlab(command + " --set norms.ln.eps=" + literal);
            check_refused(r, "error: --set norms.ln.eps=" + literal + ": /norms/ln/eps: expected a number, but got string \"" +
                                 literal + "\"" + note);
        }
    }
    // In a list, the value is malformed JSON: the note follows the parse error.
    CliResult list = run_normlab("validate " + kQuick + " --set 'data.row.values=[[1, NaN, 3, 4]]'");
    check_refused(list, "error: --set data.row.values=[[1, NaN, 3, 4]]: the value starts with '[' but is not valid JSON: parse error");
    CHECK_MESSAGE(list.err.find(note + " (to set a string, quote it as JSON") != std::string::npos, list.err);
    // Another word where a number goes gets no such note.
    CliResult other = run_normlab("validate " + kQuick + " --set norms.ln.eps=NaNa");
    check_refused(other, "expected a number, but got string \"NaNa\"");
    CHECK(other.err.find("\"nan\"") == std::string::npos);
}

TEST_CASE("a NaN or Infinity given by --set as one element of a values list gets the same note") {
    for (const std::string literal : {"NaN", "-Infinity"}) {
        CAPTURE(literal);
        CliResult r = run_normlab("validate " + kQuick + " --set data.row.values.0.1=" + literal);
        check_refused(r, "error: --set data.row.values.0.1=" + literal + ": /data/row/values/0/1: expected a number, but got string \"" +
                             literal + "\" (JSON has no NaN or infinity: write the strings \"nan\", \"inf\" or \"-inf\"");
    }
    // Another word there gets no such note.
    CliResult other = run_normlab("validate " + kQuick + " --set data.row.values.0.1=NaNa");
    check_refused(other, "/data/row/values/0/1: expected a number, but got string \"NaNa\"");
    CHECK(other.err.find("\"nan\"") == std::string::npos);
}

TEST_CASE("a --set or --unset with a control character is named escaped, as typed otherwise, on one line") {
    // Refused while the override is applied, at its path.
    check_refused(run_normlab("validate " + kQuick + " --set \"$(printf 'norms.l\\nn.eps=1')\""),
                  R"(error: --set "norms.l\nn.eps=1": "/norms/l\nn" does not exist in the config)");
    check_refused(run_normlab("validate " + kQuick + " --unset \"$(printf 'norms.ln.e\\nps')\""),
                  R"(error: --unset "norms.ln.e\nps": "/norms/ln/e\nps" does not exist in the config)");
    // Refused when the config is read, blaming the override.
    check_refused(run_normlab("validate " + kQuick + " --set \"$(printf 'norms.ln.e\\tps=1')\""),
                  R"(error: --set "norms.ln.e\tps=1": unknown key "e\tps" in /norms/ln)");
}

TEST_CASE("a dtype name with a control character is named escaped, on one line") {
    const std::string word = "\"$(printf 'float\\n32')\"";
    const std::string shown = R"(unknown dtype "float\n32" (expected float16, bfloat16, float32 or float64))";
    check_refused(run_normlab("validate " + kQuick + " --set dtype=" + word), "/dtype: " + shown);
    check_refused(run_normlab("bench --norm layernorm --shape 4,8 --threads 1 --dtype " + word), shown);
    check_refused(run_normlab("bench --stack --dtype " + word), shown);
}

TEST_CASE("a --set that is not UTF-8 is refused as such, not as an internal error when it is printed") {
    // 0xFF never occurs in UTF-8; 0xE9 is Latin-1's e-acute, a lead byte with no continuation.
    for (const std::string bad : {"\xff", "caf\xe9"}) {
        CAPTURE(bad);
        for (const std::string at : {"norms.ln.eps=", "name=", "norms.ln.x\xff="}) {
            CliResult r = run_normlab("validate " + kQuick + " --set '" + at + bad + "'");
            check_refused(r, "not valid UTF-8 (a config's keys and strings are JSON text, which is UTF-8)");
            CHECK(r.err.find("internal error") == std::string::npos);
        }
    }
}

TEST_CASE("a misspelled required key is reported as the unknown key it is, for every object type") {
    struct Case {
        std::string name, json, expect;
    };
    const std::string values = R"({"source": "values", "values": [[1, 2, 3, 4]]})";
    const std::vector<Case> cases = {
        {"norm_required", config(values, R"({"type": "layernorm", "normalised_shape": [4]})"),
         "/norms/n/normalised_shape: unknown key \"normalised_shape\"; did you mean \"normalized_shape\"?"},
        {"norm_groups", config(kGauss, R"({"type": "groupnorm", "num_group": 2})"),
         "/norms/n/num_group: unknown key \"num_group\"; did you mean \"num_groups\"?"},
        {"norm_type", config(values, R"({"typ": "layernorm", "axes": [-1]})"),
         "/norms/n/typ: unknown key \"typ\"; did you mean \"type\"?"},
        {"source", config(R"({"sourse": "values", "values": [[1, 2]]})", kLn),
         "/data/x/sourse: unknown key \"sourse\"; did you mean \"source\"?"},
        {"source_key", config(R"({"source": "gaussian", "shap": [2, 4]})", kLn),
         "/data/x/shap: unknown key \"shap\"; did you mean \"shape\"?"},
        {"tokens_key", config(R"({"source": "tokens", "batch": 2, "max_lenght": 5, "dim": 4})", kLn),
         "/data/x/max_lenght: unknown key \"max_lenght\"; did you mean \"max_len\"?"},
        {"analysis_norms", R"({"data": {"x": )" + values + R"(}, "norms": {"n": )" + kLn +
                               R"(}, "analyses": [{"type": "apply", "data": ["x"], "norm": ["n"]}]})",
         "/analyses/0/norm: unknown key \"norm\"; did you mean \"norms\"?"},
        {"analysis_type", R"({"data": {"x": )" + values + R"(}, "norms": {"n": )" + kLn +
                              R"(}, "analyses": [{"tpye": "apply", "data": ["x"], "norms": ["n"]}]})",
         "/analyses/0/tpye: unknown key \"tpye\"; did you mean \"type\"?"},
        {"top", R"({"data": {"x": )" + values + R"(}, "norms": {"n": )" + kLn +
                    R"(}, "analysis": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
         "/analysis: unknown key \"analysis\"; did you mean \"analyses\"?"},
        {"init", config(values, R"({"type": "layernorm", "axes": [-1], "weight": {"nmp": "w.npy"}})"),
         "/norms/n/weight/nmp: unknown key \"nmp\"; did you mean \"npy\"?"},
        {"stack", R"({"data": {"x": {"source": "values", "values": [[1, 2, 3, 4]], "channel_axis": -1}}, "norms": {"n": )" + kLn +
                      R"(}, "stacks": {"s": {"layer": 2, "placement": "pre", "norm": "n"}},
                      "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "/stacks/s/layer: unknown key \"layer\"; did you mean \"layers\"?"},
        {"analysis_stacks", R"({"data": {"x": {"source": "values", "values": [[1, 2, 3, 4]], "channel_axis": -1}}, "norms": {"n": )" + kLn +
                                R"(}, "stacks": {"s": {"layers": 2, "placement": "pre", "norm": "n"}},
                                "analyses": [{"type": "depth", "data": ["x"], "stack": ["s"]}]})",
         "/analyses/0/stack: unknown key \"stack\"; did you mean \"stacks\"?"},
        // a valid key close to a missing one is not taken for its misspelling
        {"ports_not_norms", R"({"data": {"x": )" + values + R"(}, "norms": {"n": )" + kLn +
                                R"(}, "analyses": [{"type": "port_check", "data": ["x"], "ports": ["n"]}]})",
         "/analyses/0: missing required key \"norms\""},
        {"min_len_not_max_len", config(R"({"source": "tokens", "batch": 2, "min_len": 1, "dim": 4})", kLn),
         "/data/x: missing required key \"max_len\""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        check_refused(on_config("misspelled_" + c.name, c.json, "validate"), "cfg.json: " + c.expect);
    }
}

TEST_CASE("another framework's name for a key or value is answered with normlab's, and whose name it is") {
    struct Case {
        std::string name, json, expect;
    };
    const std::vector<Case> cases = {
        {"epsilon", config(kGauss, R"({"type": "layernorm", "normalized_shape": [4], "epsilon": 1e-3})"),
         "/norms/n/epsilon: unknown key \"epsilon\" (Keras, Flax and ONNX name it so; normlab's is \"eps\")"},
        {"groups", config(kGauss, R"({"type": "groupnorm", "groups": 2})"),
         "/norms/n/groups: unknown key \"groups\" (Keras's GroupNormalization names it so; normlab's is \"num_groups\")"},
        {"center", config(kGauss, R"({"type": "batchnorm", "center": false})"),
         "/norms/n/center: unknown key \"center\" (Keras's flag for the bias beta; in normlab \"affine\": false drops "
         "weight and bias, \"bias\": \"zeros\" the bias alone)"},
        {"scale", config(kGauss, R"({"type": "layernorm", "axes": [-1], "scale": false})"),
         "/norms/n/scale: unknown key \"scale\" (Keras's flag for the weight gamma"},
        {"elementwise_affine", config(kGauss, R"({"type": "layernorm", "axes": [-1], "elementwise_affine": false})"),
         "(PyTorch's LayerNorm and RMSNorm name it so; normlab's is \"affine\")"},
        // Keras's "axis" is the channel axis of a BatchNorm and the normalized axes of a LayerNorm.
        {"axis_bn", config(kGauss, R"({"type": "batchnorm", "axis": -1})"), "normlab's is \"channel_axis\")"},
        // ONNX's "axis" of a LayerNormalization is the first normalized axis, not the list.
        {"axis_ln", config(kGauss, R"({"type": "layernorm", "axis": 1})"),
         "(Keras's LayerNormalization names the list of normalized axes so, normlab's \"axes\"; ONNX's "
         "LayerNormalization names so the first normalized axis: its axis k is normlab's \"axes\" [k, ..., -1])"},
        {"feature_axes", config(kGauss, R"({"type": "layernorm", "axes": [1, 2], "feature_axes": [-1]})"),
         "/norms/n/feature_axes: unknown key \"feature_axes\" (Flax's LayerNorm and RMSNorm name so the axes of their "
         "scale and bias; normlab's is \"param_axes\")"},
        {"reduction_axes", config(kGauss, R"({"type": "layernorm", "reduction_axes": [1, 2]})"),
         "(Flax's LayerNorm and RMSNorm name them so; normlab's is \"axes\" (Flax's scale and bias follow its "
         "feature_axes: normlab's \"param_axes\"))"},
        {"num_features", config(kGauss, R"({"type": "batchnorm", "num_features": 4})"),
         "/norms/n/num_features: unknown key \"num_features\" (PyTorch's BatchNorm and InstanceNorm take the channel "
         "count so; normlab reads it from the data's shape at \"channel_axis\")"},
        {"num_channels", config(kGauss, R"({"type": "groupnorm", "num_groups": 2, "num_channels": 4})"),
         "(PyTorch's GroupNorm takes the channel count so; normlab reads it from the data's shape at \"channel_axis\")"},
        {"group_size", config(kGauss, R"({"type": "groupnorm", "group_size": 2})"),
         "/norms/n/group_size: unknown key \"group_size\" (Flax's GroupNorm can give the channels per group so; "
         "normlab's is \"num_groups\", the channels / group_size)"},
        {"rms_scaling", config(kGauss, R"({"type": "layernorm", "axes": [-1], "rms_scaling": true})"),
         "(Keras's LayerNormalization with rms_scaling=True is an RMSNorm: normlab's \"type\": \"rmsnorm\")"},
        {"type_torch", config(kGauss, R"({"type": "BatchNorm2d"})"),
         "/norms/n/type: unknown value \"BatchNorm2d\" (expected one of: batchnorm, layernorm, instancenorm, groupnorm, "
         "rmsnorm); PyTorch names it so; normlab's is \"batchnorm\", for data of any rank"},
        {"type_sync", config(kGauss, R"({"type": "SyncBatchNorm"})"),
         "PyTorch names it so; normlab's is \"batchnorm\" with \"replicas\" and \"sync\": true"},
        {"decay", config(kGauss, R"({"type": "batchnorm", "decay": 0.99})"),
         "/norms/n/decay: unknown key \"decay\" (TensorFlow 1's tf.contrib.layers.batch_norm (TF-Slim's batch_norm) names "
         "it so: the old running statistics' weight; normlab's is \"momentum\", read by the convention: decay 0.99 is "
         "momentum 0.99 under \"keras\" and 0.01 under \"torch\")"},
        {"use_running_average", config(kGauss, R"({"type": "batchnorm", "use_running_average": true})"),
         "(Flax's BatchNorm flag, the opposite of normlab's \"training\": use_running_average true is \"training\": false)"},
        {"convention", config(kGauss, R"({"type": "layernorm", "axes": [-1], "convention": "tensorflow"})"),
         "/norms/n/convention: unknown value \"tensorflow\" (expected one of: torch, onnx, keras, flax); TensorFlow's "
         "normalization layers are Keras's; normlab's convention for them is \"keras\""},
        {"type", config(kGauss, R"({"type": "LayerNormalization", "axes": [-1]})"),
         "/norms/n/type: unknown value \"LayerNormalization\" (expected one of: batchnorm, layernorm, instancenorm, groupnorm, "
         "rmsnorm); Keras and ONNX name it so; normlab's is \"layernorm\""},
        // Only where normlab has the counterpart: a LayerNorm has no groups to name.
        {"groups_layernorm", config(kGauss, R"({"type": "layernorm", "axes": [-1], "groups": 2})"),
         "/norms/n/groups: unknown key \"groups\"\n"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        for (const std::string command : {"validate", "run"})
            check_refused(on_config("foreign_" + c.name + "_" + command, c.json, command), c.expect);
    }
    // Set by --set or a sweep: the override or sweep entry is blamed, with the same note.
    check_refused(run_normlab("validate " + kQuick + " --set norms.ln.epsilon=1e-3"),
                  "error: --set norms.ln.epsilon=1e-3: unknown key \"epsilon\" in /norms/ln (Keras, Flax and ONNX name it "
                  "so; normlab's is \"eps\")");
    check_refused(run_normlab("run " + kQuick + " --dry-run --set norms.gn.groups=3"),
                  "error: --set norms.gn.groups=3: unknown key \"groups\" in /norms/gn (Keras's GroupNormalization names "
                  "it so; normlab's is \"num_groups\")");
    check_refused(run_normlab("validate " + kQuick + " --set norms.ln.convention=tensorflow"),
                  "error: --set norms.ln.convention=tensorflow: /norms/ln/convention: unknown value \"tensorflow\"");
    const std::string base = config(kGauss, kLn).substr(0, config(kGauss, kLn).size() - 1);
    check_refused(on_config("foreign_sweep", base + R"(, "sweep": {"norms.n.epsilon": [1e-5, 1e-3]}})", "validate"),
                  "cfg.json: /sweep/norms.n.epsilon/0 (sweep point 0): unknown key \"epsilon\" in /norms/n (Keras, Flax and "
                  "ONNX name it so; normlab's is \"eps\")");
}

TEST_CASE("stack and sweep messages: case is no typo, another library's activation or init is named, the lists at fault") {
    const std::string cfg = R"({"data": {"x": {"source": "tokens", "batch": 2, "max_len": 4, "dim": 64}},
        "norms": {"gn": {"type": "groupnorm", "num_groups": 3}, "ln": {"type": "layernorm", "normalized_shape": [64]}},
        "stacks": {"g": {"layers": 2, "placement": "pre", "norm": "ln", "block": "ffn", "hidden": 8},
                   "h": {"layers": 2, "placement": "post", "norm": "ln"}},
        "analyses": [{"type": "depth", "data": ["x"], "stacks": ["g", "h"]}]})";
    const fs::path dir = fresh_dir("stack_messages");
    write_text(dir / "s.json", cfg);
    const std::string v = "validate " + (dir / "s.json").string() + " ";
    check_refused(run_normlab(v + "--set norms.ln.type=RMSNorm"), "unknown value \"RMSNorm\" (expected one of: "
                  "batchnorm, layernorm, instancenorm, groupnorm, rmsnorm); did you mean \"rmsnorm\"?");
    check_refused(run_normlab(v + "--set stacks.g.activation=silu"),
                  "/stacks/g/activation: activation \"silu\" is not an activation of normlab's ffn block (relu, gelu, "
                  "identity)");
    check_refused(run_normlab(v + "--set stacks.g.activation=linear"), "Keras names the identity activation so");
    // A valid value of another key but for case is a misspelling, not a foreign name.
    check_refused(run_normlab(v + "--set stacks.g.block=Linear"),
                  "unknown value \"Linear\" (expected one of: linear, ffn, identity); did you mean \"linear\"?");
    check_refused(run_normlab(v + "--set stacks.g.init=he_normal"),
                  "Keras names it so (a normal truncated at 2 std); normlab's \"kaiming_normal\" is PyTorch's "
                  "untruncated N(0, 2/fan_in)");
    check_refused(run_normlab(v + "--set stacks.g.norm=layernorm"),
                  "/stacks/g/norm: no norms entry named \"layernorm\" (/norms has: gn, ln)");
    // A norm that fits no data but is used by a stack alone: the stack is named too.
    check_refused(run_normlab(v + "--set stacks.g.norm=gn"),
                  "/norms/gn/num_groups: stack \"g\": groupnorm \"gn\" on data \"x\": expected channels (C=64) to be "
                  "divisible by num_groups (3)");
    // Unequal zip lists: both named, each with its length.
    write_text(dir / "z.json", cfg.substr(0, cfg.rfind('}')) +
                                   R"(, "sweep": {"zip": {"stacks.g.layers": [2, 3], "stacks.h.layers": [2, 3, 4]}}})");
    check_refused(run_normlab("validate " + (dir / "z.json").string()),
                  "/sweep/zip: zip lists must have equal lengths, but \"stacks.g.layers\" has 2 values and "
                  "\"stacks.h.layers\" has 3");
}

TEST_CASE("notes and warnings for inputs that run but are likely wrong: negative running_var, a mask of padding only, half overflow") {
    const std::string cfg = R"({"data": {"x": {"source": "gaussian", "shape": [4, 3, 2]},
        "h": {"source": "values", "values": [[70000, 1, 2, 3]]},
        "m": {"source": "tokens", "batch": 2, "max_len": 3, "dim": 4, "lengths": [0, 0]}},
      "norms": {"bn": {"type": "batchnorm", "training": false, "running_var": [-1, 1, 1]},
                "ln": {"type": "layernorm", "normalized_shape": [4], "mask": true},
                "ln2": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["bn"]}, {"type": "apply", "data": ["h"], "norms": ["ln2"]},
                   {"type": "apply", "data": ["m"], "norms": ["ln"]}]})";
    const fs::path dir = fresh_dir("likely_wrong");
    write_text(dir / "c.json", cfg);
    for (const std::string dtype : {"float32", "float16"}) {
        CAPTURE(dtype);
        const auto r = run_normlab("validate " + (dir / "c.json").string() + " --set dtype=" + dtype);
        CHECK(r.exit_code == 0);
        CHECK(r.err.find("note: " + (dir / "c.json").string() + ": /norms/bn/running_var: running_var holds a negative "
                         "value (-1), which no variance is") != std::string::npos);
        CHECK(r.err.find("/data/m: the padding mask marks no position as real (1 = real, 0 = padding; PyTorch's "
                         "key_padding_mask is the opposite)") != std::string::npos);
        const bool half = dtype == "float16";
        CHECK((r.err.find("/data/h: 1 of 4 values is NaN or infinite (or beyond float16's largest finite value, 65504, "
                          "and rounded to infinity)") != std::string::npos) == half);
    }
}

TEST_CASE("numeric options refuse values the help gives no meaning") {
    struct Case {
        std::string args, expect;
    };
    const std::vector<Case> cases = {
        {"run " + kQuick + " --dry-run --threads 0", "--threads 0: expected an integer from 1 to 1024 (leave it out to use all cores)"},
        {"run " + kQuick + " --dry-run --threads -2", "--threads -2: expected an integer from 1 to 1024"},
        {"run " + kQuick + " --dry-run --threads 100000", "--threads 100000: expected an integer from 1 to 1024"},
        {"run " + kQuick + " --dry-run --threads 99999999999999999999", "--threads 99999999999999999999: expected an integer from 1 to 1024 (leave it out to use all cores)\n"},
        {"run " + kQuick + " --dry-run --seed 9223372036854775808", "run --seed 9223372036854775808: expected an integer, at most 9223372036854775807 in magnitude\n"},
        {"run " + kQuick + " --dry-run --threads two", "--threads two: expected an integer from 1 to 1024"},
        {"run " + kQuick + " --dry-run --max-memory 0", "--max-memory: \"0\" would allow no memory at all; for no limit, give none"},
        {"validate " + kQuick + " --max-memory 0G", "--max-memory: \"0G\" would allow no memory at all; for no limit, give none"},
        {"run " + kQuick + " --dry-run --shard 2/2", "--shard 2/2: expected I/N with 0 <= I < N"},
        {"shapes --shape 2,4,3 --norm groupnorm --num-groups 0", "shapes --num-groups 0: expected an integer >= 1"},
        {"shapes --shape 2,4,3 --norm batchnorm --channel-axis x", "shapes --channel-axis x: expected an integer"},
        {"shapes --shape 2,0,3 --norm layernorm --normalized-shape 3", "shapes --shape: dims must be positive, but got 0"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        check_refused(run_normlab(c.args), "normlab: error: " + c.expect);
    }
    // The help says what the ranges are.
    CHECK(run_normlab("run --help").out.find("1 to 1024") != std::string::npos);
    CHECK(run_normlab("run " + kQuick + " --dry-run --threads 1").exit_code == 0);
}

TEST_CASE("shapes blames its own options, as typed, with the engine's reason") {
    struct Case {
        std::string args, expect;
    };
    const std::vector<Case> cases = {
        {"--shape 32,3,64,64 --norm groupnorm --num-groups 2",
         "shapes --num-groups 2: expected channels (C=3) to be divisible by num_groups (2), but got input of shape [32, 3, 64, 64]"},
        {"--shape 32,3,64,64 --norm layernorm --normalized-shape 3,64",
         "shapes --normalized-shape 3,64: given normalized_shape=[3, 64], expected input with shape [*, 3, 64]"},
        {"--shape 32,3,64,64 --norm layernorm --axes 1,1", "shapes --axes 1,1: axis 1 repeated"},
        {"--shape 32,3,64,64 --norm batchnorm --channel-axis 7", "shapes --channel-axis 7: axis 7 out of range for input of rank 4"},
        {"--shape 32,3,64,64 --norm layernorm --axes 1 --normalized-shape 3",
         "shapes: give either --normalized-shape or --axes, not both"},
        {"--shape 32,3,64,64 --norm layernorm --normalized-shape 64,-3",
         "shapes --normalized-shape 64,-3: dims must be positive, but got -3"},
        {"--shape 32,3,64,64 --norm groupnorm", "shapes --norm groupnorm: needs --num-groups"},
        {"--shape 32,3,64,64 --norm gropnorm", "shapes --norm: unknown norm type \"gropnorm\" (did you mean \"groupnorm\"?)"},
        // Options the norm does not take: refused, as the config refuses the keys.
        {"--shape 32,3,64,64 --norm batchnorm --num-groups 3", "shapes --num-groups: only groupnorm takes it, and --norm is batchnorm"},
        {"--shape 32,3,64,64 --norm instancenorm --axes 1", "shapes --axes: only layernorm and rmsnorm take it, and --norm is instancenorm"},
        {"--shape 32,3,64,64 --norm groupnorm --num-groups 3 --normalized-shape 64",
         "shapes --normalized-shape: only layernorm and rmsnorm take it, and --norm is groupnorm"},
        {"--shape 32,3,64,64 --norm rmsnorm --axes -1 --channel-axis 1",
         "shapes --channel-axis: only batchnorm, instancenorm and groupnorm take it, and --norm is rmsnorm"},
        {"--shape 32,3,64,64 --norm batchnorm --param-axes -1",
         "shapes --param-axes: only layernorm and rmsnorm take it, and --norm is batchnorm"},
        {"--shape 8,32,32,3 --norm layernorm --axes 1,2,3 --param-axes -1,4",
         "shapes --param-axes -1,4: axis 4 out of range for input of rank 4"},
        {"--shape 8,32,32,3 --norm layernorm --normalized-shape 3 --param-axes 1",
         "shapes --param-axes 1: axis 1 of input shape [8, 32, 32, 3] is not normalized: the normalized "
         "axis is 3 (normalized_shape [3])"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const CliResult r = run_normlab("shapes " + c.args);
        check_refused(r, "normlab: error: " + c.expect);
        CHECK(r.err.find("on data") == std::string::npos);  // the config's wording: no data is named here
    }
}

TEST_CASE("numbers in messages read as the CSVs write them (shortest round trip, no -1.000000)") {
    struct Case {
        std::string name, json, expect;
    };
    const std::vector<Case> cases = {
        {"gaussian_std", config(R"({"source": "gaussian", "shape": [2, 4], "std": -1})", kLn),
         "/data/x/std: std must be >= 0 and finite, but got -1"},
        {"gaussian_std_nan", config(R"({"source": "gaussian", "shape": [2, 4], "std": "nan"})", kLn),
         "/data/x/std: std must be >= 0 and finite, but got nan"},
        {"images_std", config(R"({"source": "images", "shape": [2, 1, 4, 4], "channel_std": [-0.25]})",
                              R"({"type": "batchnorm"})"),
         "/data/x/channel_std/0: channel_std must be >= 0 and finite, but got -0.25"},
        {"images_smooth", config(R"({"source": "images", "shape": [2, 1, 4, 4], "smooth": -0.1})",
                                 R"({"type": "batchnorm"})"),
         "/data/x/smooth: smooth (the correlation length in pixels) must be in [0, 1e6], but got -0.1"},
        {"normal_init", config(kGauss, R"({"type": "layernorm", "axes": [-1], "weight": {"normal": {"std": -0.5}}})"),
         "/norms/n/weight/normal/std: std must be >= 0 and finite, but got -0.5"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        CliResult r = on_config("numbers_" + c.name, c.json, "validate");
        check_refused(r, "cfg.json: " + c.expect);
        CHECK(r.err.find("00000") == std::string::npos);
    }
    // A mask value from a file (no JSON involved).
    fs::path dir = fresh_dir("numbers_mask");
    normlab::write_file_bytes(dir / "m.npy", normlab::npy_bytes(xt::xarray<double>{{1, -0.5}, {1, 1}}, normlab::DType::float64));
    write_text(dir / "cfg.json", config(R"({"source": "gaussian", "shape": [2, 2, 4], "channel_axis": -1, "mask": "m.npy"})", kLn));
    check_refused(run_normlab("validate " + (dir / "cfg.json").string()),
                  "cfg.json: /data/x/mask: mask values must be 0 or 1 (or bool), but element 1 (row-major) is -0.5");
}

TEST_CASE("values, weights and other numbers accept \"nan\", \"inf\" and \"-inf\", as reports write them") {
    const std::string cfg = config(R"({"source": "values", "values": [[1, "nan", 3, 4], [1, 2, "inf", "-inf"], [1, 2, 3, 4]]})",
                                   R"({"type": "layernorm", "normalized_shape": [4], "weight": [1, 1, "inf", 1]})");
    CliResult r = on_config("nonfinite_values", cfg, "run", "-q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string csv = read_text(fresh_dir("nonfinite_probe").parent_path() / "nonfinite_values" / "out" / "apply.csv");
    // 1 NaN and 2 infinities in; the NaN row and the inf row have non-finite statistics.
    CHECK(csv.find(",3,2,") != std::string::npos);  // nonfinite_in 3, nonfinite_stats 2
    const std::string report = read_text(fresh_dir("nonfinite_probe").parent_path() / "nonfinite_values" / "out" / "report.json");
    CHECK(report.find("\"nonfinite_values\": 3") != std::string::npos);
    // Only those spellings: anything else is still an error.
    check_refused(on_config("nonfinite_bad", config(R"({"source": "values", "values": [[1, "NaN"]]})", kLn), "validate"),
                  "cfg.json: /data/x/values/0/1: expected a number, but got string \"NaN\"");
    check_refused(on_config("nonfinite_eps", config(kGauss, R"({"type": "layernorm", "axes": [-1], "eps": "nan"})"), "validate"),
                  "cfg.json: /norms/n/eps: eps must be >= 0 and finite, but got nan");
    // Settings a non-finite value makes meaningless (eps inf gave outputs of 0; a mean of
    // inf drew data of inf alone) are refused; data, weights and biases may hold them.
    const std::vector<std::pair<std::string, std::string>> settings = {
        {config(kGauss, R"({"type": "layernorm", "axes": [-1], "eps": "inf"})"), "/norms/n/eps: eps must be >= 0 and finite, but got inf"},
        {config(R"({"source": "gaussian", "shape": [2, 4], "mean": "inf"})", kLn), "/data/x/mean: mean must be finite, but got inf"},
        {config(R"({"source": "gaussian", "shape": [2, 4], "std": "inf"})", kLn), "/data/x/std: std must be >= 0 and finite, but got inf"},
        {config(kGauss, R"({"type": "layernorm", "axes": [-1], "weight": {"normal": {"mean": "-inf"}}})"),
         "/norms/n/weight/normal/mean: mean must be finite, but got -inf"},
        {config(kGauss, R"({"type": "rmsnorm", "axes": [-1], "weight_offset": "nan"})"),
         "/norms/n/weight_offset: weight_offset must be finite, but got nan"},
        // A tolerance of inf made every verdict "true".
        {analysis(kGauss, kLn, R"({"type": "invariance", "data": ["x"], "norms": ["n"], "tolerance": "inf"})"),
         "/analyses/0/tolerance: tolerance must be >= 0 and finite, but got inf"},
        {analysis(kGauss, kLn + R"(, "m": {"type": "layernorm", "axes": [-1]})",
                  R"({"type": "equivalence", "data": ["x"], "norms": ["n", "m"], "tolerance": "inf"})"),
         "/analyses/0/tolerance: tolerance must be >= 0 and finite, but got inf"},
        {analysis(R"({"source": "tokens", "batch": 3, "max_len": 6, "dim": 4})", R"({"type": "layernorm", "normalized_shape": [4], "mask": true})",
                  R"({"type": "padding", "data": ["x"], "norms": ["n"], "tolerance": "nan"})"),
         "/analyses/0/tolerance: tolerance must be >= 0 and finite, but got nan"},
        {config(R"({"source": "images", "shape": [2, 3, 4, 4], "channel_mean": ["inf", 0, 0]})", R"({"type": "batchnorm"})"),
         "/data/x/channel_mean/0: channel_mean must be finite, but got inf"},
        {config(R"({"source": "images", "shape": [2, 3, 4, 4], "channel_std": [1, "nan", 1]})", R"({"type": "batchnorm"})"),
         "/data/x/channel_std/1: channel_std must be >= 0 and finite, but got nan"},
        {config(R"({"source": "tokens", "batch": 3, "max_len": 6, "dim": 4, "scale": "inf"})", kLn),
         "/data/x/scale: scale must be finite, but got inf"},
        {config(R"({"source": "tokens", "batch": 3, "max_len": 6, "dim": 4, "offset": [0, 0, "nan", 0]})", kLn),
         "/data/x/offset/2: offset must be finite, but got nan"},
        {config(R"({"source": "tokens", "batch": 3, "max_len": 6, "dim": 4, "outlier_scale": "-inf"})", kLn),
         "/data/x/outlier_scale: outlier_scale must be finite, but got -inf"},
    };
    for (const auto& [json, expect] : settings) {
        CAPTURE(expect);
        check_refused(on_config("nonfinite_setting", json, "validate"), "cfg.json: " + expect);
    }
    CliResult w = on_config("nonfinite_const", config(kGauss, R"({"type": "layernorm", "axes": [-1], "bias": "-inf"})"), "run", "-q");
    CHECK_MESSAGE(w.exit_code == 0, w.err);
    // Used as given, with a note.
    const CliResult rn = on_config("nonfinite_values_note", cfg, "validate");
    CHECK(rn.err.find("/norms/n/weight: weight holds 1 NaN or infinite of its 4 values, used as given, as PyTorch "
                      "does: the outputs it enters are NaN or infinite") != std::string::npos);
    const CliResult wn = on_config("nonfinite_const_note", config(kGauss, R"({"type": "layernorm", "axes": [-1], "bias": "-inf"})"),
                                   "validate");
    CHECK(wn.err.find("/norms/n/bias: bias holds a NaN or infinite value") != std::string::npos);
    const CliResult rv = on_config("nonfinite_running",
                                   config(R"({"source": "gaussian", "shape": [2, 3, 4]})",
                                          R"({"type": "batchnorm", "training": false, "running_var": [1, "inf", "nan"]})"),
                                   "validate");
    CHECK(rv.exit_code == 0);
    CHECK(rv.err.find("/norms/n/running_var: running_var holds 2 NaN or infinite of its 3 values, used as given, as "
                      "PyTorch does: NaN makes the output NaN where it enters, and inf makes x_hat 0 (rstd 0)") !=
          std::string::npos);
    // One note of the kind (a build without FMA kernels adds its own note about the double path).
    CHECK(occurrences(rv.err, "NaN or infinite") == 1);
}

TEST_CASE("a list typed without brackets, and a mask given inline, are answered with how to write them") {
    // --set shape=4,5,8 gives the string "4,5,8": the message quotes it and shows the list.
    check_refused(run_normlab("validate " + kQuick + " --set data.small.shape=4,5,8"),
                  "/data/small/shape: expected a list of integers, but got string \"4,5,8\"; a list is written in "
                  "brackets: [4,5,8]");
    check_refused(run_normlab("validate " + kQuick + " --set 'data.row.values=1, 2.5'"),
                  "but got string \"1, 2.5\"; a list is written in brackets: [1,2.5]");
    // A number JSON does not take as written, or one in quotes: how JSON writes it.
    check_refused(run_normlab("validate " + kQuick + " --set norms.ln.eps=.001"),
                  "/norms/ln/eps: expected a number, but got string \".001\" (as a number, JSON writes it 0.001, "
                  "without quotes)");
    check_refused(run_normlab("validate " + kQuick + " --set 'norms.ln.eps=\"1e-3\"'"),
                  "got string \"1e-3\" (as a number, JSON writes it 1e-3, without quotes)");
    // A valid JSON number in quotes is shown as written (nlohmann would print 1e-05).
    check_refused(run_normlab("validate " + kQuick + " --set 'norms.ln.eps=\"1e-5\"'"),
                  "got string \"1e-5\" (as a number, JSON writes it 1e-5, without quotes)");
    // A number out of double's range among them is still such a list, not an out-of-range number.
    check_refused(run_normlab("validate " + kQuick + " --set data.small.shape=1e999,2"),
                  "/data/small/shape: expected a list of integers, but got string \"1e999,2\"");
    // Not numbers between commas: no list to show.
    for (const std::string v : {"4x5", "1,,2", "1,2,"}) {
        CAPTURE(v);
        const CliResult r = run_normlab("validate " + kQuick + " --set data.small.shape=" + v);
        check_refused(r, "expected a list of integers, but got string \"" + v + "\"");
        CHECK(r.err.find("brackets") == std::string::npos);
    }
    const std::string padded = R"({"source": "gaussian", "shape": [1, 4, 2], "mask": [[1, 1, 0, 0]]})";
    check_refused(on_config("inline_mask", config(padded, kLn), "validate"),
                  "/data/x/mask: expected the path of an .npy file of 0/1 or bool values (1: a real position, 0: "
                  "padding), but got array [[1,1,0,0]]; for sequences, \"lengths\" lists their lengths");
    // A mask as large as its data is shown by its start and its length, not whole.
    std::string row = "[1";
    for (int i = 1; i < 512; ++i) row += ",1";
    const std::string big = R"({"source": "gaussian", "shape": [1, 512, 2], "mask": [)" + row + "]]}";
    const CliResult rb = on_config("inline_mask_big", config(big, R"({"type": "layernorm", "normalized_shape": [2]})"),
                                   "validate");
    check_refused(rb, "but got array [[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,... (1027 characters)");
    CHECK(rb.err.size() < 400);
}

TEST_CASE("gradients on padded data through norms without a mask, and no masked loss, are noted once per data entry") {
    const std::string cfg = R"({"data": {"t": {"source": "tokens", "batch": 2, "max_len": 3, "dim": 4, "lengths": [3, 1]},
        "x": {"source": "gaussian", "shape": [2, 3, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}, "rms": {"type": "rmsnorm", "normalized_shape": [4]},
                "lm": {"type": "layernorm", "normalized_shape": [4], "mask": true},
                "bne": {"type": "batchnorm", "training": false}},
      "analyses": [{"type": "gradients", "data": ["t", "x"], "norms": ["ln", "rms", "bne"]},
                   {"type": "gradients", "data": ["t"], "norms": ["lm"]},
                   {"type": "gradients", "data": ["t"], "norms": ["ln"], "masked_loss": true}]})";
    const fs::path dir = fresh_dir("gradients_padding");
    write_text(dir / "c.json", cfg);
    const auto r = run_normlab("validate " + (dir / "c.json").string());
    CHECK(r.exit_code == 0);
    const std::string note = "note: " + (dir / "c.json").string() + ": /analyses/0: gradients on data \"t\": its padded "
                             "positions enter the statistics of \"ln\" and \"rms\" (no \"mask\": true) and get upstream "
                             "gradients (no \"masked_loss\": true)";
    CHECK_MESSAGE(r.err.find(note) != std::string::npos, r.err);
    // Unpadded data, running statistics, a masked norm, a masked loss: nothing to note (a
    // build without FMA kernels adds its own note about the double path).
    CHECK(r.err.find("bne") == std::string::npos);
    CHECK(occurrences(r.err, "gradients on data") == 1);
    CHECK(r.err.find("data \"x\"") == std::string::npos);
}

TEST_CASE("a save entry some norms of an apply analysis cannot give is saved for the others and noted; none: an error") {
    const std::string norms = R"({"ln": {"type": "layernorm", "normalized_shape": [4]},
        "rms": {"type": "rmsnorm", "normalized_shape": [4]}, "ln2": {"type": "layernorm", "normalized_shape": [4]}})";
    auto cfg = [&](const std::string& listed) {
        return R"({"name": "t", "data": {"x": )" + kGauss + R"(}, "norms": )" + norms +
               R"(, "analyses": [{"type": "apply", "data": ["x"], "norms": )" + listed +
               R"(, "save": ["output", "mean"]}]})";
    };
    const fs::path dir = fresh_dir("save_mixed");
    write_text(dir / "c.json", cfg(R"(["ln", "rms", "ln2"])"));
    const CliResult r = run_normlab("run " + (dir / "c.json").string() + " --out " + (dir / "out").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK_MESSAGE(r.err.find("/analyses/0/save/1: rmsnorm \"rms\" does not centre and has no mean (save var: the mean "
                             "square, or rstd): \"mean\" is saved for \"ln\" and \"ln2\" only") != std::string::npos,
                  r.err);
    const fs::path arrays = dir / "out" / "arrays" / "x";
    CHECK(fs::exists(arrays / "ln" / "mean.npy"));
    CHECK(fs::exists(arrays / "ln2" / "mean.npy"));
    CHECK(fs::exists(arrays / "rms" / "output.npy"));
    CHECK_FALSE(fs::exists(arrays / "rms" / "mean.npy"));
    // The same entry for RMSNorm alone asks for nothing that exists.
    check_refused(on_config("save_none", cfg(R"(["rms"])"), "validate"),
                  "/analyses/0/save/1: rmsnorm \"rms\" does not centre and has no mean");
}

TEST_CASE("save entries a norm holds back for one reason are noted in one line, naming the norms that give them") {
    const std::string cfg = R"({"name": "t", "data": {"x": )" + kGauss + R"(}, "norms": {"bn": {"type": "batchnorm"},
        "ln": {"type": "layernorm", "normalized_shape": [4]}, "rms": {"type": "rmsnorm", "normalized_shape": [4]}},
        "analyses": [{"type": "apply", "data": ["x"], "norms": ["bn", "ln", "rms"],
                      "save": ["running_mean", "output", "mean", "running_var"]}]})";
    const fs::path dir = fresh_dir("save_grouped");
    write_text(dir / "c.json", cfg);
    const auto r = run_normlab("validate " + (dir / "c.json").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string at = (dir / "c.json").string() + ": /analyses/0/save";
    CHECK_MESSAGE(r.err.find(at + ": layernorm \"ln\" keeps no running statistics: \"running_mean\" and \"running_var\" are "
                                  "saved for \"bn\" only\n") != std::string::npos,
                  r.err);
    CHECK_MESSAGE(r.err.find(at + ": rmsnorm \"rms\" keeps no running statistics: \"running_mean\" and \"running_var\" are "
                                  "saved for \"bn\" only\n") != std::string::npos,
                  r.err);
    // A reason of its own is a line of its own, at the one entry it is about.
    CHECK_MESSAGE(r.err.find(at + "/2: rmsnorm \"rms\" does not centre and has no mean (save var: the mean square, or "
                                  "rstd): \"mean\" is saved for \"bn\" and \"ln\" only\n") != std::string::npos,
                  r.err);
    CHECK(occurrences(r.err, "keeps no running statistics") == 2);
    CHECK(occurrences(r.err, " only\n") == 3);
    // An entry listed twice is named once.
    std::string twice = cfg;
    twice.replace(twice.find("\"running_var\"]"), 14, "\"mean\"]");
    write_text(dir / "twice.json", twice);
    const auto t = run_normlab("validate " + (dir / "twice.json").string());
    CHECK_MESSAGE(t.err.find("/analyses/0/save/2: rmsnorm \"rms\" does not centre and has no mean (save var: the mean square, "
                             "or rstd): \"mean\" is saved for \"bn\" and \"ln\" only\n") != std::string::npos,
                  t.err);
}

TEST_CASE("a parameter's shape error blames the override or sweep point that changed the norm's axes") {
    const std::string cfg = R"({"name": "p", "data": {"img": {"source": "gaussian", "shape": [2, 3, 4, 5]},
        "seq": {"source": "gaussian", "shape": [2, 6, 16]}},
      "norms": {"bn": {"type": "batchnorm", "training": false, "running_mean": [0, 0, 0], "running_var": [1, 1, 1]},
                "ln": {"type": "layernorm", "normalized_shape": [16], "bias": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]},
                "gn": {"type": "groupnorm", "num_groups": 3, "weight": [1, 1, 1]}},
      "analyses": [{"type": "apply", "data": ["img"], "norms": ["bn", "gn"]}, {"type": "apply", "data": ["seq"], "norms": ["ln"]}]})";
    const std::string v = validate_command("param_shape_blame", cfg);
    const std::vector<std::pair<std::string, std::string>> cases = {  // (overrides, expected message)
        {"--set norms.bn.channel_axis=2",
         "error: --set norms.bn.channel_axis=2: /norms/bn/running_mean: batchnorm \"bn\" on data \"img\": "
         "running_mean: expected shape [4]"},
        {"--set 'norms.ln.normalized_shape=[6,16]'", "error: --set norms.ln.normalized_shape=[6,16]: /norms/ln/bias:"},
        {"--set 'norms.ln.axes=[1,2]' --unset norms.ln.normalized_shape",
         "error: --unset norms.ln.normalized_shape and --set norms.ln.axes=[1,2]: /norms/ln/bias:"},
        {"--set 'sweep={\"norms.bn.channel_axis\":[1,2]}'",
         "/sweep/norms.bn.channel_axis/1 (sweep point 1): /norms/bn/running_mean:"},
        {"--set norms.gn.affine_per=group --set norms.gn.num_groups=1",
         "error: --set norms.gn.num_groups=1 and --set norms.gn.affine_per=group: /norms/gn/weight:"}};
    for (const auto& [overrides, expect] : cases) {
        CAPTURE(overrides);
        check_refused(run_normlab(v + overrides), expect);
    }
    // An override of something else is not to blame.
    const CliResult eps = run_normlab(v + "--set norms.bn.eps=0.1 --set 'norms.bn.running_var=[1,1]'");
    check_refused(eps, "error: --set norms.bn.running_var=[1,1]: /norms/bn/running_var:");
    CHECK(eps.err.find("eps") == std::string::npos);
}

TEST_CASE("a --set, --unset or --seed of a value the sweep sets at every point is refused, not silently unused") {
    const std::string cfg = R"({"name": "t", "data": {"x": )" + kGauss +
                            R"(}, "norms": {"n": {"type": "layernorm", "normalized_shape": [4], "eps": 1e-5}},
        "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}],
        "sweep": {"norms.n.eps": [1e-5, 1e-3], "/data/x/shape/0": [2, 3], "seed": [1, 2]}})";
    const std::string v = validate_command("swept_override", cfg);
    const std::string run = "run " + v.substr(std::string("validate ").size()) + "--dry-run ";
    const std::vector<std::pair<std::string, std::string>> cases = {  // (command, expected message)
        {v + "--set norms.n.eps=0.1",
         "error: --set norms.n.eps=0.1: /norms/n/eps is swept (sweep key \"norms.n.eps\"): every point sets it, so "
         "this value would not be used"},
        {v + "--unset norms.n.eps", "error: --unset norms.n.eps: /norms/n/eps is swept"},
        {v + "--set data.x.shape.0=4",
         "error: --set data.x.shape.0=4: /data/x/shape/0 is swept (sweep key \"/data/x/shape/0\")"},
        {run + "--seed 5", "error: --seed 5: /seed is swept (sweep key \"seed\")"}};
    for (const auto& [command, expect] : cases) {
        CAPTURE(command);
        check_refused(run_normlab(command), expect);
    }
    // Values the sweep does not set, and the sweep itself, may be overridden.
    CHECK(run_normlab(v + "--set 'data.x.shape=[2,6,4]' --set norms.n.type=rmsnorm").exit_code == 0);
    CHECK(run_normlab(v + "--set '/sweep/norms.n.eps=[0.5]'").exit_code == 0);
}

TEST_CASE("a path holding a newline is printed escaped: each message stays one line") {
    const fs::path dir = fresh_dir("newline_path") / "a\nb";
    fs::create_directories(dir);
    write_text(dir / "c.json", read_text(kQuick));
    const std::string quoted = "'" + dir.string() + "'";  // the shell keeps the newline inside quotes
    const CliResult missing = run_normlab("validate " + quoted + "/nope.json");
    check_refused(missing, "a\\nb/nope.json: cannot open config file");
    const CliResult ran = run_normlab("run " + quoted + "/c.json --out " + quoted + "/out");
    REQUIRE_MESSAGE(ran.exit_code == 0, ran.err);
    // The summary line and one line per file written, each path escaped and quoted; on a
    // build or CPU without FMA a note (one line too) comes first.
    const std::size_t files = nlohmann::json::parse(read_text(dir / "out" / "report.json"))["files"].size() + 1;
    std::size_t lines = 0;
    std::istringstream err_lines(ran.err);
    for (std::string line; std::getline(err_lines, line);) lines += line.rfind("normlab: note: ", 0) != 0;
    CHECK_MESSAGE(lines == 1 + files, ran.err);
    CHECK_MESSAGE(ran.err.find("written to \"" + fresh_dir("newline_probe").parent_path().string() + "/newline_path/a\\nb/out\"\n") !=
                      std::string::npos,
                  ran.err);
}
