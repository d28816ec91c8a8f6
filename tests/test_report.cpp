// report.html and its pieces: figures declared by the analyses, Vega-Lite specs (non-finite
// values kept and counted, sweeps faceted), the page, and terminal tables.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/analysis.hpp"
#include "report/assets.hpp"
#include "figure_util.hpp"
#include "report/figure.hpp"
#include "report/html.hpp"
#include "report/terminal.hpp"
#include "tensor/errors.hpp"

using namespace normlab;
using Json = nlohmann::ordered_json;
using namespace figure_test;

namespace {


Table small_table() {
    Table t;
    t.columns = {"data", "norm", "eps", "max_abs_diff", "shape"};
    t.add_row({std::string("x"), std::string("ln"), 1e-5, 0.5, std::string("[4,8,16]")});
    t.add_row({std::string("x"), std::string("bn"), 1e-5, std::nan(""), std::string("[4,8,16]")});
    t.add_row({std::string("y"), std::string("ln"), 1e-3, HUGE_VAL, std::string("[2,3]")});
    return t;
}

Figure bars_figure() {
    Figure f;
    f.title = "difference";
    f.category = {"data", "norm"};
    f.metrics = {{"max_abs_diff", "max |diff|"}};
    return f;
}

}  // namespace

TEST_CASE("every registered analysis declares a figure that reads only its own columns") {
    REQUIRE(analysis_types().size() >= 10);
    for (const auto& a : analysis_types()) {
        CAPTURE(a.name);
        const Figure& f = a.figure;
        CHECK_FALSE(f.title.empty());
        REQUIRE_FALSE(f.metrics.empty());
        for (const auto& c : f.columns()) {
            CAPTURE(c);
            CHECK(has(a.columns, c));
        }
        if (f.kind == FigureKind::lines) CHECK_FALSE(f.x.empty());
        else CHECK_FALSE(f.category.empty());
        for (const auto& m : f.metrics) CHECK((f.kind == FigureKind::ranges) == !m.column2.empty());
    }
}

TEST_CASE("table_from_json reads back table_to_json, non-finite values included") {
    const Table t = small_table();
    const Table back = table_from_json(table_to_json(t));
    REQUIRE(back.columns == t.columns);
    REQUIRE(back.rows.size() == 3);
    CHECK(std::get<std::string>(back.rows[0][4]) == "[4,8,16]");
    CHECK(std::isnan(std::get<double>(back.rows[1][3])));
    CHECK(std::get<double>(back.rows[2][3]) == HUGE_VAL);
    CHECK(std::get<double>(back.rows[0][2]) == 1e-5);
    CHECK_THROWS_AS(table_from_json(Json::parse(R"([{"a": 1}, {"b": 2}])")), std::invalid_argument);
    CHECK_THROWS_AS(table_from_json(Json::parse(R"([{"a": null}])")), std::invalid_argument);
}

TEST_CASE("figure specs keep non-finite values: drawn as notes and counted in the subtitle") {
    const auto specs = figure_specs("demo", bars_figure(), small_table(), {});
    REQUIRE(specs.size() == 1);
    const Json& s = specs[0].spec;
    CHECK(specs[0].name == "demo");
    CHECK(s["$schema"].get<std::string>().find("vega-lite") != std::string::npos);
    const std::string subtitle = s["title"]["subtitle"].get<std::string>();
    CHECK(subtitle.find("2 non-finite value(s) (1 nan, 1 inf)") != std::string::npos);
    const Json& v = values(s);
    REQUIRE(v.size() == 3);
    CHECK(v[0]["value"] == 0.5);
    CHECK(v[0]["note"].is_null());
    CHECK(v[1]["value"].is_null());
    CHECK(v[1]["note"] == "nan");
    CHECK(v[1]["nonfinite"] == true);
    CHECK(v[2]["note"] == "inf");
    // Labels join the columns that vary; the note layer draws the text where the bar would be.
    CHECK(v[0]["category"] == "x \u00b7 ln");
    CHECK(layers(s).size() == 2);
    CHECK(layers(s)[1]["mark"]["type"] == "text");
}

TEST_CASE("figure specs: an empty cell (not applicable) draws nothing and says nothing; text is a note") {
    Table t = small_table();
    t.rows[1][3] = std::string("refused");
    t.rows[2][3] = std::string();
    const auto specs = figure_specs("demo", bars_figure(), t, {});
    const Json& v = values(specs.at(0).spec);
    REQUIRE(v.size() == 3);
    CHECK(v[1]["value"].is_null());
    CHECK(v[1]["note"] == "refused");
    CHECK(v[2]["value"].is_null());
    CHECK(v[2]["note"].is_null());
    CHECK(v[2]["nonfinite"] == false);
}

TEST_CASE("figure specs: values <= 0 on a log axis are notes too; an unknown column is an error") {
    Figure f = bars_figure();
    f.log = true;
    Table t = small_table();
    t.rows[0][3] = 0.0;
    const Json s = figure_specs("demo", f, t, {})[0].spec;
    CHECK(s["title"]["subtitle"].get<std::string>().find("1 value(s) <= 0") != std::string::npos);
    CHECK(values(s)[0]["note"] == "0");
    CHECK(values(s)[0]["nonfinite"] == false);
    f.metrics = {{"no_such_column", "?"}};
    CHECK_THROWS_AS(figure_specs("demo", f, t, {}), std::invalid_argument);
}

TEST_CASE("figure specs: lines put rows whose x cannot sit on a log axis at the left edge") {
    Figure f = norm_lines("against eps", "eps", "max_abs_diff", "max |diff|");
    Table t = small_table();
    t.rows[0][2] = 0.0;
    const Json s = figure_specs("demo", f, t, {})[0].spec;
    CHECK(values(s)[0]["x_ok"] == false);
    CHECK(values(s)[0]["note"] == "eps = 0");
    CHECK(s["title"]["subtitle"].get<std::string>().find("1 row(s) with eps not on the log x axis") != std::string::npos);
    CHECK(layers(s)[0]["mark"]["type"] == "line");
    // Its edge a decade below the smallest eps on the axis (1e-5); without such rows, the data's own.
    CHECK(layers(s)[0]["encoding"]["x"]["scale"]["domainMin"] == doctest::Approx(1e-6));
    t.rows[0][2] = 1e-4;
    CHECK_FALSE(layers(figure_specs("demo", f, t, {})[0].spec)[0]["encoding"]["x"]["scale"].contains("domainMin"));
}

TEST_CASE("a swept figure has one labelled panel row per point and metric-against-swept-value figures") {
    // Four points (two eps by two tags) with identical rows: each must be told apart by its label.
    Table t;
    t.columns = {"point", "norms_ln_eps", "tag", "data", "norm", "max_abs_diff"};
    const double eps[] = {1e-7, 1e-7, 1e-1, 1e-1};
    for (int p = 0; p < 4; ++p)
        for (const char* norm : {"ln", "bn"})
            t.add_row({static_cast<long long>(p), eps[p], std::string(p % 2 ? "a" : "b"), std::string("x"),
                       std::string(norm), 0.25});
    const auto specs = figure_specs("demo", bars_figure(), t, {"norms_ln_eps", "tag"});
    REQUIRE(specs.size() == 2);  // "tag" is not numeric: no figure against it
    const Json& main = specs[0].spec;
    REQUIRE(main.contains("facet"));
    CHECK(main["facet"]["row"]["field"] == "sweep_point");
    std::set<std::string> labels;
    for (const auto& r : values(main)) labels.insert(r["sweep_point"].get<std::string>());
    CHECK(labels.size() == 4);
    CHECK(labels.count("point 2: norms_ln_eps = 0.1, tag = b") == 1);

    CHECK(specs[1].name == "demo_vs_norms_ln_eps");
    const Json& vs = specs[1].spec;
    CHECK(layers(vs)[0]["mark"]["type"] == "line");
    CHECK(layers(vs)[0]["encoding"]["x"]["field"] == "norms_ln_eps");
    CHECK(layers(vs)[0]["encoding"]["x"]["scale"]["type"] == "log");  // 1e-7..1e-1 spans 6 decades
    // One line per norm and value of the other swept column, one point per swept value.
    std::set<std::string> lines;
    for (const auto& r : values(vs)) lines.insert(r["series"].get<std::string>());
    CHECK(lines == std::set<std::string>{"ln \u00b7 tag=b", "bn \u00b7 tag=b", "ln \u00b7 tag=a", "bn \u00b7 tag=a"});
    CHECK(values(vs).size() == 8);
}

TEST_CASE("a swept summary is the max over the point's rows, and nan when any row is nan") {
    Table t;
    t.columns = {"point", "b", "data", "norm", "max_abs_diff"};
    t.add_row({0LL, 1.0, std::string("x"), std::string("ln"), 0.5});
    t.add_row({0LL, 1.0, std::string("x"), std::string("ln"), 0.75});
    t.add_row({1LL, 2.0, std::string("x"), std::string("ln"), 0.5});
    t.add_row({1LL, 2.0, std::string("x"), std::string("ln"), std::nan("")});
    const auto specs = figure_specs("demo", bars_figure(), t, {"b"});
    REQUIRE(specs.size() == 2);
    const Json& v = values(specs[1].spec);
    REQUIRE(v.size() == 2);
    CHECK(v[0]["value"] == 0.75);
    CHECK(v[1]["note"] == "nan");
}

TEST_CASE("a swept summary leaves empty cells out, and is empty only when every row is") {
    Table t;
    t.columns = {"point", "b", "data", "norm", "max_abs_diff"};
    t.add_row({0LL, 1.0, std::string("x"), std::string("ln"), std::string()});  // does not apply (depth's layer 0)
    t.add_row({0LL, 1.0, std::string("x"), std::string("ln"), 0.75});
    t.add_row({1LL, 2.0, std::string("x"), std::string("ln"), std::string()});
    t.add_row({2LL, 3.0, std::string("x"), std::string("ln"), std::string("refused")});
    t.add_row({2LL, 3.0, std::string("x"), std::string("ln"), 0.5});
    const auto specs = figure_specs("demo", bars_figure(), t, {"b"});
    REQUIRE(specs.size() == 2);
    const Json& v = values(specs[1].spec);
    REQUIRE(v.size() == 3);
    CHECK(v[0]["value"] == 0.75);
    CHECK(v[1]["value"].is_null());
    CHECK(v[1]["note"].is_null());
    CHECK(v[2]["note"] == "refused");
}

TEST_CASE("embedded Vega builds: present, versioned, and safe inside a script element") {
    for (const auto& s : {vega_script(), vega_lite_script(), vega_embed_script()}) {
        CHECK(s.js.size() > 10000);
        CHECK_FALSE(s.version.empty());
        std::string lower(s.js);
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        CHECK(lower.find("</script") == std::string::npos);
    }
    CHECK(vega_script().js.find("vega") != std::string_view::npos);
    CHECK(vega_embed_script().js.find("vegaEmbed") != std::string_view::npos);
}

TEST_CASE("report.html: scripts, escaped config, data summary and marked non-finite cells") {
    Json report = Json::parse(R"({"tool": "normlab", "normlab_version": "0.1.0", "name": "demo", "seed": 0,
        "dtype": "float32", "config": {"name": "demo", "data": {"<b>x</b>": {"source": "values"}}},
        "data": {"x": {"source": "values", "shape": [2, 3], "channel_axis": 1, "has_mask": true,
                       "pad_fraction": 0.25, "nonfinite_values": 3}}})");
    ReportSection s;
    s.analysis = "demo";
    s.summary = "a demo & more";
    s.table = small_table();
    s.lead_columns = {"max_abs_diff"};
    s.figures = figure_specs("demo", bars_figure(), s.table, {});
    // A string that would end the script element if written raw.
    s.figures[0].spec["description"] = "</script><script>alert(1)</script>";
    const std::string html = report_html(report, {s});
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find(std::string(vega_embed_script().js.substr(0, 200))) != std::string::npos);
    CHECK(html.find("&lt;b&gt;x&lt;/b&gt;") != std::string::npos);
    CHECK(html.find("<b>x</b>") == std::string::npos);
    CHECK(html.find("alert(1)</script>") == std::string::npos);
    CHECK(html.find("\\u003c/script>\\u003cscript>alert(1)") != std::string::npos);
    CHECK(html.find("a demo &amp; more") != std::string::npos);
    CHECK(html.find("id=\"fig-demo\"") != std::string::npos);
    CHECK(html.find("2 non-finite cell(s)") != std::string::npos);
    CHECK(html.find("<td class=\"num nonfinite\" data-v=\"nan\" title=\"nan\">nan</td>") != std::string::npos);
    CHECK(html.find("<td>[4,8,16]</td>") != std::string::npos);
    // The lead column comes first in the table header.
    CHECK(html.find("<thead><tr><th>max_abs_diff</th><th>data</th>") != std::string::npos);
    CHECK(html.find("\"shape\": [2, 3]") == std::string::npos);  // config has no shape; data row has
    CHECK(html.find("<td>[2,3]</td>") != std::string::npos);
    CHECK(html.find("<td class=\"num nonfinite\" data-v=\"3\">3</td>") != std::string::npos);
    // A summary without its own dtype (a report of an older version) shows the run's; one
    // with it, its own.
    CHECK(html.find("<td>[2,3]</td><td>float32</td>") != std::string::npos);
    report["data"]["x"]["dtype"] = "bfloat16";
    CHECK(report_html(report, {s}).find("<td>[2,3]</td><td>bfloat16</td>") != std::string::npos);

    const auto files = report_files(report, {s});
    REQUIRE(files.size() == 2);
    CHECK(files[0].first == "figures/demo.vl.json");
    CHECK(Json::parse(files[0].second)["title"]["text"] == "demo: difference");
    CHECK(files[1].first == "report.html");
}

TEST_CASE("terminal tables: aligned, 6 significant digits unless full, quoted cells whole") {
    Table t = small_table();
    t.rows[0][3] = 0.123456789;
    TerminalTableOptions o;
    const std::string text = terminal_table(t, o);
    // Numbers right-aligned under their header, text left-aligned.
    CHECK(text.find("data  norm    eps  max_abs_diff  shape\n----  ----  -----  ------------  --------\n"
                    "x     ln    1e-05      0.123457  [4,8,16]\n") == 0);
    CHECK(text.find("0.123457") != std::string::npos);
    CHECK(text.find("0.123456789") == std::string::npos);
    CHECK(text.find("[4,8,16]") != std::string::npos);
    CHECK(text.find("x     bn    1e-05           nan  [4,8,16]\n") != std::string::npos);
    o.full = true;
    CHECK(terminal_table(t, o).find("0.123456789") != std::string::npos);
    // Text longer than kTerminalTextWidth is cut with "..." and counted; whole with full.
    Table long_text = small_table();
    long_text.rows[0][1] = std::string(kTerminalTextWidth + 12, 'a');
    TerminalTableOptions lo;
    std::size_t cut = 7;
    const std::string shortened = terminal_table(long_text, lo, nullptr, &cut);
    CHECK(shortened.find(std::string(kTerminalTextWidth - 3, 'a') + "...  ") != std::string::npos);
    CHECK(shortened.find(std::string(kTerminalTextWidth - 2, 'a')) == std::string::npos);
    CHECK(cut == 1);
    lo.full = true;
    CHECK(terminal_table(long_text, lo, nullptr, &cut).find(std::string(kTerminalTextWidth + 12, 'a')) != std::string::npos);
    CHECK(cut == 0);

    o.columns = {"norm", "shape"};
    o.where = {parse_where("eps=0.00001")};  // matches 1e-05 by value
    CHECK(terminal_table(t, o) == "norm  shape\n----  --------\nln    [4,8,16]\nbn    [4,8,16]\n");
    o.where = {parse_where("shape=[2,3]")};
    CHECK(terminal_table(t, o) == "norm  shape\n----  -----\nln    [2,3]\n");
    o.columns = {"nope"};
    CHECK_THROWS_AS(terminal_table(t, o), InputError);
    CHECK_THROWS_AS(parse_where("novalue"), InputError);
}

TEST_CASE("labels leave out columns with one value; a series with one value gets no colour") {
    Figure f = bars_figure();
    f.series = {"eps"};
    Table t = small_table();
    const Json varying = figure_specs("demo", f, t, {})[0].spec;
    CHECK(values(varying)[2]["series"] == "eps=0.001");  // numbers say which column they are
    CHECK(layers(varying)[0]["encoding"]["color"]["title"] == "eps");
    for (auto& row : t.rows) {
        row[0] = std::string("x");  // one data: the labels name the norm only
        row[2] = 1e-5;              // one eps: no colour
    }
    const Json constant = figure_specs("demo", f, t, {})[0].spec;
    CHECK(values(constant)[0]["category"] == "ln");
    CHECK_FALSE(values(constant)[0].contains("series"));
    CHECK_FALSE(layers(constant)[0]["encoding"].contains("color"));
    CHECK(layers(constant)[0]["encoding"]["y"]["title"] == "norm");
}

TEST_CASE("padding figure: the norm as configured first; masked norms named and grey, their contamination hypothetical") {
    // Masked and unmasked BatchNorm have the same contamination columns (they compare the
    // statistics with and without padding whatever the mask); only re-padding differs.
    const AnalysisType* a = find_analysis("padding");
    REQUIRE(a != nullptr);
    Table t;
    t.columns = a->columns;
    for (const bool masked : {false, true}) {
        std::vector<Cell> row;
        for (const auto& c : t.columns) {
            if (c == "data") row.emplace_back(std::string("tokens"));
            else if (c == "norm") row.emplace_back(std::string(masked ? "bn_masked" : "bn"));
            else if (c == "masked") row.emplace_back(masked);
            else if (c == "repad_max_abs_diff") row.emplace_back(masked ? 0.0 : 1.3);
            else if (c == "mean_contamination_max") row.emplace_back(0.0843);
            else row.emplace_back(0.5);
        }
        t.add_row(row);
    }
    const Json s = figure_specs("padding", a->figure, t, {})[0].spec;
    const Json& v = values(s);
    REQUIRE(v.size() == 6);
    // The first panel is the configured norm's own result: re-padding.
    CHECK(v[0]["metric"].get<std::string>().find("re-padding") != std::string::npos);
    CHECK(v[1]["value"] == 0.0);
    CHECK(v[2]["metric"].get<std::string>().find("padding included") != std::string::npos);
    // The legend says what masked means, and masked rows have their own (grey) colour.
    CHECK(v[0]["series"] == "unmasked: padding included");
    CHECK(v[1]["series"] == "masked: padding excluded");
    const Json& scale = layers(s)[0]["encoding"]["color"]["scale"];
    CHECK(scale["domain"] == Json::array({"unmasked: padding included", "masked: padding excluded"}));
    CHECK(scale["range"][1] == "#a0a0a0");
    CHECK(scale["range"][0] != scale["range"][1]);
    // The title says so on a second line.
    REQUIRE(s["title"]["text"].is_array());
    CHECK(s["title"]["text"][1].get<std::string>().find("masked norms exclude padding") != std::string::npos);
}

TEST_CASE("figure cosmetics: a 0 bar is written, log bars have room, end dots unclipped, labels kept apart") {
    // Linear bars: a value of exactly 0 gets a text mark "0" at 0 (no bar to see otherwise;
    // test_report_figures.cpp has the tiny values).
    Table t = small_table();
    t.rows[1][3] = 0.0;
    const Json lin = figure_specs("demo", bars_figure(), t, {})[0].spec;
    CHECK(values(lin)[1]["label"] == "0");
    CHECK(values(lin)[0]["label"].is_null());
    bool zero_text = false;
    for (const auto& l : layers(lin))
        if (l["mark"]["type"] == "text" && l["encoding"].contains("text") && l["encoding"]["text"].contains("condition")) {
            zero_text = true;
            // No filter: a panel without labels would have no rows, an extent Vega warns of.
            CHECK_FALSE(l.contains("transform"));
            CHECK(l["encoding"]["text"]["condition"]["test"] == "datum.label != null");
            CHECK(l["encoding"]["text"]["condition"]["field"] == "label");
            CHECK(l["encoding"]["text"]["value"] == "");
            CHECK(l["encoding"]["x"]["field"] == "value");
        }
    CHECK(zero_text);
    // Linear axes drop labels that would touch ("0.0350.04").
    CHECK(layers(lin)[0]["encoding"]["x"]["axis"]["labelOverlap"] == true);
    CHECK(layers(lin)[0]["encoding"]["x"]["axis"]["labelSeparation"].get<int>() > 0);
    // One panel: wider than three panels in a row.
    CHECK(lin["width"].get<int>() > 300);

    // Log bars start at the left edge: the scale is padded so that the smallest value
    // (1.2e-13 beside 1e-4) is a bar, not a sliver at the axis minimum.
    Figure f = bars_figure();
    f.log = true;
    t.rows[0][3] = 1.2e-13;
    t.rows[1][3] = 1e-4;
    t.rows[2][3] = 0.5;
    const Json lg = figure_specs("demo", f, t, {})[0].spec;
    CHECK(layers(lg)[0]["encoding"]["x"]["scale"]["type"] == "log");
    CHECK(layers(lg)[0]["encoding"]["x"]["scale"]["padding"].get<int>() >= 8);

    // Ranges and lines: the dots at the ends of the domain (a std of 1) are not clipped.
    Figure r;
    r.title = "ranges";
    r.kind = FigureKind::ranges;
    r.category = {"data", "norm"};
    r.metrics = {{"eps", "range", "max_abs_diff"}};
    const Json rs = figure_specs("demo", r, small_table(), {})[0].spec;
    REQUIRE(layers(rs).size() >= 3);
    CHECK(layers(rs)[1]["mark"]["type"] == "point");
    CHECK(layers(rs)[1]["mark"]["clip"] == false);
    CHECK(layers(rs)[2]["mark"]["clip"] == false);
    Figure l;
    l.title = "lines";
    l.kind = FigureKind::lines;
    l.x = "eps";
    l.metrics = {{"max_abs_diff", "max |diff|"}};
    const Json ls = figure_specs("demo", l, small_table(), {})[0].spec;
    CHECK(layers(ls)[0]["mark"]["point"]["clip"] == false);
}

TEST_CASE("in a sweep, a series column with one value per point leaves the labels: each stack keeps one colour") {
    // A swept depth: every point's stacks have that point's layers; two stacks per point.
    Figure f;
    f.title = "per layer";
    f.kind = FigureKind::lines;
    f.x = "layer";
    f.series = {"stack", "layers"};
    f.metrics = {{"grad", "gradient"}};
    Table t;
    t.columns = {"point", "depth", "stack", "layers", "layer", "grad"};
    for (const long long layers : {2LL, 4LL})
        for (const char* stack : {"pre", "post"})
            for (long long l = 1; l <= layers; ++l)
                t.add_row({layers / 2 - 1, static_cast<double>(layers), std::string(stack), layers, l, 1.0 / double(l)});
    // The series labels of the main figure.
    auto labels_of = [&](const Table& table) {
        const Json spec = figure_specs("demo", f, table, {"depth"})[0].spec;
        std::set<std::string> out;
        for (const auto& v : values(spec)) out.insert(v["series"].get<std::string>());
        return out;
    };
    CHECK(labels_of(t) == std::set<std::string>{"pre", "post"});
    // Two stacks of different depths in one point: layers separates their lines there.
    t.add_row({1LL, 4.0, std::string("pre"), 8LL, 1LL, 0.5});
    const auto labels = labels_of(t);
    CHECK(labels.count("pre \u00b7 layers=8") == 1);
    CHECK(labels.count("post \u00b7 layers=2") == 1);
}

TEST_CASE("a swept value from 0 (eps 0, 1e-6, 1e-4, 1e-2) gets a log x axis; the 0 is a triangle at the left edge") {
    Table t;
    t.columns = {"point", "eps", "data", "norm", "max_abs_diff"};
    const double eps[] = {0, 1e-6, 1e-4, 1e-2};
    for (long long p = 0; p < 4; ++p) t.add_row({p, eps[p], std::string("x"), std::string("ln"), 0.5 + double(p)});
    auto vs_spec = [&]() { return figure_specs("demo", bars_figure(), t, {"eps"}).at(1).spec; };
    const Json vs = vs_spec();
    CHECK(layers(vs)[0]["encoding"]["x"]["scale"]["type"] == "log");
    const Json& v = values(vs);
    REQUIRE(v.size() == 4);
    CHECK(v[0]["x_ok"] == false);
    CHECK(v[0]["eps"].is_null());
    CHECK(v[0]["value"] == 0.5);  // the triangle is drawn at its value
    CHECK(v[0]["note"] == "eps = 0");
    CHECK(v[1]["x_ok"] == true);
    bool triangle = false;
    for (const auto& l : layers(vs)) triangle = triangle || (l["mark"].value("shape", "") == "triangle-left");
    CHECK(triangle);
    // The left edge, where the triangle is, lies a decade below the smallest eps: not on its point.
    CHECK(layers(vs)[0]["encoding"]["x"]["scale"]["domainMin"] == doctest::Approx(1e-7));
    CHECK(layers(vs)[0]["encoding"]["x"]["axis"]["values"].front() == doctest::Approx(1e-6));
    CHECK(vs["title"]["subtitle"].get<std::string>().find("1 row(s) with eps not on the log x axis") != std::string::npos);
    // Two values, or a negative one: linear, every row on the axis.
    t.rows.resize(2);
    CHECK_FALSE(layers(vs_spec())[0]["encoding"]["x"].contains("scale"));
    t.rows[0][1] = -1e-6;
    t.add_row({2LL, 1e-2, std::string("x"), std::string("ln"), 1.0});
    CHECK_FALSE(layers(vs_spec())[0]["encoding"]["x"].contains("scale"));
}
