#pragma once
// report.html: one self-contained page per result folder (the config, a summary of each data
// entry, and per analysis its Vega-Lite figures plus a sortable table). The Vega builds are
// embedded (report/assets.hpp), so the page needs no network and no file beside it.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/figure.hpp"
#include "report/table.hpp"

namespace normlab {

/// One analysis type of a result: its table (the rows of <analysis>.csv) and figures.
struct ReportSection {
    std::string analysis;                   ///< the analysis type, e.g. "epsilon"
    std::string summary;                    ///< one line saying what it measures
    Table table;
    std::vector<std::string> lead_columns;  ///< shown first in the table (sweep columns, figure columns)
    std::vector<FigureSpec> figures;        ///< figure_specs() of the analysis' Figure
};

/// Tables longer than this show their first rows only and say so (the CSV has them all).
inline constexpr std::size_t kHtmlTableRows = 2000;

/// The page for `report` (the content of report.json: name, config, data, sweep, ...) and
/// its sections, in order. Non-finite cells are shown as nan/inf/-inf, marked and counted per
/// table; figures that fail to render say so in place of the figure.
std::string report_html(const nlohmann::ordered_json& report, const std::vector<ReportSection>& sections);

/// Every file the report adds to a result folder, as (relative path, bytes):
/// figures/<name>.vl.json for each figure, then report.html.
std::vector<std::pair<std::string, std::string>> report_files(const nlohmann::ordered_json& report,
                                                              const std::vector<ReportSection>& sections);

}  // namespace normlab
