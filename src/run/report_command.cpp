#include "run/report_command.hpp"

#include <algorithm>

#include "analysis/analysis.hpp"
#include "config/sweep.hpp"
#include "json/reader.hpp"
#include "json/text.hpp"
#include "report/output.hpp"
#include "report/result.hpp"
#include "tensor/errors.hpp"
#include "tensor/tensor.hpp"

namespace fs = std::filesystem;

namespace normlab {

using Json = nlohmann::ordered_json;

std::vector<ReportSection> report_sections(const Json& report, const std::string& file) {
    std::vector<ReportSection> out;
    const auto sweep = sweep_columns(report);
    for (auto& [type, table] : result_tables(report, file)) {
        ReportSection s;
        s.analysis = type;
        s.table = std::move(table);
        const AnalysisType* a = find_analysis(type);
        // report.json names each sweep column once; this table may hold it as sweep_<name>.
        std::vector<std::string> swept;
        for (const auto& c : sweep) swept.push_back(a ? sweep_column_in(c, a->columns) : c);
        if (!swept.empty()) s.lead_columns.push_back("point");
        s.lead_columns.insert(s.lead_columns.end(), swept.begin(), swept.end());
        if (a) {
            s.summary = a->summary;
            const auto cols = a->figure.columns();
            s.lead_columns.insert(s.lead_columns.end(), cols.begin(), cols.end());
            if (!s.table.rows.empty()) s.figures = figure_specs(type, a->figure, s.table, swept);
        } else {
            s.summary = "an analysis this normlab does not know: its table only, no figure";
        }
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<std::pair<std::string, std::string>> add_report_files(Json& report, const std::string& file) {
    auto files = report_files(report, report_sections(report, file));
    if (!report.contains("files") || !report["files"].is_array()) report["files"] = Json::array();
    for (const auto& f : files)
        if (std::find(report["files"].begin(), report["files"].end(), Json(f.first)) == report["files"].end())
            report["files"].push_back(f.first);
    return files;
}

namespace {

bool has_column(const Table& t, const std::string& column) {
    return std::find(t.columns.begin(), t.columns.end(), column) != t.columns.end();
}

// 'no column "c" in the <type> table (its columns: ...)', and which analyses of the result
// have it, or a did-you-mean when none does.
std::string missing_column(const fs::path& dir, const std::vector<std::pair<std::string, Table>>& tables,
                           const std::string& type, const std::string& column) {
    const Table& table = std::find_if(tables.begin(), tables.end(), [&](const auto& p) { return p.first == type; })->second;
    std::vector<std::string> others;
    for (const auto& [other, t] : tables)
        if (has_column(t, column)) others.push_back(other);
    std::string list, where;
    for (const auto& c : table.columns) list += (list.empty() ? "" : ", ") + c;
    for (const auto& w : others) where += (where.empty() ? "" : ", ") + w;
    return "no column " + quoted_text(column) + " in the " + type + " table" +
           (others.empty() ? did_you_mean_note(column, table.columns) : "") + " (its columns: " + list + ")" +
           (others.empty() ? "" : "; " + where + (others.size() == 1 ? " has" : " have") + " it: normlab show " +
                                      dir.string() + " " + others.front());
}

// Why --where kept no row of `t`: each condition that matches no row, with the values its
// column has (up to 12, in table order) and, in a column of names, a did-you-mean; else that
// no row meets them all.
std::string unmatched_where(const Table& t, const TerminalTableOptions& o) {
    constexpr std::size_t kListed = 12;
    std::string out;
    for (const auto& [column, value] : o.where) {
        const std::size_t c = static_cast<std::size_t>(
            std::find(t.columns.begin(), t.columns.end(), column) - t.columns.begin());
        std::vector<std::string> values;
        bool any = false, numbers = false;
        for (const auto& row : t.rows) {
            double v = 0;
            any = any || cell_matches(row[c], value);
            numbers = numbers || cell_number(row[c], v);
            const std::string text = cell_to_string(row[c]);
            if (std::find(values.begin(), values.end(), text) == values.end()) values.push_back(text);
        }
        if (any) continue;
        std::string list;
        for (std::size_t i = 0; i < std::min(values.size(), kListed); ++i) list += (i ? ", " : "") + values[i];
        if (values.size() > kListed) list += ", ... (" + std::to_string(values.size()) + " values)";
        // A near number is no likelier meant than a far one: the hint is for names.
        out += "no row has " + column + "=" + value + "; its values: " + list +
               (numbers ? "" : did_you_mean_note(value, values)) + "\n";
    }
    return out.empty() ? "no row meets all of the --where conditions\n" : out;
}

}  // namespace

std::vector<fs::path> write_report(const fs::path& dir) {
    Json report = load_report(dir);
    std::vector<fs::path> written;
    for (const auto& [rel, bytes] : add_report_files(report, (dir / "report.json").string())) {
        write_file_atomic(dir / rel, bytes);
        written.push_back(dir / rel);
    }
    write_file_atomic(dir / "report.json", report.dump(2) + "\n");  // lists the new files
    return written;
}

std::string show_result(const fs::path& dir, const ShowOptions& o) {
    const Json report = load_report(dir);
    const auto all = result_tables(report, (dir / "report.json").string());
    std::vector<const std::pair<std::string, Table>*> shown;  // into `all`: the tables are not copied
    for (const auto& p : all)
        if (o.analysis.empty() || p.first == o.analysis) shown.push_back(&p);
    if (shown.empty() && !o.analysis.empty()) {
        std::vector<std::string> types;
        std::string have;
        for (const auto& p : all) {
            types.push_back(p.first);
            have += (have.empty() ? "" : ", ") + p.first;
        }
        throw InputError((dir / "report.json").string() + ": no analysis " + quoted_text(o.analysis) +
                         " in this result, which has " + (have.empty() ? "none" : have) +
                         did_you_mean_note(o.analysis, types));
    }
    // A column a table lacks is named with the table, and with the analyses that have it.
    std::vector<std::pair<std::string, std::string>> asked;  // (option, column)
    for (const auto& c : o.table.columns) asked.push_back({"--columns", c});
    for (const auto& w : o.table.where) asked.push_back({"--where", w.first});
    for (const auto* p : shown)
        for (const auto& [option, column] : asked)
            if (!has_column(p->second, column))
                throw InputError("show " + option + ": " + missing_column(dir, all, p->first, column));
    std::string out;
    for (const auto* p : shown) {
        const auto& [type, table] = *p;
        std::size_t kept = 0, cut = 0;
        const std::string body = terminal_table(table, o.table, &kept, &cut);
        const std::string rows = o.table.where.empty()
                                     ? count_noun(table.rows.size(), "row")
                                     : std::to_string(kept) + " of " + count_noun(table.rows.size(), "row");
        out += "== " + type + " (" + rows + ", " + (dir / (type + ".csv")).string() + ")\n";
        out += body;
        if (kept == 0 && !table.rows.empty() && !o.table.where.empty()) out += unmatched_where(table, o.table);
        if (cut > 0)
            out += "(" + count_noun(cut, "text cell") + " cut at " + std::to_string(kTerminalTextWidth) +
                   " characters: --full shows " + (cut == 1 ? "it" : "them") + " whole)\n";
        const fs::path fig = dir / "figures" / (type + ".vl.json");
        out += "figure: " + (fs::exists(fig) ? fig.string() : fig.string() + " (not written yet: normlab report " + dir.string() + ")");
        out += "\n\n";
    }
    const fs::path html = dir / "report.html";
    out += fs::exists(html) ? "report: " + plain_or_quoted(html.string()) + "\n"
                            : "no report.html yet: normlab report " + plain_or_quoted(dir.string()) + "\n";
    return out;
}

}  // namespace normlab
