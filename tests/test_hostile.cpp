// Hostile inputs, end to end through the built binary: every bad input exits 2
// with one line naming the file and where in it; memory is estimated before anything
// large is allocated; NaN/inf inputs are reported; the output folder is never left
// half-written, never escapes where the user pointed, and holds nothing normlab did not
// write unless --force. tests/README.md "Bad inputs and what normlab says" lists these rows.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;
const std::string kData = kSrc + "/tests/data";

/// Starts `normlab <args>` in `dir` without waiting, stdout to /dev/null, stderr to
/// dir/stderr.txt (for the signal tests). Returns its pid (-1 when fork fails).
pid_t start_normlab(const fs::path& dir, const std::vector<std::string>& args, int ignored_signal = 0) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    if (::chdir(dir.c_str()) != 0) ::_exit(99);
    if (ignored_signal) std::signal(ignored_signal, SIG_IGN);  // as nohup does for SIGHUP
    int devnull = ::open("/dev/null", O_WRONLY);
    int err = ::open("stderr.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(devnull, 1);
    ::dup2(err, 2);
    std::vector<char*> argv{const_cast<char*>(NORMLAB_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(NORMLAB_BINARY, argv.data());
    ::_exit(98);
}

/// Runs a shell command line with "NL" standing for the normlab binary (so tests can cd,
/// wrap it in `timeout` or run it as another user), capturing exit code, stdout, stderr.
CliResult run_sh(std::string cmd) {
    static int counter = 0;
    const std::string bin = NORMLAB_BINARY;
    for (std::size_t p = cmd.find("NL "); p != std::string::npos; p = cmd.find("NL ", p + bin.size()))
        cmd.replace(p, 2, bin);
    const auto dir = process_temp_dir("normlab_hostile_");
    auto out = dir / ("out" + std::to_string(counter));
    auto err = dir / ("err" + std::to_string(counter++));
    std::string full = "(" + cmd + ") >" + out.string() + " 2>" + err.string();
    int status = std::system(full.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
}

/// A config with one data entry, one norm and one apply analysis.
std::string config(const std::string& data, const std::string& norm = R"({"type": "layernorm", "axes": [-1]})",
                   const std::string& extra = "") {
    // A name in `extra` replaces "t" (a key given twice is refused).
    const std::string name = extra.find(R"("name")") == std::string::npos ? R"("name": "t", )" : "";
    return "{" + name + extra + R"("data": {"x": )" + data + R"(}, "norms": {"n": )" + norm +
           R"(}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})";
}

std::string npy_data(const std::string& path) { return R"({"source": "npy", "path": ")" + path + R"("})"; }

/// The row contract: exit code 2 and exactly one line on stderr, "normlab: error: " and then
/// `expect` (which names the file and where in it), and no output folder left behind.
void check_row(const CliResult& r, const std::string& expect, const fs::path& out = {}) {
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.rfind("normlab: error: ", 0) == 0, r.err);
    CHECK_MESSAGE(r.err.find(expect) != std::string::npos, "expected: " << expect << "\ngot: " << r.err);
    CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
    if (!out.empty()) CHECK_FALSE(fs::exists(out));
}

/// Writes cfg.json into a fresh folder and runs it there with `--out out`, in `timeout` so
/// that a hang fails the row instead of the suite.
CliResult run_cfg(const std::string& name, const std::string& json, const std::string& extra = "") {
    fs::path dir = fresh_dir("hostile_" + name);
    write_text(dir / "cfg.json", json);
    return run_sh("cd " + dir.string() + " && timeout 60 NL run cfg.json --out out " + extra);
}

fs::path out_of(const std::string& name) { return fresh_dir("hostile_probe").parent_path() / ("hostile_" + name) / "out"; }

struct Row {
    const char* name;
    std::string json;
    std::string expect;
};

void check_rows(const std::vector<Row>& rows) {
    for (const auto& row : rows) {
        const std::string name = row.name;  // a char* would be logged as its address
        CAPTURE(name);
        check_row(run_cfg(row.name, row.json), row.expect, out_of(row.name));
    }
}

/// A PNG of width x height that holds only its header (signature, IHDR with a valid CRC,
/// IEND): what a hostile or truncated file may claim.
std::string png_header_only(std::uint32_t width, std::uint32_t height) {
    auto be32 = [](std::uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                           static_cast<char>(v)};
    };
    auto chunk = [&](const std::string& type, const std::string& body) {
        std::string td = type + body;
        auto crc = static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(td.data()), static_cast<uInt>(td.size())));
        return be32(static_cast<std::uint32_t>(body.size())) + td + be32(crc);
    };
    std::string ihdr = be32(width) + be32(height) + std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB
    return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IEND", "");
}

}  // namespace

TEST_CASE("bad config files: exit 2 and one line with the file and the JSON pointer") {
    const std::string g = R"({"source": "gaussian", "shape": [2, 3, 4]})";
    check_rows({
        {"empty_file", "", "cfg.json: is empty, expected a JSON object (a config)"},
        {"blank_file", " \n\t\n", "cfg.json: is empty, expected a JSON object (a config)"},
        // nlohmann throws out_of_range, not parse_error, for these: it was an "internal error", exit 1.
        {"number_overflow", config(R"({"source": "values", "values": [1, 1e400]})"),
         "cfg.json: line 1, column 64: number 1e400 is out of range (a double holds magnitudes up to 1.8e308)"},
        // Below the smallest double it would read as 0 without a word; 0e-400 and 1e-310 (subnormal) are fine.
        {"number_underflow", config(R"({"source": "values", "values": [1, 1e-400]})"),
         "cfg.json: /data/x/values/1: number 1e-400 is below a double's smallest magnitude (about 4.9e-324) and "
         "would read as 0; write 0 if 0 is meant"},
        {"truncated_json", R"({"name": "t", "data": {"x": )", "cfg.json: malformed JSON: parse error at line 1, column 29"},
        {"not_object", "[1, 2]", "cfg.json: /: expected an object, but got array"},
        {"binary_garbage", std::string("\x93NUMPY\x01\x00\xff\xfe", 10), "cfg.json: malformed JSON: parse error at line 1, column 1"},
        {"top_level_typo", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analysis": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
         R"(cfg.json: /analysis: unknown key "analysis"; did you mean "analyses"?)"},
        // nlohmann keeps the last of two equal keys; the pointer counts arrays' members of
        // every kind (objects, arrays, numbers) before the one holding the key.
        {"duplicate_key", config(g, R"({"type": "layernorm", "eps": 1e-5, "eps": 1e-3})"),
         "cfg.json: /norms/n/eps: key given twice in one object (JSON would keep only the last, silently); remove one"},
        {"duplicate_norm_name", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "layernorm"}, "n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})", "cfg.json: /norms/n: key given twice"},
        {"duplicate_key_in_array", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}, [1, {"a": [2]}, {"b": 1, "b": 2}]]})",
         "cfg.json: /analyses/1/2/b: key given twice"},
        {"source_key_typo", config(R"({"source": "gaussian", "shap": [2, 3]})"),
         R"(cfg.json: /data/x/shap: unknown key "shap"; did you mean "shape"?)"},
        {"wrong_type_shape", config(R"({"source": "gaussian", "shape": "2x3"})"),
         "cfg.json: /data/x/shape: expected a list of integers, but got string \"2x3\"\n"},
        {"wrong_type_bool", config(g, R"({"type": "batchnorm", "affine": "yes"})"),
         R"(cfg.json: /norms/n/affine: expected true or false, but got string "yes")"},
        {"null_value", config(g, R"({"type": "batchnorm", "convention": null})"),
         "cfg.json: /norms/n/convention: expected a string, but got null\n"},
        {"zero_dim", config(R"({"source": "gaussian", "shape": [2, 0]})"),
         "cfg.json: /data/x/shape/1: dimensions must be positive, but got 0"},
        {"negative_dim", config(R"({"source": "gaussian", "shape": [-2, 3]})"),
         "cfg.json: /data/x/shape/0: dimensions must be positive, but got -2"},
        {"fractional_dim", config(R"({"source": "gaussian", "shape": [2.5, 3]})"),
         "cfg.json: /data/x/shape/0: expected an integer, but got number 2.5"},
        {"zero_tokens_dim", config(R"({"source": "tokens", "batch": 2, "max_len": 3, "dim": 0})"),
         "cfg.json: /data/x/dim: dim must be a positive integer, but got 0"},
        {"zero_normalized_shape", config(g, R"({"type": "layernorm", "normalized_shape": [0]})"),
         "cfg.json: /norms/n/normalized_shape/0: dims must be positive, but got 0"},
        {"zero_groups", config(g, R"({"type": "groupnorm", "num_groups": 0})"),
         "cfg.json: /norms/n/num_groups: num_groups must be positive, but got 0"},
        {"channel_axis_range", config(R"({"source": "gaussian", "shape": [2, 3], "channel_axis": 5})"),
         "cfg.json: /data/x/channel_axis: channel_axis for data of shape [2, 3]: axis 5 out of range for input of rank 2"},
        {"axes_negative_range", config(g, R"({"type": "layernorm", "axes": [-4]})"),
         "cfg.json: /norms/n/axes: layernorm \"n\" on data \"x\": axes: axis -4 out of range for input of rank 3"},
        {"empty_data", R"({"data": {}, "norms": {"n": {"type": "batchnorm"}}, "analyses": []})",
         "cfg.json: /data: no data defined"},
        {"empty_analyses", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}}, "analyses": []})",
         "cfg.json: /analyses: no analyses listed"},
        {"empty_data_list", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": [], "norms": ["n"]}]})", "cfg.json: /analyses/0/data: list is empty"},
        {"undefined_norm", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["m"]}]})",
         R"(cfg.json: /analyses/0/norms/0: no norms entry named "m"; did you mean "n"?)"},
        // A norm no analysis uses is still checked for what no data could make valid.
        {"unused_rmsnorm_bias", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"},
            "m": {"type": "rmsnorm", "normalized_shape": [4], "bias": 0.1}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
         "cfg.json: /norms/m/bias: rmsnorm has no bias (weight only)"},
        // Before the file it names is read: the file is not the fault.
        {"rmsnorm_bias_from_missing_file", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "rmsnorm",
            "normalized_shape": [4], "bias": {"npy": "missing.npy"}}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
         "cfg.json: /norms/n/bias: rmsnorm has no bias (weight only)"},
        {"unused_weight_without_affine", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"},
            "m": {"type": "instancenorm", "weight": 2}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}]})",
         "cfg.json: /norms/m/weight: weight given but affine is false (instancenorm's default)"},
        {"data_list_as_string", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": "x", "norms": ["n"]}]})",
         R"(cfg.json: /analyses/0/data: expected a list of strings, but got string "x"; a list is written in brackets: ["x"])"},
        {"seed_per_point_string", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}],
            "sweep": {"norms.n.eps": [0.1, 1], "seed_per_point": "no"}})",
         R"(cfg.json: /sweep/seed_per_point: expected true or false, but got string "no")"},
        {"unknown_source", config(R"({"source": "gausian", "shape": [2]})"),
         R"(cfg.json: /data/x/source: unknown value "gausian")"},
        {"huge_sweep", R"({"data": {"x": )" + g + R"(}, "norms": {"n": {"type": "batchnorm"}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}],
            "sweep": {"norms.n.eps": [1,2,3,4,5,6,7,8,9,10], "norms.n.momentum": [0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9],
                      "seed": [1,2,3,4,5,6,7,8,9,10], "data.x.shape.0": [1,2,3,4,5,6,7,8,9,10],
                      "data.x.shape.1": [1,2,3,4,5,6,7,8,9,10], "data.x.shape.2": [1,2,3,4,5,6,7,8,9,10],
                      "data.x.mean": [1,2,3,4,5,6,7,8,9,10]}})",
         "cfg.json: /sweep: sweep has more than 1000000 points"},
    });
}

TEST_CASE("deeply nested JSON is refused before it is parsed (it used to overflow the stack)") {
    const std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
    CliResult r = run_cfg("deep_values", config(R"({"source": "values", "values": )" + deep + "}"));
    check_row(r, "cfg.json: line 1, column ", out_of("deep_values"));
    CHECK_MESSAGE(r.err.find(": JSON nested deeper than 100 levels") != std::string::npos, r.err);
    check_row(run_cfg("deep_plain", std::string(1000000, '[') + std::string(1000000, ']')),
              "cfg.json: line 1, column 101: JSON nested deeper than 100 levels");
    // The same through --set, whose VALUE is JSON too.
    const std::string deep_arg = std::string(1000, '[') + "1" + std::string(1000, ']');  // one argument: < 128 KiB
    CliResult s = run_cfg("deep_set", config(R"({"source": "values", "values": [1, 2]})"), "--set data.x.values=" + deep_arg);
    check_row(s, "--set data.x.values=");
    CHECK_MESSAGE(s.err.find("JSON nested deeper than 100 levels") != std::string::npos, s.err.substr(0, 300));
    check_row(run_cfg("set_overflow", config(R"({"source": "values", "values": [1, 2]})"), "--set norms.n.eps=1e400"),
              "--set norms.n.eps=1e400: the number is out of range");
    check_row(run_cfg("set_underflow", config(R"({"source": "values", "values": [1, 2]})"), "--set norms.n.eps=1e-400"),
              "--set norms.n.eps=1e-400: /norms/n/eps: number 1e-400 is below a double's smallest magnitude");
    for (const char* fine : {"0e-400", "1e-310", "0.0"})
        CHECK(run_cfg(std::string("set_small_") + fine, config(R"({"source": "values", "values": [1, 2]})"),
                      std::string("--set norms.n.eps=") + fine).exit_code == 0);
    // A key given twice inside a --set value is refused as in the file, named in the value.
    check_row(run_cfg("set_duplicate", config(R"({"source": "values", "values": [1, 2]})"),
                      R"(--set 'norms.n={"type": "layernorm", "axes": [-1], "eps": 1, "eps": 2}')"),
              R"(--set norms.n={"type": "layernorm", "axes": [-1], "eps": 1, "eps": 2}: /norms/n/eps: key given twice in one object)");
    // 90 levels are fine (a values list of rank 86).
    const std::string ok = std::string(86, '[') + "1, 2" + std::string(86, ']');
    CliResult fine = run_cfg("deep_ok", config(R"({"source": "values", "values": )" + ok + "}", R"({"type": "layernorm", "axes": [-1]})"), "-q");
    CHECK_MESSAGE(fine.exit_code == 0, fine.err);
}

TEST_CASE("names cannot make the results escape the folder the user pointed at") {
    const std::string g = R"({"source": "gaussian", "shape": [2, 3]})";
    check_rows({
        {"name_dotdot", config(g, R"({"type": "layernorm", "axes": [-1]})", R"("name": "../evil", )"),
         R"(cfg.json: /name: name (the default output folder is results/<name>) "../evil" must not contain '/')"},
        {"name_absolute", config(g, R"({"type": "layernorm", "axes": [-1]})", R"("name": "/tmp/evil", )"),
         R"(cfg.json: /name: name (the default output folder is results/<name>) "/tmp/evil" must not contain '/')"},
        {"name_dots", config(g, R"({"type": "layernorm", "axes": [-1]})", R"("name": "..", )"),
         R"(cfg.json: /name: name (the default output folder is results/<name>) ".." must not be "." or "..")"},
        {"data_name", R"({"data": {"../../x": )" + g + R"(}, "norms": {"n": {"type": "layernorm", "axes": [-1]}},
            "analyses": [{"type": "apply", "data": ["../../x"], "norms": ["n"], "save": ["output"]}]})",
         R"(cfg.json: /data/..~1..~1x: data name "../../x" must not contain '/')"},
        {"norm_name", R"({"data": {"x": )" + g + R"(}, "norms": {"..": {"type": "layernorm", "axes": [-1]}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": [".."], "save": ["output"]}]})",
         R"(cfg.json: /norms/..: norm name ".." must not be "." or "..")"},
    });
    // Without --out the run goes to results/<name> under the current folder; nothing is
    // created outside it.
    fs::path dir = fresh_dir("hostile_name_default");
    write_text(dir / "work" / "cfg.json", config(g, R"({"type": "layernorm", "axes": [-1]})", R"("name": "../escaped", )"));
    CliResult r = run_sh("cd " + (dir / "work").string() + " && NL run cfg.json");
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(dir / "escaped"));
    CHECK_FALSE(fs::exists(dir / "work" / "results"));
}

TEST_CASE("memory: the estimate refuses what does not fit, fast, before allocating") {
    const auto t0 = std::chrono::steady_clock::now();
    CliResult r = run_cfg("mem_gaussian", config(R"({"source": "gaussian", "shape": [100000, 100000, 100]})"));
    check_row(r, "cfg.json: /data/x: needs an estimated ", out_of("mem_gaussian"));
    CHECK_MESSAGE(r.err.find("(data \"x\": gaussian [100000, 100000, 100], ") != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find("more than the limit of ") != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find("(--max-memory; default: half of the ") != std::string::npos, r.err);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

    // The same config is refused by validate and --dry-run, which would build the data too.
    fs::path dir = out_of("mem_gaussian").parent_path();
    check_row(run_sh("cd " + dir.string() + " && NL validate cfg.json"), "cfg.json: /data/x: needs an estimated ");
    check_row(run_sh("cd " + dir.string() + " && NL run cfg.json --dry-run"), "cfg.json: /data/x: needs an estimated ");

    // --max-memory sets the limit: a small batch under a tiny limit is refused, and
    // "none" lifts the limit.
    const std::string small = config(R"({"source": "gaussian", "shape": [64, 1024]})");
    CliResult tiny = run_cfg("mem_small", small, "--max-memory 100K");
    check_row(tiny, "cfg.json: /data/x: needs an estimated ");
    CHECK_MESSAGE(tiny.err.find(" of memory (data \"x\": gaussian [64, 1024], ") != std::string::npos, tiny.err);
    CHECK_MESSAGE(tiny.err.find("more than the limit of 100.0 KiB (--max-memory 100K)") != std::string::npos, tiny.err);
    CHECK(run_cfg("mem_ok", small, "--max-memory 2M -q").exit_code == 0);
    CHECK(run_cfg("mem_none", small, "--max-memory none -q").exit_code == 0);
    check_row(run_cfg("mem_bad_option", small, "--max-memory lots"),
              "--max-memory: expected a size such as 8G, 512M, 1.5GiB or 75% (of the memory), or none, but got \"lots\"");

    // Other sources: tokens (batch x max_len x dim), a size_t overflow, and files whose
    // headers claim more than fits (an npy header is trusted only as far as the file holds
    // data; an image header is read without decoding).
    check_row(run_cfg("mem_tokens", config(R"({"source": "tokens", "batch": 1000000, "max_len": 100000, "dim": 1000})")),
              "cfg.json: /data/x: needs an estimated ");
    check_row(run_cfg("mem_overflow", config(R"({"source": "gaussian", "shape": [4294967296, 4294967296, 4294967296]})")),
              "cfg.json: /data/x: needs an estimated more than 16 EiB of memory");
    // 16000 x 16000 RGB decodes to 768 MB (under stb's 1 GiB limit per image): the
    // estimate, from the header alone, refuses it under a 1 GiB limit.
    fs::path img = fresh_dir("hostile_mem_png_file") / "huge.png";
    write_text(img, png_header_only(16000, 16000));
    check_row(run_cfg("mem_png", config(R"({"source": "image_files", "paths": [")" + img.string() + R"("]})"), "--max-memory 1G"),
              "cfg.json: /data/x: needs an estimated ");
}

#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer's shadow memory does not start under ulimit -v
TEST_CASE("memory: a process given less than --max-memory allows says so when an allocation fails") {
    // 1.8 GiB of data within the default limit (half of the RAM), in a process limited to
    // about 400 MiB of address space: the estimate passes and the allocation fails.
    const std::string big = config(R"({"source": "gaussian", "shape": [64, 1024, 1024]})");
    const fs::path dir = out_of("mem_ulimit").parent_path();
    write_text(dir / "cfg.json", big);
    CliResult within = run_sh("cd " + dir.string() + " && ulimit -v 400000 && NL run cfg.json --out out");
    CHECK(within.exit_code == 1);
    CHECK_MESSAGE(within.err.rfind("normlab: error: out of memory: an allocation failed although the config's estimated "
                                   "memory was within --max-memory", 0) == 0, within.err);
    CliResult none = run_sh("cd " + dir.string() + " && ulimit -v 400000 && NL run cfg.json --out out --max-memory none");
    CHECK(none.exit_code == 1);
    CHECK_MESSAGE(none.err.find("--max-memory none had turned off the check") != std::string::npos, none.err);
    for (const CliResult* r : {&within, &none}) CHECK(std::count(r->err.begin(), r->err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
}
#endif

TEST_CASE("bad npy files: exit 2, the config pointer, the file and the problem") {
    const std::string d = kData + "/npy/";
    fs::path dir = fresh_dir("hostile_npy_files");
    // A header that claims 10^12 float64 values, with no data: refused as truncated,
    // without trying to allocate 8 TB.
    std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000, 100), }";
    dict += std::string(118 - dict.size(), ' ') + "\n";
    write_text(dir / "huge.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string{static_cast<char>(dict.size()), 0} + dict);
    const std::string at = "cfg.json: /data/x/path: ";
    check_rows({
        {"npy_truncated", config(npy_data(d + "truncated.npy")),
         at + d + "truncated.npy: truncated npy file: shape [6] of float64 needs 48 bytes of data, but the file has 43"},
        {"npy_bad_magic", config(npy_data(d + "bad_magic.npy")), at + d + "bad_magic.npy: not an npy file (bad magic"},
        {"npy_not_npy", config(npy_data(d + "not_npy.npy")), at + d + "not_npy.npy: not an npy file (bad magic"},
        {"npy_bad_header", config(npy_data(d + "bad_header.npy")),
         at + d + "bad_header.npy: bad npy header: 'shape' must be a tuple"},
        {"npy_truncated_header", config(npy_data(d + "truncated_header.npy")),
         at + d + "truncated_header.npy: truncated npy file: header length"},
        {"npy_complex", config(npy_data(d + "complex64.npy")), at + d + "complex64.npy: unsupported dtype '<c8' (complex)"},
        {"npy_strings", config(npy_data(d + "unicode.npy")), at + d + "unicode.npy: unsupported dtype '<U2' (strings)"},
        {"npy_object", config(npy_data(d + "object.npy")), at + d + "object.npy: unsupported dtype '|O' (Python objects)"},
        {"npy_structured", config(npy_data(d + "structured.npy")), at + d + "structured.npy: bad npy header: structured dtype"},
        {"npy_extra_bytes", config(npy_data(d + "extra_bytes.npy")),
         at + d + "extra_bytes.npy: data size does not match the header: shape [6] of float64 needs 48 bytes of data, but the file has 56"},
        {"npy_huge_header", config(npy_data((dir / "huge.npy").string())),
         at + (dir / "huge.npy").string() + ": truncated npy file: shape [100000, 100000, 100] of float64 needs 8000000000000 bytes of data, but the file has 0"},
        {"npy_scalar", config(npy_data(d + "scalar.npy")), "cfg.json: /data/x: data must have at least one axis, but got a scalar"},
        {"npy_empty", config(npy_data(d + "empty.npy")), "cfg.json: /data/x: data has no elements (shape [0, 3])"},
        {"npy_mask_shape", config(R"({"source": "npy", "path": ")" + d + R"(hidden.npy", "channel_axis": -1, "mask": ")" + d +
                                  R"(mask_wrong_shape.npy"})"),
         "cfg.json: /data/x/mask: mask of shape"},
    });
}

TEST_CASE("bad csv files: exit 2, the file, the line and the column") {
    const std::string d = kData + "/csv/";
    fs::path dir = fresh_dir("hostile_csv_files");
    write_text(dir / "empty.csv", "");
    write_text(dir / "blank.csv", "\n  \n\r\n");
    write_text(dir / "binary.csv", std::string("\x89PNG\r\n\x1a\n\0\0\0", 11));
    auto csv = [](const std::string& p, const std::string& more = "") {
        return config(R"({"source": "csv", "path": ")" + p + "\"" + more + "}");
    };
    const std::string at = "cfg.json: /data/x/path: ";
    check_rows({
        {"csv_ragged", csv(d + "ragged.csv"), at + d + "ragged.csv: line 3 has 2 cells, but line 1 (the first data row) has 3"},
        {"csv_nonnumeric", csv(d + "nonnumeric.csv", R"(, "header": true)"),
         at + d + "nonnumeric.csv: line 3, column 2 (\"q\"): \"abc\" is not a number"},
        {"csv_empty_cell", csv(d + "empty_cell.csv"), at + d + "empty_cell.csv: line 2, column 2: empty cell is not a number"},
        {"csv_empty_file", csv((dir / "empty.csv").string()), at + (dir / "empty.csv").string() + ": no data rows"},
        {"csv_blank_lines", csv((dir / "blank.csv").string()), at + (dir / "blank.csv").string() + ": no data rows"},
        {"csv_only_header", csv(d + "only_header.csv", R"(, "header": true)"),
         at + d + "only_header.csv: no data rows after the skipped/header lines"},
        {"csv_truncated_gzip", csv(d + "truncated.csv.gz"), at + d + "truncated.csv.gz: corrupt or truncated gzip data"},
        {"csv_binary", csv((dir / "binary.csv").string()), at + (dir / "binary.csv").string() + ": line 1, column 1: "},
    });
}

TEST_CASE("bad image files: exit 2, the config pointer and the file") {
    const std::string d = kData + "/images/";
    fs::path huge = fresh_dir("hostile_images_huge") / "huge.png";  // claims 100000 x 100000 pixels
    write_text(huge, png_header_only(100000, 100000));
    auto img = [](const std::string& p) { return config(R"({"source": "image_files", "paths": [")" + p + R"("]})"); };
    // A JPEG cut off after its first 100 bytes, before its frame header.
    fs::path cut = fresh_dir("hostile_images_cut") / "cut.jpg";
    write_text(cut, read_text(d + "ok/c_flat_10x4.jpg").substr(0, 100));
    // The same JPEG with a 12-bit frame: valid, but not decoded by stb_image.
    fs::path deep = fresh_dir("hostile_images_12bit") / "deep.jpg";
    std::string bytes = read_text(d + "ok/c_flat_10x4.jpg");
    const auto sof = bytes.find("\xFF\xC0");
    REQUIRE(sof != std::string::npos);
    bytes[sof + 4] = 12;  // after the marker and its 2-byte length: the sample precision
    write_text(deep, bytes);
    check_rows({
        {"image_12bit_jpeg", img(deep.string()),
         "cfg.json: /data/x/paths/0: " + deep.string() + ": cannot decode image: a 12-bit JPEG, which stb_image does not decode (8-bit only) (stb_image: only 8-bit)"},
        {"image_cut_jpeg", img(cut.string()),
         "cfg.json: /data/x/paths/0: " + cut.string() + ": cannot decode image: a damaged or truncated JPEG file, or a kind of JPEG stb_image does not decode (stb_image: "},
        {"image_not_image", img(d + "bad/text.png"),
         "cfg.json: /data/x/paths/0: " + d + "bad/text.png: cannot decode image: not a JPEG or PNG file, the two formats the image sources read (stb_image: unknown image type)"},
        {"image_truncated", img(d + "bad/truncated.png"), "cfg.json: /data/x/paths/0: " + d + "bad/truncated.png: cannot decode image: a damaged or truncated PNG file, or a kind of PNG stb_image does not decode (stb_image: "},
        {"image_missing", img(d + "ok/nope.png"), "cfg.json: /data/x/paths/0: " + d + "ok/nope.png: no such file"},
        {"image_directory", img(d + "ok"), "cfg.json: /data/x/paths/0: " + d + "ok: is a directory, not a file"},
        {"image_huge_header", img(huge.string()), "cfg.json: /data/x/paths/0: " + huge.string() + ": cannot decode image: its header gives a size beyond what stb_image decodes (damaged, or too large) (stb_image: too large)"},
    });
}

TEST_CASE("bad paths: missing, a directory, a device, a pipe, unreadable") {
    fs::path dir = fresh_dir("hostile_paths");
    check_row(run_sh("NL run " + (dir / "nope.json").string()),
              (dir / "nope.json").string() + ": cannot open config file (missing or unreadable)");
    check_row(run_sh("NL run " + dir.string()), dir.string() + ": is a directory, expected a JSON config file");
    const std::string at = "cfg.json: /data/x/path: ";
    ::mkfifo((dir / "fifo.npy").c_str(), 0644);
    check_rows({
        {"path_missing", config(npy_data((dir / "missing.npy").string())), at + (dir / "missing.npy").string() + ": no such file"},
        {"path_directory", config(npy_data(dir.string())), at + dir.string() + ": is a directory, not a file"},
        // Reading /dev/zero never ends and a FIFO blocks: both are refused up front.
        {"path_device", config(npy_data("/dev/zero")), at + "/dev/zero: not a regular file (a device, pipe or socket)"},
        {"path_fifo", config(npy_data((dir / "fifo.npy").string())),
         at + (dir / "fifo.npy").string() + ": not a regular file (a device, pipe or socket)"},
        {"path_csv_device", config(R"({"source": "csv", "path": "/dev/zero"})"),
         at + "/dev/zero: not a regular file (a device, pipe or socket)"},
    });

    // Unreadable files. Tests usually run as root, for whom chmod 000 changes nothing, so
    // as root normlab runs as the user "nobody" (setpriv); otherwise as the current user.
    fs::path udir = fresh_dir("hostile_unreadable");
    fs::permissions(udir.parent_path(), fs::perms::all, fs::perm_options::add);
    fs::permissions(udir, fs::perms::all, fs::perm_options::add);
    write_text(udir / "secret.npy", "x");
    write_text(udir / "secret.json", "{}");
    write_text(udir / "cfg.json", config(npy_data("secret.npy")));
    fs::permissions(udir / "cfg.json", fs::perms::all, fs::perm_options::add);
    fs::permissions(udir / "secret.npy", fs::perms::none);
    fs::permissions(udir / "secret.json", fs::perms::none);
    std::string as_user;
    if (::geteuid() == 0) {
        // The binary must be reachable by nobody: every folder on its path searchable.
        as_user = "setpriv --reuid=nobody --regid=nogroup --clear-groups ";
        if (run_sh(as_user + "NL --version").exit_code != 0) {
            WARN_MESSAGE(false, "unreadable files NOT TESTED: running as root, and the user nobody cannot run "
                                    << NORMLAB_BINARY << " through setpriv (missing setpriv, or a folder on the path "
                                    << "is not searchable)");
            return;
        }
    }
    check_row(run_sh("cd " + udir.string() + " && " + as_user + "NL validate cfg.json"),
              "cfg.json: /data/x/path: secret.npy: cannot open: Permission denied");
    check_row(run_sh("cd " + udir.string() + " && " + as_user + "NL validate secret.json"),
              "secret.json: cannot open config file (missing or unreadable)");
}

TEST_CASE("NaN and inf inputs are counted and reported; eps 0 on a constant group is reported, not a crash") {
    // nan_inf.csv holds one row: nan,inf,-inf. Add a finite row so that BatchNorm has two
    // values per channel.
    fs::path dir = fresh_dir("hostile_nonfinite");
    write_text(dir / "x.csv", "nan,inf,-inf,1\n1,2,3,4\n");
    write_text(dir / "cfg.json", R"({"name": "nf", "data": {"x": {"source": "csv", "path": "x.csv"},
        "c": {"source": "values", "values": [[2, 2, 2, 2], [1, 2, 3, 4]]},
        "big": {"source": "values", "values": [[1e300, 1, 2, 3], [1, 2, 3, 4]]}},
      "norms": {"bn": {"type": "batchnorm"}, "ln": {"type": "layernorm", "normalized_shape": [4]},
                "ln0": {"type": "layernorm", "normalized_shape": [4], "eps": 0}},
      "analyses": [{"type": "apply", "data": ["x", "c", "big"], "norms": ["bn", "ln", "ln0"]}]})");
    CliResult r = run_sh("cd " + dir.string() + " && NL run cfg.json --out out");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    // One warning line per data holding non-finite values (1e300 overflows float32 to inf).
    CHECK_MESSAGE(r.err.find("normlab: warning: cfg.json: /data/x: 3 of 8 values are NaN or infinite") != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find("normlab: warning: cfg.json: /data/big: 1 of 8 values is NaN or infinite") != std::string::npos, r.err);
    std::size_t warnings = 0;
    for (auto at = r.err.find("normlab: warning:"); at != std::string::npos; at = r.err.find("normlab: warning:", at + 1))
        ++warnings;
    CHECK(warnings == 2);
    // validate warns the same, before anything runs (its batches are the ones run builds).
    CliResult checked = run_sh("cd " + dir.string() + " && NL validate cfg.json");
    CHECK_MESSAGE(checked.exit_code == 0, checked.err);
    CHECK(checked.out == "cfg.json: ok\n");
    for (const char* line : {"/data/x: 3 of 8 values are NaN or infinite", "/data/big: 1 of 8 values is NaN or infinite"})
        CHECK_MESSAGE(checked.err.find(std::string("normlab: warning: cfg.json: ") + line) != std::string::npos, checked.err);
    // In a sweep: once, blaming the point that brings the NaN, and the dtype that makes 1e5 inf.
    write_text(dir / "sweep.json", R"({"name": "sw", "data": {"x": {"source": "values", "values": [[1, 2, 3], [3, 4, 1e5]]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [3]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"]}],
      "sweep": {"data.x.values.0.1": [2, "nan", 7], "dtype": ["float32", "float16"]}})");
    CliResult swept = run_sh("cd " + dir.string() + " && NL validate sweep.json");
    CHECK_MESSAGE(swept.exit_code == 0, swept.err);
    // Point 0 is float32 and finite; point 1 (the values' 2, float16) holds an inf.
    CHECK_MESSAGE(swept.err.find("(sweep point 1): /data/x: 1 of 6 values is NaN or infinite") != std::string::npos, swept.err);
    // One warning (a build without FMA adds a note about the double path).
    CHECK(swept.err.find("normlab: warning:") == swept.err.rfind("normlab: warning:"));
    auto report = nlohmann::json::parse(read_text(dir / "out" / "report.json"));
    CHECK(report["data"]["x"]["nonfinite_values"] == 3);
    CHECK(report["data"]["c"]["nonfinite_values"] == 0);
    CHECK(report["data"]["big"]["nonfinite_values"] == 1);

    // apply.csv: nonfinite_in (input values), nonfinite_stats (statistics made non-finite),
    // nonfinite_count (output values).
    std::string csv = read_text(dir / "out" / "apply.csv");
    std::map<std::string, std::map<std::string, std::string>> cell;  // "data/norm" -> column -> value
    {
        std::stringstream ss(csv);
        std::string line, h;
        std::getline(ss, h);
        std::vector<std::string> cols;
        std::stringstream hs(h);
        for (std::string c; std::getline(hs, c, ',');) cols.push_back(c);
        while (std::getline(ss, line)) {
            std::vector<std::string> v;
            std::stringstream ls(line);
            for (std::string c; std::getline(ls, c, ',');) v.push_back(c);
            REQUIRE(v.size() == cols.size());
            for (std::size_t i = 0; i < cols.size(); ++i) cell[v[0] + "/" + v[1]][cols[i]] = v[i];
        }
    }
    // BatchNorm over (2, 4): channels 0..2 hold a non-finite value, channel 3 does not.
    CHECK(cell["x/bn"]["nonfinite_in"] == "3");
    CHECK(cell["x/bn"]["nonfinite_stats"] == "3");
    CHECK(cell["x/bn"]["nonfinite_count"] == "6");
    // LayerNorm over rows: the first row's statistics are NaN, the second row's are fine.
    CHECK(cell["x/ln"]["nonfinite_stats"] == "1");
    CHECK(cell["x/ln"]["nonfinite_count"] == "4");
    CHECK(cell["big/ln"]["nonfinite_in"] == "1");
    CHECK(cell["big/ln"]["nonfinite_stats"] == "1");
    // eps = 0 on the constant row [2, 2, 2, 2]: 0/0, four NaN outputs, statistics finite.
    CHECK(cell["c/ln0"]["nonfinite_in"] == "0");
    CHECK(cell["c/ln0"]["nonfinite_stats"] == "0");
    CHECK(cell["c/ln0"]["nonfinite_count"] == "4");
    CHECK(cell["c/ln"]["nonfinite_count"] == "0");  // eps 1e-5: finite
    CHECK(cell["c/ln0"]["out_min"] == "nan");
    // report.json carries them as strings, never null.
    bool saw_nan_string = false;
    for (const auto& a : report["analyses"])
        for (const auto& row : a["rows"])
            for (const auto& [k, v] : row.items()) {
                CHECK_FALSE(v.is_null());
                saw_nan_string = saw_nan_string || v == "nan";
            }
    CHECK(saw_nan_string);
    // --quiet silences the warnings.
    CHECK(run_sh("cd " + dir.string() + " && NL run cfg.json --out out -q").err.empty());
}

TEST_CASE("output folder: kept inside where the user pointed, nothing foreign touched without --force") {
    const std::string cfg = config(R"({"source": "gaussian", "shape": [2, 3]})");
    fs::path dir = fresh_dir("hostile_out");
    write_text(dir / "cfg.json", cfg);
    const std::string run = "cd " + dir.string() + " && NL run cfg.json -q ";

    SUBCASE("--out is a file: refused, the file untouched") {
        write_text(dir / "file.txt", "precious");
        check_row(run_sh(run + "--out file.txt"), "file.txt: output path exists and is not a folder");
        check_row(run_sh(run + "--out file.txt --force"), "file.txt: output path exists and is not a folder");
        CHECK(read_text(dir / "file.txt") == "precious");
    }
    SUBCASE("--out . or a parent of the current folder or / : refused even with --force") {
        write_text(dir / "mine.txt", "precious");
        check_row(run_sh(run + "--out . --force"), ".: is the current folder or one of its parents");
        check_row(run_sh(run + "--out ./ --force"), "./: is the current folder or one of its parents");
        check_row(run_sh(run + "--out .. --force"), "..: is the current folder or one of its parents");
        check_row(run_sh(run + "--out / --force"), "/: is the root folder, which normlab would replace as a whole");
        CHECK(read_text(dir / "mine.txt") == "precious");
        CHECK(read_text(dir / "cfg.json") == cfg);
    }
    SUBCASE("a folder holding the config is refused even with --force") {
        write_text(dir / "sub" / "cfg.json", cfg);
        check_row(run_sh("cd " + dir.string() + " && NL run sub/cfg.json --out sub --force"),
                  "sub: the output folder holds sub/cfg.json, an input of this run; normlab replaces the output folder as a whole");
        CHECK(read_text(dir / "sub" / "cfg.json") == cfg);
        // --out naming the config itself: said as such, not as a folder holding it.
        check_row(run_sh("cd " + dir.string() + " && NL run sub/cfg.json --out sub/cfg.json --force"),
                  "sub/cfg.json: is an input of this run, not a folder for its results; choose another --out");
        // Named as the run read it where --out spells it otherwise.
        check_row(run_sh("cd " + dir.string() + " && NL run sub/cfg.json --out ./sub/cfg.json --force"),
                  "./sub/cfg.json: is an input of this run (sub/cfg.json), not a folder for its results; choose another --out");
        CHECK(read_text(dir / "sub" / "cfg.json") == cfg);
    }
    SUBCASE("a config's output.dir that run refuses: validate refuses it too, at /output/dir") {
        write_text(dir / "file.txt", "precious");
        write_text(dir / "data" / "x.csv", "1,2\n3,4\n");
        for (const auto& [out_dir, expect] : std::vector<std::pair<std::string, std::string>>{
                 {"file.txt", "output path exists and is not a folder"},
                 {"data", "the output folder holds data/x.csv, an input of this run; normlab replaces the output "
                          "folder as a whole, so choose another output.dir"},
                 {dir.string(), "is the current folder or one of its parents"}}) {
            CAPTURE(out_dir);
            nlohmann::json j = nlohmann::json::parse(cfg);
            j["data"]["x"] = {{"source", "csv"}, {"path", "data/x.csv"}};
            j["output"]["dir"] = out_dir;
            write_text(dir / "out_cfg.json", j.dump());
            for (const std::string cmd : {"validate", "run"})
                check_row(run_sh("cd " + dir.string() + " && NL " + cmd + " out_cfg.json"), "out_cfg.json: /output/dir: " +
                          out_dir + ": " + expect);
        }
        CHECK(read_text(dir / "file.txt") == "precious");
        CHECK(fs::exists(dir / "data" / "x.csv"));
    }
    SUBCASE("an earlier result with a file normlab did not write: refused; --force replaces it") {
        REQUIRE(run_sh(run + "--out res").exit_code == 0);
        write_text(dir / "res" / "notes.txt", "mine");
        check_row(run_sh(run + "--out res"),
                  "res: output folder holds an earlier normlab result and also \"notes.txt\", which normlab did not write");
        CHECK(read_text(dir / "res" / "notes.txt") == "mine");
        fs::remove(dir / "res" / "notes.txt");
        write_text(dir / "res" / "arrays" / "x" / "extra.npy", "mine");  // inside normlab's layout, still foreign
        check_row(run_sh(run + "--out res"), "also \"arrays\", which normlab did not write");
        CHECK(run_sh(run + "--out res --force").exit_code == 0);
        CHECK_FALSE(fs::exists(dir / "res" / "arrays"));
        CHECK(fs::exists(dir / "res" / "report.json"));
        // Only normlab's files: replaced without --force.
        CHECK(run_sh(run + "--out res").exit_code == 0);
    }
    SUBCASE("a foreign folder: refused; with --force replaced as a whole") {
        write_text(dir / "foreign" / "a.txt", "mine");
        check_row(run_sh(run + "--out foreign"), "foreign: output folder is not empty (it holds \"a.txt\") and does not hold an earlier normlab result");
        CHECK(read_text(dir / "foreign" / "a.txt") == "mine");
        CHECK(run_sh(run + "--out foreign --force").exit_code == 0);
        CHECK_FALSE(fs::exists(dir / "foreign" / "a.txt"));
    }
    SUBCASE("an output that cannot be written: exit 1 before anything is computed, from run and --dry-run") {
        // NaN data: the run warns about it after the output check, just before it computes,
        // so a refusal that came later would follow that warning.
        write_text(dir / "nan.json", config(R"({"source": "values", "values": [[1, "nan", 2]]})"));
        write_text(dir / "afile", "x");
        for (const std::string extra : {"", "--dry-run "}) {
            CAPTURE(extra);
            // /proc takes no new folder, even from root, whom permissions do not stop.
            CliResult r = run_sh("cd " + dir.string() + " && NL run nan.json " + extra + "--out /proc/normlab_out/sub");
            CHECK(r.exit_code == 1);
            CHECK_MESSAGE(r.err.rfind("normlab: error: /proc/normlab_out/sub: cannot write the output folder here: cannot "
                                      "create /proc/normlab_out: ", 0) == 0, r.err);
            CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
            CHECK(r.out.empty());
            // A folder under a file is refused by the folder's own check, as validate finds it (exit 2).
            CliResult f = run_sh("cd " + dir.string() + " && NL run nan.json " + extra + "--out afile/sub");
            CHECK(f.exit_code == 2);
            CHECK(f.err == "normlab: error: afile/sub: afile is a file, not a folder, so the output folder cannot be made in "
                           "it; choose another --out\n");
            CHECK(f.out.empty());
        }
        // The dry run's probe leaves nothing behind: not the staging folder, nor the parents.
        CliResult dry = run_sh(run + "--dry-run --out new/deeper/out");
        CHECK_MESSAGE(dry.exit_code == 0, dry.err);
        CHECK_FALSE(fs::exists(dir / "new"));
        for (const auto& e : fs::directory_iterator(dir))
            CHECK_MESSAGE(e.path().filename().string().find("normlab-staging") == std::string::npos, e.path());
        // --dry-run refuses what run refuses about the folder.
        write_text(dir / "theirs" / "a.txt", "mine");
        check_row(run_sh(run + "--dry-run --out theirs"), "theirs: output folder is not empty (it holds \"a.txt\") and does not hold an earlier normlab result");
    }
    SUBCASE("a trailing slash names the same folder") {
        CliResult r = run_sh(run + "--out res2/");
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(fs::exists(dir / "res2" / "report.json"));
        CHECK(run_sh(run + "--out res2/.").exit_code == 0);
        CHECK(fs::exists(dir / "res2" / "report.json"));
    }
    SUBCASE("a run that fails halfway leaves no staging folder and the earlier result intact") {
        REQUIRE(run_sh(run + "--out res3").exit_code == 0);
        const std::string before = read_text(dir / "res3" / "report.json");
        // rmsnorm has no mean to save: the analysis fails while the run is writing.
        write_text(dir / "bad.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [2, 3]}},
            "norms": {"n": {"type": "layernorm", "axes": [-1]}, "r": {"type": "rmsnorm", "axes": [-1]}},
            "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"], "save": ["output"]},
                         {"type": "apply", "data": ["x"], "norms": ["r"], "save": ["mean"]}]})");
        check_row(run_sh("cd " + dir.string() + " && NL run bad.json --out res3"),
                  "bad.json: /analyses/1/save/0: rmsnorm \"r\" does not centre");
        CHECK(read_text(dir / "res3" / "report.json") == before);
        for (const auto& e : fs::directory_iterator(dir))
            CHECK_MESSAGE(e.path().filename().string().find("normlab-staging") == std::string::npos, e.path());
    }
}

TEST_CASE("an interrupt before anything is staged: run says an earlier result is kept, run --dry-run and validate do not") {
    fs::path dir = fresh_dir("hostile_sigint_early");
    REQUIRE(::mkfifo((dir / "cfg.json").c_str(), 0644) == 0);
    // normlab blocks reading the config from the pipe: interrupted while it reads, before it
    // has staged anything. Returns normlab's stderr.
    auto interrupted = [&](const std::vector<std::string>& args) {
        const pid_t pid = start_normlab(dir, args);
        REQUIRE(pid >= 0);
        // Opening the pipe for writing succeeds once normlab has opened it for reading.
        int fd = -1;
        for (int i = 0; i < 1200 && fd < 0; ++i) {
            fd = ::open((dir / "cfg.json").c_str(), O_WRONLY | O_NONBLOCK);
            if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        CHECK(fd >= 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ::kill(pid, SIGINT);
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (fd >= 0) ::close(fd);
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGINT);
        return read_text(dir / "stderr.txt");
    };
    CHECK(interrupted({"run", "cfg.json", "--out", "out"}) ==
          "normlab: interrupted (SIGINT); nothing was written, and an earlier result in the output folder, if any, is left as it was\n");
    // commands that write no result folder say nothing about one
    CHECK(interrupted({"run", "cfg.json", "--dry-run"}) == "normlab: interrupted (SIGINT)\n");
    CHECK(interrupted({"validate", "cfg.json"}) == "normlab: interrupted (SIGINT)\n");
    CHECK_FALSE(fs::exists(dir / "out"));
}

namespace {

// Waits until `dir` holds the staging folder of a run into dir/out (with `inside` in it,
// when not empty). The runs of the test below check all 20000 points before they compute
// one: under the sanitizers on a loaded machine that alone took over 30 s, so the wait
// allows two minutes. False when it timed out.
bool wait_for_staging(const fs::path& dir, const std::string& inside) {
    for (int i = 0; i < 2400; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().filename().string().find(".out.normlab-staging-") == 0 &&
                (inside.empty() || fs::exists(e.path() / inside)))
                return true;
    }
    return false;
}

}  // namespace

TEST_CASE("SIGINT and SIGTERM: no partial report, no staging folder, the earlier result kept") {
    fs::path dir = fresh_dir("hostile_sigint");
    // A sweep of many points that each save an array: the staging folder fills for a while.
    std::string eps = "[";
    for (int i = 0; i < 20000; ++i) eps += (i ? "," : "") + std::to_string(1e-5 * (1 + i));
    eps += "]";
    write_text(dir / "long.json", R"({"name": "long", "data": {"x": {"source": "gaussian", "shape": [16, 64, 64]}},
        "norms": {"n": {"type": "layernorm", "axes": [-1]}},
        "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"], "save": ["output"]}],
        "sweep": {"norms.n.eps": )" + eps + "}}");
    write_text(dir / "short.json", config(R"({"source": "gaussian", "shape": [2, 3]})"));
    REQUIRE(run_sh("cd " + dir.string() + " && NL run short.json --out out -q").exit_code == 0);
    const std::string before = read_text(dir / "out" / "report.json");

    for (int sig : {SIGINT, SIGTERM}) {
        CAPTURE(sig);
        const pid_t pid = start_normlab(dir, {"run", "long.json", "--out", "out"});
        REQUIRE(pid >= 0);
        // Wait until the staging folder holds saved arrays, then interrupt.
        CHECK(wait_for_staging(dir, "arrays"));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ::kill(pid, sig);
        int status = 0;
        bool ended = false;
        for (int i = 0; i < 200 && !ended; ++i) {
            ended = ::waitpid(pid, &status, WNOHANG) == pid;
            if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (!ended) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
        }
        REQUIRE_MESSAGE(ended, "normlab did not stop within 10 s of the signal");
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == sig);
        const std::string err = read_text(dir / "stderr.txt");
        CHECK_MESSAGE(err.find(std::string("normlab: interrupted (") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                               "); the unfinished results were removed") != std::string::npos, err);
        fs::remove(dir / "stderr.txt");
        CHECK(read_text(dir / "out" / "report.json") == before);
        for (const auto& e : fs::directory_iterator(dir))
            CHECK_MESSAGE(e.path().filename().string().find("normlab-staging") == std::string::npos, e.path());
    }

    // Without saved arrays nothing is written before the end, though the staging folder is
    // made before the computing (to find an output that cannot be written): an interrupt
    // then says that nothing was written.
    std::string nosave = read_text(dir / "long.json");
    nosave.replace(nosave.find(R"(, "save": ["output"])"), std::string(R"(, "save": ["output"])").size(), "");
    write_text(dir / "nosave.json", nosave);
    const pid_t pid = start_normlab(dir, {"run", "nosave.json", "--out", "out"});
    REQUIRE(pid >= 0);
    CHECK(wait_for_staging(dir, ""));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGINT);
    CHECK(read_text(dir / "stderr.txt") ==
          "normlab: interrupted (SIGINT); nothing was written, and an earlier result in the output folder, if any, is left as it was\n");
    CHECK(read_text(dir / "out" / "report.json") == before);
    for (const auto& e : fs::directory_iterator(dir))
        CHECK_MESSAGE(e.path().filename().string().find("normlab-staging") == std::string::npos, e.path());
}

TEST_CASE("a signal ignored when normlab starts stays ignored: nohup's SIGHUP, a background job's SIGINT") {
    fs::path dir = fresh_dir("hostile_ignored_signal");
    std::string eps = "[";
    // 10000 points: about 3.5 s on a 2-core VM, so the signal comes in the middle of the run.
    for (int i = 0; i < 10000; ++i) eps += (i ? "," : "") + std::to_string(1e-5 * (1 + i));
    eps += "]";
    write_text(dir / "long.json", R"({"name": "long", "data": {"x": {"source": "gaussian", "shape": [16, 64]}},
        "norms": {"n": {"type": "layernorm", "axes": [-1]}},
        "analyses": [{"type": "apply", "data": ["x"], "norms": ["n"]}],
        "sweep": {"norms.n.eps": )" + eps + "}}");
    for (int sig : {SIGHUP, SIGINT}) {
        CAPTURE(sig);
        fs::remove_all(dir / "out");
        const pid_t pid = start_normlab(dir, {"run", "long.json", "--out", "out"}, sig);
        REQUIRE(pid >= 0);
        CHECK(wait_for_staging(dir, ""));
        ::kill(pid, sig);
        int status = 0;
        ::waitpid(pid, &status, 0);
        CHECK_MESSAGE(WIFEXITED(status), read_text(dir / "stderr.txt"));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(fs::exists(dir / "out" / "report.json"));
    }
}

TEST_CASE("stdout that cannot be written (a full disk) fails the command with a message") {
    for (const std::string cmd : {"NL init > /dev/full", "NL list > /dev/full", "NL shapes --norm batchnorm --shape 2,3,4 > /dev/full"}) {
        CAPTURE(cmd);
        const CliResult r = run_sh(cmd);
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.err.find("normlab: error: standard output: write failed") == 0, r.err);
    }
    // an input error keeps its code
    CHECK(run_sh("NL shapes --norm layernorm --shape 2,3,4 > /dev/full").exit_code == 2);
    CHECK(run_sh("NL list > /dev/null").exit_code == 0);
}
