#pragma once
// Figures of report.html. Each analysis declares one Figure: what to draw from which columns
// of its table. figure_specs() turns a Figure and the table into Vega-Lite specifications
// (https://vega.github.io/vega-lite/docs/), written with nlohmann::json: the main figure,
// and with a sweep one "metric against swept value" figure per numeric swept column.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/table.hpp"

namespace normlab {

/// The chart type of a Figure.
enum class FigureKind {
    bars,    ///< horizontal bars: one row per category label, the value along x; series side by side
    lines,   ///< a numeric column along x, the value along y, one line (with dots) per series
    ranges,  ///< horizontal intervals [column, column2] per category label, dots at both ends
};

/// One plotted quantity: a column of the table (for ranges: column..column2) and its axis title.
struct FigureMetric {
    FigureMetric(std::string column_, std::string title_, std::string column2_ = "")
        : column(std::move(column_)), title(std::move(title_)), column2(std::move(column2_)) {}
    std::string column;
    std::string title;
    std::string column2;  ///< ranges only: the interval's upper end
};

/// How a `_vs_` figure summarises one sweep point's rows: their max, their mean, or (lines
/// figures) the row at the largest x, such as a stack's last layer.
enum class SweepSummary { max, mean, last };

/// What an analysis draws. Labels made of several columns join their values with " · ".
struct Figure {
    std::string title;                  ///< what the figure shows; a '\n' starts a second line
    FigureKind kind = FigureKind::bars;
    std::vector<std::string> category;  ///< bars, ranges: columns that name one bar (e.g. data, norm)
    std::string x;                      ///< lines: the numeric x column
    bool x_log = false;                 ///< lines: log x axis
    std::vector<std::string> series;    ///< colour (bars: side by side within a category)
    /// Series columns that stay in the labels even where the table holds one value (a
    /// verdict, whose colours mean something); other series columns show only where they vary.
    std::vector<std::string> series_kept;
    std::vector<std::string> panels;    ///< small multiples, one panel per value
    std::vector<FigureMetric> metrics;  ///< more than one: one panel column per metric
    bool log = false;                   ///< log value axis
    SweepSummary sweep_summary = SweepSummary::max;
    /// What a label shows for a column's value, by "column=value" (the value as the CSV
    /// writes it): {"masked=true", "masked: padding excluded"}. Values not listed show as
    /// usual (names alone, numbers and booleans as column=value).
    std::map<std::string, std::string> value_names;
    /// Fixed colours by series label (as shown, after value_names), used when every series
    /// label of the figure has one; otherwise the tableau10 scheme, tableau20 beyond 10
    /// series, and beyond 20 also a dash pattern (lines, range rules) and a point shape per
    /// series, so that no two series look alike.
    std::map<std::string, std::string> series_colors;

    /// Every column the figure reads, in the order a table shows them first: category or
    /// x, series, panels, metrics.
    std::vector<std::string> columns() const;
    /// Whether a `_vs_` figure takes each point's rows at the largest x (SweepSummary::last,
    /// which needs a lines figure with an x column).
    bool sweep_at_last_x() const { return sweep_summary == SweepSummary::last && kind == FigureKind::lines && !x.empty(); }
};

/// One Vega-Lite specification and the name of its file (figures/<name>.vl.json).
struct FigureSpec {
    std::string name;
    nlohmann::ordered_json spec;
};

/// The specifications for one analysis' table `t` (the rows of every analysis of that type,
/// as in <analysis>.csv): first `analysis` itself, then for each swept column whose values are
/// all numbers and take at least two values, "<analysis>_vs_<column>": the first metric
/// summarised per point (figure.sweep_summary) against that column, one line per category
/// and series label (and value of the other swept columns). With `sweep_columns` the main
/// figure has one panel row per sweep point, titled with the point's values.
/// Non-finite values (and values <= 0 on a log axis) are not dropped: each is drawn as a red
/// (grey for <= 0) text mark at the edge of the plot where its mark would be, and counted in
/// the subtitle. Bars on a linear axis too short to see (0, or 2e-17 beside 1) get their
/// value written beside them ("0", "2e-17"; label_short_bars() in figure_data.hpp).
/// Throws std::invalid_argument when the figure names a column the table lacks.
std::vector<FigureSpec> figure_specs(const std::string& analysis, const Figure& figure, const Table& t,
                                     const std::vector<std::string>& sweep_columns);

}  // namespace normlab
