// Rules every figure of report.html keeps, checked on the figures the analyses declare and
// on the shared figure code: no two results drawn at one position, series told apart
// however many there are, and no bar too short to see without its value written.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "analysis/analysis.hpp"
#include "figure_util.hpp"
#include "report/figure.hpp"

using namespace normlab;
using Json = nlohmann::ordered_json;
using namespace figure_test;

namespace {


// The columns whose values identify what a figure draws, per analysis: rows that differ in
// one of them are different results. Analyses of one type share a table, so columns that
// record an analysis' own keys (port_check's steps, batch_dependence's sample, depth's
// draws) are among them; columns that these determine (a norm's type and eps, port_check's
// rank within one comparison, which repeats its max_abs_diff) are not. Left out as well:
// precision's work_dtype (its accumulate key) and equivalence's shape_a/shape_b (its reshape
// key): they change with the algorithm or the norm within one analysis, so labels made of
// them would split every figure of those analyses.
const std::map<std::string, std::vector<std::string>> kDrawnKeys = {
    {"stats_shapes", {"data", "norm"}},
    {"apply", {"data", "norm", "step"}},
    {"epsilon", {"data", "norm", "dtype", "eps", "scale"}},
    {"padding", {"data", "norm"}},
    {"equivalence", {"data", "norm_a", "norm_b"}},
    {"invariance", {"data", "norm", "transform", "granularity"}},
    {"batch_dependence", {"data", "norm", "batch_size", "kind", "mates", "sample"}},
    {"train_eval", {"data", "norm", "batch_size", "step"}},
    {"depth", {"data", "stack", "layers", "draws", "layer"}},
    {"precision", {"data", "norm", "dtype", "algorithm"}},
    {"port_check", {"data", "reference", "port", "steps"}},
    {"gradients", {"data", "norm", "upstream"}},
    {"jacobian", {"data", "norm", "group"}},
};

// Where a long-format row of a main figure is drawn: its sweep row, panel and metric, and
// its category (bars, ranges) or x (lines) and series (bars side by side, lines).
std::string position(const Json& r, const Figure& f) {
    std::string s;
    for (const char* k : {"sweep_point", "panel", "metric", "category", "series"})
        s += (r.contains(k) ? r[k].dump() : "-") + "|";
    if (f.kind == FigureKind::lines) s += r[f.x].dump();
    return s;
}

// A table with the columns `columns`, a row per entry of `rows` (column -> cell); cells not
// given are 1.
Table table_of(const std::vector<std::string>& columns, const std::vector<std::map<std::string, Cell>>& rows) {
    Table t;
    t.columns = columns;
    for (const auto& given : rows) {
        std::vector<Cell> row;
        for (const auto& c : columns) row.push_back(given.count(c) ? given.at(c) : Cell(1LL));
        t.add_row(row);
    }
    return t;
}

// A lines figure of n series ("s0", "s1", ...), two points each; ranges with `ranges`.
Json many_series(int n, bool ranges = false) {
    Figure f;
    f.title = "many";
    f.kind = ranges ? FigureKind::ranges : FigureKind::lines;
    if (ranges) f.category = {"data"};
    else f.x = "x";
    f.series = {"norm"};
    f.metrics = {ranges ? FigureMetric("lo", "range", "hi") : FigureMetric("y", "y")};
    std::vector<std::map<std::string, Cell>> rows;
    for (int k = 0; k < n; ++k)
        for (long long x : {1LL, 2LL})
            rows.push_back({{"data", std::string("d") + std::to_string(x)}, {"norm", "s" + std::to_string(k)},
                            {"x", x}, {"y", 0.5 * k}, {"lo", 0.0}, {"hi", 1.0}});
    return figure_specs("demo", f, table_of({"data", "norm", "x", "y", "lo", "hi"}, rows), {})[0].spec;
}

// How each series looks in layer `layer`: its colour slot (position in the scale's domain,
// cycled over the scheme's colours), dash pattern and shape (empty when not encoded).
std::set<std::string> looks(const Json& spec, std::size_t layer) {
    const Json& enc = layers(spec)[layer]["encoding"];
    const Json& domain = enc["color"]["scale"]["domain"];
    const std::string scheme = enc["color"]["scale"]["scheme"];
    const std::size_t colours = scheme == "tableau20" ? 20 : 10;
    std::set<std::string> out;
    for (std::size_t k = 0; k < domain.size(); ++k) {
        std::string look = std::to_string(k % colours);
        for (const char* channel : {"strokeDash", "shape"})
            if (enc.contains(channel)) {
                REQUIRE(enc[channel]["scale"]["domain"] == domain);
                look += "|" + enc[channel]["scale"]["range"][k].dump();
            }
        out.insert(look);
    }
    return out;
}

}  // namespace

TEST_CASE("no figure draws two results at one position: its labels hold every column that identifies one") {
    REQUIRE(analysis_types().size() >= 10);
    for (const auto& a : analysis_types()) {
        CAPTURE(a.name);
        const auto key = kDrawnKeys.find(a.name);
        REQUIRE_MESSAGE(key != kDrawnKeys.end(), "list the columns that identify what its figure draws");
        const Figure& f = a.figure;
        std::vector<std::string> placed = f.category;
        placed.push_back(f.x);
        placed.insert(placed.end(), f.series.begin(), f.series.end());
        placed.insert(placed.end(), f.panels.begin(), f.panels.end());
        for (const auto& k : key->second) {
            CAPTURE(k);
            CHECK(has(a.columns, k));
            CHECK(has(placed, k));
            // Two rows that differ in k alone: the shared figure code must draw two marks.
            const Table t = table_of(a.columns, {{{k, Cell(1LL)}}, {{k, Cell(2LL)}}});
            const Json spec = figure_specs(a.name, f, t, {})[0].spec;
            std::set<std::string> at;
            for (const auto& r : values(spec)) at.insert(position(r, f));
            CHECK(at.size() == values(spec).size());
        }
    }
}

TEST_CASE("port_check: the same pair with and without training steps are two bars, labelled with the steps") {
    const AnalysisType* a = find_analysis("port_check");
    REQUIRE(a != nullptr);
    // Two analyses on the same data and reference, one with "steps": 20: four rows.
    std::vector<std::map<std::string, Cell>> rows;
    const std::vector<double> diffs = {0.44, 0.0, 0.80, 0.3};
    for (int k = 0; k < 4; ++k)
        rows.push_back({{"data", std::string("tokens")}, {"reference", std::string("ln_torch")},
                        {"port", std::string(k % 2 ? "ln_keras" : "ln_onnx")}, {"steps", Cell(k < 2 ? 0LL : 20LL)},
                        {"max_abs_diff", diffs[static_cast<std::size_t>(k)]}});
    const Json spec = figure_specs("port_check", a->figure, table_of(a->columns, rows), {})[0].spec;
    std::set<std::string> categories;
    for (const auto& r : values(spec)) categories.insert(r["category"].get<std::string>());
    CHECK(categories.size() == 4);
    CHECK(categories.count("ln_onnx \u00b7 steps=20") == 1);
    CHECK(categories.count("ln_keras \u00b7 steps=0") == 1);
    // One steps value: the label leaves it out.
    rows.resize(2);
    const Json one = figure_specs("port_check", a->figure, table_of(a->columns, rows), {})[0].spec;
    CHECK(values(one)[0]["category"] == "ln_onnx");
}

TEST_CASE("series colours: tableau10 up to 10 series, tableau20 up to 20, beyond that a dash and a shape too") {
    const Json few = many_series(5);
    CHECK(layers(few)[0]["encoding"]["color"]["scale"]["scheme"] == "tableau10");
    CHECK_FALSE(layers(few)[0]["encoding"].contains("strokeDash"));
    const Json some = many_series(13);
    CHECK(layers(some)[0]["encoding"]["color"]["scale"]["scheme"] == "tableau20");
    CHECK(looks(some, 0).size() == 13);
    CHECK_FALSE(layers(some)[0]["encoding"].contains("strokeDash"));
    // 45 lines: colours repeat, colour and dash do not; the line's dots take the shape.
    const Json lots = many_series(45);
    CHECK(layers(lots)[0]["encoding"].contains("strokeDash"));
    CHECK(layers(lots)[0]["encoding"].contains("shape"));
    CHECK(looks(lots, 0).size() == 45);
    // Ranges: the rules take the dash, the end dots the shape; one legend (same field and title).
    const Json ranges = many_series(25, true);
    const Json& rule = layers(ranges)[0]["encoding"];
    CHECK(rule.contains("strokeDash"));
    CHECK(rule["strokeDash"]["title"] == rule["color"]["title"]);
    CHECK(layers(ranges)[1]["encoding"].contains("shape"));
    CHECK(looks(ranges, 0).size() == 25);
    CHECK(looks(ranges, 1).size() == 25);
}

TEST_CASE("bars: a value of 0 or too small to see against its axis is written beside the bar, per panel") {
    Figure f;
    f.title = "ratio";
    f.category = {"norm"};
    f.metrics = {{"ratio", "ratio"}, {"share", "share"}};
    // rms(dx)/rms(dy) with an upstream of ones: 1e-17 beside BatchNorm's 1; float32 rounding
    // (1e-6) beside a real change is under a pixel too.
    const Table t = table_of({"norm", "ratio", "share"}, {{{"norm", std::string("ln")}, {"ratio", 2.3e-17}, {"share", 1e-12}},
                                                          {{"norm", std::string("bn")}, {"ratio", 1.0}, {"share", 2e-12}},
                                                          {{"norm", std::string("rms")}, {"ratio", -6e-17}, {"share", 0.0}},
                                                          {{"norm", std::string("gn")}, {"ratio", 9.5e-7}, {"share", 3e-12}},
                                                          {{"norm", std::string("in")}, {"ratio", 0.01}, {"share", 3e-12}}});
    const Json spec = figure_specs("demo", f, t, {})[0].spec;
    const Json& v = values(spec);
    REQUIRE(v.size() == 10);
    CHECK(v[0]["label"] == "2.3e-17");
    CHECK(v[1]["label"].is_null());
    CHECK(v[2]["label"] == "-6e-17");
    CHECK(v[3]["label"] == "9.5e-7");
    CHECK(v[4]["label"].is_null());  // 1% of the axis: a short bar, but one to see
    // The share panel has its own axis, up to 3e-12: 1e-12 is a bar there; 0 is written.
    CHECK(v[5]["label"].is_null());
    CHECK(v[7]["label"] == "0");
    bool text = false;
    for (const auto& l : layers(spec))
        if (l["mark"]["type"] == "text" && l["encoding"]["text"].contains("condition")) {
            text = true;
            CHECK(l["encoding"]["text"]["condition"]["field"] == "label");
            CHECK(l["encoding"]["x"]["field"] == "value");
        }
    CHECK(text);
    // One metric: one axis for every panel.
    f.metrics.pop_back();
    f.panels = {"norm"};
    CHECK(values(figure_specs("demo", f, t, {})[0].spec)[3]["label"] == "9.5e-7");
    // Two significant digits, plain between 1e-3 and 100: padding's BatchNorm (0.4166) beside
    // InstanceNorm's 4293 read "4e-1" with one.
    f.panels.clear();
    // The form follows the exponent after rounding: 99.95 is 1.0e2, 0.0009999 is 0.001.
    const std::vector<std::pair<double, std::string>> shown = {
        {0.4166, "0.42"}, {3.0, "3"}, {-0.42, "-0.42"}, {99.95, "1e2"}, {0.0009999, "0.001"}, {0.00099, "9.9e-4"}, {250.0, "2.5e2"}};
    std::vector<std::map<std::string, Cell>> wide_rows;
    for (std::size_t i = 0; i < shown.size(); ++i)
        wide_rows.push_back({{"norm", "n" + std::to_string(i)}, {"ratio", shown[i].first}});
    wide_rows.push_back({{"norm", std::string("in")}, {"ratio", 1e6}});
    const auto wide_specs = figure_specs("demo", f, table_of({"norm", "ratio"}, wide_rows), {});
    for (std::size_t i = 0; i < shown.size(); ++i) {
        CAPTURE(shown[i].first);
        CHECK(values(wide_specs[0].spec)[i]["label"] == shown[i].second);
    }
    // A log axis has room for them: no labels there.
    f.log = true;
    const auto log_specs = figure_specs("demo", f, t, {});  // kept: the loop reads into it
    for (const auto& r : values(log_specs[0].spec)) CHECK_FALSE(r.contains("label"));
}

TEST_CASE("lines: a row the norm refused is drawn as \"refused\", and series all at 0 are named in the subtitle") {
    const Figure f = norm_lines("batch", "batch_size", "max_abs_diff", "change");
    const std::vector<std::string> columns = {"norm", "batch_size", "max_abs_diff", "status"};
    std::vector<std::map<std::string, Cell>> rows;
    for (long long n : {1LL, 2LL, 8LL}) {
        // BatchNorm refuses one sample; LayerNorm and RMSNorm do not depend on the batch.
        if (n == 1) rows.push_back({{"norm", "bn"}, {"batch_size", n}, {"max_abs_diff", Cell(std::string())},
                                    {"status", std::string("error: one value per channel")}});
        else rows.push_back({{"norm", "bn"}, {"batch_size", n}, {"max_abs_diff", 0.5 / n}, {"status", std::string("ok")}});
        for (const char* zero : {"ln", "rms"})
            rows.push_back({{"norm", std::string(zero)}, {"batch_size", n}, {"max_abs_diff", 0.0}, {"status", std::string("ok")}});
    }
    const Json spec = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    int refused = 0;
    for (const auto& r : values(spec))
        if (r["note"] == "refused") {
            ++refused;
            CHECK(r["series"] == "bn");
            CHECK(r["batch_size"] == 1);
        }
    CHECK(refused == 1);
    const Json& subtitle = spec["title"]["subtitle"];
    REQUIRE(subtitle.is_array());
    CHECK(subtitle[0].get<std::string>().find("1 row(s) refused by the norm") != std::string::npos);
    CHECK(subtitle[1] == "2 series are exactly 0 everywhere, drawn one over another: ln, rms");
    // One series at 0 hides nothing: no such line.
    rows.erase(std::remove_if(rows.begin(), rows.end(), [](const auto& r) { return std::get<std::string>(r.at("norm")) == "rms"; }),
               rows.end());
    const Json one = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    REQUIRE(one["title"]["subtitle"].is_string());
    CHECK(one["title"]["subtitle"].get<std::string>().find("exactly 0") == std::string::npos);
    // Many long labels: lines of about 100 characters at most, every label in one of them.
    rows.clear();
    for (int k = 0; k < 12; ++k)
        for (long long n : {2LL, 8LL})
            rows.push_back({{"norm", "a_rather_long_norm_name_" + std::to_string(k)}, {"batch_size", n}, {"max_abs_diff", 0.0},
                            {"status", std::string("ok")}});
    const Json many = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    std::string all;
    for (const auto& line : many["title"]["subtitle"]) {
        CHECK(line.get<std::string>().size() <= 100);
        all += line.get<std::string>() + " ";
    }
    for (int k = 0; k < 12; ++k) CHECK(all.find("a_rather_long_norm_name_" + std::to_string(k) + (k < 11 ? "," : " ")) != std::string::npos);
}

TEST_CASE("lines: series with the same values at every point are named in the subtitle, whatever the values") {
    // GroupNorm does not depend on a BatchNorm's eps: swept together, its two lines coincide.
    const Figure f = norm_lines("batch", "batch_size", "max_abs_diff", "change");
    const std::vector<std::string> columns = {"norm", "batch_size", "max_abs_diff"};
    std::vector<std::map<std::string, Cell>> rows;
    for (long long n : {2LL, 8LL, 32LL}) {
        for (const char* same : {"gn_a", "gn_b"})
            rows.push_back({{"norm", std::string(same)}, {"batch_size", n}, {"max_abs_diff", 0.3 / n}});
        rows.push_back({{"norm", std::string("bn")}, {"batch_size", n}, {"max_abs_diff", 0.5 / n}});
        // Equal to the others at one point only: not the same line.
        rows.push_back({{"norm", std::string("in")}, {"batch_size", n}, {"max_abs_diff", n == 2 ? 0.15 : 0.2}});
    }
    const Json spec = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    CHECK(spec["title"]["subtitle"] == "2 series draw the same line, one over another: gn_a, gn_b");
    rows.erase(std::remove_if(rows.begin(), rows.end(), [](const auto& r) { return std::get<std::string>(r.at("norm")) == "gn_b"; }),
               rows.end());
    const Json none = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    CHECK_FALSE(none["title"].contains("subtitle"));
}

TEST_CASE("lines: lines on one another are found panel by panel, and within half a pixel") {
    // Two panels: "growth" (about 1 to 3) and "share" (0 for ln and rms, not for bn).
    Figure f = norm_lines("per layer", "layer", "growth", "growth");
    f.x_log = false;
    f.metrics.push_back(FigureMetric("share", "share"));
    const std::vector<std::string> columns = {"point", "eps", "norm", "layer", "growth", "share"};
    std::vector<std::map<std::string, Cell>> rows;
    // At point 1 rms's growth parts from ln's by 1/100 of the axis (3): a line of its own.
    for (long long p : {0LL, 1LL})
        for (long long l : {1LL, 2LL, 3LL}) {
            rows.push_back({{"point", p}, {"norm", std::string("bn")}, {"layer", l}, {"growth", 1.0 + l * 2.0 / 3},
                            {"share", 0.1 * l}});
            // ln and rms agree to 1e-5 (a 3e-6 of the axis): one line over the other
            rows.push_back({{"point", p}, {"norm", std::string("ln")}, {"layer", l}, {"growth", 1.00325}, {"share", 0.0}});
            rows.push_back({{"point", p}, {"norm", std::string("rms")}, {"layer", l},
                            {"growth", p == 0 ? 1.00326 : 1.03325}, {"share", 0.0}});
        }
    for (auto& r : rows) r["eps"] = 0.1 * double(std::get<long long>(r.at("point")) + 1);
    auto subtitle = [&](const std::vector<std::string>& sweep) {
        const Json t = figure_specs("gradients", f, table_of(columns, rows), sweep).at(0).spec["title"];
        std::vector<std::string> lines;
        if (t.contains("subtitle"))
            for (const auto& l : t["subtitle"].is_array() ? t["subtitle"] : Json::array({t["subtitle"]})) lines.push_back(l);
        return lines;
    };
    // A sweep over eps, one row of panels per point: at point 1 growth has two lines.
    CHECK(subtitle({"eps"}) ==
          std::vector<std::string>{"2 series are exactly 0 in share, drawn one over another: ln, rms",
                                   "2 series draw the same line in growth at 1 of 2 sweep points, one over another: ln, rms"});
    // Point 0 alone, as a table without a sweep.
    rows.erase(std::remove_if(rows.begin(), rows.end(),
                              [](const auto& r) { return std::get<long long>(r.at("point")) == 1; }),
               rows.end());
    CHECK(subtitle({}) == std::vector<std::string>{"2 series are exactly 0 in share, drawn one over another: ln, rms",
                                                    "2 series draw the same line in growth, one over another: ln, rms"});
    // Within half a pixel (1/400 of the axis, 0 to 3) is the same line; beyond it is not.
    const std::vector<std::string> zero_only = {"2 series are exactly 0 in share, drawn one over another: ln, rms"};
    auto set_rms = [&](double growth) {
        for (auto& r : rows)
            if (std::get<std::string>(r.at("norm")) == "rms") r["growth"] = growth;
    };
    set_rms(1.00325 + 3.0 / 400 * 0.99);
    CHECK(subtitle({}).size() == 2);
    set_rms(1.00325 + 3.0 / 400 * 1.01);
    CHECK(subtitle({}) == zero_only);
    // On a log axis, half a pixel of the decades spanned (log10 3 - log10 1.00325); the zeros
    // cannot be drawn there, so they hide nothing.
    f.log = true;
    const double half_pixel = (std::log10(3.0) - std::log10(1.00325)) / 400;
    const std::string growth_line = "2 series draw the same line in growth, one over another: ln, rms";
    set_rms(1.00325 * std::pow(10.0, 0.99 * half_pixel));
    CHECK(has(subtitle({}), growth_line));
    CHECK_FALSE(has(subtitle({}), zero_only[0]));
    set_rms(1.00325 * std::pow(10.0, 1.01 * half_pixel));
    CHECK_FALSE(has(subtitle({}), growth_line));
    f.log = false;
    // Two rows of one series at one x (two analyses sharing a table): every value counts,
    // the earlier 0.5 as well as the later 0.
    std::vector<std::map<std::string, Cell>> both;
    for (auto r : rows)
        if (std::get<std::string>(r.at("norm")) == "ln") {
            r["share"] = 0.5;
            both.push_back(r);
        }
    rows.insert(rows.begin(), both.begin(), both.end());
    CHECK(subtitle({}).empty());
}

TEST_CASE("invariance: every bar's colour carries its verdict, also when all rows share one") {
    const Figure& f = find_analysis("invariance")->figure;
    const std::vector<std::string> columns = {"data", "norm", "transform", "granularity", "max_abs_diff", "invariant"};
    for (bool mixed : {true, false}) {
        CAPTURE(mixed);
        std::vector<std::map<std::string, Cell>> rows;
        for (const char* g : {"batch", "sample", "channel"})
            rows.push_back({{"data", std::string("x")}, {"norm", std::string("in")}, {"transform", std::string("scale")},
                            {"granularity", std::string(g)}, {"max_abs_diff", 0.6},
                            {"invariant", mixed && std::string(g) == "channel" ? false : true}});
        const Json spec = figure_specs("invariance", f, table_of(columns, rows), {}).at(0).spec;
        std::set<std::string> labels;
        for (const auto& r : values(spec)) labels.insert(r["series"].get<std::string>());
        CHECK(labels.count("batch · invariant"));
        CHECK(labels.count(mixed ? "channel · not invariant" : "channel · invariant"));
        // The fixed colours, not the scheme: invariant ones cool, the others warm.
        CHECK(spec.dump().find("#4c78a8") != std::string::npos);
        CHECK(spec.dump().find("tableau") == std::string::npos);
    }
}

TEST_CASE("lines: series without a number anywhere are not called the same line") {
    const Figure f = norm_lines("batch", "batch_size", "max_abs_diff", "change");
    const std::vector<std::string> columns = {"norm", "batch_size", "max_abs_diff"};
    std::vector<std::map<std::string, Cell>> rows;
    for (long long n : {2LL, 8LL})
        for (const char* norm : {"a", "b", "c"})
            rows.push_back({{"norm", std::string(norm)}, {"batch_size", n},
                            {"max_abs_diff", std::string(norm) == "c" ? Cell(0.5) : Cell(std::nan(""))}});
    const Json spec = figure_specs("batch_dependence", f, table_of(columns, rows), {}).at(0).spec;
    CHECK(spec["title"].dump().find("the same line") == std::string::npos);
}

TEST_CASE("a sweep's summary figure says \"refused\" and names the series at 0 as the main figure does") {
    const Figure f = norm_lines("batch", "batch_size", "max_abs_diff", "change");
    const std::vector<std::string> columns = {"point", "std", "norm", "batch_size", "max_abs_diff", "status"};
    std::vector<std::map<std::string, Cell>> rows;
    for (long long p : {0LL, 1LL})
        for (long long n : {1LL, 4LL}) {
            const double std_dev = p == 0 ? 1.0 : 2.0;
            // A norm that refuses every batch (unsynchronised replicas of one sample each): its
            // summary at each point is empty. BatchNorm refuses only n = 1: its summary is 0.25.
            rows.push_back({{"point", p}, {"std", std_dev}, {"norm", std::string("bn_1")}, {"batch_size", n},
                            {"max_abs_diff", Cell(std::string())}, {"status", std::string("error: one value per channel")}});
            rows.push_back({{"point", p}, {"std", std_dev}, {"norm", std::string("bn")}, {"batch_size", n},
                            {"max_abs_diff", n == 1 ? Cell(std::string()) : Cell(0.25)},
                            {"status", std::string(n == 1 ? "error: one value per channel" : "ok")}});
            for (const char* zero : {"ln", "rms"})
                rows.push_back({{"point", p}, {"std", std_dev}, {"norm", std::string(zero)}, {"batch_size", n},
                                {"max_abs_diff", 0.0}, {"status", std::string("ok")}});
        }
    const auto specs = figure_specs("batch_dependence", f, table_of(columns, rows), {"std"});
    REQUIRE(specs.size() == 2);
    CHECK(specs[1].name == "batch_dependence_vs_std");
    const Json& vs = specs[1].spec;
    int refused = 0;
    for (const auto& r : values(vs))
        if (r["note"] == "refused") {
            ++refused;
            CHECK(r["series"] == "bn_1");
        } else {
            CHECK(!r["value"].is_null());
        }
    CHECK(refused == 2);  // bn_1 at each of the two points
    const Json& subtitle = vs["title"]["subtitle"];
    REQUIRE(subtitle.is_array());
    CHECK(subtitle[0].get<std::string>().find("2 row(s) refused by the norm") != std::string::npos);
    CHECK(subtitle[1] == "2 series are exactly 0 everywhere, drawn one over another: ln, rms");
}

TEST_CASE("a swept depth's summary figure: the last layer's value, one line per stack, one figure for zipped paths") {
    // Two stacks whose layers are swept together (a zip): each point's rows run over the
    // layers; the gradient is largest at layer 1 (3 everywhere) and falls with depth at the last.
    Figure f = norm_lines("per layer", "layer", "grad", "gradient");
    f.series = {"stack", "layers"};
    f.sweep_summary = SweepSummary::last;
    const std::vector<std::string> columns = {"point", "stacks_a_layers", "stacks_b_layers", "stack", "layers", "layer", "grad"};
    std::vector<std::map<std::string, Cell>> rows;
    long long point = 0;
    for (long long L : {2LL, 4LL, 8LL}) {
        for (const char* stack : {"a", "b"})
            for (long long l = 1; l <= L; ++l)
                rows.push_back({{"point", point}, {"stacks_a_layers", L}, {"stacks_b_layers", L},
                                {"stack", std::string(stack)}, {"layers", L}, {"layer", l},
                                {"grad", l == 1 ? 3.0 : (std::string(stack) == "a" ? 1.0 : 2.0) / static_cast<double>(L)}});
        ++point;
    }
    const auto specs = figure_specs("depth", f, table_of(columns, rows), {"stacks_a_layers", "stacks_b_layers"});
    REQUIRE(specs.size() == 2);  // the main figure and one _vs_ figure: b's layers follow a's
    CHECK(specs[1].name == "depth_vs_stacks_a_layers");
    const Json& vs = specs[1].spec;
    CHECK(vs["title"]["text"].get<std::string>().find("at each point's largest layer") != std::string::npos);
    std::map<std::string, std::vector<double>> lines;
    for (const auto& r : values(vs)) lines[r["series"].get<std::string>()].push_back(r["value"].get<double>());
    REQUIRE(lines.size() == 2);  // "a" and "b": not a line per point (layers=2 ...)
    CHECK(lines["a"] == std::vector<double>{0.5, 0.25, 0.125});
    CHECK(lines["b"] == std::vector<double>{1.0, 0.5, 0.25});
}
