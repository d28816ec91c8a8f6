// report.html, `normlab report` and `normlab show` through the built binary.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "analysis_util.hpp"
#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const std::string kConfigs = std::string(NORMLAB_SOURCE_DIR) + "/configs/";

bool listed(const Json& report, const std::string& file) {
    for (const auto& f : report["files"])
        if (f == file) return true;
    return false;
}

std::size_t count(const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

// Runs `config` (JSON text) into a fresh folder named `name` and returns the folder.
fs::path run_config_text(const std::string& name, const std::string& config) {
    const fs::path dir = fresh_dir(name);
    write_text(dir / "config.json", config);
    const auto r = run_normlab("run " + (dir / "config.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return dir / "out";
}

// The rows of figures/<name>.vl.json in `out`, for the metric titled `metric` (all when empty).
Json figure_rows(const fs::path& out, const std::string& name, const std::string& metric = "") {
    const Json spec = Json::parse(read_text(out / "figures" / (name + ".vl.json")));
    Json rows = Json::array();
    for (const auto& r : spec["data"]["values"])
        if (metric.empty() || r["metric"] == metric) rows.push_back(r);
    return rows;
}

}  // namespace

TEST_CASE("port_check's figure: the same pair with and without steps are two bars, not one over the other") {
    const fs::path out = run_config_text("report_port_steps", R"({"name": "steps", "seed": 0,
      "data": {"images": {"source": "gaussian", "shape": [8, 3, 4, 4], "mean": 3, "std": 2}},
      "norms": {"bn": {"type": "batchnorm"}, "bn_keras": {"type": "batchnorm", "convention": "keras"},
                "bn_onnx": {"type": "batchnorm", "convention": "onnx"}},
      "analyses": [{"type": "port_check", "data": ["images"], "norms": ["bn", "bn_keras", "bn_onnx"]},
                   {"type": "port_check", "data": ["images"], "norms": ["bn", "bn_keras", "bn_onnx"], "steps": 20}]})");
    CHECK(parse_csv(read_text(out / "port_check.csv")).size() == 4);
    const Json rows = figure_rows(out, "port_check");
    REQUIRE(rows.size() == 4);
    std::set<std::string> categories;
    for (const auto& r : rows) categories.insert(r["category"].get<std::string>());
    CHECK(categories.size() == 4);
    CHECK(categories.count("bn_keras \u00b7 steps=20") == 1);
}

TEST_CASE("gradients' figure with an upstream of ones: the near-zero ratios are written, not left blank") {
    // float64, as configs/gradients.json: LayerNorm's ratio is then rounding, not an exact 0.
    const fs::path out = run_config_text("report_tiny_bars", R"({"name": "ones", "seed": 0, "dtype": "float64",
      "data": {"tokens": {"source": "gaussian", "shape": [8, 16, 64], "mean": 0.5, "std": 0.1, "channel_axis": -1}},
      "norms": {"ln": {"type": "layernorm", "axes": [-1]}, "rms": {"type": "rmsnorm", "axes": [-1]}},
      "analyses": [{"type": "gradients", "data": ["tokens"], "norms": ["ln", "rms"], "upstream": "ones"}]})");
    for (const auto& r : figure_rows(out, "gradients", "rms(dx) / rms(dy)")) {
        CAPTURE(r.dump());
        const double v = r["value"].get<double>();
        if (r["norm"] == "ln") {  // 0 in exact arithmetic, about 1e-17 in double
            CHECK(std::abs(v) < 1e-12);
            CHECK(v != 0);
            REQUIRE(r["label"].is_string());
            CHECK(std::stod(r["label"].get<std::string>()) == doctest::Approx(v).epsilon(0.5));
        } else {
            CHECK(v > 0.1);
            CHECK(r["label"].is_null());
        }
    }
}

TEST_CASE("jacobian's figure title: its largest singular value is rstd for weight 1 without a mask only") {
    const fs::path out = run_config_text("report_jacobian_title", R"({"name": "jac", "seed": 0,
      "data": {"vals": {"source": "values", "values": [[1, 2], [3, 5], [0, 4], [2, 2]]},
               "tokens": {"source": "tokens", "batch": 2, "max_len": 4, "dim": 8, "lengths": [3, 2], "scale": 3, "offset": 2}},
      "norms": {"bn": {"type": "batchnorm"}, "bn_w2": {"type": "batchnorm", "weight": [2, 2]},
                "bn_masked": {"type": "batchnorm", "mask": true}},
      "analyses": [{"type": "jacobian", "data": ["vals"], "norms": ["bn", "bn_w2"], "groups": 1},
                   {"type": "jacobian", "data": ["tokens"], "norms": ["bn_masked"], "groups": 1}]})");
    const auto rows = parse_csv(read_text(out / "jacobian.csv"));
    REQUIRE(rows.size() == 3);
    auto ratio = [&](const std::string& norm) {
        const auto row = one(rows, {{"norm", norm}});
        return num(row, "sv_max") / num(row, "rstd");
    };
    CHECK(ratio("bn") == doctest::Approx(1));
    CHECK(ratio("bn_w2") == doctest::Approx(2));
    CHECK(ratio("bn_masked") > 1.1);
    // So the title may call the largest singular value rstd only with those conditions.
    const Json title = Json::parse(read_text(out / "figures" / "jacobian.vl.json"))["title"]["text"];
    std::string text;
    for (const auto& line : title.is_array() ? title : Json::array({title})) text += line.get<std::string>() + "\n";
    CAPTURE(text);
    CHECK(text.find("largest singular value rstd") != std::string::npos);
    CHECK(text.find("weight 1") != std::string::npos);
    CHECK(text.find("no mask") != std::string::npos);
    CHECK(text.find("singular value (rstd)") == std::string::npos);
}

TEST_CASE("run writes a self-contained report.html and one Vega-Lite spec per analysis, all listed") {
    const fs::path out = fresh_dir("report_run") / "quick";
    auto r = run_normlab("run " + kConfigs + "quickstart.json --out " + out.string() + " -q");
    REQUIRE(r.exit_code == 0);
    const Json report = Json::parse(read_text(out / "report.json"));
    for (const char* f : {"report.html", "figures/stats_shapes.vl.json", "figures/apply.vl.json"}) {
        CAPTURE(f);
        CHECK(fs::exists(out / f));
        CHECK(listed(report, f));
    }
    const Json spec = Json::parse(read_text(out / "figures" / "stats_shapes.vl.json"));
    CHECK(spec["$schema"].get<std::string>().find("vega-lite") != std::string::npos);
    CHECK(spec["data"]["values"].size() == 2 * 9);  // two metrics x nine stats_shapes rows
    const std::string html = read_text(out / "report.html");
    CHECK(html.find("<script src") == std::string::npos);  // nothing loaded from elsewhere
    CHECK(html.find("<link") == std::string::npos);
    CHECK(count(html, "<div class=\"figure\"") == 2);
    CHECK(html.find("id=\"fig-stats_shapes\"") != std::string::npos);
    // The folder holds only what report.json lists: a second run replaces it without --force.
    CHECK(run_normlab("run " + kConfigs + "quickstart.json --out " + out.string() + " -q").exit_code == 0);
}

TEST_CASE("normlab report rebuilds the report of an existing folder, also a merged sweep") {
    const fs::path dir = fresh_dir("report_cmd");
    const fs::path cfg = dir / "sweep.json";
    REQUIRE(run_normlab("init sweep -o " + cfg.string()).exit_code == 0);
    for (int s = 0; s < 2; ++s)
        REQUIRE(run_normlab("run " + cfg.string() + " --shard " + std::to_string(s) + "/2 --out " +
                            (dir / ("s" + std::to_string(s))).string() + " -q").exit_code == 0);
    const fs::path merged = dir / "merged";
    REQUIRE(run_normlab("merge " + merged.string() + " " + (dir / "s0").string() + " " + (dir / "s1").string()).exit_code == 0);
    CHECK(fs::exists(merged / "report.html"));
    CHECK(fs::exists(merged / "figures" / "apply_vs_norms_ln_eps.vl.json"));
    CHECK(fs::exists(merged / "figures" / "apply_vs_data_tokens_std.vl.json"));

    // As an older result: no report.html, no figures, none of them listed.
    Json report = Json::parse(read_text(merged / "report.json"));
    Json files = Json::array();
    for (const auto& f : report["files"])
        if (f.get<std::string>().rfind("figures/", 0) != 0 && f != "report.html") files.push_back(f);
    report["files"] = files;
    write_text(merged / "report.json", report.dump(2) + "\n");
    fs::remove(merged / "report.html");
    fs::remove_all(merged / "figures");

    auto r = run_normlab("report " + merged.string());
    REQUIRE(r.exit_code == 0);
    // What it wrote is a message, on stderr as run's and merge's are: stdout stays empty.
    CHECK(r.out.empty());
    CHECK(r.err.find("normlab: report: 4 files written to " + merged.string()) != std::string::npos);
    CHECK(r.err.find("  " + (merged / "report.html").string() + "\n") != std::string::npos);
    CHECK(fs::exists(merged / "report.html"));
    const Json again = Json::parse(read_text(merged / "report.json"));
    CHECK(listed(again, "report.html"));
    CHECK(listed(again, "figures/apply_vs_norms_ln_eps.vl.json"));
    // The sweep's points are told apart in the main figure.
    const Json spec = Json::parse(read_text(merged / "figures" / "apply.vl.json"));
    CHECK(spec["facet"]["row"]["field"] == "sweep_point");

    auto bad = run_normlab("report " + dir.string());
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("not a normlab result folder") != std::string::npos);
}

TEST_CASE("report and show say when the folder is missing or is a file, not that it lacks report.json") {
    const fs::path dir = fresh_dir("report_no_folder");
    write_text(dir / "file.json", "{}");
    struct Case {
        std::string path, expect;
    };
    for (const Case& c : {Case{(dir / "nothere").string(), "normlab: error: " + (dir / "nothere").string() + ": no such folder\n"},
                          Case{(dir / "file.json").string(), "normlab: error: " + (dir / "file.json").string() +
                                                                 ": not a folder (give the result folder, the one that holds report.json)\n"},
                          Case{dir.string(), "normlab: error: " + (dir / "report.json").string() +
                                                 ": not a normlab result folder (no report.json written by normlab)\n"}})
        for (const char* command : {"report ", "show "}) {
            CAPTURE(command + c.path);
            const CliResult r = run_normlab(command + c.path);
            CHECK(r.exit_code == 2);
            CHECK(r.err == c.expect);
        }
    CHECK_FALSE(fs::exists(dir / "nothere"));
}

TEST_CASE("a report.json that is there but empty or malformed is said to be so, with the parse error, not to be missing") {
    const fs::path dir = fresh_dir("report_bad_json");
    write_text(dir / "empty" / "report.json", "");
    write_text(dir / "cut" / "report.json", "{\n  \"tool\": \"normlab\",\n");
    write_text(dir / "list" / "report.json", "[]\n");
    const std::string empty = (dir / "empty" / "report.json").string(), cut = (dir / "cut" / "report.json").string();
    for (const char* command : {"report ", "show ", "merge "}) {
        const std::string out = command == std::string("merge ") ? (dir / "merged").string() + " " : "";
        CAPTURE(command);
        const CliResult e = run_normlab(command + out + (dir / "empty").string());
        CHECK(e.exit_code == 2);
        CHECK(e.err == "normlab: error: " + empty + ": exists but cannot be read: the file is empty (expected the JSON "
                       "report normlab writes)\n");
        const CliResult c = run_normlab(command + out + (dir / "cut").string());
        CHECK(c.exit_code == 2);
        CHECK_MESSAGE(c.err.rfind("normlab: error: " + cut + ": exists but cannot be read: malformed JSON: parse error at line 3, column 1", 0) == 0,
                      c.err);
        const CliResult l = run_normlab(command + out + (dir / "list").string());
        CHECK(l.exit_code == 2);
        CHECK(l.err == "normlab: error: " + (dir / "list" / "report.json").string() +
                           ": not a normlab result folder (this report.json was not written by normlab: expected an object "
                           "with \"tool\": \"normlab\")\n");
    }
    CHECK_FALSE(fs::exists(dir / "merged"));
    // A table's rows that cannot be read: the message names this report.json, folder and all.
    const fs::path res = dir / "res";
    write_text(dir / "cfg.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [2, 4]}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4]}},
      "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"]}]})");
    REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --out " + res.string() + " -q").exit_code == 0);
    auto report = nlohmann::ordered_json::parse(read_text(res / "report.json"));
    report["analyses"][0]["rows"] = "none";
    write_text(res / "report.json", report.dump(2));
    for (const char* command : {"report ", "show "}) {
        CAPTURE(command);
        const CliResult r = run_normlab(command + res.string());
        CHECK(r.exit_code == 2);
        CHECK(r.err == "normlab: error: " + (res / "report.json").string() + ": /analyses/0/rows: table rows: expected an array\n");
    }
    // Column names and table types with a newline are named escaped, on one line.
    const std::string file = (res / "report.json").string();
    report["analyses"] = nlohmann::ordered_json::parse(R"([{"type": "apply", "rows": [{"a\nb": 1}, {"c": 2}]}])");
    write_text(res / "report.json", report.dump(2));
    const CliResult lacks = run_normlab("show " + res.string());
    CHECK(lacks.exit_code == 2);
    CHECK(lacks.err == "normlab: error: " + file + R"(: /analyses/0/rows: table rows: row 1 lacks "a\nb")" + "\n");
    report["analyses"] = nlohmann::ordered_json::parse(
        R"([{"type": "a\nb", "rows": [{"x": 1}]}, {"type": "a\nb", "rows": [{"y": 1}]}])");
    write_text(res / "report.json", report.dump(2));
    const CliResult differ = run_normlab("show " + res.string());
    CHECK(differ.exit_code == 2);
    CHECK(differ.err == "normlab: error: " + file + R"(: /analyses/1: columns differ from the earlier "a\nb" rows)" + "\n");
}

TEST_CASE("normlab show says when it cut a long text cell, and --full prints it whole") {
    // BatchNorm in training on a batch of one sample: a status cell with the norm's error.
    const fs::path dir = fresh_dir("show_cut");
    write_text(dir / "c.json", R"({"name": "t", "data": {"x": {"source": "gaussian", "shape": [4, 3]}},
        "norms": {"bn": {"type": "batchnorm"}},
        "analyses": [{"type": "batch_dependence", "data": ["x"], "norms": ["bn"], "sizes": [1, 2]}]})");
    REQUIRE(run_normlab("run " + (dir / "c.json").string() + " --out " + (dir / "out").string() + " -q").exit_code == 0);
    const CliResult cut = run_normlab("show " + (dir / "out").string());
    REQUIRE(cut.exit_code == 0);
    CHECK_MESSAGE(cut.out.find("...") != std::string::npos, cut.out);
    CHECK_MESSAGE(cut.out.find("\n(1 text cell cut at 48 characters: --full shows it whole)\nfigure: ") != std::string::npos,
                  cut.out);
    const CliResult full = run_normlab("show " + (dir / "out").string() + " --full");
    CHECK_MESSAGE(full.out.find("error: batchnorm \"bn\" on data \"x\": in training mode: one value per channel") !=
                      std::string::npos,
                  full.out);
    CHECK(full.out.find("cut at") == std::string::npos);
}

TEST_CASE("normlab show prints aligned tables, quoted cells whole, and the figure's path") {
    const fs::path out = fresh_dir("report_show") / "quick";
    REQUIRE(run_normlab("run " + kConfigs + "quickstart.json --out " + out.string() + " -q").exit_code == 0);

    auto all = run_normlab("show " + out.string());
    REQUIRE(all.exit_code == 0);
    CHECK(all.out.find("== stats_shapes (9 rows") != std::string::npos);
    CHECK(all.out.find("== apply (7 rows") != std::string::npos);
    CHECK(all.out.find("[32,64,512]") != std::string::npos);
    CHECK(all.out.find("figure: " + (out / "figures" / "stats_shapes.vl.json").string()) != std::string::npos);
    CHECK(all.out.find("report: " + (out / "report.html").string()) != std::string::npos);

    auto some = run_normlab("show " + out.string() + " stats_shapes --columns norm,stats_shape,num_stats --where data=images");
    REQUIRE(some.exit_code == 0);
    CHECK(some.out.find("norm    stats_shape   num_stats\n------  ------------  ---------\nbn      [1,3,1,1]             3\n"
                        "ln_img  [32,1,1,1]           32\nin      [32,3,1,1]           96\ngn      [32,3,1,1,1]         96\n"
                        "figure: ") != std::string::npos);
    CHECK(some.out.find("tokens") == std::string::npos);
    // the header counts the rows --where kept, and one row is "1 row"
    CHECK_MESSAGE(some.out.rfind("== stats_shapes (4 of 9 rows, ", 0) == 0, some.out);

    // No row kept: the show says which condition matched nothing, with its column's values,
    // a did-you-mean for a name (not for a number), or that no row meets them all.
    auto misspelt = run_normlab("show " + out.string() + " stats_shapes --columns norm --where norm=lnn");
    CHECK(misspelt.exit_code == 0);
    CHECK_MESSAGE(misspelt.out.find("----\nno row has norm=lnn; its values: ln, rms, bn, ln_img, in, gn, ln_last, ln_two "
                                    "(did you mean \"ln\"?)\nfigure: ") != std::string::npos,
                  misspelt.out);
    auto number = run_normlab("show " + out.string() + " stats_shapes --columns norm --where num_stats=97");
    CHECK_MESSAGE(number.out.find("no row has num_stats=97; its values: 2048, 512, 3, 32, 96, 6, 2\n") != std::string::npos,
                  number.out);
    auto both = run_normlab("show " + out.string() + " stats_shapes --columns norm --where norm=ln --where data=images");
    CHECK_MESSAGE(both.out.find("== stats_shapes (0 of 9 rows, ") == 0, both.out);
    CHECK_MESSAGE(both.out.find("no row meets all of the --where conditions\n") != std::string::npos, both.out);
    CHECK(some.out.find("no row") == std::string::npos);

    // 6 significant digits unless --full.
    auto shortened = run_normlab("show " + out.string() + " apply --columns norm,out_std_min --where norm=rms");
    auto full = run_normlab("show " + out.string() + " apply --columns norm,out_std_min --where norm=rms --full");
    CHECK(shortened.out.find("rms      0.401545\n") != std::string::npos);
    CHECK_MESSAGE(shortened.out.rfind("== apply (1 of 7 rows, ", 0) == 0, shortened.out);
    // --full: the value as apply.csv holds it (shortest round-trip form)
    const std::string cell = normlab_test::one(normlab_test::parse_csv(read_text(out / "apply.csv")),
                                               {{"norm", "rms"}}).at("out_std_min");
    CHECK(full.out.find("rms   " + cell + "\n") != std::string::npos);

    auto unknown = run_normlab("show " + out.string() + " epsilon");
    CHECK(unknown.exit_code == 2);
    CHECK_MESSAGE(unknown.err.find("no analysis \"epsilon\" in this result, which has stats_shapes, apply\n") != std::string::npos,
                  unknown.err);
    // a misspelled or shortened analysis name gets the hint the rest of normlab gives
    auto typo = run_normlab("show " + out.string() + " aply");
    CHECK_MESSAGE(typo.err.find("no analysis \"aply\" in this result, which has stats_shapes, apply (did you mean \"apply\"?)") !=
                      std::string::npos, typo.err);
    auto prefix = run_normlab("show " + out.string() + " stats");
    CHECK_MESSAGE(prefix.err.find("(did you mean \"stats_shapes\"?)") != std::string::npos, prefix.err);
    auto column = run_normlab("show " + out.string() + " apply --columns nope");
    CHECK(column.exit_code == 2);
    CHECK(column.err.find("no column \"nope\"") != std::string::npos);
    CHECK(run_normlab("show " + out.string() + " apply --where nope").exit_code == 2);
    // A missing column names the table checked, and the analysis that has it.
    auto elsewhere = run_normlab("show " + out.string() + " --columns data,norm,out_min");
    CHECK(elsewhere.exit_code == 2);
    CHECK_MESSAGE(elsewhere.err.rfind("normlab: error: show --columns: no column \"out_min\" in the stats_shapes table (its columns: "
                                      "data, norm, type,", 0) == 0, elsewhere.err);
    CHECK_MESSAGE(elsewhere.err.find("); apply has it: normlab show " + out.string() + " apply\n") != std::string::npos, elsewhere.err);
    auto where = run_normlab("show " + out.string() + " stats_shapes --where out_min=1");
    CHECK_MESSAGE(where.err.find("show --where: no column \"out_min\" in the stats_shapes table") != std::string::npos, where.err);
    auto misspelled = run_normlab("show " + out.string() + " apply --columns norm,out_mni");
    CHECK_MESSAGE(misspelled.err.find("no column \"out_mni\" in the apply table (did you mean \"out_min\"?) (its columns: ") !=
                      std::string::npos, misspelled.err);

    // a one-row table: "1 row"
    const fs::path one = fresh_dir("report_show_one");
    write_text(one / "cfg.json", R"({"name": "one", "data": {"x": {"source": "values", "values": [[1, 2, 3]]}},
        "norms": {"n": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "stats_shapes", "data": ["x"], "norms": ["n"]}]})");
    REQUIRE(run_normlab("run " + (one / "cfg.json").string() + " --out " + (one / "out").string() + " -q").exit_code == 0);
    auto single = run_normlab("show " + (one / "out").string());
    CHECK_MESSAGE(single.out.rfind("== stats_shapes (1 row, ", 0) == 0, single.out);
}

TEST_CASE("show --where: a number as show prints it finds its row, a shorter one does not; more digits ask for more; text matches exactly") {
    const fs::path dir = fresh_dir("report_show_where");
    write_text(dir / "cfg.json", R"({"name": "w", "seed": 3, "data": {"x": {"source": "gaussian", "shape": [4, 6], "std": 3}},
        "norms": {"ln": {"type": "layernorm", "axes": [-1]}, "bn": {"type": "batchnorm"}},
        "analyses": [{"type": "gradients", "data": ["x"], "norms": ["ln", "bn"], "upstream": "normal"}]})");
    const fs::path out = dir / "out";
    REQUIRE(run_normlab("run " + (dir / "cfg.json").string() + " --out " + out.string() + " -q").exit_code == 0);
    const auto rows = parse_csv(read_text(out / "gradients.csv"));
    const std::string cell = one(rows, {{"norm", "ln"}}).at("grad_ratio");
    const double v = std::stod(cell);
    // The cell holds the shortest round-trip form, which show shortens to 6 significant digits.
    char shown[32];
    std::snprintf(shown, sizeof shown, "%.6g", v);
    REQUIRE_MESSAGE(std::string(shown) != cell, cell);  // the case this test is about
    auto table = run_normlab("show " + out.string() + " gradients --columns norm,grad_ratio");
    REQUIRE(table.exit_code == 0);
    CHECK_MESSAGE(table.out.find(shown) != std::string::npos, table.out);

    auto kept = [&](const std::string& where) {
        const CliResult r = run_normlab("show " + out.string() + " gradients --columns norm --where 'grad_ratio=" + where + "'");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return r.out.substr(0, r.out.find(')') + 1);
    };
    const std::string one_row = "== gradients (1 of 2 rows, ", none = "== gradients (0 of 2 rows, ";
    // The displayed value and the CSV's full value match; a shorter rounding typed by hand
    // does not (it would widen eps=1e-5 to 1.2e-5).
    CHECK(kept(shown).rfind(one_row, 0) == 0);
    CHECK(kept(cell).rfind(one_row, 0) == 0);
    char three[32];
    std::snprintf(three, sizeof three, "%.3g", v);
    CHECK_MESSAGE(kept(three).rfind(none, 0) == 0, three);
    // A value that is not the cell's rounding at its own precision does not: the 6-digit
    // value two units off in its last digit.
    const double unit = std::pow(10.0, std::floor(std::log10(std::fabs(v))) - 5);  // of the 6th digit
    char off[32];
    std::snprintf(off, sizeof off, "%.5e", std::stod(shown) + 2 * unit);
    CHECK_MESSAGE(kept(off).rfind(none, 0) == 0, off);
    // More digits ask for more: the cell's 7-digit rounding matches, a 7-digit value three
    // units of its last digit off does not.
    char seven[32], seven_off[32];
    std::snprintf(seven, sizeof seven, "%.7g", v);
    std::snprintf(seven_off, sizeof seven_off, "%.6e", std::stod(seven) + 0.3 * unit);
    CHECK_MESSAGE(kept(seven).rfind(one_row, 0) == 0, seven);
    CHECK_MESSAGE(kept(seven_off).rfind(none, 0) == 0, seven_off);
    // Text matches exactly: "l" is not "ln".
    auto text = run_normlab("show " + out.string() + " gradients --columns norm --where norm=l");
    CHECK(text.out.rfind(none, 0) == 0);
}
