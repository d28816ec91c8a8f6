#pragma once
// Helpers for the analysis tests: run a config given as text through the built binary
// and read the CSV tables it writes.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"

namespace normlab_test {

/// One CSV row, by column name.
using CsvRow = std::map<std::string, std::string>;

/// The rows report.json in the result folder `out` holds for its first analysis of type
/// `type` (null when there is none). Cells as report.json writes them: "" for a value that
/// does not apply, "nan"/"inf" for a computed non-finite one.
inline nlohmann::json report_rows(const std::filesystem::path& out, const std::string& type) {
    const auto report = nlohmann::json::parse(read_text(out / "report.json"));
    for (const auto& a : report["analyses"])
        if (a["type"] == type) return a["rows"];
    return nullptr;
}

/// Whether report.html in `out` marks any table cell red as non-finite.
inline bool html_flags_nonfinite(const std::filesystem::path& out) {
    return read_text(out / "report.html").find("non-finite cell") != std::string::npos;
}

/// Parses RFC 4180 CSV text (header row, quoted fields with "" escapes, "\n" line ends).
inline std::vector<CsvRow> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> lines(1);
    std::string field;
    bool quoted = false, any = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
            else if (c == '"') quoted = false;
            else field += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            lines.back().push_back(field), field.clear();
        } else if (c == '\n') {
            lines.back().push_back(field), field.clear();
            lines.emplace_back();
        } else {
            field += c;
        }
        any = true;
    }
    if (!field.empty() || (any && !lines.back().empty())) lines.back().push_back(field);
    if (lines.back().empty()) lines.pop_back();
    std::vector<CsvRow> rows;
    for (std::size_t r = 1; r < lines.size(); ++r) {
        REQUIRE(lines[r].size() == lines[0].size());
        CsvRow row;
        for (std::size_t k = 0; k < lines[0].size(); ++k) row[lines[0][k]] = lines[r][k];
        rows.push_back(row);
    }
    return rows;
}

/// The header of a CSV text, as one string ("data,norm,...").
inline std::string csv_header(const std::string& text) { return text.substr(0, text.find('\n')); }

/// A numeric cell ("nan", "inf" included).
inline double num(const CsvRow& r, const std::string& col) {
    const auto it = r.find(col);
    REQUIRE_MESSAGE(it != r.end(), "no column " << col);
    return std::stod(it->second);
}

/// The rows whose columns equal the given values.
inline std::vector<CsvRow> select(const std::vector<CsvRow>& rows, const std::map<std::string, std::string>& where) {
    std::vector<CsvRow> out;
    for (const auto& r : rows) {
        bool ok = true;
        for (const auto& [k, v] : where) ok = ok && r.count(k) && r.at(k) == v;
        if (ok) out.push_back(r);
    }
    return out;
}

/// The single row matching `where` (a failed REQUIRE otherwise).
inline CsvRow one(const std::vector<CsvRow>& rows, const std::map<std::string, std::string>& where) {
    auto s = select(rows, where);
    std::string what;
    for (const auto& [k, v] : where) what += k + "=" + v + " ";
    REQUIRE_MESSAGE(s.size() == 1, "rows matching " << what << ": " << s.size());
    return s[0];
}

/// The outcome of running one config.
struct RunResult {
    CliResult cli;
    std::filesystem::path out;  ///< the output folder

    std::vector<CsvRow> csv(const std::string& type) const {
        return parse_csv(read_text(out / (type + ".csv")));
    }
};

/// Writes `json` to a fresh folder as cfg.json (plus any extra files) and runs it.
inline RunResult run_config(const std::string& name, const nlohmann::json& json,
                            const std::map<std::string, std::string>& files = {}) {
    const auto dir = fresh_dir(name);
    write_text(dir / "cfg.json", json.dump(2));
    for (const auto& [f, text] : files) write_text(dir / f, text);
    RunResult r;
    r.out = dir / "out";
    r.cli = run_normlab("run " + (dir / "cfg.json").string() + " --out " + r.out.string() + " -q");
    return r;
}

/// |a - b| <= tol, with a message naming both.
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        const double a_ = (a), b_ = (b);                                                           \
        CHECK_MESSAGE(std::fabs(a_ - b_) <= (tol), #a " = " << a_ << ", expected " << b_);        \
    } while (0)

}  // namespace normlab_test
