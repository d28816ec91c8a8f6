// validate, run --dry-run and run agree: a table of well-formed configs that run refuses,
// each refused by all three with the same first line, before anything is printed or
// written. Every shipped config passes validate. The dry-run plan labels the config's seed
// and the seed a sweep point derives from it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

// Data entries the cases pick from by name.
const std::string kData = R"({
    "x":    {"source": "gaussian", "shape": [4, 3, 5]},
    "x6":   {"source": "gaussian", "shape": [4, 6, 5]},
    "x234": {"source": "gaussian", "shape": [2, 3, 4]},
    "row":  {"source": "values", "values": [[1, 2, 3, 4]]},
    "vec":  {"source": "values", "values": [1, 2, 3]},
    "pair": {"source": "gaussian", "shape": [4, 3]},
    "tok":  {"source": "tokens", "batch": 3, "max_len": 6, "dim": 4, "min_len": 2}
  })";

// Norms the cases pick from by name.
const std::string kNorms = R"({
    "ln5":   {"type": "layernorm", "normalized_shape": [5]},
    "ln5b":  {"type": "layernorm", "normalized_shape": [5], "eps": 1e-3},
    "ln4":   {"type": "layernorm", "normalized_shape": [4]},
    "ln4m":  {"type": "layernorm", "normalized_shape": [4], "mask": true},
    "ln5m":  {"type": "layernorm", "normalized_shape": [5], "mask": true},
    "ln_ax": {"type": "layernorm", "axes": [3]},
    "bn":    {"type": "batchnorm"},
    "bn2":   {"type": "batchnorm", "eps": 1e-3},
    "bn_ev": {"type": "batchnorm", "training": false},
    "bn_rm": {"type": "batchnorm", "running_mean": [0, 0]},
    "in":    {"type": "instancenorm"},
    "gn2":   {"type": "groupnorm", "num_groups": 2},
    "gn3w":  {"type": "groupnorm", "num_groups": 3, "weight": [1, 2]},
    "rms3":  {"type": "rmsnorm", "normalized_shape": [3]},
    "rms5":  {"type": "rmsnorm", "normalized_shape": [5]},
    "ln12":  {"type": "layernorm", "normalized_shape": [4, 3]},
    "bn_r3": {"type": "batchnorm", "replicas": 3},
    "bn_r2": {"type": "batchnorm", "replicas": 2},
    "bn_w3": {"type": "batchnorm", "weight": [1, 2, 3]},
    "ln5w":  {"type": "layernorm", "normalized_shape": [5], "bias": [0, 0]},
    "ln_pa": {"type": "layernorm", "normalized_shape": [5], "param_axes": [1]}
  })";

struct BadCase {
    const char* name;
    std::string analyses;  ///< the "analyses" list
    std::string expect;    ///< in the first line of every message
};

std::string config_text(const BadCase& c) {
    return R"({"name": "bad", "seed": 1, "data": )" + kData + R"(, "norms": )" + kNorms +
           R"(, "analyses": )" + c.analyses + "}";
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// One analysis entry of `type` over `data` and `norms` (JSON lists) with extra keys.
std::string an(const std::string& type, const std::string& data, const std::string& norms,
               const std::string& extra = "") {
    return R"([{"type": ")" + type + R"(", "data": )" + data + R"(, "norms": )" + norms +
           (extra.empty() ? "" : ", " + extra) + "}]";
}

}  // namespace

TEST_CASE("validate, --dry-run and run refuse the same configs with the same first line") {
    const std::vector<BadCase> cases = {
        // The checks that used to pass validate and --dry-run and then fail the run.
        {"padding_without_mask", an("padding", R"(["x"])", R"(["ln5"])"),
         "/analyses/0/data: padding on data \"x\": needs data with a padding mask"},
        {"batch_dependence_sample", an("batch_dependence", R"(["x"])", R"(["ln5"])", R"("sample": 9)"),
         "/analyses/0/sample: batch_dependence on data \"x\": sample 9 out of range for a batch of 4"},
        {"precision_running_stats", an("precision", R"(["x"])", R"(["bn_ev"])"),
         "/analyses/0/norms: batchnorm \"bn_ev\" on data \"x\": normalises with running statistics"},
        {"equivalence_reshape", an("equivalence", R"(["x234"])", R"(["ln4", "in"])", R"("reshape": {"in": [7, -1]})"),
         "/analyses/0/reshape/in: cannot reshape data \"x234\" of shape [2, 3, 4] (24 elements) with a -1 dim"},
        {"apply_save_running_mean", an("apply", R"(["x"])", R"(["ln5"])", R"("save": ["running_mean"])"),
         "/analyses/0/save/0: layernorm \"ln5\" keeps no running statistics"},
        {"mask_without_padding_mask", an("apply", R"(["x"])", R"(["ln5m"])"),
         "/norms/ln5m/mask: layernorm \"ln5m\" on data \"x\": mask is true but the data has no padding mask"},
        // A pair that does not fit, for every norm type.
        {"batchnorm_running_mean", an("apply", R"(["x"])", R"(["bn_rm"])"),
         "/norms/bn_rm/running_mean: batchnorm \"bn_rm\" on data \"x\": running_mean: expected shape [3] (one value per "
         "channel: C = 3 at channel axis 1 of input shape [4, 3, 5]), but got [2]"},
        {"batchnorm_weight", an("apply", R"(["x6"])", R"(["bn_w3"])"),
         "/norms/bn_w3/weight: batchnorm \"bn_w3\" on data \"x6\": weight: expected shape [6] (one value per channel: "
         "C = 6 at channel axis 1 of input shape [4, 6, 5]), but got [3]"},
        {"layernorm_bias", an("apply", R"(["x"])", R"(["ln5w"])"),
         "/norms/ln5w/bias: layernorm \"ln5w\" on data \"x\": bias: expected shape [5] (the dim at normalized axis 2 of "
         "input shape [4, 3, 5]), but got [2]"},
        {"batchnorm_one_value", an("apply", R"(["row"])", R"(["bn"])"), "one value per channel (need more than 1), input shape [1, 4]"},
        {"layernorm_shape", an("stats_shapes", R"(["x234"])", R"(["ln5"])"),
         "/norms/ln5/normalized_shape: layernorm \"ln5\" on data \"x234\": given normalized_shape=[5]"},
        {"layernorm_axes", an("apply", R"(["x"])", R"(["ln_ax"])"), "/norms/ln_ax/axes: layernorm \"ln_ax\" on data \"x\": axes: axis 3 out of range"},
        {"instancenorm_one_value", an("apply", R"(["pair"])", R"(["in"])"), "instancenorm \"in\" on data \"pair\": one value per instance and channel"},
        {"groupnorm_groups", an("apply", R"(["x"])", R"(["gn2"])"), "/norms/gn2/num_groups: groupnorm \"gn2\" on data \"x\""},
        {"groupnorm_weight", an("apply", R"(["x"])", R"(["gn3w"])"), "/norms/gn3w/weight: groupnorm \"gn3w\" on data \"x\": weight: expected shape [3]"},
        {"rmsnorm_shape", an("apply", R"(["x"])", R"(["rms3"])"), "/norms/rms3/normalized_shape: rmsnorm \"rms3\" on data \"x\""},
        {"layernorm_param_axes", an("gradients", R"(["x"])", R"(["ln_pa"])"),
         "/norms/ln_pa/param_axes/0: layernorm \"ln_pa\" on data \"x\": param_axes: axis 1 of input shape "
         "[4, 3, 5] is not normalized: the normalized axis is 2 (normalized_shape [5])"},
        // A bad key of every analysis type.
        {"stats_shapes_key", an("stats_shapes", R"(["x"])", R"(["ln5"])", R"("save": ["output"])"), "/analyses/0/save: unknown key \"save\""},
        {"apply_key", an("apply", R"(["x"])", R"(["ln5"])", R"("save": ["outptu"])"), "/analyses/0/save/0: cannot save \"outptu\" (expected output, mean, var, rstd, running_mean, running_var, "
                     "grad_input, grad_weight, grad_bias, input, weight, bias, upstream or mask); did you mean \"output\"?"},
        {"precision_key", an("precision", R"(["x"])", R"(["ln5"])", R"("algorithms": ["welfort"])"),
         "/analyses/0/algorithms/0: unknown algorithm \"welfort\""},
        {"port_check_key", an("port_check", R"(["x"])", R"(["ln5", "ln5b"])", R"("reference": "ln6")"),
         "/analyses/0/reference: \"ln6\" is not among this analysis' norms"},
        {"epsilon_key", an("epsilon", R"(["x"])", R"(["ln5"])", R"("eps": [-1])"), "/analyses/0/eps/0: eps must be >= 0"},
        {"padding_key", an("padding", R"(["tok"])", R"(["ln4"])", R"("batch_mates": -1)"), "/analyses/0/batch_mates: batch_mates must be >= 0"},
        {"equivalence_key", an("equivalence", R"(["x"])", R"(["ln5"])"), "/analyses/0/norms: equivalence compares norms pairwise"},
        {"invariance_key", an("invariance", R"(["x"])", R"(["ln5"])", R"("scale_range": [0, 1])"), "/analyses/0/scale_range: scales must be > 0"},
        {"batch_dependence_key", an("batch_dependence", R"(["x"])", R"(["ln5"])", R"("sizes": [0])"),
         "/analyses/0/sizes/0: a batch size must be >= 1"},
        {"batch_dependence_mates", an("batch_dependence", R"(["x"])", R"(["ln5"])", R"("mates": "real")"),
         "/analyses/0/mates: unknown value \"real\" (expected one of: drawn, data)"},
        {"train_eval_key", an("train_eval", R"(["x"])", R"(["bn"])", R"("steps": 0)"),
         "/analyses/0/steps: steps must be in [1, 1000000], but got 0"},
        // Training steps are capped as depth's train_steps are: 1e9 used to pass and run for hours.
        {"train_eval_steps_cap", an("train_eval", R"(["x"])", R"(["bn"])", R"("steps": 1000000000)"),
         "/analyses/0/steps: steps must be in [1, 1000000], but got 1000000000"},
        {"port_check_steps_cap", an("port_check", R"(["x"])", R"(["bn", "bn2"])", R"("steps": 1000001)"),
         "/analyses/0/steps: steps must be in [1, 1000000], but got 1000001"},
        // Settings that make an analysis build batches far larger than the data: the memory
        // estimate counts them and points at the setting (no machine has these petabytes).
        {"batch_dependence_sizes_memory", an("batch_dependence", R"(["x"])", R"(["ln5"])", R"("sizes": [2, 1000000000000000])"),
         "/analyses/0/sizes: needs an estimated "},
        {"train_eval_batch_size_memory", an("train_eval", R"(["x"])", R"(["bn"])", R"("batch_size": 1000000000000000)"),
         "/analyses/0/batch_size: needs an estimated "},
        {"padding_batch_mates_memory", an("padding", R"(["tok"])", R"(["ln4"])", R"("batch_mates": 1000000000000000)"),
         "/analyses/0/batch_mates: needs an estimated "},
        {"padding_extra_length_memory", an("padding", R"(["tok"])", R"(["ln4"])", R"("extra_length": 1000000000000000)"),
         "/analyses/0/extra_length: needs an estimated "},
        {"gradients_key", an("gradients", R"(["x"])", R"(["ln5"])", R"("upstream": "twos")"), "/analyses/0/upstream"},
        {"jacobian_key", an("jacobian", R"(["x"])", R"(["ln5"])", R"("groups": 0)"), "/analyses/0/groups: groups must be >= 1"},
        // Checks that depend on the data, one or more per analysis type.
        {"port_check_train_data", an("port_check", R"(["x"])", R"(["bn", "bn2"])", R"("train_data": ["nope"])"),
         "/analyses/0/train_data/0: no data entry named \"nope\""},
        {"port_check_train_channels", an("port_check", R"(["x"])", R"(["bn", "bn2"])", R"("train_data": ["x6"])"),
         "batchnorm \"bn\" on data \"x\": running statistics have 6 channels from training on \"x6\""},
        {"train_eval_batch_of_one", an("train_eval", R"(["pair"])", R"(["bn"])", R"("batch_size": 1)"),
         "/analyses/0/batch_size: batchnorm \"bn\" on data \"pair\": in training mode: one value per channel"},
        {"apply_sequential_channels", an("apply", R"(["x", "x6"])", R"(["bn"])", R"("sequential": true)"),
         "batchnorm \"bn\" on data \"x6\": running statistics have 3 channels from an earlier step (data \"x\")"},
        {"batch_dependence_data_mates", an("batch_dependence", R"(["x"])", R"(["bn"])", R"("sizes": [2, 8], "mates": "data")"),
         "/analyses/0/sizes/1: batch_dependence on data \"x\": batch size 8 with \"mates\": \"data\" needs 8 samples, "
         "but the data has a batch of N = 4 (use sizes <= 4, or \"mates\": \"drawn\")"},
        {"batch_dependence_replicas", an("batch_dependence", R"(["x"])", R"(["ln5", "bn_ev"])", R"("replicas": [1, 2, 3])"),
         "/analyses/0/replicas/2: batch_dependence on data \"x\": replicas 3 does not divide the batch of N = 4 samples "
         "into equal slices (use 1, 2 or 4)"},
        {"batch_dependence_rank1", an("batch_dependence", R"(["vec"])", R"(["ln4"])"),
         "/analyses/0: batch_dependence on data \"vec\": needs a batch axis 0 apart from the channel axis"},
        {"train_eval_rank1", an("train_eval", R"(["vec"])", R"(["ln4"])"), "train_eval on data \"vec\": needs a batch axis 0"},
        {"padding_rank1", an("padding", R"(["vec"])", R"(["ln4"])"), "padding on data \"vec\": needs"},
        {"equivalence_copy_dim", an("equivalence", R"(["x234"])", R"(["ln4", "in"])", R"("reshape": {"in": [0, 0, 0, 0]})"),
         "/analyses/0/reshape/in/3: dim 0 copies the input's dim 3, but data \"x234\" has shape [2, 3, 4]"},
        {"equivalence_reshaped_pair", an("equivalence", R"(["x234"])", R"(["ln4", "ln12"])", R"("reshape": {"ln12": [2, 12]})"),
         "/norms/ln12/normalized_shape: layernorm \"ln12\" on data \"x234\""},
        {"epsilon_mask", an("epsilon", R"(["x"])", R"(["ln5m"])"), "/norms/ln5m/mask: layernorm \"ln5m\" on data \"x\": mask is true"},
        {"precision_mask", an("precision", R"(["x"])", R"(["ln5m"])"), "/norms/ln5m/mask: layernorm \"ln5m\" on data \"x\": mask is true"},
        {"invariance_pair", an("invariance", R"(["x"])", R"(["gn2"])"), "/norms/gn2/num_groups: groupnorm \"gn2\""},
        {"batch_dependence_pair", an("batch_dependence", R"(["x"])", R"(["rms3"])"), "/norms/rms3/normalized_shape"},
        {"port_check_pair", an("port_check", R"(["x234"])", R"(["ln4", "ln5"])"), "/norms/ln5/normalized_shape"},
        {"train_eval_pair", an("train_eval", R"(["x"])", R"(["rms5", "gn2"])"), "/norms/gn2/num_groups"},
        {"padding_pair", an("padding", R"(["tok"])", R"(["ln5"])"), "/norms/ln5/normalized_shape: layernorm \"ln5\" on data \"tok\""},
        {"gradients_pair", an("gradients", R"(["x"])", R"(["gn2"])"), "/norms/gn2/num_groups"},
        {"jacobian_group_size", an("jacobian", R"(["x"])", R"(["ln5"])", R"("max_elements": 2)"),
         "/analyses/0/max_elements: jacobian of layernorm \"ln5\" on data \"x\": its groups have 5 elements"},
        {"replicas_do_not_divide", an("apply", R"(["x"])", R"(["bn_r3"])"), "/norms/bn_r3/replicas: "},
        {"precision_replicas", an("precision", R"(["x"])", R"(["bn_r2"])"),
         "/analyses/0/norms: batchnorm \"bn_r2\" on data \"x\": normalises each of its replicas with its own statistics"},
        // A name listed twice in one analysis would only repeat its rows.
        {"norm_listed_twice", an("apply", R"(["x"])", R"(["ln5", "bn", "ln5"])"),
         "/analyses/0/norms/2: norm \"ln5\" is listed twice (first at /analyses/0/norms/0); a second listing would only "
         "repeat its rows"},
        {"data_listed_twice", an("stats_shapes", R"(["x", "x6", "x"])", R"(["bn"])"),
         "/analyses/0/data/2: data entry \"x\" is listed twice (first at /analyses/0/data/0); a second listing would only "
         "repeat its rows"},
        {"apply_data_listed_twice", an("apply", R"(["x", "x"])", R"(["ln5"])"),
         "/analyses/0/data/1: data entry \"x\" is listed twice (first at /analyses/0/data/0); a second listing would only "
         "repeat its rows (with \"sequential\": true, each listing is one more step)"},
        {"second_analysis", R"([{"type": "apply", "data": ["x"], "norms": ["ln5"]}, {"type": "padding", "data": ["x"], "norms": ["ln5"]}])",
         "/analyses/1/data: padding on data \"x\""},
    };
    CHECK(cases.size() >= 30);
    for (const auto& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        fs::path dir = fresh_dir(std::string("agree_") + c.name);
        write_text(dir / "cfg.json", config_text(c));
        const std::string cfg = (dir / "cfg.json").string();
        CliResult v = run_normlab("validate " + cfg);
        CliResult d = run_normlab("run " + cfg + " --dry-run");
        CliResult r = run_normlab("run " + cfg + " --out " + (dir / "out").string());
        CHECK_MESSAGE(v.exit_code == 2, v.out << v.err);
        CHECK_MESSAGE(d.exit_code == 2, d.out << d.err);
        CHECK_MESSAGE(r.exit_code == 2, r.err);
        CHECK_MESSAGE(first_line(r.err).find(c.expect) != std::string::npos, "expected: " << c.expect << "\ngot: " << r.err);
        CHECK(first_line(v.err) == first_line(r.err));
        CHECK(first_line(d.err) == first_line(r.err));
        CHECK_MESSAGE(d.out.empty(), d.out);  // checked first, nothing of the plan printed
        CHECK(v.out.empty());
        CHECK_FALSE(fs::exists(dir / "out"));
    }
}

TEST_CASE("settings that make an analysis allocate more than the data are counted: refused at the setting") {
    // The memory estimate counts the batches an analysis builds (batch sizes, training
    // batches, re-padded batches) and the rows of its table, before anything is allocated:
    // validate, --dry-run and run refuse each config with the same line, naming the setting.
    // batch_dependence with sizes [4000000] and train_eval with batch_size 4000000 used to
    // pass validate (a 1 MiB estimate) and then grow past 2 GB under --max-memory 1G.
    struct MemoryCase {
        const char* name;
        std::string config;
        const char* limit;
        std::vector<std::string> expect;  ///< all in the first line
    };
    const std::string data = R"("data": {"x": {"source": "gaussian", "shape": [4, 6, 8]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}, "bn": {"type": "batchnorm"},
                "gn": {"type": "groupnorm", "num_groups": 2}})";
    auto cfg = [](const std::string& body, const std::string& analysis, const std::string& extra = "") {
        return R"({"name": "m", )" + body + R"(, "analyses": [)" + analysis + "]" + extra + "}";
    };
    const std::vector<MemoryCase> cases = {
        {"sizes", cfg(data, R"({"type": "batch_dependence", "data": ["x"], "norms": ["ln", "bn", "gn"], "sizes": [4000000]})"), "1G",
         {"cfg.json: /analyses/0/sizes: needs an estimated ",
          " of memory (data \"x\": gaussian [4, 6, 8] in its batch_dependence analysis (sizes), ",
          "more than the limit of 1.0 GiB (--max-memory 1G); lower sizes, make the data smaller or raise --max-memory"}},
        {"batch_size", cfg(data, R"({"type": "train_eval", "data": ["x"], "norms": ["ln", "bn", "gn"], "batch_size": 4000000})"), "1G",
         {"cfg.json: /analyses/0/batch_size: needs an estimated ", "in its train_eval analysis (batch_size), ",
          "; lower batch_size, make the data smaller or raise --max-memory"}},
        {"port_check_steps",
         cfg(R"("data": {"x": {"source": "gaussian", "shape": [64, 64]}}, "norms": {"a": {"type": "batchnorm"},
               "b": {"type": "batchnorm", "eps": 1e-3}})",
             R"({"type": "port_check", "data": ["x"], "norms": ["a", "b"], "steps": 1000000})"),
         "1G", {"cfg.json: /analyses/0/steps: needs an estimated ", "in its port_check analysis (steps), "}},
        {"batch_mates",
         cfg(R"("data": {"x": {"source": "tokens", "batch": 4, "max_len": 16, "dim": 8}},
               "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}})",
             R"({"type": "padding", "data": ["x"], "norms": ["ln"], "batch_mates": 10000000})"),
         "1G", {"cfg.json: /analyses/0/batch_mates: needs an estimated ", "in its padding analysis (batch_mates), "}},
        {"extra_length",
         cfg(R"("data": {"x": {"source": "tokens", "batch": 4, "max_len": 16, "dim": 8}},
               "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}})",
             R"({"type": "padding", "data": ["x"], "norms": ["ln"], "extra_length": 100000000})"),
         "1G", {"cfg.json: /analyses/0/extra_length: needs an estimated ", "in its padding analysis (extra_length), "}},
        // A row per step and norm: 300003 rows of 9 cells, kept until the report is written.
        {"steps_rows", cfg(data, R"({"type": "train_eval", "data": ["x"], "norms": ["ln", "bn", "gn"], "steps": 100000})"), "1G",
         {"cfg.json: /analyses/0/steps: needs an estimated ",
          " of memory (its tables: 300003 rows, ", "of which its train_eval analysis (steps) gives 300003), ",
          "; lower steps or raise --max-memory"}},
        {"eps_rows",
         cfg(data, R"({"type": "epsilon", "data": ["x"], "norms": ["ln", "bn", "gn"], "eps": [1e-5, 1e-4, 1e-3, 1e-2],
                      "scales": [)" + [] {
                 std::string s;
                 for (int i = 1; i <= 2000; ++i) s += (i > 1 ? ", " : "") + std::to_string(i);
                 return s;
             }() + "]}"),
         "200M", {"cfg.json: /analyses/0/scales: needs an estimated ", "(its tables: 30000 rows, ", "; shorten scales or raise"}},
        // Every point fits, their tables together do not.
        {"sweep_rows",
         cfg(data, R"({"type": "train_eval", "data": ["x"], "norms": ["ln", "bn"], "steps": 1000})",
             R"(, "sweep": {"data.x.mean": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]})"),
         "200M", {"cfg.json: /sweep: its 20 points need an estimated ", "(their tables: 40040 rows, ",
                  "run the sweep in shards (--shard I/N, then normlab merge) or raise --max-memory"}},
    };
    for (const auto& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        fs::path dir = fresh_dir(std::string("memory_setting_") + c.name);
        write_text(dir / "cfg.json", c.config);
        const std::string cfg_path = (dir / "cfg.json").string(), limit = std::string(" --max-memory ") + c.limit;
        CliResult v = run_normlab("validate " + cfg_path + limit);
        CliResult d = run_normlab("run " + cfg_path + " --dry-run" + limit);
        CliResult r = run_normlab("run " + cfg_path + " --out " + (dir / "out").string() + limit);
        CHECK_MESSAGE(v.exit_code == 2, v.out << v.err);
        CHECK_MESSAGE(d.exit_code == 2, d.out << d.err);
        CHECK_MESSAGE(r.exit_code == 2, r.err);
        for (const auto& e : c.expect) CHECK_MESSAGE(first_line(v.err).find(e) != std::string::npos, "expected: " << e << "\ngot: " << v.err);
        CHECK(first_line(d.err) == first_line(v.err));
        CHECK(first_line(r.err) == first_line(v.err));
        CHECK_FALSE(fs::exists(dir / "out"));
    }
    // Modest settings still pass at the default limit (and the shipped configs: below).
    fs::path dir = fresh_dir("memory_setting_ok");
    write_text(dir / "cfg.json", cfg(data, R"({"type": "batch_dependence", "data": ["x"], "norms": ["ln", "bn"], "sizes": [1, 64, 4096]})"));
    CliResult ok = run_normlab("validate " + (dir / "cfg.json").string());
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
}

TEST_CASE("every shipped config and init template passes validate") {
    for (const auto& e : fs::directory_iterator(kSrc + "/configs")) {
        if (e.path().extension() != ".json") continue;
        CAPTURE(e.path());
        CliResult v = run_normlab("validate " + e.path().string());
        CHECK_MESSAGE(v.exit_code == 0, v.err);
    }
}

TEST_CASE("validate accepts a norm that fits only the data as an analysis reshapes it") {
    // ln12 does not fit x234 [2, 3, 4], but equivalence applies it to the data viewed as
    // [2, 12]: the run succeeds, so validate must not refuse it.
    fs::path dir = fresh_dir("agree_reshaped_ok");
    write_text(dir / "cfg.json", R"({"name": "ok", "data": {"x234": {"source": "gaussian", "shape": [2, 3, 4]}},
      "norms": {"a": {"type": "layernorm", "normalized_shape": [3, 4]}, "b": {"type": "layernorm", "normalized_shape": [12]}},
      "analyses": [{"type": "equivalence", "data": ["x234"], "norms": ["a", "b"], "reshape": {"b": [2, 12]}}]})");
    const std::string cfg = (dir / "cfg.json").string();
    CliResult r = run_normlab("run " + cfg + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CliResult v = run_normlab("validate " + cfg);
    CHECK_MESSAGE(v.exit_code == 0, v.err);
    CHECK(run_normlab("run " + cfg + " --dry-run").exit_code == 0);
}

TEST_CASE("--dry-run labels the config's seed and a sweep point's derived seed") {
    fs::path dir = fresh_dir("dry_seed");
    const std::string base = R"("data": {"x": {"source": "gaussian", "shape": [4, 3]}},
      "norms": {"n": {"type": "layernorm", "normalized_shape": [3]}},
      "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}])";
    write_text(dir / "plain.json", R"({"name": "p", "seed": 0, )" + base + "}");
    write_text(dir / "swept.json", R"({"name": "s", "seed": 0, )" + base + R"(, "sweep": {"norms.n.eps": [1e-5, 1e-3]}})");
    write_text(dir / "kept.json",
               R"({"name": "k", "seed": 7, )" + base + R"(, "sweep": {"norms.n.eps": [1e-5, 1e-3], "seed_per_point": false}})");

    CliResult p = run_normlab("run " + (dir / "plain.json").string() + " --dry-run");
    REQUIRE_MESSAGE(p.exit_code == 0, p.err);
    CHECK_MESSAGE(p.out.find("seed: 0 (the config's seed") != std::string::npos, p.out);
    CHECK(p.out.find("point 0 seed") == std::string::npos);

    CliResult s = run_normlab("run " + (dir / "swept.json").string() + " --dry-run");
    REQUIRE_MESSAGE(s.exit_code == 0, s.err);
    CHECK_MESSAGE(s.out.find("seed: 0 (the config's seed") != std::string::npos, s.out);
    const auto at = s.out.find("point 0 seed: ");
    REQUIRE_MESSAGE(at != std::string::npos, s.out);
    const std::string derived = s.out.substr(at + 14, s.out.find(' ', at + 14) - at - 14);
    CHECK(derived != "0");
    CHECK(derived.find_first_not_of("0123456789") == std::string::npos);
    CHECK(s.out.find("derived from the config's seed and the point's values") != std::string::npos);

    CliResult k = run_normlab("run " + (dir / "kept.json").string() + " --dry-run");
    REQUIRE_MESSAGE(k.exit_code == 0, k.err);
    CHECK(k.out.find("seed: 7 (the config's seed") != std::string::npos);
    CHECK(k.out.find("point 0 seed") == std::string::npos);  // seed_per_point false: every point runs with 7

    // A point's seed derives from the run's seed however it was given: --seed stores a signed
    // integer, which the derivation once read as 0.
    const auto point0 = [&](const std::string& args) {
        CliResult r = run_normlab("run " + (dir / "swept.json").string() + " --dry-run " + args);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const auto p0 = r.out.find("point 0 seed: ");
        REQUIRE(p0 != std::string::npos);
        return r.out.substr(p0 + 14, r.out.find(' ', p0 + 14) - p0 - 14);
    };
    CHECK(point0("--seed 1") == point0("--set seed=1"));
    CHECK(point0("--seed 1") != point0("--seed 0"));
    CHECK(point0("--seed 0") == derived);
    // A seed the config refuses is refused in a sweep too, by run and validate alike.
    for (const std::string cmd : {"run --dry-run ", "validate "}) {
        CliResult bad = run_normlab(cmd + (dir / "swept.json").string() + " --set seed=-1");
        CHECK(bad.exit_code == 2);
        CHECK_MESSAGE(bad.err.find("--set seed=-1: /seed: seed must be >= 0, but got -1") != std::string::npos, bad.err);
    }
}

TEST_CASE("validate takes run's options and refuses what run refuses with them") {
    fs::path dir = fresh_dir("validate_as_run");
    // Point 1 of the sweep does not fit its LayerNorm; point 0 does.
    write_text(dir / "shape.json", R"({"name": "validate_as_run_v", "data": {"x": {"source": "gaussian", "shape": [2, 6, 4]}},
      "norms": {"n": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}], "sweep": {"data.x.shape.2": [4, 3]}})");
    // 20 points whose tables together exceed 200M; a quarter of them fit.
    std::string means;
    for (int i = 0; i < 20; ++i) means += (i ? ", " : "") + std::to_string(i);
    write_text(dir / "rows.json", R"({"name": "validate_as_run_r", "data": {"x": {"source": "gaussian", "shape": [4, 6, 8]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}, "bn": {"type": "batchnorm"}},
      "analyses": [{"type": "train_eval", "data": ["x"], "norms": ["ln", "bn"], "steps": 1000}],
      "sweep": {"data.x.mean": [)" + means + "]}}");
    fs::create_directories(dir / "foreign");
    write_text(dir / "foreign" / "notes.txt", "not a result\n");
    const std::string shape = (dir / "shape.json").string(), rows = (dir / "rows.json").string(),
                      foreign = (dir / "foreign").string();
    struct Case {
        std::string args;    ///< after "<command> "
        std::string expect;  ///< in the one line of the refusal; empty: accepted
    };
    const std::vector<Case> cases = {
        {shape, "/sweep/data.x.shape.2/1 (sweep point 1): /norms/n/normalized_shape"},
        {shape + " --shard 0/2", ""},
        {shape + " --shard 1/2", "/sweep/data.x.shape.2/1 (sweep point 1): /norms/n/normalized_shape"},
        {shape + " --shard 2/2", "--shard 2/2: expected I/N with 0 <= I < N"},
        {shape + " --shard ''", "--shard \"\": expected I/N"},
        // digits alone: no sign, no blanks on either side of either number
        {shape + " --shard ' 0/2'", "--shard \" 0/2\": expected I/N"},
        {shape + " --shard '0/2 '", "--shard \"0/2 \": expected I/N"},
        {shape + " --shard '0/ 2'", "--shard 0/ 2: expected I/N"},
        {shape + " --shard +0/2", "--shard +0/2: expected I/N"},
        {shape + " --shard 0/+2", "--shard 0/+2: expected I/N"},
        {rows + " --max-memory 200M", "rows.json: /sweep: its 20 points need an estimated "},
        {rows + " --max-memory 200M --shard 3/4", ""},
        {shape + " --shard 0/2 --seed -1", "--seed -1: /seed: seed must be >= 0, but got -1"},
        {shape + " --shard 0/2 --seed 3", ""},
        {shape + " --shard 0/2 --threads 0", "--threads 0: expected an integer from 1 to 1024"},
        {shape + " --shard 0/2 --threads 1", ""},
        {shape + " --shard 0/2 --out '~/v'", "--out ~/v: "},
        {shape + " --shard 0/2 --out ''", "--out \"\": "},
        {shape + " --shard 0/2 --out " + foreign, "foreign: output folder is not empty (it holds \"notes.txt\") and does not hold an earlier normlab result; choose another --out or pass --force"},
        {shape + " --shard 0/2 --out " + foreign + " --force", ""},
        // output.dir set by an override: its refusal blames the override, as other values' do
        {shape + " --shard 0/2 --set 'output={\"dir\": \"" + foreign + "\"}'",
         "--set output={\"dir\": \"" + foreign + "\"}: /output/dir: " + foreign + ": output folder is not empty"},
        {shape + " --shard 0/2 --out " + shape + "/x", "shape.json is a file, not a folder, so the output folder cannot be made in it"},
        {shape + " --shard 0/2 --out " + (dir / "new" / "out").string(), ""},
    };
    // Without --out the folder is results/<name> in the current folder: validate and the
    // dry run must leave it as they found it (absent).
    const fs::path defaults = fs::current_path() / "results";
    for (const char* name : {"validate_as_run_v", "validate_as_run_r"}) fs::remove_all(defaults / name);
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const CliResult v = run_normlab("validate " + c.args);
        const CliResult d = run_normlab("run --dry-run " + c.args);
        if (c.expect.empty()) {
            CHECK_MESSAGE(v.exit_code == 0, v.err);
            CHECK_MESSAGE(d.exit_code == 0, d.err);
            continue;
        }
        CHECK(v.exit_code == 2);
        CHECK_MESSAGE(first_line(v.err).find(c.expect) != std::string::npos, v.err);
        CHECK(first_line(d.err) == first_line(v.err));
    }
    CHECK(read_text(dir / "foreign" / "notes.txt") == "not a result\n");
    CHECK_FALSE(fs::exists(defaults / "validate_as_run_v"));
    CHECK_FALSE(fs::exists(defaults / "validate_as_run_r"));
    CHECK_FALSE(fs::exists(dir / "new"));
}
