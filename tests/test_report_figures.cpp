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

const Json& values(const Json& spec) { return spec.at("data").at("values"); }

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
