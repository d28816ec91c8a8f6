// Scripting: sweeps in one process, shards merged equal to the unsharded run byte for byte,
// shapes/init/dry-run subcommands.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "analysis_util.hpp"
#include "cli_util.hpp"
#include "config/sweep.hpp"
#include "tensor/errors.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

TEST_CASE("extract_sweep: grid order (first key slowest) and zip") {
    normlab::Json j = normlab::Json::parse(R"({"a": 1, "sweep": {"x.y": [1, 2], "zip": {"p": [10, 20, 30], "q": ["u", "v", "w"]}}})");
    normlab::Sweep s = normlab::extract_sweep(j, "c.json");
    CHECK_FALSE(j.contains("sweep"));
    REQUIRE(s.points.size() == 6);
    CHECK(s.paths == std::vector<std::string>{"x.y", "p", "q"});
    CHECK(s.points[0].values[0].second == 1);
    CHECK(s.points[2].values[1].second == 30);
    CHECK(s.points[2].values[2].second == "w");
    CHECK(s.points[3].values[0].second == 2);
    CHECK(s.points[3].values[1].second == 10);
    CHECK(normlab::sweep_column("/data/x/shape/0") == "data_x_shape_0");
    normlab::Json bad = normlab::Json::parse(R"({"sweep": {"zip": {"p": [1, 2], "q": [1]}}})");
    CHECK_THROWS_WITH_AS(normlab::extract_sweep(bad, "c.json"), doctest::Contains("/sweep/zip: zip lists must have equal lengths, but \"p\" has 2 values and \"q\" has 1"),
                         normlab::InputError);
    normlab::Json empty = normlab::Json::parse(R"({"sweep": {"a": []}})");
    CHECK_THROWS_AS(normlab::extract_sweep(empty, "c.json"), normlab::InputError);
    CHECK(normlab::parse_shard("2/4") == std::pair<std::size_t, std::size_t>{2, 4});
    CHECK_THROWS_AS(normlab::parse_shard("4/4"), normlab::InputError);
    CHECK_THROWS_AS(normlab::parse_shard("x"), normlab::InputError);
}

TEST_CASE("no CSV gets one column name twice: one path in two spellings, paths that sanitise alike, a sweep column an analysis has") {
    // One value in two spellings is one path swept twice, as in a zip and the grid.
    normlab::Json two = normlab::Json::parse(R"({"sweep": {"norms.ln.eps": [1], "/norms/ln/eps": [2]}})");
    CHECK_THROWS_WITH_AS(normlab::extract_sweep(two, "c.json"),
                         "c.json: /sweep/~1norms~1ln~1eps: path \"/norms/ln/eps\" is swept twice: \"norms.ln.eps\" names the same value, /norms/ln/eps",
                         normlab::InputError);
    normlab::Json zipped = normlab::Json::parse(R"({"sweep": {"/norms/ln/eps": [1], "zip": {"norms.ln.eps": [2]}}})");
    CHECK_THROWS_WITH_AS(normlab::extract_sweep(zipped, "c.json"), doctest::Contains("is swept twice"), normlab::InputError);
    // Distinct values whose paths give one column name.
    normlab::Json alike = normlab::Json::parse(R"({"sweep": {"/data/a.b/std": [1, 2], "data.a_b.std": [3, 4]}})");
    CHECK_THROWS_WITH_AS(normlab::extract_sweep(alike, "c.json"),
                         doctest::Contains("c.json: /sweep/data.a_b.std: sweep paths \"/data/a.b/std\" and \"data.a_b.std\" would both "
                                           "be the CSV column \"data_a_b_std\""),
                         normlab::InputError);

    fs::path dir = fresh_dir("sweep_columns");
    write_text(dir / "dup.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [2, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"]}], "sweep": {"norms.ln.eps": [1], "/norms/ln/eps": [2]}})");
    CliResult dup = run_normlab("validate " + (dir / "dup.json").string());
    CHECK(dup.exit_code == 2);
    CHECK_MESSAGE(dup.err.find("is swept twice") != std::string::npos, dup.err);

    // A swept dtype beside precision's own dtype column: sweep_dtype there, dtype elsewhere.
    write_text(dir / "dtype.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [2, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "precision", "data": ["x"], "norms": ["ln"]}, {"type": "apply", "data": ["x"], "norms": ["ln"]}],
      "sweep": {"dtype": ["float32", "float64"]}})");
    CliResult r = run_normlab("run " + (dir / "dtype.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string precision = read_text(dir / "out" / "precision.csv");
    CHECK(precision.rfind("point,sweep_dtype,data,norm,type,dtype,", 0) == 0);
    CHECK(read_text(dir / "out" / "apply.csv").rfind("point,dtype,data,norm,", 0) == 0);
    for (const auto& row : parse_csv(precision)) {
        CAPTURE(row.at("point"));
        CHECK(row.at("sweep_dtype") == (row.at("point") == "0" ? "float32" : "float64"));
    }
    // show filters on either column; float64 rows of point 0 are its own, not the sweep's.
    CliResult swept = run_normlab("show " + (dir / "out").string() + " precision --where sweep_dtype=float64 --columns point,sweep_dtype,dtype");
    CHECK_MESSAGE(swept.exit_code == 0, swept.err);
    CHECK(swept.out.find("float32") == std::string::npos);
    CliResult own = run_normlab("show " + (dir / "out").string() + " precision --where dtype=float64 --columns point,sweep_dtype,dtype");
    CHECK_MESSAGE(own.exit_code == 0, own.err);
    CHECK(own.out.find("float32") != std::string::npos);  // point 0's float64 rows
    CHECK(run_normlab("report " + (dir / "out").string()).exit_code == 0);
    // Each point's data summary, and the report's Data table, carry that point's dtype.
    const auto report = nlohmann::json::parse(read_text(dir / "out" / "report.json"));
    CHECK(report["data"]["0"]["x"]["dtype"] == "float32");
    CHECK(report["data"]["1"]["x"]["dtype"] == "float64");
    const std::string html = read_text(dir / "out" / "report.html");
    for (const char* point : {"0", "1"}) {
        const std::string row = R"(<tr><td class="num" data-v=")" + std::string(point) + R"(">)" + point + "</td><td>x</td>";
        const std::size_t at = html.find(row);
        REQUIRE(at != std::string::npos);
        const std::string dtype = std::string(point) == "0" ? "<td>float32</td>" : "<td>float64</td>";
        CHECK(html.substr(at, html.find("</tr>", at) - at).find(dtype) != std::string::npos);
    }
}

TEST_CASE("a 100-point sweep in one process and its 4 shards merged equal it byte for byte") {
    fs::path dir = fresh_dir("sweep100");
    write_text(dir / "cfg.json", R"({
      "name": "s", "seed": 3,
      "data": {"x": {"source": "gaussian", "shape": [4, 6, 5], "mean": 2, "std": 0.5}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [5]}, "bn": {"type": "batchnorm"}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln", "bn"], "save": ["output"]},
                   {"type": "stats_shapes", "data": ["x"], "norms": ["ln"]}],
      "sweep": {"norms.ln.eps": [1e-9, 1e-7, 1e-5, 1e-3, 1e-1], "data.x.std": [0.001, 0.01, 0.1, 1, 10],
                "zip": {"data.x.mean": [0, 100, 1e4, -5], "norms.bn.momentum": [0.1, 0.2, 0.3, 0.4]}}
    })");
    std::string cfg = (dir / "cfg.json").string();
    CliResult all = run_normlab("run " + cfg + " --out " + (dir / "all").string() + " -q");
    REQUIRE_MESSAGE(all.exit_code == 0, all.err);
    std::string csv = read_text(dir / "all" / "apply.csv");
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 100 * 2);
    CHECK(csv.rfind("point,norms_ln_eps,data_x_std,data_x_mean,norms_bn_momentum,data,norm,type", 0) == 0);
    CHECK(fs::exists(dir / "all" / "arrays" / "p99" / "x" / "bn" / "output.npy"));
    std::string merge_args;
    for (int i = 0; i < 4; ++i) {
        fs::path sd = dir / ("shard" + std::to_string(i));
        CliResult r = run_normlab("run " + cfg + " --shard " + std::to_string(i) + "/4 --out " + sd.string() + " -q");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        merge_args += " " + sd.string();
    }
    CliResult m = run_normlab("merge " + (dir / "merged").string() + merge_args);
    REQUIRE_MESSAGE(m.exit_code == 0, m.err);
    CHECK(read_text(dir / "merged" / "apply.csv") == csv);
    CHECK(read_text(dir / "merged" / "stats_shapes.csv") == read_text(dir / "all" / "stats_shapes.csv"));
    CHECK(read_text(dir / "merged" / "arrays" / "p57" / "x" / "ln" / "output.npy") ==
          read_text(dir / "all" / "arrays" / "p57" / "x" / "ln" / "output.npy"));
    CliResult partial = run_normlab("merge " + (dir / "partial").string() + " " + (dir / "shard0").string());
    CHECK(partial.exit_code == 2);
    CHECK(partial.err.find("75 of 100 sweep points missing") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "partial"));
}

TEST_CASE("sweep points reuse an unchanged batch and rebuild a changed one") {
    // Points 0,1 and 2,3 share their data (only eps changes; one seed for all points), so
    // the batch is taken over; point 2 changes the mean and must see new data. With a seed
    // per point, every point has its own data.
    fs::path dir = fresh_dir("sweep_reuse");
    std::string base = R"("data": {"x": {"source": "gaussian", "shape": [3, 4, 8], "mean": 0, "std": 1}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"]}],)";
    write_text(dir / "one.json", "{\"name\": \"r\", \"seed\": 5, " + base +
                                     R"( "sweep": {"data.x.mean": [0, 100], "norms.ln.eps": [1e-5, 1e-3], "seed_per_point": false}})");
    write_text(dir / "per.json", "{\"name\": \"r\", \"seed\": 5, " + base +
                                     R"( "sweep": {"norms.ln.eps": [1e-5, 1e-3]}})");
    CliResult r = run_normlab("run " + (dir / "one.json").string() + " --out " + (dir / "one").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto rows = parse_csv(read_text(dir / "one" / "apply.csv"));
    REQUIRE(rows.size() == 4);
    auto in_min = [&](std::size_t i) { return std::stod(rows[i].at("in_min")); };
    CHECK(rows[1].at("in_min") == rows[0].at("in_min"));
    CHECK(rows[3].at("in_min") == rows[2].at("in_min"));
    CHECK(in_min(2) - in_min(0) == doctest::Approx(100).epsilon(1e-6));  // same noise, mean moved by 100
    CHECK(rows[1].at("out_min") != rows[0].at("out_min"));               // eps still changed the output

    r = run_normlab("run " + (dir / "per.json").string() + " --out " + (dir / "per").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    rows = parse_csv(read_text(dir / "per" / "apply.csv"));
    REQUIRE(rows.size() == 2);
    CHECK(rows[1].at("in_min") != rows[0].at("in_min"));
}

TEST_CASE("shapes, init and dry-run") {
    CliResult s = run_normlab("shapes --shape 32,3,64,64 --norm batchnorm");
    CHECK(s.exit_code == 0);
    CHECK(s.out.find("stats_shape: [1,3,1,1]") != std::string::npos);
    CHECK(s.out.find("channel_axis: 1\n") != std::string::npos);
    CliResult j = run_normlab("shapes --shape 32,3,64,64 --norm layernorm --normalized-shape 3,64,64 --json");
    CHECK(j.out.find("\"stats_shape\": [32,1,1,1]") != std::string::npos);
    CHECK(j.out.find("\"channel_axis\": null") != std::string::npos);
    CHECK(run_normlab("shapes --shape 32,3,64,64 --norm layernorm --normalized-shape 3,64,64").out.find("channel_axis: none\n") !=
          std::string::npos);
    // The axis the channels were taken from, negative ones as the index they stand for.
    CliResult last = run_normlab("shapes --shape 8,16,512 --norm instancenorm --channel-axis -1 --json");
    CHECK(last.out.find("\"channel_axis\": 2, \"reduction_axes\": [1]") != std::string::npos);
    CHECK(run_normlab("shapes --shape 2,30,8,8 --norm groupnorm --num-groups 4").exit_code == 2);
    CHECK(run_normlab("shapes --shape 2,x --norm batchnorm").exit_code == 2);
    // Flax's LayerNorm over H, W, C with a (C) scale and bias (README's example).
    CliResult flax = run_normlab("shapes --shape 8,32,32,3 --norm layernorm --axes 1,2,3 --param-axes -1");
    CHECK_MESSAGE(flax.exit_code == 0, flax.err);
    CHECK(flax.out.find("stats_shape: [8,1,1,1]\n") != std::string::npos);
    CHECK(flax.out.find("param_shape: [3]\nparam_axes: [3]\nnum_params: 6\n") != std::string::npos);

    fs::path dir = fresh_dir("init");
    for (std::string t : {"minimal", "sweep", "depth"}) {
        CAPTURE(t);
        fs::path cfg = dir / (t + ".json");
        REQUIRE(run_normlab("init " + t + " -o " + cfg.string()).exit_code == 0);
        CHECK(run_normlab("init " + t + " -o " + cfg.string()).exit_code == 2);  // exists
        CliResult dry = run_normlab("run " + cfg.string() + " --dry-run");
        CHECK_MESSAGE(dry.exit_code == 0, dry.err);
        CHECK(dry.out.find("estimated peak memory") != std::string::npos);
        CHECK(run_normlab("validate " + cfg.string()).exit_code == 0);
    }
    CHECK(run_normlab("init nosuch").exit_code == 2);
    CliResult help = run_normlab("init --help");
    CHECK(help.exit_code == 0);
    CHECK_MESSAGE(help.out.find("template name: minimal, sweep, depth") != std::string::npos, help.out);
}

TEST_CASE("shapes refuses a shape whose element count does not fit 64 bits, and so do validate and run") {
    for (const std::string shape : {"4294967296,4294967296,2", "4611686018427387904,4611686018427387904"}) {
        for (const std::string norm : {"instancenorm", "batchnorm"}) {
            CAPTURE(shape + " " + norm);
            CliResult s = run_normlab("shapes --shape " + shape + " --norm " + norm);
            CHECK(s.exit_code == 2);
            CHECK(s.out.empty());
            CHECK(s.err == "normlab: error: shapes --shape " + shape +
                               ": the shape has more elements than a 64-bit count holds (2^64 - 1)\n");
        }
    }
    // The largest count that fits still gets its true numbers.
    CliResult big = run_normlab("shapes --shape 4294967296,4294967295 --norm batchnorm");
    CHECK_MESSAGE(big.exit_code == 0, big.err);
    CHECK(big.out.find("elems_per_stat: 4294967296\n") != std::string::npos);
    fs::path dir = fresh_dir("shape_overflow");
    write_text(dir / "cfg.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [4294967296, 4294967296, 2]}},
      "norms": {"n": {"type": "instancenorm"}}, "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}]})");
    for (const std::string command : {"validate ", "run --dry-run "}) {
        CAPTURE(command);
        // The memory estimate saturates and refuses it; without a limit, the shape's reader.
        CliResult r = run_normlab(command + (dir / "cfg.json").string());
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find("/data/x: needs an estimated more than 16 EiB of memory") != std::string::npos, r.err);
        CliResult unlimited = run_normlab(command + (dir / "cfg.json").string() + " --max-memory none");
        CHECK(unlimited.exit_code == 2);
        CHECK(unlimited.err == "normlab: error: " + (dir / "cfg.json").string() + ": /data/x/shape: shape has too many elements\n");
    }
}
