// The output folder end to end: replacing it never deletes an input of the run.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kData = std::string(NORMLAB_SOURCE_DIR) + "/tests/data";

/// `normlab <args>` run in `dir` (args as /bin/sh reads them).
CliResult run_in(const fs::path& dir, const std::string& args) {
    static int counter = 0;
    const auto tmp = process_temp_dir("normlab_output_folder_");
    const auto out = tmp / ("out" + std::to_string(counter)), err = tmp / ("err" + std::to_string(counter++));
    const std::string cmd = "cd '" + dir.string() + "' && " + NORMLAB_BINARY + " " + args + " >" + out.string() +
                            " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
}

/// A config of one data entry (`data`, JSON) named `data_name`, one layernorm named
/// `norm_name`, and an apply analysis saving the output; `extra` goes first in the object.
std::string config(const std::string& data, const std::string& extra = "", const std::string& data_name = "x",
                   const std::string& norm_name = "n") {
    return "{" + extra + R"("data": {")" + data_name + R"(": )" + data + R"(}, "norms": {")" + norm_name +
           R"(": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "apply", "data": [")" + data_name +
           R"("], "norms": [")" + norm_name + R"("], "save": ["output"]}]})";
}

/// An npy file (version 1.0) of dtype `descr` and `shape` (a Python tuple) holding `data`.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() & 0xff) +
           static_cast<char>(header.size() >> 8) + header + data;
}

const std::string kGauss = R"({"source": "gaussian", "shape": [2, 3]})";

/// Exit 2 with one line "normlab: error: ..." holding `expect`.
void check_refused(const CliResult& r, const std::string& expect) {
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.rfind("normlab: error: ", 0) == 0, r.err);
    CHECK_MESSAGE(r.err.find(expect) != std::string::npos, "expected: " << expect << "\ngot: " << r.err);
    CHECK_MESSAGE(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
}

}  // namespace

TEST_CASE("replacing the output folder never deletes an input of the run, with --force or over an earlier result") {
    fs::path dir = fresh_dir("output_inputs");
    fs::create_directories(dir / "in");
    fs::copy_file(kData + "/npy/float32.npy", dir / "in" / "d.npy");
    fs::copy_file(kData + "/csv/semicolon.csv", dir / "in" / "t.csv");
    fs::copy_file(kData + "/text/small.txt", dir / "in" / "s.txt");
    fs::copy(kData + "/images/ok", dir / "in" / "imgs");
    const std::string npy = R"({"source": "npy", "path": "in/d.npy"})";
    struct Case {
        const char* what;
        std::string json;
        std::string input;  // as the message names it
    };
    const std::vector<Case> cases = {
        {"npy data", config(npy), "in/d.npy"},
        {"csv data", config(R"({"source": "csv", "path": "in/t.csv", "delimiter": ";"})"), "in/t.csv"},
        {"text data", config(R"({"source": "text", "path": "in/s.txt", "dim": 4})"), "in/s.txt"},
        {"image folder", config(R"({"source": "image_files", "folder": "in/imgs", "patch": [4, 4]})"), "in/imgs"},
        {"weight npy", R"({"data": {"x": {"source": "gaussian", "shape": [2, 3]}}, "norms": {"n": {"type":
            "layernorm", "axes": [-1], "weight": {"npy": "in/w.npy"}}}, "analyses": [{"type": "apply", "data": ["x"],
            "norms": ["n"]}]})", "in/w.npy"},
        {"data mask npy", config(R"({"source": "gaussian", "shape": [2, 3], "mask": "in/m.npy"})"), "in/m.npy"},
    };
    write_text(dir / "in" / "w.npy", npy_bytes("<f8", "(3,)", std::string(3 * 8, '\0')));
    write_text(dir / "in" / "m.npy", npy_bytes("|u1", "(2, 3)", std::string(6, '\1')));
    for (const auto& c : cases) {
        CAPTURE(c.what);
        write_text(dir / "cfg.json", c.json);
        const CliResult ok = run_in(dir, "validate cfg.json");
        // validate has no output folder to judge: it passes (or refuses for its own reasons)
        CHECK_MESSAGE(ok.err.find("an input of this run") == std::string::npos, ok.err);
        for (const std::string extra : {"--force", "--force --dry-run"}) {
            CAPTURE(extra);
            check_refused(run_in(dir, "run cfg.json --out in " + extra),
                          "in: the output folder holds " + c.input + ", an input of this run");
        }
        CHECK(fs::exists(dir / "in" / "d.npy"));
        CHECK(fs::exists(dir / "in" / "imgs" / "a_rgb_6x8.png"));
    }
}

TEST_CASE("a run reading an earlier result's saved array may not replace that result, even without --force") {
    fs::path dir = fresh_dir("output_chain");
    write_text(dir / "a.json", config(kGauss));
    REQUIRE(run_in(dir, "run a.json --out res -q").exit_code == 0);
    const fs::path saved = dir / "res" / "arrays" / "x" / "n" / "output.npy";
    REQUIRE(fs::exists(saved));
    write_text(dir / "b.json", config(R"({"source": "npy", "path": "res/arrays/x/n/output.npy"})"));
    check_refused(run_in(dir, "run b.json --out res"),
                  "res: the output folder holds res/arrays/x/n/output.npy, an input of this run");
    CHECK(fs::exists(saved));
    // The same run into another folder is fine.
    const CliResult ok = run_in(dir, "run b.json --out res2 -q");
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
}
