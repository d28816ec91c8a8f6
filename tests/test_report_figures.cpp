// Rules every figure of report.html keeps, checked on the figures the analyses declare and
// on the shared figure code: no two results drawn at one position.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "analysis/analysis.hpp"
#include "report/figure.hpp"

using namespace normlab;
using Json = nlohmann::ordered_json;

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

const Json& values(const Json& spec) { return spec.at("data").at("values"); }

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
