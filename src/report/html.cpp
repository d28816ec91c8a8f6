#include "report/html.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/assets.hpp"
#include "report/html_page.hpp"

namespace normlab {

using Json = nlohmann::ordered_json;

namespace {

std::string escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// JSON inside <script>: every '<' (only ever inside a JSON string) as \u003c, so that neither
// "</script" nor "<!--" can end or change the script element.
std::string script_json(const Json& j) {
    const std::string s = j.dump();
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        if (c == '<') out += "\\u003c";
        else out += c;
    }
    return out;
}

// The config as people write it: two-space indents, but a list of numbers or strings on one
// line ("shape": [32, 3, 64, 64]) instead of one element per line as dump(2) does.
void pretty(std::ostream& o, const Json& j, int indent) {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    if (j.is_object() && !j.empty()) {
        o << "{\n";
        std::size_t i = 0;
        for (const auto& [k, v] : j.items()) {
            o << pad << Json(k).dump() << ": ";
            pretty(o, v, indent + 2);
            o << (++i < j.size() ? ",\n" : "\n");
        }
        o << std::string(static_cast<std::size_t>(indent), ' ') << "}";
    } else if (j.is_array() && !j.empty() &&
               std::any_of(j.begin(), j.end(), [](const Json& e) { return e.is_structured(); })) {
        o << "[\n";
        for (std::size_t i = 0; i < j.size(); ++i) {
            o << pad;
            pretty(o, j[i], indent + 2);
            o << (i + 1 < j.size() ? ",\n" : "\n");
        }
        o << std::string(static_cast<std::size_t>(indent), ' ') << "]";
    } else if (j.is_array()) {
        o << "[";
        for (std::size_t i = 0; i < j.size(); ++i) o << (i ? ", " : "") << j[i].dump();
        o << "]";
    } else {
        o << j.dump();
    }
}

// One table cell: numbers right-aligned with 6 significant digits (the full value in the
// title and the sort key), non-finite ones marked.
void write_cell(std::ostream& o, const Cell& c, std::size_t& nonfinite) {
    double v = 0;
    if (cell_number(c, v)) {
        const bool bad = !std::isfinite(v);
        nonfinite += bad;
        o << "<td class=\"num" << (bad ? " nonfinite" : "") << "\" data-v=\"" << format_number(v) << "\" title=\""
          << format_number(v) << "\">" << format_number_short(v) << "</td>";
        return;
    }
    o << "<td>" << escape(cell_to_string(c)) << "</td>";
}

// Column order: the lead columns that exist, then the others as the CSV has them.
std::vector<std::size_t> column_order(const Table& t, const std::vector<std::string>& lead) {
    std::vector<std::size_t> order;
    for (const auto& c : lead) {
        auto it = std::find(t.columns.begin(), t.columns.end(), c);
        const auto i = static_cast<std::size_t>(it - t.columns.begin());
        if (it != t.columns.end() && std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
    }
    for (std::size_t i = 0; i < t.columns.size(); ++i)
        if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
    return order;
}

void write_table(std::ostream& o, const Table& t, const std::vector<std::string>& lead, const std::string& csv) {
    const auto order = column_order(t, lead);
    std::ostringstream body;
    std::size_t nonfinite = 0;
    const std::size_t shown = std::min(t.rows.size(), kHtmlTableRows);
    for (std::size_t r = 0; r < shown; ++r) {
        body << "<tr>";
        for (auto i : order) write_cell(body, t.rows[r][i], nonfinite);
        body << "</tr>\n";
    }
    o << "<p class=\"caption\">" << t.rows.size() << " row(s)";
    if (shown < t.rows.size()) o << ", the first " << shown << " shown (all in " << escape(csv) << ")";
    if (nonfinite) o << "; <span class=\"nonfinite\">" << nonfinite << " non-finite cell(s)</span> in the rows shown";
    o << "; click a column header to sort.</p>\n<div class=\"tablewrap\"><table class=\"sortable\"><thead><tr>";
    for (auto i : order) o << "<th>" << escape(t.columns[i]) << "</th>";
    o << "</tr></thead><tbody>\n" << body.str() << "</tbody></table></div>\n";
}

std::string data_row(const std::string& point, const std::string& name, const Json& s, const std::string& dtype) {
    std::ostringstream o;
    o << "<tr>";
    if (!point.empty()) o << "<td class=\"num\" data-v=\"" << escape(point) << "\">" << escape(point) << "</td>";
    o << "<td>" << escape(name) << "</td><td>" << escape(s.value("source", "")) << "</td><td>"
      << escape(s.contains("shape") ? s["shape"].dump() : "") << "</td><td>"
      // The batch's own dtype (a swept dtype differs by point); reports of versions before
      // it was recorded fall back to the run's.
      << escape(s.contains("dtype") && s["dtype"].is_string() ? s["dtype"].get<std::string>() : dtype) << "</td>";
    o << "<td class=\"num\">" << escape(s.contains("channel_axis") ? s["channel_axis"].dump() : "") << "</td>";
    if (s.contains("pad_fraction") && s["pad_fraction"].is_number())
        o << "<td class=\"num\">" << format_number_short(s["pad_fraction"].get<double>()) << "</td>";
    else
        o << "<td>no mask</td>";
    const long long bad = s.contains("nonfinite_values") && s["nonfinite_values"].is_number_integer()
                              ? s["nonfinite_values"].get<long long>() : 0;
    o << "<td class=\"num" << (bad ? " nonfinite" : "") << "\" data-v=\"" << bad << "\">" << bad << "</td></tr>\n";
    return o.str();
}

void write_data(std::ostream& o, const Json& report) {
    // Data summaries are keyed by point when paths are swept (a sharded config without a
    // sweep has a "sweep" block with no paths, and one point).
    const bool swept = report.contains("sweep") && !report["sweep"].value("paths", Json::array()).empty();
    const std::string dtype = report.value("dtype", "");
    o << "<section id=\"data\"><h2>Data</h2>\n<div class=\"tablewrap\"><table class=\"sortable\"><thead><tr>"
      << (swept ? "<th>point</th>" : "")
      << "<th>data</th><th>source</th><th>shape</th><th>dtype</th><th>channel_axis</th><th>pad_fraction</th>"
         "<th>nonfinite_values</th></tr></thead><tbody>\n";
    const Json data = report.value("data", Json::object());
    for (const auto& [key, value] : data.items()) {
        if (!swept) {
            o << data_row("", key, value, dtype);
            continue;
        }
        for (const auto& [name, s] : value.items()) o << data_row(key, name, s, dtype);
    }
    o << "</tbody></table></div></section>\n";
}

void write_header(std::ostream& o, const Json& report) {
    const std::string name = report.value("name", "result");
    o << "<header><h1>normlab: " << escape(name) << "</h1><p>";
    o << "normlab " << escape(report.value("normlab_version", "")) << ", dtype " << escape(report.value("dtype", ""))
      << ", seed " << escape(report.contains("seed") ? report["seed"].dump() : "");
    if (report.contains("sweep")) {
        const Json& sw = report["sweep"];
        o << ", sweep over " << escape(sw.value("columns", Json::array()).dump()) << " ("
          << sw.value("points", Json::array()).size() << " of " << sw.value("total_points", Json(0)).dump()
          << " points)";
    }
    o << ". Figures: Vega " << vega_script().version << ", Vega-Lite " << vega_lite_script().version << ", vega-embed "
      << vega_embed_script().version << ", embedded in this page.</p></header>\n";
}

void write_nav(std::ostream& o, const std::vector<ReportSection>& sections) {
    o << "<nav><a href=\"#config\">config</a> <a href=\"#data\">data</a>";
    for (const auto& s : sections) o << " <a href=\"#" << escape(s.analysis) << "\">" << escape(s.analysis) << "</a>";
    o << "</nav>\n";
}

}  // namespace

std::string report_html(const Json& report, const std::vector<ReportSection>& sections) {
    std::ostringstream o;
    Json specs = Json::object();
    o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>normlab: "
      << escape(report.value("name", "result")) << "</title>\n<style>" << kReportCss << "</style>\n";
    for (const auto& s : {vega_script(), vega_lite_script(), vega_embed_script()}) o << "<script>" << s.js << "</script>\n";
    o << "</head><body>\n";
    write_header(o, report);
    write_nav(o, sections);
    std::ostringstream config;
    pretty(config, report.value("config", Json::object()), 0);
    o << "<section id=\"config\"><h2>Config</h2><pre>" << escape(config.str()) << "</pre></section>\n";
    write_data(o, report);
    for (const auto& s : sections) {
        o << "<section id=\"" << escape(s.analysis) << "\" class=\"analysis\"><h2>" << escape(s.analysis) << "</h2>\n";
        if (!s.summary.empty()) o << "<p>" << escape(s.summary) << "</p>\n";
        for (const auto& f : s.figures) {
            const std::string id = "fig-" + f.name;
            o << "<div class=\"figure\" id=\"" << escape(id) << "\"></div><p class=\"figpath\">figures/"
              << escape(f.name) << ".vl.json</p>\n";
            specs[id] = f.spec;
        }
        write_table(o, s.table, s.lead_columns, s.analysis + ".csv");
        o << "</section>\n";
    }
    o << "<script type=\"application/json\" id=\"normlab-specs\">" << script_json(specs) << "</script>\n";
    o << "<script>" << kReportJs << "</script>\n</body></html>\n";
    return o.str();
}

std::vector<std::pair<std::string, std::string>> report_files(const Json& report,
                                                              const std::vector<ReportSection>& sections) {
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& s : sections)
        for (const auto& f : s.figures) files.push_back({"figures/" + f.name + ".vl.json", f.spec.dump(2) + "\n"});
    files.push_back({"report.html", report_html(report, sections)});
    return files;
}

}  // namespace normlab
