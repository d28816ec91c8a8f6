// Shards: every shard index I of N, for N up to the number of sweep points + 2, runs (a
// shard without points writes a result folder with CSV headers and no rows), and merging
// the N shards gives what the unsharded run gives: the same CSVs and saved arrays byte for
// byte, and the same report apart from timings and the sweep's bookkeeping.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

// Every file below `dir`, relative, sorted.
std::vector<std::string> files_under(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(e.path().lexically_relative(dir).generic_string());
    std::sort(out.begin(), out.end());
    return out;
}

// The report without what legitimately differs between a merged and an unsharded run.
nlohmann::ordered_json comparable(nlohmann::ordered_json r) {
    r.erase("timings_ms");
    r.erase("sweep");
    return r;
}

// Runs `cfg` unsharded and as every shard I/N for N = 1 .. max_n, merging each set of N
// shards, and compares every merge with the unsharded run.
void check_all_shardings(const fs::path& dir, const std::string& cfg, std::size_t max_n) {
    CliResult all = run_normlab("run " + cfg + " --out " + (dir / "all").string() + " -q");
    REQUIRE_MESSAGE(all.exit_code == 0, all.err);
    const auto all_files = files_under(dir / "all");
    const auto all_report = nlohmann::ordered_json::parse(read_text(dir / "all" / "report.json"));
    for (std::size_t n = 1; n <= max_n; ++n) {
        std::string shard_dirs;
        for (std::size_t i = 0; i < n; ++i) {
            CAPTURE(i);
            CAPTURE(n);
            const std::string shard = std::to_string(i) + "/" + std::to_string(n);
            fs::path sd = dir / ("n" + std::to_string(n) + "_" + std::to_string(i));
            CliResult dry = run_normlab("run " + cfg + " --shard " + shard + " --dry-run");
            CHECK_MESSAGE(dry.exit_code == 0, dry.err);
            CliResult r = run_normlab("run " + cfg + " --shard " + shard + " --out " + sd.string() + " -q");
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            const auto rep = nlohmann::json::parse(read_text(sd / "report.json"));
            CHECK(rep["sweep"]["shard"] == nlohmann::json::array({i, n}));
            for (const auto& p : rep["sweep"]["points"]) CHECK(p.get<std::size_t>() % n == i);
            shard_dirs += " " + sd.string();
        }
        CAPTURE(n);
        fs::path merged = dir / ("merged" + std::to_string(n));
        CliResult m = run_normlab("merge " + merged.string() + shard_dirs);
        REQUIRE_MESSAGE(m.exit_code == 0, m.err);
        CHECK(files_under(merged) == all_files);
        // report.json and report.html (drawn from it) carry the sweep's bookkeeping (shards,
        // merged_from); every other file is the unsharded run's, byte for byte.
        for (const auto& f : all_files) {
            if (f == "report.json" || f == "report.html") continue;
            const bool same = read_text(merged / f) == read_text(dir / "all" / f);
            CHECK_MESSAGE(same, f);
        }
        const auto merged_report = nlohmann::ordered_json::parse(read_text(merged / "report.json"));
        CHECK(comparable(merged_report) == comparable(all_report));
    }
}

}  // namespace

TEST_CASE("every shard of a 3-point sweep, up to 5 shards, runs and merges into the unsharded result") {
    fs::path dir = fresh_dir("shards_sweep");
    write_text(dir / "cfg.json", R"({"name": "s", "seed": 2,
      "data": {"x": {"source": "gaussian", "shape": [3, 2, 4], "mean": 1, "std": 2}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}, "bn": {"type": "batchnorm"}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln", "bn"], "save": ["output"]},
                   {"type": "stats_shapes", "data": ["x"], "norms": ["ln"]},
                   {"type": "apply", "data": ["x"], "norms": ["bn"], "save": ["running_mean"]}],
      "sweep": {"norms.ln.eps": [1e-5, 1e-3, 1e-1]}})");
    check_all_shardings(dir, (dir / "cfg.json").string(), 3 + 2);
}

TEST_CASE("a config without a sweep is one point: every shard up to 3 runs and merges") {
    fs::path dir = fresh_dir("shards_plain");
    write_text(dir / "cfg.json", R"({"name": "p", "seed": 4,
      "data": {"x": {"source": "gaussian", "shape": [3, 2, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"], "save": ["output"]}]})");
    check_all_shardings(dir, (dir / "cfg.json").string(), 1 + 2);
}

TEST_CASE("an empty shard: a result folder with CSV headers, no rows, its (empty) point list") {
    // The first report of this: quickstart has one point, so shard 1/2 gets none (it crashed).
    fs::path dir = fresh_dir("shards_empty");
    const std::string quick = kSrc + "/configs/quickstart.json";
    CliResult dry = run_normlab("run " + quick + " --shard 1/2 --dry-run");
    CHECK_MESSAGE(dry.exit_code == 0, dry.err);
    CHECK_MESSAGE(dry.out.find("sweep points: 1 (this shard runs 0)") != std::string::npos, dry.out);
    CliResult r = run_normlab("run " + quick + " --shard 1/2 --out " + (dir / "x").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(read_text(dir / "x" / "apply.csv").find('\n') + 1 == read_text(dir / "x" / "apply.csv").size());
    CHECK(read_text(dir / "x" / "apply.csv").rfind("data,norm,type,step,eps,", 0) == 0);
    CHECK(read_text(dir / "x" / "stats_shapes.csv").rfind("data,norm,type,input_shape,", 0) == 0);
    const auto rep = nlohmann::json::parse(read_text(dir / "x" / "report.json"));
    CHECK(rep["sweep"]["points"] == nlohmann::json::array());
    CHECK(rep["sweep"]["total_points"] == 1);
    CHECK(rep["analyses"] == nlohmann::json::array());
    CHECK(rep["name"] == "quickstart");
}

TEST_CASE("merge refuses reports it cannot read, with a message, not a crash") {
    fs::path dir = fresh_dir("shards_bad_report");
    write_text(dir / "a" / "report.json", R"({"tool": "normlab", "sweep": {"total_points": "many"}})");
    CliResult m = run_normlab("merge " + (dir / "out").string() + " " + (dir / "a").string());
    CHECK(m.exit_code == 2);
    CHECK_MESSAGE(m.err.find("report.json: /sweep/total_points: expected") != std::string::npos, m.err);
    CHECK_FALSE(fs::exists(dir / "out"));
    write_text(dir / "b" / "report.json",
               R"({"tool": "normlab", "config": {}, "files": [], "analyses": [], "data": {}, "timings_ms": {"analyses": []},
                   "sweep": {"paths": ["x"], "total_points": 2, "points": [0, 5]}})");
    m = run_normlab("merge " + (dir / "out").string() + " " + (dir / "b").string());
    CHECK(m.exit_code == 2);
    CHECK_MESSAGE(m.err.find("point 5 is not below the sweep's 2 points") != std::string::npos, m.err);
}

TEST_CASE("merge names a shard folder given twice, and a missing one") {
    const fs::path dir = fresh_dir("shards_twice");
    write_text(dir / "cfg.json", R"({"name": "t", "data": {"x": {"source": "values", "values": [[1, 2, 3, 4]]}},
        "norms": {"n": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}],
        "sweep": {"norms.n.eps": [1e-5, 1e-3]}})");
    for (int i = 0; i < 2; ++i)
        REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --shard " + std::to_string(i) + "/2 --out " +
                            (dir / ("s" + std::to_string(i))).string() + " -q").exit_code == 0);
    const std::string s0 = (dir / "s0").string(), s1 = (dir / "s1").string();
    CliResult twice = run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + s1 + " " + s1);
    CHECK(twice.exit_code == 2);
    CHECK_MESSAGE(twice.err == "normlab: error: merge: " + s1 + " is given twice\n", twice.err);
    // the same folder by another spelling
    CliResult spelled = run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + s1 + " " + s0 + "/../s1/");
    CHECK_MESSAGE(spelled.err == "normlab: error: merge: " + s0 + "/../s1/ is given twice (also as " + s1 + ")\n", spelled.err);
    CliResult missing = run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + (dir / "s2").string());
    CHECK_MESSAGE(missing.err == "normlab: error: " + (dir / "s2").string() + ": no such folder\n", missing.err);
    CliResult alone = run_normlab("merge " + (dir / "m").string() + " " + s0);
    CHECK_MESSAGE(alone.err == "normlab: error: merge: 1 of 2 sweep points missing (1); the folder of shard 1/2 is not "
                  "among those given\n", alone.err);
    // Merge has no --out: a folder it may not replace is refused with advice it can follow.
    write_text(dir / "busy" / "notes.txt", "x");
    CliResult busy = run_normlab("merge " + (dir / "busy").string() + " " + s0 + " " + s1);
    CHECK(busy.exit_code == 2);
    CHECK_MESSAGE(busy.err.find("choose another output folder or pass --force to replace it") != std::string::npos, busy.err);
    CHECK(busy.err.find("--out") == std::string::npos);
    CHECK_FALSE(fs::exists(dir / "m"));
    // A shard run with another --set: where the configs part is named.
    REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --shard 1/2 --set norms.n.axes=[0,1] --out " +
                        (dir / "other").string() + " -q").exit_code == 0);
    CliResult other = run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + (dir / "other").string());
    CHECK_MESSAGE(other.err == "normlab: error: " + (dir / "other" / "report.json").string() + ": comes from a different "
                  "config than " + s0 + " (first difference at /norms/n/axes/0: 0 here, -1 there)\n", other.err);
    // A list longer in one shard: the first element the other lacks.
    REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --shard 1/2 --set 'data.x.values=[[1,2,3,4],[5,6,7,8]]' --out " +
                        (dir / "longer").string() + " -q").exit_code == 0);
    CliResult longer = run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + (dir / "longer").string());
    CHECK_MESSAGE(longer.err == "normlab: error: " + (dir / "longer" / "report.json").string() + ": comes from a "
                  "different config than " + s0 + " (first difference at /data/x/values/1: [5,6,7,8] here, absent there)\n",
                  longer.err);
    CHECK_FALSE(fs::exists(dir / "m"));
    REQUIRE(run_normlab("merge " + (dir / "m").string() + " " + s0 + " " + s1).exit_code == 0);
}

TEST_CASE("merge names the shards not given, and refuses shards of different N") {
    const fs::path dir = fresh_dir("shards_which");
    write_text(dir / "cfg.json", R"({"name": "w", "data": {"x": {"source": "values", "values": [[1, 2, 3, 4]]}},
        "norms": {"n": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}],
        "sweep": {"norms.n.eps": [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]}})");
    auto shard = [&](const std::string& which, const std::string& folder) {
        REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --shard " + which + " --out " + (dir / folder).string() +
                            " -q").exit_code == 0);
        return (dir / folder).string();
    };
    const std::string a = shard("0/4", "a"), c = shard("2/4", "c"), t = shard("1/3", "t");
    CliResult two = run_normlab("merge " + (dir / "m").string() + " " + a + " " + c);
    CHECK_MESSAGE(two.err == "normlab: error: merge: 2 of 5 sweep points missing (1, 3); the folders of shards 1/4 and 3/4 "
                  "are not among those given\n", two.err);
    CliResult mixed = run_normlab("merge " + (dir / "m").string() + " " + a + " " + t);
    CHECK_MESSAGE(mixed.err == "normlab: error: merge: point 4 is in both " + a + " (shard 0/4) and " + t +
                  " (shard 1/3): shards of different N overlap\n", mixed.err);
    CHECK_FALSE(fs::exists(dir / "m"));
    // Shards of different N that cover the sweep once (a failed 1/2 split again in two) merge,
    // into the rows of one unsharded run.
    const std::string half = shard("0/2", "h0"), q1 = shard("1/4", "q1"), q3 = shard("3/4", "q3");
    CliResult resplit = run_normlab("merge " + (dir / "m").string() + " " + half + " " + q1 + " " + q3);
    REQUIRE_MESSAGE(resplit.exit_code == 0, resplit.err);
    REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "whole").string() + " -q").exit_code == 0);
    CHECK(read_text(dir / "m" / "stats_shapes.csv") == read_text(dir / "whole" / "stats_shapes.csv"));
}

TEST_CASE("merge refuses shards whose norms without compute took different arithmetic") {
    // A shard run on a CPU without FMA instructions takes the double path where another
    // takes the float path: the merged folder would mix the two.
    fs::path dir = fresh_dir("shards_compute");
    write_text(dir / "cfg.json", R"({"name": "c", "seed": 1,
      "data": {"x": {"source": "gaussian", "shape": [3, 2, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"]}],
      "sweep": {"norms.ln.eps": [1e-5, 1e-3]}})");
    std::string shards;
    for (int i = 0; i < 2; ++i) {
        const fs::path sd = dir / ("s" + std::to_string(i));
        CliResult r = run_normlab("run " + (dir / "cfg.json").string() + " --shard " + std::to_string(i) + "/2 --out " +
                                  sd.string() + " -q");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        shards += " " + sd.string();
    }
    auto rep = nlohmann::ordered_json::parse(read_text(dir / "s1" / "report.json"));
    const std::string ran = rep["default_compute"].get<std::string>();
    CHECK((ran == "float" || ran == "double"));
    rep["default_compute"] = ran == "float" ? "double" : "float";
    write_text(dir / "s1" / "report.json", rep.dump(2));
    CliResult m = run_normlab("merge " + (dir / "out").string() + shards);
    CHECK(m.exit_code == 2);
    CHECK_MESSAGE(m.err.find("s1/report.json: its norms without \"compute\" took the " +
                             std::string(ran == "float" ? "double" : "float") + " path") != std::string::npos,
                  m.err);
    CHECK(std::count(m.err.begin(), m.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("values that do not apply (empty cells) merge like any other, and show --where COLUMN= selects them") {
    // train_eval's running averages and port_check's running-statistics differences do not
    // apply to LayerNorm (no running statistics): empty CSV cells, "" in report.json.
    fs::path dir = fresh_dir("shards_empty_cells");
    write_text(dir / "cfg.json", R"({"name": "e", "seed": 5, "dtype": "float64",
      "data": {"x": {"source": "gaussian", "shape": [4, 3]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [3]}, "bn": {"type": "batchnorm"}},
      "analyses": [{"type": "train_eval", "data": ["x"], "norms": ["ln", "bn"], "steps": 2},
                   {"type": "port_check", "data": ["x"], "norms": ["bn", "ln"]}],
      "sweep": {"norms.ln.eps": [1e-5, 1e-2]}})");
    check_all_shardings(dir, (dir / "cfg.json").string(), 2 + 1);
    const fs::path merged = dir / "merged2";
    const auto report = nlohmann::json::parse(read_text(merged / "report.json"));
    std::size_t empty = 0;
    for (const auto& a : report["analyses"])
        for (const auto& row : a["rows"])
            for (const char* c : {"running_mean_avg", "running_var_avg", "running_mean_max_abs_diff"})
                if (row.contains(c)) {
                    const bool ln = row.contains("norm") ? row["norm"] == "ln" : true;  // port_check: bn vs ln
                    CHECK((row[c] == "") == ln);
                    empty += row[c] == "";
                }
    CHECK(empty == 2 * 3 * 2 + 2);  // per point: ln's 3 steps x 2 columns, and 1 port_check row
    CHECK(read_text(merged / "report.html").find("non-finite cell") == std::string::npos);
    // show --where running_mean_avg= keeps the rows where it does not apply: LayerNorm's.
    CliResult s = run_normlab("show " + merged.string() + " train_eval --columns norm,running_mean_avg --where running_mean_avg=");
    REQUIRE_MESSAGE(s.exit_code == 0, s.err);
    CHECK(s.out.find("(6 of 12 rows") != std::string::npos);
    CHECK(s.out.find("bn") == std::string::npos);
    // A number column with empty cells stays right-aligned: the values end under its name.
    CliResult all = run_normlab("show " + merged.string() + " train_eval --columns norm,running_mean_avg --where step=1");
    REQUIRE_MESSAGE(all.exit_code == 0, all.err);
    std::istringstream lines(all.out);
    std::string line, header, bn;
    while (std::getline(lines, line)) {
        if (line.rfind("norm ", 0) == 0) header = line;
        if (line.rfind("bn ", 0) == 0 && bn.empty()) bn = line;
    }
    REQUIRE(!header.empty());
    REQUIRE(!bn.empty());
    CHECK(bn.size() == header.size());
}
