// What run, merge and bench tell the user and leave on disk: messages on stderr (stdout is
// for data), counts with the right plural, a merge summary, no folders left by a failed
// run, and bench's memory column measured per case.
#include <doctest/doctest.h>

#include <filesystem>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "report/output.hpp"
#include "tensor/errors.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kOneAnalysis = R"({"name": "one", "seed": 1,
  "data": {"x": {"source": "gaussian", "shape": [4, 3]}},
  "norms": {"n": {"type": "layernorm", "normalized_shape": [3]}},
  "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}])";

// "N files": report.json and the files it lists (the CSVs, report.html, the figures).
std::string files_written(const fs::path& dir) {
    const auto report = nlohmann::json::parse(read_text(dir / "report.json"));
    const std::size_t n = report["files"].size() + 1;
    return std::to_string(n) + (n == 1 ? " file" : " files");
}

// The "estimated peak memory" a dry run of `cfg` prints, in MiB.
double estimated_mib(const fs::path& cfg) {
    CliResult dry = run_normlab("run " + cfg.string() + " --dry-run");
    REQUIRE_MESSAGE(dry.exit_code == 0, dry.err);
    const std::string key = "estimated peak memory: ";
    const std::size_t at = dry.out.find(key);
    REQUIRE_MESSAGE(at != std::string::npos, dry.out);
    return std::stod(dry.out.substr(at + key.size()));
}

// Peak resident memory of `normlab run cfg --out out`, in MiB, from its own process
// (wait4's rusage); the run must succeed. Unused under AddressSanitizer, whose shadow memory
// and quarantine make the resident size say nothing about the program's own.
[[maybe_unused]] double run_peak_mib(const fs::path& cfg, const fs::path& out) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::execl(NORMLAB_BINARY, NORMLAB_BINARY, "run", cfg.c_str(), "--out", out.c_str(), "--force", "-q",
                (char*)nullptr);
        ::_exit(98);
    }
    int status = 0;
    struct rusage usage {};
    REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// stderr without its leading "normlab: note: " lines: a float32 run on a CPU without FMA
// instructions notes its default arithmetic first (config_notes).
std::string after_notes(const std::string& err) {
    std::size_t at = 0;
    while (err.compare(at, 15, "normlab: note: ") == 0 && err.find('\n', at) != std::string::npos) at = err.find('\n', at) + 1;
    return err.substr(at);
}

}  // namespace

TEST_CASE("run and merge: the summary goes to stderr, stdout stays empty, counts are singular when 1") {
    fs::path dir = fresh_dir("msg_run");
    write_text(dir / "one.json", kOneAnalysis + "}");
    const fs::path out = dir / "out";
    CliResult r = run_normlab("run " + (dir / "one.json").string() + " --out " + out.string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK_MESSAGE(r.out.empty(), r.out);
    CHECK_MESSAGE(after_notes(r.err).rfind("normlab: one: 1 point, " + files_written(out) + " written to " + out.string() + "\n", 0) == 0, r.err);
    CHECK(r.err.find("\n  " + (out / "stats_shapes.csv").string() + "\n") != std::string::npos);
    CHECK(r.err.find("\n  " + (out / "report.json").string() + "\n") != std::string::npos);
    CHECK(run_normlab("run " + (dir / "one.json").string() + " --out " + out.string() + " -q").err.empty());

    write_text(dir / "sweep.json", kOneAnalysis + R"(, "sweep": {"norms.n.eps": [1e-5, 1e-3, 1e-1]}})");
    std::string shards;
    for (int i = 0; i < 2; ++i) {
        fs::path sd = dir / ("s" + std::to_string(i));
        CliResult s = run_normlab("run " + (dir / "sweep.json").string() + " --shard " + std::to_string(i) + "/2 --out " + sd.string());
        REQUIRE_MESSAGE(s.exit_code == 0, s.err);
        CHECK(s.out.empty());
        CHECK_MESSAGE(after_notes(s.err).rfind(std::string(i == 0 ? "normlab: one: 2 points, " : "normlab: one: 1 point, ") + files_written(sd) +
                                      " written to ", 0) == 0, s.err);
        shards += " " + sd.string();
    }
    CliResult m = run_normlab("merge " + (dir / "merged").string() + shards);
    REQUIRE_MESSAGE(m.exit_code == 0, m.err);
    CHECK(m.out.empty());
    CHECK_MESSAGE(m.err == "normlab: merged 2 shard folders (3 points): " + files_written(dir / "merged") + " written to " +
                               (dir / "merged").string() + "\n", m.err);
    // One shard folder holding every point: "1 shard folder".
    REQUIRE(run_normlab("run " + (dir / "sweep.json").string() + " --shard 0/1 --out " + (dir / "whole").string() + " -q").exit_code == 0);
    m = run_normlab("merge " + (dir / "merged1").string() + " " + (dir / "whole").string());
    REQUIRE_MESSAGE(m.exit_code == 0, m.err);
    CHECK_MESSAGE(m.err.rfind("normlab: merged 1 shard folder (3 points): ", 0) == 0, m.err);
}

TEST_CASE("a failed run creates no folder: neither the output folder nor its missing parents") {
    fs::path dir = fresh_dir("msg_parents");
    // padding needs a padding mask, which gaussian data does not have.
    write_text(dir / "bad.json", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 3]}},
      "norms": {"n": {"type": "layernorm", "normalized_shape": [3]}},
      "analyses": [{"type": "padding", "data": ["x"], "norms": ["n"]}]})");
    CliResult r = run_normlab("run " + (dir / "bad.json").string() + " --out " + (dir / "results" / "deep" / "out").string());
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(dir / "results"));
}

TEST_CASE("OutputFolder creates missing parent folders only when it writes, and removes them when it fails") {
    fs::path dir = fresh_dir("msg_output_folder");
    const fs::path target = dir / "a" / "b" / "out";
    { normlab::OutputFolder f(target, false); }
    CHECK_FALSE(fs::exists(dir / "a"));
    {
        normlab::OutputFolder f(target, false);
        f.write("x.csv", "1\n");
        CHECK(fs::exists(dir / "a" / "b"));
    }  // destroyed without commit: a failed run
    CHECK_FALSE(fs::exists(dir / "a"));
    fs::create_directories(dir / "a");
    {
        normlab::OutputFolder f(target, false);
        f.write("x.csv", "1\n");
    }
    CHECK(fs::exists(dir / "a"));  // it existed before: kept
    CHECK_FALSE(fs::exists(dir / "a" / "b"));
    {
        normlab::OutputFolder f(target, false);
        f.write("x.csv", "1\n");
        f.commit();
    }
    CHECK(read_text(target / "x.csv") == "1\n");
    CHECK(fs::directory_iterator(dir / "a" / "b")->path().filename() == "out");  // no staging left
}

TEST_CASE("bench: peak_rss_mib is each case's own peak, not the process's so far") {
    // A 32 MiB float32 case first (its input and output: over 64 MiB resident while it
    // normalizes), then a tiny one, whose own peak is a few MiB.
    CliResult r = run_normlab("bench --norm layernorm --shape 2048,4096 --shape 2,8 --threads 1 --repeat 1 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::istringstream lines(r.out);
    std::string big, small;
    std::getline(lines, big);
    std::getline(lines, small);
    const auto b = nlohmann::json::parse(big), s = nlohmann::json::parse(small);
    CHECK(b["shape"] == nlohmann::json::array({2048, 4096}));
    CHECK(s["shape"] == nlohmann::json::array({2, 8}));
    CHECK(b["peak_rss_mib"].get<double>() > 64);
#ifndef __SANITIZE_ADDRESS__
    // AddressSanitizer's quarantine keeps freed memory resident, so there the small case's
    // peak includes the big case's buffers; the per-case figure is only meaningful without it.
    CHECK_MESSAGE(s["peak_rss_mib"].get<double>() < b["peak_rss_mib"].get<double>() / 2, r.out);
#endif
}

#ifndef __SANITIZE_ADDRESS__
TEST_CASE("the memory estimate covers what a gradients run holds at its peak") {
    // The gradients analysis keeps float64 copies of x, dy and dx and, for its
    // finite-difference check, a float64 batch and forward outputs: several times the
    // estimate's default allowance. (Not under AddressSanitizer, whose shadow memory and
    // quarantine make the resident size say nothing about the program's own.)
    fs::path dir = fresh_dir("estimate_gradients");
    for (const char* fd : {"true", "false"}) {
        CAPTURE(fd);
        write_text(dir / "g.json", std::string(R"({"name": "g", "seed": 0,
          "data": {"x": {"source": "gaussian", "shape": [16, 512, 512]}},
          "norms": {"ln": {"type": "layernorm", "normalized_shape": [512]}},
          "analyses": [{"type": "gradients", "data": ["x"], "norms": ["ln"], "fd_check": )") + fd + "}]}");
        const double estimate_mib = estimated_mib(dir / "g.json");
        const double peak_mib = run_peak_mib(dir / "g.json", dir / "out");
        CAPTURE(peak_mib);
        CAPTURE(estimate_mib);
        CHECK(peak_mib > 16 * 4);  // the batch and more: the run was measured at all
        CHECK(peak_mib <= estimate_mib);
    }
}
#endif

#ifndef __SANITIZE_ADDRESS__
TEST_CASE("the memory estimate covers what analyses that build batches or copies hold at their peak") {
    // batch_dependence keeps a batch of every size, train_eval every training batch,
    // port_check every resampled batch, padding a re-padded batch with its batch-mates; the
    // others hold float64 copies and transformed inputs beyond the default allowance (three
    // doubles per element). Each runs on small data with settings that make it large; the
    // process's own few MiB besides.
    fs::path dir = fresh_dir("estimate_analyses");
    const std::string norms = R"("norms": {"ln": {"type": "layernorm", "axes": [-1]}, "bn": {"type": "batchnorm"},
      "rms": {"type": "rmsnorm", "axes": [-1]}})";
    auto gaussian = [](const std::string& shape) {
        return R"("data": {"x": {"source": "gaussian", "shape": )" + shape + "}}";
    };
    const std::string tokens = R"("data": {"x": {"source": "tokens", "batch": 64, "max_len": 128, "dim": 64}})";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {gaussian("[4, 6, 8]"), R"({"type": "batch_dependence", "data": ["x"], "norms": ["ln", "bn"], "sizes": [1, 50000, 100000]})"},
        {gaussian("[4, 6, 8]"), R"({"type": "train_eval", "data": ["x"], "norms": ["ln", "bn"], "batch_size": 100000})"},
        {gaussian("[64, 64, 64]"), R"({"type": "train_eval", "data": ["x"], "norms": ["ln", "bn"], "steps": 40})"},
        {gaussian("[64, 64, 64]"), R"({"type": "port_check", "data": ["x"], "norms": ["ln", "rms"], "steps": 20})"},
        {tokens, R"({"type": "padding", "data": ["x"], "norms": ["ln", "bn"], "batch_mates": 16, "extra_length": 256})"},
        {gaussian("[64, 128, 64]"), R"({"type": "invariance", "data": ["x"], "norms": ["ln", "bn"]})"},
        {gaussian("[64, 128, 64]"), R"({"type": "precision", "data": ["x"], "norms": ["ln", "bn"]})"},
        {gaussian("[64, 128, 64]"), R"({"type": "epsilon", "data": ["x"], "norms": ["ln", "bn"]})"},
        {gaussian("[64, 128, 64]"), R"({"type": "equivalence", "data": ["x"], "norms": ["ln", "bn", "rms"]})"},
        {gaussian("[64, 128, 64]"), R"({"type": "apply", "data": ["x"], "norms": ["ln", "bn"], "save": ["grad_input"]})"},
    };
    for (const auto& [data, analysis] : cases) {
        CAPTURE(analysis);
        write_text(dir / "a.json", R"({"name": "a", "seed": 0, )" + data + ", " + norms + R"(, "analyses": [)" + analysis + "]}");
        const double estimate_mib = estimated_mib(dir / "a.json");
        const double peak_mib = run_peak_mib(dir / "a.json", dir / "out");
        CAPTURE(peak_mib);
        CAPTURE(estimate_mib);
        CHECK(peak_mib <= estimate_mib + 16);
    }
}
#endif

TEST_CASE("the memory estimate counts a jacobian's n x n matrices, and --max-memory refuses them") {
    // The Jacobian of a group of n elements is n x n doubles, and LAPACK's SVD works on a
    // copy: about 2 n^2 doubles at the peak, far above the batch. The group comes from the
    // norm and the data's channel axis before anything is built: a LayerNorm row of n, and
    // a BatchNorm channel of n samples (channels on axis 1 of (n, 2)).
    fs::path dir = fresh_dir("estimate_jacobian");
    const std::size_t n = 1536;
    const std::string rows = std::to_string(n);
    for (const char* norm : {R"({"type": "layernorm", "normalized_shape": [)", R"({"type": "batchnorm")"}) {
        CAPTURE(norm);
        const bool ln = std::string(norm).find("layer") != std::string::npos;
        write_text(dir / "j.json",
                   std::string(R"({"name": "j", "seed": 0, "data": {"x": {"source": "gaussian", "shape": )") +
                       (ln ? "[2, " + rows + "]" : "[" + rows + ", 2]") + R"(}}, "norms": {"n": )" + norm +
                       (ln ? rows + "]}" : "}") +
                       R"(}, "analyses": [{"type": "jacobian", "data": ["x"], "norms": ["n"], "groups": 1}]})");
        const double estimate_mib = estimated_mib(dir / "j.json");
        const double matrices_mib = 2.0 * n * n * 8 / (1 << 20);
        CHECK(estimate_mib >= matrices_mib);
        CHECK(estimate_mib <= 2 * matrices_mib);

        CliResult refused = run_normlab("run " + (dir / "j.json").string() + " --max-memory 20M --out " +
                                        (dir / "refused").string());
        CHECK(refused.exit_code == 2);
        CHECK_MESSAGE(refused.err.find("in its jacobian analysis") != std::string::npos, refused.err);
        CHECK_FALSE(fs::exists(dir / "refused"));
#ifndef __SANITIZE_ADDRESS__
        const double peak_mib = run_peak_mib(dir / "j.json", dir / "out");
        CAPTURE(peak_mib);
        CAPTURE(estimate_mib);
        CHECK(peak_mib > matrices_mib);  // the matrices were there
        CHECK(peak_mib <= estimate_mib + 16);  // the process's own few MiB besides
#endif
    }
}
