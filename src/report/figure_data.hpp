#pragma once
// The data of a figure: the analysis table reshaped into the long format the Vega-Lite specs
// of report/figure.cpp read (one row per table row and metric), with non-finite values and
// values a log axis cannot show replaced by a text note and counted.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/figure.hpp"

namespace normlab {

/// Joins the values of several columns into one label: "tokens · ln".
inline constexpr const char* kLabelSeparator = " \u00b7 ";

/// Counts of non-finite values by kind.
struct NonfiniteCount {
    std::size_t nan = 0, pos_inf = 0, neg_inf = 0;
    void add(double v);
    std::size_t total() const { return nan + pos_inf + neg_inf; }
    /// "2 nan, 1 inf" (kinds with a zero count left out).
    std::string describe() const;
};

/// Lines within this fraction of a panel's value axis of one another at every x are drawn
/// on one another: half a pixel of a 200-pixel panel (lines figures' height).
inline constexpr double kSameLineFraction = 1.0 / 400;

/// Two or more series whose lines lie on one another.
struct Overlap {
    /// true: every value of each is exactly 0; false: they agree at every x, within
    /// kSameLineFraction of the panel's value axis (log10 of the values on a log axis).
    bool zero = false;
    std::vector<std::string> series;  ///< their labels, first-seen order
    /// A panel where they lie on one another: at `points` of the `of` sweep points (rows of
    /// panels) that draw them all there (1 of 1 without a sweep).
    struct Panel {
        std::string name;  ///< the panel's title; "" for a figure without panels
        std::size_t points = 0, of = 0;
    };
    /// Where: empty when in every panel that draws them all, else those panels.
    std::vector<Panel> panels;
};

/// Long-format rows, one per (table row, metric). Fields: "category" (bars, ranges) or the x
/// column (lines) with "x_ok" (false when x cannot sit on the axis), "series", "panel",
/// "metric", "value" (and "value2" for ranges; null when it cannot be drawn), "note" (the
/// text drawn instead, or null) and "nonfinite"; with a sweep "point" and "sweep_point" (the
/// point's label); and the raw category/series/panel columns for tooltips.
struct PlotData {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    std::vector<std::string> raw_columns;  ///< raw table columns copied into each row
    bool has_panel = false;                ///< rows carry a "panel" (several metrics or panels)
    nlohmann::ordered_json panel_order = nlohmann::ordered_json::array();  ///< panels in first-seen order
    bool grouped = false;                  ///< bars, ranges: some category has several series (side by side)
    NonfiniteCount nonfinite;              ///< metric values that are nan or +-inf
    std::size_t not_on_log_axis = 0;       ///< finite metric values <= 0 on a log value axis
    std::size_t missing = 0;               ///< metric cells that are not numbers (empty, text)
    std::size_t x_not_on_axis = 0;         ///< lines: rows whose x is non-finite or <= 0 on a log x axis
    /// Rows whose "status" column holds an error (a norm refused the batch): their empty
    /// metric is drawn as the note "refused" instead of nothing.
    std::size_t refused = 0;
    /// lines: the series whose lines lie on one another, so that only the last drawn shows.
    std::vector<Overlap> overlaps;
    std::string x_column;
    std::string category_title, series_title;  ///< the columns the labels are made of ("data · norm"); no series: ""
};

/// The rows of the main figure. With `sweep_columns`, the table has a "point" column and each
/// row is labelled "point 3: norms_ln_eps=0.001, ...". A table with a "status" column (the
/// norm's error, "error: ...", or "ok") draws a refused row's metric as the note "refused".
PlotData plot_rows(const Figure& f, const Table& t, const std::vector<std::string>& sweep_columns);

/// A bar on a linear axis below this fraction of the largest |value| on that axis is under
/// half a pixel long on the widest panel (420 pixels): 2e-17 beside 1, or float32 rounding
/// (1e-6) beside a real change (8.5), reads as missing data.
inline constexpr double kShortBarFraction = 1e-3;

/// For bars on a linear axis: sets "label" on every row, the value in short form ("0",
/// "2e-17", "0.42": two significant digits) when it is 0 or its bar too short to see (|value| <
/// kShortBarFraction x the largest finite |value| on its axis), else null; rows without a
/// value (null) get null. The axis is the panel's (its "panel" and "sweep_point") when
/// `per_panel`, as when each panel has its own value scale, else the whole figure's.
void label_short_bars(PlotData& d, bool per_panel);

/// The rows of "metric against `swept`": per line label (category, series and the other swept
/// columns' values) and value of `swept`, each metric summarised over the point's rows by
/// f.sweep_summary (ranges: the low end by min, the high end by max, rows tagged "end"). A nan
/// among the rows makes the summary nan: nothing is dropped. Sets *x_log when no value of
/// `swept` is negative and those above 0 span at least a factor 100; a 0 then has x_ok false,
/// its swept value null and a note, and is counted in x_not_on_axis.
PlotData swept_rows(const Figure& f, const Table& t, const std::vector<std::string>& sweep_columns,
                    const std::string& swept, bool* x_log);

/// True when `column` exists and every cell is a finite number, with at least two values.
bool numeric_column(const Table& t, const std::string& column);

/// Whether column `col` of t follows from column `by`: every row with the same value of
/// `by` has the same value of `col` (a sweep path zipped with `by`, or a stack's own layers
/// when its layers are swept).
bool determined_by(const Table& t, std::size_t col, std::size_t by);

}  // namespace normlab
