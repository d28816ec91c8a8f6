#include "report/figure.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "report/figure_data.hpp"

namespace normlab {

using Json = nlohmann::ordered_json;

std::vector<std::string> Figure::columns() const {
    std::vector<std::string> out;
    auto add = [&](const std::string& c) {
        if (!c.empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    };
    for (const auto& c : category) add(c);
    add(x);
    for (const auto& c : series) add(c);
    for (const auto& c : panels) add(c);
    for (const auto& m : metrics) {
        add(m.column);
        add(m.column2);
    }
    return out;
}

namespace {

constexpr const char* kRed = "#c0392b";
constexpr const char* kGrey = "#7f7f7f";
constexpr int kLogBarPadding = 12;  // pixels below the smallest (and above the largest) log bar
constexpr std::size_t kSchemeSmall = 10, kSchemeLarge = 20;  // colours of tableau10, tableau20

Json nominal(const std::string& field, const std::string& title) {
    Json j = {{"field", field}, {"type", "nominal"}, {"sort", nullptr}};
    j["title"] = title.empty() ? Json(nullptr) : Json(title);
    return j;
}

// Powers of ten from the decade below the smallest to the one above the largest positive
// value of `fields`, thinned to at most 7; null when they span fewer than `min_decades`
// decades (Vega's own ticks then) or there is no positive value.
// Vega's log ticks label every 2e-5, 3e-5, ... across a few decades, printed over each other.
Json log_ticks(const PlotData& d, const std::vector<std::string>& fields, int min_decades) {
    double lo = HUGE_VAL, hi = 0;
    for (const auto& r : d.rows)
        for (const auto& f : fields) {
            auto it = r.find(f);
            if (it == r.end() || !it->is_number()) continue;
            const double v = it->get<double>();
            if (v > 0 && std::isfinite(v)) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
        }
    if (!(hi > 0)) return nullptr;
    const int a = static_cast<int>(std::floor(std::log10(lo))), b = static_cast<int>(std::ceil(std::log10(hi)));
    if (b - a < min_decades) return nullptr;
    const int step = (b - a + 6) / 7;
    Json ticks = Json::array();
    for (int e = a; e <= b; e += step) ticks.push_back(std::pow(10.0, e));
    return ticks;
}

Json quantitative(const std::string& field, const std::string& title, bool log, const PlotData& d) {
    Json j = {{"field", field}, {"type", "quantitative"}};
    j["title"] = title.empty() ? Json(nullptr) : Json(title);
    // 2.5e-9 rather than 0.0000000025. A labelExpr, not the axis "format": Vega gives an
    // axis format the precision of the tick step, which writes 10, 20, 30 as 1e+1, 2e+1, 3e+1.
    // labelOverlap with a separation: labels such as 0.035 and 0.04 otherwise touch ("0.0350.04").
    j["axis"] = {{"labelExpr", "datum.value != 0 && (abs(datum.value) < 1e-3 || abs(datum.value) >= 1e5) ? "
                               "format(datum.value, '~e') : format(datum.value, '~g')"},
                 {"labelOverlap", true}, {"labelSeparation", 6}};
    if (log) {
        j["scale"] = {{"type", "log"}};
        // 1e-06 rather than 0.000001.
        j["axis"] = {{"labelExpr", "abs(datum.value) < 1e-3 || abs(datum.value) >= 1e5 ? format(datum.value, '.0e') : "
                                   "format(datum.value, '~g')"},
                     {"labelOverlap", "greedy"}, {"labelSeparation", 6}};
        const std::vector<std::string> fields = field == "value" || field == "value2"
                                                    ? std::vector<std::string>{"value", "value2"}
                                                    : std::vector<std::string>{field};
        Json ticks = log_ticks(d, fields, 2);
        if (field == d.x_column && d.x_not_on_axis > 0) {
            // The rows drawn at the left edge (x = 0) get a decade of their own below the
            // power of ten at or below the smallest x: on the data's own domain the edge is
            // that x, and its point and the triangles would lie on one another. The ticks are
            // the data's decades even when they span fewer than two, so that Vega puts no
            // tick at the edge: it is no value.
            const Json data_ticks = log_ticks(d, fields, 0);
            if (!data_ticks.is_null()) {
                j["scale"]["domainMin"] = data_ticks.front().get<double>() / 10;
                if (ticks.is_null()) ticks = data_ticks;
            }
        }
        if (!ticks.is_null()) j["axis"]["values"] = ticks;
    }
    return j;
}

// The red (non-finite) or grey (<= 0 on a log axis) text drawn where a mark cannot be.
Json note_layer(Json encoding, const std::string& filter) {
    encoding["text"] = {{"field", "note"}};
    encoding["color"] = {{"condition", {{"test", "datum.nonfinite"}, {"value", kRed}}}, {"value", kGrey}};
    encoding["tooltip"] = Json::array({{{"field", "note"}, {"title", "value"}}});
    return {{"transform", Json::array({{{"filter", filter}}})},
            {"mark", {{"type", "text"}, {"align", "left"}, {"baseline", "middle"}, {"dx", 3}, {"dy", 0},
                      {"fontWeight", "bold"}, {"fontSize", 10}}},
            {"encoding", encoding}};
}

// Whether some row has a note, with x on its axis (x_ok) or not, and a drawable value or not
// (value_ok; only asked when x is off the axis). Rows without "x_ok" have x on the axis.
bool any_note(const PlotData& d, bool x_ok, bool value_ok) {
    for (const auto& r : d.rows) {
        if (r["note"].is_null()) continue;
        const bool rx = r.value("x_ok", true);
        if (rx != x_ok) continue;
        if (x_ok || r["value"].is_null() != value_ok) return true;
    }
    return false;
}

// Whether some row has a "label" (label_short_bars(): a bar too short to see).
bool any_label(const PlotData& d) {
    for (const auto& r : d.rows)
        if (r.contains("label") && !r["label"].is_null()) return true;
    return false;
}

// Series labels in the order of first appearance: the colour scale's domain, so that the
// k-th series takes the k-th colour of the scheme.
Json series_labels(const PlotData& d) {
    Json labels = Json::array();
    for (const auto& r : d.rows)
        if (r.contains("series") && std::find(labels.begin(), labels.end(), r["series"]) == labels.end())
            labels.push_back(r["series"]);
    return labels;
}

// The colour scale of the series: f.series_colors when it names every series label, else
// tableau10, or tableau20 beyond 10 series (colours would repeat: two lines of one colour
// read as one norm's).
Json series_scale(const Figure& f, const Json& labels) {
    Json range = Json::array();
    for (const auto& l : labels) {
        auto it = f.series_colors.find(l.get<std::string>());
        if (it == f.series_colors.end()) {
            range = nullptr;
            break;
        }
        range.push_back(it->second);
    }
    if (!range.is_null()) return {{"domain", labels}, {"range", range}};
    return {{"domain", labels}, {"scheme", labels.size() > kSchemeSmall ? "tableau20" : "tableau10"}};
}

// Beyond 20 series the colours repeat (Vega cycles the scheme over the domain): series k
// takes colour k % 20 and the (k / 20)-th dash pattern (lines, rules) and point shape, so
// that no two series share both. Patterns past the listed ones stay distinct by length.
Json series_patterns(const Json& labels, bool shapes) {
    static const std::vector<std::vector<int>> dashes = {{1, 0}, {6, 3}, {2, 2}, {8, 3, 2, 3}, {12, 4}, {2, 5}};
    static const std::vector<const char*> marks = {"circle", "square", "triangle-up", "diamond", "cross",
                                                   "triangle-down", "triangle-right", "triangle-left", "wedge"};
    Json range = Json::array();
    for (std::size_t k = 0; k < labels.size(); ++k) {
        const std::size_t cycle = k / kSchemeLarge;
        if (shapes) range.push_back(marks[cycle % marks.size()]);
        else if (cycle < dashes.size()) range.push_back(dashes[cycle]);
        else range.push_back(Json::array({static_cast<int>(2 * cycle), 2, 1, 2}));
    }
    return {{"domain", labels}, {"range", range}};
}

// The encoding channels that tell series apart: "color", and beyond 20 series (without
// fixed colours) also "strokeDash" and "shape", on the same field and title so that Vega-Lite
// draws one legend for them.
Json series_channels(const Figure& f, const PlotData& d) {
    const Json labels = series_labels(d);
    Json color = nominal("series", d.series_title);
    color["scale"] = series_scale(f, labels);
    color["legend"] = {{"labelLimit", 400}};
    Json out = {{"color", color}};
    if (labels.size() <= kSchemeLarge || color["scale"].contains("range")) return out;
    for (const char* channel : {"strokeDash", "shape"}) {
        Json c = color;
        c["scale"] = series_patterns(labels, std::string(channel) == "shape");
        out[channel] = c;
    }
    return out;
}

Json tooltip(const std::vector<std::string>& raw, bool range) {
    Json t = Json::array();
    for (const auto& c : raw) t.push_back({{"field", c}});
    t.push_back({{"field", "metric"}});
    t.push_back({{"field", "value"}, {"format", ".6g"}});
    if (range) t.push_back({{"field", "value2"}, {"format", ".6g"}});
    return t;
}

// Layers for one chart (bars, ranges or lines) over the long-format rows.
Json layers(const Figure& f, const PlotData& d, const std::string& value_title) {
    Json L = Json::array();
    const bool has_series = !d.series_title.empty();
    const Json channels = has_series ? series_channels(f, d) : Json::object();
    const Json color = has_series ? channels["color"] : Json();
    // Adds the channels of `names` that the series have (strokeDash and shape: beyond 20).
    auto with_series = [&](Json enc, std::initializer_list<const char*> names) {
        for (const char* n : names)
            if (channels.contains(n)) enc[n] = channels[n];
        return enc;
    };
    if (f.kind == FigureKind::lines) {
        Json enc = {{"x", quantitative(f.x, f.x, f.x_log, d)}, {"y", quantitative("value", value_title, f.log, d)}};
        // The line takes the dash, its dots the shape.
        enc = with_series(enc, {"color", "strokeDash", "shape"});
        enc["tooltip"] = tooltip(d.raw_columns, false);
        // The dots unclipped: a dot at the end of the x domain would be cut in half.
        L.push_back({{"mark", {{"type", "line"}, {"point", {{"clip", false}}}, {"clip", true}}}, {"encoding", enc}});
        // Rows whose value or x cannot be placed: at the top edge, at the left edge, or both.
        // Only the layers that have rows: an empty layer makes Vega warn about its extent.
        const Json top = {{"value", 6}}, left = {{"value", 0}};
        if (any_note(d, true, false))
            L.push_back(note_layer({{"x", quantitative(f.x, f.x, f.x_log, d)}, {"y", top}},
                                   "datum.note != null && datum.x_ok"));
        if (any_note(d, false, true)) {  // a grey triangle at the left edge, at its value
            Json edge = {{"x", left}, {"y", quantitative("value", value_title, f.log, d)}};
            edge["tooltip"] = Json::array({{{"field", "note"}, {"title", "not on the x axis"}},
                                           {{"field", "value"}, {"format", ".6g"}}});
            if (has_series) edge["color"] = color;
            L.push_back({{"transform", Json::array({{{"filter", "datum.note != null && !datum.x_ok && datum.value != null"}}})},
                         {"mark", {{"type", "point"}, {"shape", "triangle-left"}, {"filled", true}, {"size", 50}}},
                         {"encoding", edge}});
        }
        if (any_note(d, false, false))
            L.push_back(note_layer({{"x", left}, {"y", top}}, "datum.note != null && !datum.x_ok && datum.value == null"));
        return L;
    }
    Json y = nominal("category", d.category_title);
    y["axis"] = {{"labelLimit", 320}};
    Json base = {{"y", y}};
    if (has_series && d.grouped) base["yOffset"] = nominal("series", d.series_title);
    Json enc = base;
    enc["x"] = quantitative("value", value_title, f.log, d);
    if (has_series) enc["color"] = color;
    enc["tooltip"] = tooltip(d.raw_columns, f.kind == FigureKind::ranges);
    if (f.kind == FigureKind::bars) {
        // A log axis has no 0 to start a bar from: bars start at the plot's left edge.
        // Bars side by side, never stacked (stacking would also put 0 into a log domain).
        enc["x"]["stack"] = nullptr;
        if (f.log) {
            enc["x2"] = {{"value", 0}};
            // Room below the smallest value: without it the smallest bar ends where the axis
            // starts (1.2e-13 beside 1e-4 is a sliver of a pixel). Vega pads log domains in log space.
            enc["x"]["scale"]["padding"] = kLogBarPadding;
        }
        L.push_back({{"mark", {{"type", "bar"}, {"clip", true}}}, {"encoding", enc}});
        // A value of 0, or one tiny against the axis (2e-17 beside 1), draws a bar of no
        // visible length, which reads as missing data: its value is written where it starts.
        if (!f.log && any_label(d)) {
            Json zero = base;
            zero["x"] = enc["x"];
            // Every row, the unlabelled ones with empty text, rather than a filter: a panel
            // without a label would filter to no rows, whose extent Vega warns of as
            // [Infinity, -Infinity]. A null text is drawn as "null", so it is "" instead.
            zero["text"] = {{"condition", {{"test", "datum.label != null"}, {"field", "label"}}}, {"value", ""}};
            zero["tooltip"] = enc["tooltip"];
            L.push_back({{"mark", {{"type", "text"}, {"align", "left"}, {"baseline", "middle"}, {"dx", 3},
                                   {"fontSize", 10}, {"color", kGrey}}},
                         {"encoding", zero}});
        }
    } else {
        Json rule = with_series(enc, {"strokeDash"});
        rule["x2"] = {{"field", "value2"}};
        L.push_back({{"mark", {{"type", "rule"}, {"strokeWidth", 3}, {"clip", true}}}, {"encoding", rule}});
        // The dots unclipped: a dot at the end of the domain (a std of 1) would be cut in half.
        enc = with_series(enc, {"shape"});
        L.push_back({{"mark", {{"type", "point"}, {"filled", true}, {"clip", false}}}, {"encoding", enc}});
        Json hi = enc;
        hi["x"] = quantitative("value2", value_title, f.log, d);
        L.push_back({{"mark", {{"type", "point"}, {"filled", true}, {"clip", false}}}, {"encoding", hi}});
    }
    Json note = base;
    note["x"] = {{"value", 0}};
    if (any_note(d, true, false) || any_note(d, false, false)) L.push_back(note_layer(note, "datum.note != null"));
    return L;
}

std::string subtitle_counts(const PlotData& d) {
    std::string s;
    if (d.nonfinite.total() > 0)
        s += std::to_string(d.nonfinite.total()) + " non-finite value(s) (" + d.nonfinite.describe() +
             ") drawn as red text at the edge of the plot";
    if (d.not_on_log_axis > 0)
        s += std::string(s.empty() ? "" : "; ") + std::to_string(d.not_on_log_axis) +
             " value(s) <= 0, not on the log axis: grey text";
    if (d.x_not_on_axis > 0)
        s += std::string(s.empty() ? "" : "; ") + std::to_string(d.x_not_on_axis) + " row(s) with " + d.x_column +
             " not on the log x axis (<= 0 or non-finite): triangles (or text) at the left edge";
    if (d.refused > 0)
        s += std::string(s.empty() ? "" : "; ") + std::to_string(d.refused) +
             " row(s) refused by the norm (status \"error: ...\"): \"refused\" at the " +
             (d.x_column.empty() ? "left" : "top") + " edge";
    return s;
}

// The subtitle lines naming series that lie on one another (PlotData::overlaps), after
// "<count><head>": the labels in full (which lines are hidden is the point), cut at about
// 100 characters, since a title does not wrap and a longer line widens the page.
// Characters, not bytes: the labels' separator is two bytes of UTF-8. None when `names` is
// empty.
std::vector<std::string> series_lines(const std::string& head, const std::vector<std::string>& names) {
    if (names.empty()) return {};
    auto chars = [](const std::string& s) {
        return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
    };
    std::vector<std::string> lines;
    std::string line = std::to_string(names.size()) + head;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string item = names[i] + (i + 1 < names.size() ? "," : "");
        if (chars(line) + 1 + chars(item) > 100) {
            lines.push_back(line);
            line.clear();
        }
        line += (line.empty() ? "" : " ") + item;
    }
    lines.push_back(line);
    return lines;
}

// The width of one panel: narrower as more share a row (three at most when they wrap; one
// per panel in a sweep's rows), so that a row fits a page of about 1200 pixels beside the
// category labels and the legend.
int panel_width(const Figure& f, const PlotData& d, bool swept) {
    const std::size_t across = d.has_panel ? (swept ? d.panel_order.size() : std::min<std::size_t>(3, d.panel_order.size())) : 1;
    if (f.kind == FigureKind::lines) return across <= 1 ? 360 : across == 2 ? 320 : 240;
    return across <= 1 ? 420 : across == 2 ? 340 : 260;
}

// Wraps the layers in a (possibly faceted) spec: panel columns, one row per sweep point.
Json assemble(const Figure& f, const PlotData& d, const std::string& title, const std::string& value_title,
              bool swept, bool independent_values) {
    Json spec = {{"$schema", "https://vega.github.io/schema/vega-lite/v6.json"}};
    // Lines of the title ('\n' in Figure::title): one text, or an array of lines.
    Json lines = Json::array();
    for (std::size_t a = 0, b; a <= title.size(); a = b + 1) {
        b = std::min(title.find('\n', a), title.size());
        lines.push_back(title.substr(a, b - a));
    }
    Json t = {{"text", lines.size() == 1 ? lines[0] : lines}, {"anchor", "start"}};
    Json subtitle = Json::array();
    if (const std::string counts = subtitle_counts(d); !counts.empty()) subtitle.push_back(counts);
    for (const bool zero : {true, false})
        for (const auto& o : d.overlaps) {
            if (o.zero != zero) continue;
            std::string where;
            if (o.panels.size() > 3) where = " in " + std::to_string(o.panels.size()) + " panels";
            for (std::size_t i = 0; i < o.panels.size() && o.panels.size() <= 3; ++i) {
                const Overlap::Panel& p = o.panels[i];
                where += (i ? ", " : " ") + (p.name.empty() ? "" : "in " + p.name);
                if (p.points < p.of)
                    where += (p.name.empty() ? "at " : " at ") + std::to_string(p.points) + " of " +
                             std::to_string(p.of) + " sweep points";
            }
            const std::string head = zero ? " series are exactly 0" + (where.empty() ? std::string(" everywhere") : where) +
                                                ", drawn one over another:"
                                          : " series draw the same line" + where + ", one over another:";
            for (const auto& line : series_lines(head, o.series)) subtitle.push_back(line);
        }
    if (!subtitle.empty()) t["subtitle"] = subtitle.size() == 1 ? subtitle[0] : subtitle;
    spec["title"] = t;
    spec["data"] = {{"values", d.rows}};
    Json inner = {{"layer", layers(f, d, value_title)}};
    inner["width"] = panel_width(f, d, swept);
    if (f.kind == FigureKind::lines) inner["height"] = 200;
    else inner["height"] = {{"step", d.grouped ? 10 : 16}};  // grouped: the step of one bar of a group
    const bool panels = d.has_panel;
    if (!panels && !swept) {
        for (auto& [k, v] : inner.items()) spec[k] = v;
        return spec;
    }
    const Json header = {{"labelAngle", 0}, {"labelAnchor", "start"}, {"labelOrient", "top"},
                         {"labelFontWeight", "bold"}, {"labelLimit", 600}, {"title", nullptr}};
    const Json panel = {{"field", "panel"}, {"type", "nominal"}, {"sort", d.panel_order}, {"header", header}};
    if (!swept) {  // panels only: wrapped, three to a row
        spec["facet"] = panel;
        spec["columns"] = 3;
    } else {       // one row per sweep point, one column per panel
        spec["facet"] = {{"row", {{"field", "sweep_point"}, {"type", "nominal"},
                                  {"sort", {{"field", "point"}, {"op", "min"}}}, {"header", header}}}};
        if (panels) spec["facet"]["column"] = panel;
    }
    spec["spec"] = inner;
    if (independent_values) {
        const char* axis = f.kind == FigureKind::lines ? "y" : "x";
        spec["resolve"] = {{"scale", {{axis, "independent"}}}};
    }
    return spec;
}

// "metric against swept value": one line per label, the summary of each point's rows.
FigureSpec swept_spec(const std::string& analysis, const Figure& f, const Table& t,
                      const std::vector<std::string>& sweep_columns, const std::string& swept) {
    Figure g;
    g.kind = FigureKind::lines;
    g.x = swept;
    g.log = f.log;
    const PlotData d = swept_rows(f, t, sweep_columns, swept, &g.x_log);
    g.metrics = f.metrics;
    std::string what = d.has_panel ? "metrics" : f.metrics.front().title;
    const std::string how = f.sweep_at_last_x() ? "at each point's largest " + f.x
                                 : std::string(f.sweep_summary == SweepSummary::mean ? "mean" : "max") +
                                       " over each point's rows";
    std::string title = analysis + ": " + what + " against " + swept + " (" + how +
                        (f.kind == FigureKind::ranges ? "; ranges: min of the low end, max of the high end" : "") +
                        ")";
    Json spec = assemble(g, d, title, d.has_panel ? "" : f.metrics.front().title, false, true);
    auto& layer0 = spec.contains("spec") ? spec["spec"]["layer"][0] : spec["layer"][0];
    if (f.kind == FigureKind::ranges) {
        layer0["encoding"]["strokeDash"] = nominal("end", "range end");
        // A line legend symbol, drawn (Vega-Lite leaves its stroke unset otherwise).
        layer0["encoding"]["strokeDash"]["legend"] = {
            {"symbolType", "stroke"}, {"symbolStrokeWidth", 2},
            {"encode", {{"symbols", {{"update", {{"stroke", {{"value", "#333"}}}}}}}}}};
    }
    return {analysis + "_vs_" + swept, spec};
}

}  // namespace

std::vector<FigureSpec> figure_specs(const std::string& analysis, const Figure& figure, const Table& t,
                                     const std::vector<std::string>& sweep_columns) {
    if (figure.metrics.empty()) throw std::invalid_argument(analysis + ": the figure names no metric");
    for (const auto& c : figure.columns())
        if (std::find(t.columns.begin(), t.columns.end(), c) == t.columns.end() && !t.rows.empty())
            throw std::invalid_argument(analysis + ": the figure reads column \"" + c + "\", which the table lacks");
    std::vector<FigureSpec> out;
    const bool swept = !sweep_columns.empty();
    PlotData d = plot_rows(figure, t, sweep_columns);
    // Several metrics: one value axis per panel (assemble's independent_values below).
    if (figure.kind == FigureKind::bars && !figure.log) label_short_bars(d, figure.metrics.size() > 1);
    // Several metrics: each panel's header names its metric.
    const std::string value_title = figure.metrics.size() == 1 ? figure.metrics.front().title : "";
    std::string title = analysis + ": " + figure.title;
    if (swept) title += " (one row of panels per sweep point)";
    out.push_back({analysis, assemble(figure, d, title, value_title, swept, figure.metrics.size() > 1)});
    // One figure per swept column, but not a second one for a column that varies one to one
    // with a column drawn already (zipped paths): it would be the same figure.
    std::vector<std::size_t> drawn;
    for (const auto& c : sweep_columns) {
        if (!numeric_column(t, c)) continue;
        const auto ci = static_cast<std::size_t>(std::find(t.columns.begin(), t.columns.end(), c) - t.columns.begin());
        if (std::any_of(drawn.begin(), drawn.end(),
                        [&](std::size_t k) { return determined_by(t, ci, k) && determined_by(t, k, ci); }))
            continue;
        drawn.push_back(ci);
        out.push_back(swept_spec(analysis, figure, t, sweep_columns, c));
    }
    return out;
}

}  // namespace normlab
