// The output folder end to end: what it may not be (empty, a name too long to create),
// that replacing it never deletes an input of the run, that a write failure says why, and
// that staging folders left by killed runs are cleaned up. validate refuses what run
// refuses about the config's names and output.dir.
#include <doctest/doctest.h>

#include <algorithm>
#include <fcntl.h>
#include <string>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cli_util.hpp"
#include "report/output.hpp"
#include "tensor/errors.hpp"

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

/// The entries of `dir` whose name holds "normlab-staging".
std::vector<std::string> staging_entries(const fs::path& dir) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find("normlab-staging") != std::string::npos)
            found.push_back(e.path().filename().string());
    return found;
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
        // without --out, the folder is results/<name>, which holds no input
        CHECK_MESSAGE(ok.err.find("an input of this run") == std::string::npos, ok.err);
        for (const std::string command : {"run cfg.json --force", "run cfg.json --force --dry-run", "validate cfg.json --force"}) {
            CAPTURE(command);
            check_refused(run_in(dir, command + " --out in"),
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

TEST_CASE("an empty output folder is refused with exit 2: --out \"\", output.dir \"\", merge \"\"") {
    fs::path dir = fresh_dir("output_empty");
    write_text(dir / "cfg.json", config(kGauss));
    for (const std::string extra : {"", " --dry-run"}) {
        CAPTURE(extra);
        check_refused(run_in(dir, "run cfg.json --out ''" + extra), "--out \"\": is empty; name a folder for the results");
    }
    CHECK_FALSE(fs::exists(dir / "results"));
    // A quoted ~ reaches normlab unexpanded, as a config's always does.
    check_refused(run_in(dir, "run cfg.json --out '~/runs'"), "--out ~/runs: starts with ~, which only a shell expands");
    CHECK_FALSE(fs::exists(dir / "~"));
    write_text(dir / "od.json", config(kGauss, R"("output": {"dir": ""}, )"));
    for (const std::string cmd : {"validate od.json", "run od.json", "run od.json --dry-run"}) {
        CAPTURE(cmd);
        check_refused(run_in(dir, cmd), "od.json: /output/dir: output folder \"\" is empty; name a folder for the results");
    }
    REQUIRE(run_in(dir, "run cfg.json --shard 0/1 --out s0 -q").exit_code == 0);
    check_refused(run_in(dir, "merge '' s0"), "\"\": is empty; name a folder for the results");
    check_refused(run_in(dir, "init -o ''"), "init --output: expected a file name, but got \"\"");
}

TEST_CASE("validate refuses the names and output folders run cannot write, whatever the machine") {
    fs::path dir = fresh_dir("output_names");
    const std::string long_name(300, 'd'), name_223(223, 'a'), name_224(224, 'a');
    std::string umlauts;  // 130 characters, 260 bytes
    for (int i = 0; i < 130; ++i) umlauts += "\xc3\xbc";
    struct Case {
        const char* what;
        std::string json;
        std::string expect;
    };
    const std::vector<Case> cases = {
        {"output.dir .", config(kGauss, R"("output": {"dir": "."}, )"),
         "cfg.json: /output/dir: output folder \".\" is the current folder or one of its parents"},
        {"output.dir a/..", config(kGauss, R"("output": {"dir": "a/.."}, )"),
         "cfg.json: /output/dir: output folder \"a/..\" is the current folder or one of its parents"},
        {"output.dir ~/runs", config(kGauss, R"("output": {"dir": "~/runs"}, )"),
         "cfg.json: /output/dir: output folder \"~/runs\" starts with ~, which only a shell expands; write the full path"},
        {"output.dir /", config(kGauss, R"("output": {"dir": "/"}, )"),
         "cfg.json: /output/dir: output folder \"/\" is the root folder, which normlab would replace as a whole"},
        {"output.dir long component", config(kGauss, R"("output": {"dir": "r/)" + long_name + R"(/x"}, )"),
         "has a component that is 300 bytes long, more than the 255 bytes a file name can have"},
        {"output.dir long last component", config(kGauss, R"("output": {"dir": ")" + name_224 + R"("}, )"),
         "names a folder that is 224 bytes long, more than the 223 bytes an output folder's name can have"},
        {"name", config(kGauss, R"("name": ")" + name_224 + R"(", )"),
         "cfg.json: /name: name (the default output folder is results/<name>) is 224 bytes long, more than the 223 "
         "bytes an output folder's name can have"},
        {"data name", config(kGauss, "", long_name),
         "cfg.json: /data/" + long_name + ": data name is 300 bytes long, more than the 255 bytes a file name can have"},
        {"data name in UTF-8", config(kGauss, "", umlauts),
         "data name is 260 bytes long, more than the 255 bytes a file name can have on common file systems"},
        {"norm name", config(kGauss, "", "x", long_name),
         "cfg.json: /norms/" + long_name + ": norm name is 300 bytes long, more than the 255 bytes"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.what);
        write_text(dir / "cfg.json", c.json);
        for (const std::string cmd : {"validate cfg.json", "run cfg.json", "run cfg.json --dry-run", "run cfg.json --out o"}) {
            CAPTURE(cmd);
            check_refused(run_in(dir, cmd), c.expect);
        }
        CHECK_FALSE(fs::exists(dir / "o"));
        CHECK_FALSE(fs::exists(dir / "results"));
    }
    // At the limits: a name of 223 bytes, and data and norm names of 255, run and write.
    write_text(dir / "cfg.json", config(kGauss, R"("name": ")" + name_223 + R"(", )", std::string(255, 'd'),
                                        std::string(255, 'n')));
    const CliResult ok = run_in(dir, "run cfg.json -q");
    CHECK_MESSAGE(ok.exit_code == 0, ok.err);
    CHECK(fs::exists(dir / "results" / name_223 / "arrays" / std::string(255, 'd') / std::string(255, 'n') / "output.npy"));
    // --out with a name too long: refused before anything is loaded.
    check_refused(run_in(dir, "run cfg.json --out " + name_224), "--out " + name_224 + ": names a folder that is 224 bytes long");
}

TEST_CASE("a write that fails says why: the system's reason, not only \"cannot write\"") {
    fs::path dir = fresh_dir("output_reasons");
    {
        normlab::OutputFolder out(dir / "res", false);
        try {
            out.write(fs::path(std::string(300, 'z')) / "output.npy", "bytes");
            FAIL("a file name of 300 bytes was written");
        } catch (const normlab::EnvError& e) {
            CHECK(std::string(e.what()).find("File name too long") != std::string::npos);
        }
    }
    CHECK(staging_entries(dir).empty());
    CliResult missing = run_in(dir, "init -o /nonexistent/dir/x.json");
    CHECK(missing.exit_code == 2);
    CHECK(missing.err == "normlab: error: /nonexistent/dir/x.json: /nonexistent/dir does not exist; init writes "
                         "the file into an existing folder\n");
    write_text(dir / "plain", "x");
    check_refused(run_in(dir, "init -o plain/x.json"), "plain/x.json: plain is a file, not a folder; init writes the file into an existing folder");
    fs::create_directories(dir / "folder");
    check_refused(run_in(dir, "init -o folder --force"), "folder: is a folder; name the file to write (e.g. folder/my.json)");
}

TEST_CASE("a staging folder a killed run left is removed by the next run into the same folder, when it is stale") {
    fs::path dir = fresh_dir("output_stale");
    write_text(dir / "cfg.json", config(kGauss));
    // A process id that is no longer alive: a child that has exited and been reaped.
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);
    const std::string dead = ".out.normlab-staging-" + std::to_string(child);
    write_text(dir / dead / "arrays" / "x" / "n" / "output.npy", "half");
    // Kept: a live process's (this test's), an earlier result set aside mid-replacement
    // ("-old"), another output's, and one whose lock is held (a run elsewhere whose id
    // merely looks dead here).
    const std::string live = ".out.normlab-staging-" + std::to_string(::getpid());
    const std::string old = dead + "-old", other = ".other.normlab-staging-" + std::to_string(child);
    for (const auto& name : {live, old, other}) write_text(dir / name / "report.json", "{}");
    const pid_t child2 = ::fork();
    if (child2 == 0) ::_exit(0);
    REQUIRE(child2 > 0);
    ::waitpid(child2, nullptr, 0);
    const std::string locked = ".out.normlab-staging-" + std::to_string(child2);
    fs::create_directories(dir / locked);
    const int fd = ::open((dir / locked).c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_SH) == 0);

    const CliResult r = run_in(dir, "run cfg.json --out out -q");
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    CHECK_FALSE(fs::exists(dir / dead));
    std::vector<std::string> left = staging_entries(dir);
    std::sort(left.begin(), left.end());
    std::vector<std::string> kept{live, old, other, locked};
    std::sort(kept.begin(), kept.end());
    CHECK(left == kept);
    ::close(fd);
}
