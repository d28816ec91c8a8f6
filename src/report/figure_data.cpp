#include "report/figure_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "tensor/numbers.hpp"

namespace normlab {

using Json = nlohmann::ordered_json;

void NonfiniteCount::add(double v) {
    if (std::isnan(v)) ++nan;
    else if (v > 0) ++pos_inf;
    else ++neg_inf;
}

std::string NonfiniteCount::describe() const {
    std::string s;
    auto part = [&](std::size_t n, const char* what) {
        if (n) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    part(nan, "nan");
    part(pos_inf, "inf");
    part(neg_inf, "-inf");
    return s;
}

namespace {

std::size_t column_index(const Table& t, const std::string& c) {
    auto it = std::find(t.columns.begin(), t.columns.end(), c);
    if (it == t.columns.end()) throw std::invalid_argument("figure: the table has no column \"" + c + "\"");
    return static_cast<std::size_t>(it - t.columns.begin());
}

std::vector<std::size_t> indices(const Table& t, const std::vector<std::string>& cols) {
    std::vector<std::size_t> out;
    for (const auto& c : cols) out.push_back(column_index(t, c));
    return out;
}

// The columns among `cols` whose values differ between rows.
std::vector<std::size_t> changing(const Table& t, const std::vector<std::size_t>& cols) {
    std::vector<std::size_t> out;
    for (auto c : cols) {
        std::set<std::string> values;
        for (const auto& row : t.rows) values.insert(cell_to_string(row[c]));
        if (values.size() > 1) out.push_back(c);
    }
    return out;
}

// The columns of a label that vary over the table: a part with one value everywhere (the only
// data, step=1) says nothing and crowds the axis. All of them when none varies.
std::vector<std::size_t> varying(const Table& t, const std::vector<std::size_t>& cols) {
    auto out = changing(t, cols);
    return out.empty() ? cols : out;
}

// "data · norm": what a label made of these columns consists of.
std::string names_of(const Table& t, const std::vector<std::size_t>& cols) {
    std::string s;
    for (auto c : cols) s += (s.empty() ? "" : kLabelSeparator) + t.columns[c];
    return s;
}

// One column's part of a label: its name in f.value_names, else the value, which says which
// column it is from when it is a number or boolean (or `named`): "scale=0.1".
std::string label_part(const Figure& f, const Table& t, const std::vector<Cell>& row, std::size_t col, bool named = false) {
    const Cell& c = row[col];
    const std::string pair = t.columns[col] + "=" + cell_to_string(c);
    auto it = f.value_names.find(pair);
    if (it != f.value_names.end()) return it->second;
    return named || !std::holds_alternative<std::string>(c) ? pair : cell_to_string(c);
}

// Names (data, norm, ...) stand alone; numbers and booleans say which column they are from:
// "tokens · ln · scale=0.1".
std::string label(const Figure& f, const Table& t, const std::vector<Cell>& row, const std::vector<std::size_t>& cols) {
    std::string s;
    for (std::size_t k = 0; k < cols.size(); ++k) s += (k ? kLabelSeparator : "") + label_part(f, t, row, cols[k]);
    return s;
}

Json cell_json(const Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto d = std::get_if<double>(&c)) return std::isfinite(*d) ? Json(*d) : Json(format_number(*d));
    if (auto i = std::get_if<long long>(&c)) return *i;
    return std::get<bool>(c);
}

// Puts a metric cell into row[field], or null plus a note when it cannot be drawn.
void place(Json& row, const char* field, const Cell& c, bool log, PlotData& d, std::string& note, bool& nonfinite) {
    double v = 0;
    std::string text;
    if (!cell_number(c, v)) {
        ++d.missing;
        // An empty cell is a value that does not apply (results/README.md): no bar or point,
        // and nothing to say about it (depth's block columns at layer 0, for one).
        if (is_not_applicable(c)) {
            row[field] = nullptr;
            return;
        }
        text = cell_to_string(c);
    } else if (!std::isfinite(v)) {
        d.nonfinite.add(v);
        nonfinite = true;
        text = format_number(v);
    } else if (log && v <= 0) {
        ++d.not_on_log_axis;
        text = format_number(v);
    } else {
        row[field] = v;
        return;
    }
    row[field] = nullptr;
    note += (note.empty() ? "" : " .. ") + text;
}

std::string point_label(const std::vector<Cell>& row, std::size_t point_col, const Table& t,
                        const std::vector<std::size_t>& sweep_cols) {
    std::string s = "point " + cell_to_string(row[point_col]) + ":";
    for (std::size_t k = 0; k < sweep_cols.size(); ++k)
        s += (k ? ", " : " ") + t.columns[sweep_cols[k]] + " = " + cell_to_string(row[sweep_cols[k]]);
    return s;
}

// The index of table t's "status" column (the norm's error, "error: ...", or "ok"), or
// t.columns.size() when it has none.
std::size_t status_column(const Table& t) {
    return static_cast<std::size_t>(std::find(t.columns.begin(), t.columns.end(), "status") - t.columns.begin());
}

// Whether `row`'s status (column `status`, from status_column) says the norm refused its batch.
bool refused_row(const std::vector<Cell>& row, std::size_t status) {
    const auto* s = status < row.size() ? std::get_if<std::string>(&row[status]) : nullptr;
    return s && s->rfind("error:", 0) == 0;
}

// A refused batch has no value to draw, and saying nothing would read as a result left
// out (BatchNorm in training on one sample): its empty value becomes the note "refused",
// counted once per row when `count`.
void note_refused(const Json& r, bool refused, bool count, std::string& note, PlotData& d) {
    if (!refused || !r["value"].is_null() || !note.empty()) return;
    note = "refused";
    d.refused += count;
}

// Lines drawn on one another, found panel by panel (a panel being one metric's, or one
// sweep point's, own plot): per panel, the series whose every value is exactly 0 when two or
// more are, and groups of series that agree at every x within half a pixel of the panel's
// value axis: kSameLineFraction of the extent of the panel's values (with 0 on a linear axis,
// as Vega-Lite's scale includes it; of their log10 on a log axis). Panels that share one
// axis span at least that much, so no line is called hidden that is not. A group that lies
// on one another in every panel where all its series are drawn is reported without panels.
std::vector<Overlap> overlaps(const Json& rows, const std::string& x_key, bool log_values) {
    struct PanelCell {
        std::string panel;               // the "panel" field, "" without panels
        std::vector<std::string> order;  // series, first-seen
        // series -> x|end -> its values there, in row order (analyses sharing a table can
        // give one series two rows at an x)
        std::map<std::string, std::map<std::string, std::vector<Json>>> at;
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    };
    std::vector<PanelCell> cells;
    std::map<std::string, std::size_t> cell_of;
    for (const auto& r : rows) {
        const Json panel = r.value("panel", Json());
        auto [it, fresh] = cell_of.emplace(panel.dump() + "|" + r.value("sweep_point", Json()).dump(), cells.size());
        if (fresh) cells.push_back({panel.is_string() ? panel.get<std::string>() : "", {}, {}});
        PanelCell& c = cells[it->second];
        const std::string s = r["series"].get<std::string>();
        if (!c.at.count(s)) c.order.push_back(s);
        const Json& v = r["value"];
        c.at[s][r.value(x_key, Json()).dump() + "|" + r.value("end", Json()).dump()].push_back(v);
        if (v.is_number() && std::isfinite(v.get<double>()) && (!log_values || v.get<double>() > 0)) {
            const double y = log_values ? std::log10(v.get<double>()) : v.get<double>();
            c.lo = std::min(c.lo, y);
            c.hi = std::max(c.hi, y);
        }
    }
    // (zero, series) -> the cells where they lie on one another, in first-seen order.
    std::vector<std::pair<bool, std::vector<std::string>>> found;
    std::map<std::pair<bool, std::vector<std::string>>, std::vector<std::size_t>> where;
    auto add = [&](bool zero, const std::vector<std::string>& group, std::size_t cell) {
        auto [it, fresh] = where.emplace(std::make_pair(zero, group), std::vector<std::size_t>{});
        if (fresh) found.emplace_back(zero, group);
        it->second.push_back(cell);
    };
    for (std::size_t k = 0; k < cells.size(); ++k) {
        const PanelCell& c = cells[k];
        const double lo = log_values ? c.lo : std::min(c.lo, 0.0), hi = log_values ? c.hi : std::max(c.hi, 0.0);
        const double tol = hi > lo ? kSameLineFraction * (hi - lo) : 0.0;
        auto close = [&](const Json& a, const Json& b) {
            if (!a.is_number() || !b.is_number()) return a == b;
            const double u = a.get<double>(), v = b.get<double>();
            if (u == v) return true;
            if (!std::isfinite(u) || !std::isfinite(v)) return false;
            if (log_values) return u > 0 && v > 0 && std::abs(std::log10(u) - std::log10(v)) <= tol;
            return std::abs(u - v) <= tol;
        };
        std::vector<std::string> zero, rest;
        for (const auto& s : c.order) {
            bool all_zero = true, drawn = false;
            for (const auto& [x, vs] : c.at.at(s))
                for (const auto& v : vs) {
                    all_zero = all_zero && v.is_number() && v.get<double>() == 0.0;
                    drawn = drawn || v.is_number();
                }
            if (all_zero) zero.push_back(s);
            else if (drawn) rest.push_back(s);  // a line that can hide another
        }
        if (zero.size() >= 2) add(true, zero, k);
        std::vector<std::vector<std::string>> groups;  // each compared through its first member
        for (const auto& s : rest) {
            const auto& mine = c.at.at(s);
            auto same = [&](const std::vector<std::string>& g) {
                const auto& theirs = c.at.at(g.front());
                if (theirs.size() != mine.size()) return false;
                for (const auto& [x, vs] : mine) {
                    auto it = theirs.find(x);
                    if (it == theirs.end() || it->second.size() != vs.size()) return false;
                    for (std::size_t i = 0; i < vs.size(); ++i)
                        if (!close(vs[i], it->second[i])) return false;
                }
                return true;
            };
            auto g = std::find_if(groups.begin(), groups.end(), same);
            if (g == groups.end()) groups.push_back({s});
            else g->push_back(s);
        }
        for (const auto& g : groups)
            if (g.size() >= 2) add(false, g, k);
    }
    std::vector<Overlap> out;
    for (const auto& [zero, group] : found) {
        const auto& mine = where.at({zero, group});
        // The cells where every series of the group is drawn: where it could have held.
        std::vector<std::size_t> all;
        for (std::size_t k = 0; k < cells.size(); ++k)
            if (std::all_of(group.begin(), group.end(), [&](const std::string& s) { return cells[k].at.count(s) > 0; }))
                all.push_back(k);
        Overlap o{zero, group, {}};
        if (mine.size() < all.size()) {
            // Panels in first-seen order, each with the sweep points where it holds.
            for (std::size_t k : mine)
                if (std::none_of(o.panels.begin(), o.panels.end(),
                                 [&](const Overlap::Panel& p) { return p.name == cells[k].panel; }))
                    o.panels.push_back({cells[k].panel, 0, 0});
            for (auto& p : o.panels) {
                auto in = [&](std::size_t k) { return cells[k].panel == p.name; };
                p.points = static_cast<std::size_t>(std::count_if(mine.begin(), mine.end(), in));
                p.of = static_cast<std::size_t>(std::count_if(all.begin(), all.end(), in));
            }
        }
        out.push_back(std::move(o));
    }
    return out;
}

}  // namespace

PlotData plot_rows(const Figure& f, const Table& t, const std::vector<std::string>& sweep_columns) {
    PlotData d;
    const bool lines = f.kind == FigureKind::lines;
    const auto cat = varying(t, indices(t, f.category));
    const std::size_t point = sweep_columns.empty() ? 0 : column_index(t, "point");
    std::vector<std::size_t> ser;  // none: one colour, no legend
    {
        auto moving = changing(t, indices(t, f.series));
        const auto kept = indices(t, f.series_kept);
        if (!sweep_columns.empty()) {
            // A row of panels is one sweep point, titled with its swept values: a series column
            // with one value per point (a stack's layers when the depth is swept) separates no
            // lines within a row, and would only give each point's lines colours of their own.
            moving.erase(std::remove_if(moving.begin(), moving.end(),
                                        [&](std::size_t c) { return determined_by(t, c, point); }),
                         moving.end());
        }
        for (auto c : indices(t, f.series))
            if (std::count(moving.begin(), moving.end(), c) || std::count(kept.begin(), kept.end(), c)) ser.push_back(c);
    }
    const auto pan = varying(t, indices(t, f.panels));
    d.category_title = names_of(t, cat);
    d.series_title = names_of(t, ser);
    const auto sweep = indices(t, sweep_columns);
    std::vector<std::string> raw = f.category;
    if (lines) raw.push_back(f.x);
    raw.insert(raw.end(), f.series.begin(), f.series.end());
    raw.insert(raw.end(), f.panels.begin(), f.panels.end());
    for (const auto& c : raw)
        if (std::find(d.raw_columns.begin(), d.raw_columns.end(), c) == d.raw_columns.end()) d.raw_columns.push_back(c);
    const auto raw_idx = indices(t, d.raw_columns);
    d.has_panel = f.metrics.size() > 1 || !f.panels.empty();
    d.x_column = f.x;
    const std::size_t status = status_column(t);
    std::map<std::string, std::set<std::string>> series_of;  // category -> its series labels
    // Metric-major, so that panels (first-seen order) list every panel of one metric together.
    for (std::size_t m = 0; m < f.metrics.size(); ++m) {
        const FigureMetric& metric = f.metrics[m];
        for (const auto& row : t.rows) {
            Json r = Json::object();
            for (std::size_t k = 0; k < raw_idx.size(); ++k) r[d.raw_columns[k]] = cell_json(row[raw_idx[k]]);
            if (!sweep_columns.empty()) {
                r["point"] = cell_json(row[point]);
                r["sweep_point"] = point_label(row, point, t, sweep);
            }
            std::string note;
            if (lines) {
                const Cell& xc = row[column_index(t, f.x)];
                double x = 0;
                const bool ok = cell_number(xc, x) && std::isfinite(x) && (!f.x_log || x > 0);
                r["x_ok"] = ok;
                if (!ok) {
                    r[f.x] = nullptr;
                    d.x_not_on_axis += m == 0;
                }
            } else {
                r["category"] = label(f, t, row, cat);
            }
            if (!ser.empty()) {
                r["series"] = label(f, t, row, ser);
                if (!lines) {
                    auto& seen = series_of[r["category"].get<std::string>()];
                    seen.insert(r["series"].get<std::string>());
                    d.grouped = d.grouped || seen.size() > 1;
                }
            }
            const std::string panel = label(f, t, row, pan);
            if (f.metrics.size() > 1) r["panel"] = metric.title + (panel.empty() ? "" : kLabelSeparator + panel);
            else if (!pan.empty()) r["panel"] = panel;
            if (r.contains("panel") && std::find(d.panel_order.begin(), d.panel_order.end(), r["panel"]) == d.panel_order.end())
                d.panel_order.push_back(r["panel"]);
            r["metric"] = metric.title;
            bool nonfinite = false;
            place(r, "value", row[column_index(t, metric.column)], f.log, d, note, nonfinite);
            if (!metric.column2.empty()) place(r, "value2", row[column_index(t, metric.column2)], f.log, d, note, nonfinite);
            note_refused(r, refused_row(row, status), m == 0, note, d);
            if (lines && !r["x_ok"].get<bool>())
                note = (note.empty() ? "" : note + ", ") + f.x + " = " + cell_to_string(row[column_index(t, f.x)]);
            r["note"] = note.empty() ? Json(nullptr) : Json(note);
            r["nonfinite"] = nonfinite;
            d.rows.push_back(std::move(r));
        }
    }
    if (lines && !ser.empty()) d.overlaps = overlaps(d.rows, f.x, f.log);
    return d;
}

namespace {

// Two significant digits, trailing zeros dropped: plain from 1e-3 to 100 ("0.42", "12"),
// else with an exponent without padding ("2e-17", "-3.5e-12"); "0". One digit read as
// 4e-1 for 0.4166, too coarse beside a bar.
std::string short_number(double v) {
    if (v == 0) return "0";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1e", v);
    std::string s = buf;
    const auto e = s.find('e');
    // The exponent after rounding decides the form: 99.95 is 1.0e+02, not "1e+02" from %g.
    const int exponent = std::stoi(s.substr(e + 1));
    if (exponent >= -3 && exponent < 2) return format_significant(v, 2);
    std::string mantissa = s.substr(0, e), sign = s.substr(e + 1, 1), digits = s.substr(e + 2);
    if (mantissa.size() >= 2 && mantissa.compare(mantissa.size() - 2, 2, ".0") == 0) mantissa.resize(mantissa.size() - 2);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    return mantissa + "e" + (sign == "-" ? "-" : "") + digits;
}

std::string axis_of(const Json& r, bool per_panel) {
    if (!per_panel) return std::string();
    std::string key;
    for (const char* k : {"panel", "sweep_point"}) key += (r.contains(k) ? r[k].dump() : "") + "|";
    return key;
}

}  // namespace

void label_short_bars(PlotData& d, bool per_panel) {
    std::map<std::string, double> largest;  // axis -> largest finite |value|
    for (const auto& r : d.rows)
        if (r["value"].is_number()) {
            double& m = largest[axis_of(r, per_panel)];
            m = std::max(m, std::abs(r["value"].get<double>()));
        }
    for (auto& r : d.rows) {
        r["label"] = nullptr;
        if (!r["value"].is_number()) continue;
        const double v = r["value"].get<double>();
        if (v == 0 || std::abs(v) < kShortBarFraction * largest[axis_of(r, per_panel)]) r["label"] = short_number(v);
    }
}

namespace {

// Summary of one group of values: max (or min) or mean; a nan anywhere makes it nan. Empty
// cells (values that do not apply, such as depth's block columns at layer 0) are left out,
// and the group is empty only when all of them are; a text cell makes it that text.
struct Accumulator {
    double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
    std::size_t n = 0;
    bool nan = false;
    Cell missing = std::string();  ///< a text cell, if any; else empty, the result of a group without numbers
    bool has_missing = false;
    void add(const Cell& c) {
        double v = 0;
        if (!cell_number(c, v)) {
            if (!is_not_applicable(c)) {
                has_missing = true;
                missing = c;
            }
            return;
        }
        nan = nan || std::isnan(v);
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        ++n;
    }
    Cell result(const char* how) const {
        if (has_missing || n == 0) return missing;
        if (nan) return std::nan("");
        if (std::string(how) == "min") return lo;
        if (std::string(how) == "max") return hi;
        return sum / static_cast<double>(n);
    }
};

}  // namespace

PlotData swept_rows(const Figure& f, const Table& t, const std::vector<std::string>& sweep_columns,
                    const std::string& swept, bool* x_log) {
    PlotData d;
    const std::size_t xi = column_index(t, swept);
    std::vector<std::string> names = f.category;
    names.insert(names.end(), f.series.begin(), f.series.end());
    for (const auto& c : sweep_columns)
        if (c != swept) names.push_back(c);
    // Columns that follow from the swept value (a path zipped with it, the stack's own
    // "layers" when its layers are swept) would make a line of each point: left out.
    std::vector<std::size_t> label_columns = indices(t, names);
    label_columns.erase(std::remove_if(label_columns.begin(), label_columns.end(),
                                       [&](std::size_t c) { return determined_by(t, c, xi); }),
                        label_columns.end());
    const auto parts = varying(t, label_columns);
    d.series_title = names_of(t, parts);  // the lines' legend: category, series, other swept columns
    d.has_panel = f.metrics.size() > 1;
    d.x_column = swept;
    d.raw_columns = {"series", swept};

    // Groups in first-seen order: (line label, x) -> one accumulator per metric end.
    struct Group {
        std::string line;
        double x = 0;
        std::vector<Accumulator> acc;  // per metric: [low, high] for ranges, [value] otherwise
        bool refused = false;          // a row's status is an error: its empty summary says so
        double last_at = -std::numeric_limits<double>::infinity();  // SweepSummary::last: the x kept
    };
    // SweepSummary::last keeps, per group, the rows at the largest value of the main
    // figure's x (a stack's last layer): only those enter the accumulators.
    const bool last = f.sweep_at_last_x();
    const std::size_t main_x = last ? column_index(t, f.x) : 0;
    const std::size_t status = status_column(t);
    std::vector<Group> groups;
    std::map<std::pair<std::string, double>, std::size_t> where;
    // The smallest swept value above 0: an eps swept from 0 (0, 1e-6, 1e-4, ...) gets a log
    // axis like one without the 0, which is drawn at the left edge.
    double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, xpos = xmin;
    for (const auto& row : t.rows) {
        // Category and series values as in the main figure; other swept columns as col=value.
        std::string line;
        for (auto p : parts) {
            const bool named = std::find(sweep_columns.begin(), sweep_columns.end(), t.columns[p]) != sweep_columns.end();
            line += (line.empty() ? "" : kLabelSeparator) + label_part(f, t, row, p, named);
        }
        if (line.empty()) line = "all rows";
        double x = 0;
        cell_number(row[xi], x);  // numeric_column() was checked by the caller
        xmin = std::min(xmin, x);
        xmax = std::max(xmax, x);
        if (x > 0) xpos = std::min(xpos, x);
        auto key = std::make_pair(line, x);
        if (!where.count(key)) {
            where[key] = groups.size();
            groups.push_back({line, x, std::vector<Accumulator>(2 * f.metrics.size())});
        }
        Group& g = groups[where[key]];
        g.refused = g.refused || refused_row(row, status);
        if (last) {
            double at = 0;
            if (!cell_number(row[main_x], at) || at < g.last_at) continue;
            if (at > g.last_at) {
                g.last_at = at;
                g.acc.assign(2 * f.metrics.size(), Accumulator());
            }
        }
        for (std::size_t m = 0; m < f.metrics.size(); ++m) {
            g.acc[2 * m].add(row[column_index(t, f.metrics[m].column)]);
            if (!f.metrics[m].column2.empty()) g.acc[2 * m + 1].add(row[column_index(t, f.metrics[m].column2)]);
        }
    }
    *x_log = xmin >= 0 && xpos < xmax && xmax >= 100 * xpos;
    // The rows kept at the last x are one per line there: their max is that row's value.
    const char* how = f.sweep_summary == SweepSummary::mean ? "mean" : "max";
    for (const auto& g : groups)
        for (std::size_t m = 0; m < f.metrics.size(); ++m) {
            const bool range = !f.metrics[m].column2.empty();
            for (int end = 0; end < (range ? 2 : 1); ++end) {
                const bool x_ok = !*x_log || g.x > 0;
                Json r = {{"series", g.line}, {swept, x_ok ? Json(g.x) : Json(nullptr)}, {"x_ok", x_ok}};
                d.x_not_on_axis += !x_ok && m == 0 && end == 0;
                if (d.has_panel) {
                    r["panel"] = f.metrics[m].title;
                    if (std::find(d.panel_order.begin(), d.panel_order.end(), r["panel"]) == d.panel_order.end())
                        d.panel_order.push_back(r["panel"]);
                }
                r["metric"] = f.metrics[m].title;
                if (range) r["end"] = end == 0 ? "low" : "high";
                std::string note;
                bool nonfinite = false;
                const Cell v = g.acc[2 * m + end].result(range ? (end == 0 ? "min" : "max") : how);
                place(r, "value", v, f.log, d, note, nonfinite);
                note_refused(r, g.refused, m == 0 && end == 0, note, d);
                if (!x_ok) note = (note.empty() ? "" : note + ", ") + swept + " = " + format_number(g.x);
                r["note"] = note.empty() ? Json(nullptr) : Json(note);
                r["nonfinite"] = nonfinite;
                d.rows.push_back(std::move(r));
            }
        }
    d.overlaps = overlaps(d.rows, swept, f.log);
    return d;
}

bool determined_by(const Table& t, std::size_t col, std::size_t by) {
    std::map<std::string, std::string> seen;
    for (const auto& row : t.rows) {
        const auto [it, fresh] = seen.emplace(cell_to_string(row[by]), cell_to_string(row[col]));
        if (!fresh && it->second != cell_to_string(row[col])) return false;
    }
    return true;
}

bool numeric_column(const Table& t, const std::string& column) {
    auto it = std::find(t.columns.begin(), t.columns.end(), column);
    if (it == t.columns.end()) return false;
    const std::size_t i = static_cast<std::size_t>(it - t.columns.begin());
    std::set<double> values;
    for (const auto& row : t.rows) {
        double v = 0;
        if (!cell_number(row[i], v) || !std::isfinite(v)) return false;
        values.insert(v);
    }
    return values.size() >= 2;
}

}  // namespace normlab
