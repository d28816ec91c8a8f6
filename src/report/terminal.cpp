#include "report/terminal.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Display width in code points (UTF-8 continuation bytes do not count).
std::size_t width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

std::string column_list(const Table& t) {
    std::string s;
    for (const auto& c : t.columns) s += (s.empty() ? "" : ", ") + c;
    return s;
}

std::size_t find_column(const Table& t, const std::string& name, const char* option) {
    auto it = std::find(t.columns.begin(), t.columns.end(), name);
    if (it == t.columns.end())
        throw InputError(std::string(option) + ": no column " + quoted_text(name) + " (columns: " + column_list(t) + ")");
    return static_cast<std::size_t>(it - t.columns.begin());
}

bool parse_double(const std::string& s, double& out) {
    if (s.empty()) return false;
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
}

// The cell as show prints it; `cut` is set when its text was shortened.
std::string display(const Cell& c, bool full, bool& cut) {
    double v = 0;
    if (cell_number(c, v)) return std::holds_alternative<long long>(c) || full ? cell_to_string(c) : format_number_short(v);
    std::string s = cell_to_string(c);
    if (!full && width(s) > kTerminalTextWidth) {
        std::size_t keep = 0, seen = 0;
        while (keep < s.size() && seen < kTerminalTextWidth - 3) {
            ++keep;
            while (keep < s.size() && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) ++keep;
            ++seen;
        }
        s = s.substr(0, keep) + "...";
        cut = true;
    }
    return s;
}

using Where = std::vector<std::pair<std::size_t, std::string>>;

Where where_columns(const Table& t, const TerminalTableOptions& o) {
    Where where;
    for (const auto& [c, v] : o.where) where.push_back({find_column(t, c, "--where"), v});
    return where;
}

bool kept(const Where& where, const std::vector<Cell>& row) {
    return std::all_of(where.begin(), where.end(), [&](const auto& w) { return cell_matches(row[w.first], w.second); });
}

// Significant digits of a decimal number as typed ("0.720305": 6, "1e-5": 1, "1.0e-5": 2,
// "100": 3), or 0 when `s` is not a plain decimal ([+-]digits[.digits][e[+-]digits]: hex,
// "inf", "nan") or has no non-zero digit.
int significant_digits(const std::string& s) {
    std::size_t i = 0;
    const std::size_t n = s.size();
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    std::string digits;
    bool point = false;
    for (; i < n && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !point)); ++i) {
        if (s[i] == '.') point = true;
        else digits += s[i];
    }
    if (digits.empty()) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
        if (i == n) return 0;
        for (; i < n; ++i)
            if (!std::isdigit(static_cast<unsigned char>(s[i]))) return 0;
    }
    if (i != n) return 0;
    const std::size_t lead = digits.find_first_not_of('0');
    return lead == std::string::npos ? 0 : static_cast<int>(digits.size() - lead);
}

// v in scientific notation with `digits` significant digits: two numbers agree to that
// precision when these texts are equal (printf rounds the exact binary value to nearest).
std::string rounded(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    return buf;
}

}  // namespace

std::pair<std::string, std::string> parse_where(const std::string& text) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
        throw InputError("--where " + text + ": expected COLUMN=VALUE (e.g. norm=ln)");
    return {text.substr(0, eq), text.substr(eq + 1)};
}

bool cell_matches(const Cell& c, const std::string& value) {
    if (cell_to_string(c) == value) return true;
    double a = 0, b = 0;
    if (!cell_number(c, a) || !parse_double(value, b)) return false;
    if (a == b) return true;
    // A number as show prints it matches the cells it is the display of: both rounded to 6
    // significant digits (show's; %g drops trailing zeros, so "0.5" is 0.5000004 shown) are
    // the same, or to the value's own digits when it has more. A shorter value typed by hand
    // is not widened: eps=1e-5 must not pick 1.2e-5 out of an eps sweep. From 17 digits on
    // a double has nothing left to round: equal or not.
    const int digits = std::max(significant_digits(value), 6);
    if (digits >= 17 || !std::isfinite(a) || !std::isfinite(b)) return false;
    return rounded(a, digits) == rounded(b, digits);
}

std::string terminal_table(const Table& t, const TerminalTableOptions& o, std::size_t* kept_count, std::size_t* cut_count) {
    std::vector<std::size_t> cols;
    if (o.columns.empty())
        for (std::size_t i = 0; i < t.columns.size(); ++i) cols.push_back(i);
    for (const auto& c : o.columns) cols.push_back(find_column(t, c, "--columns"));
    const Where where = where_columns(t, o);

    std::vector<std::vector<std::string>> cells;
    std::vector<bool> numeric(cols.size(), true);
    std::size_t cuts = 0;
    for (const auto& row : t.rows) {
        if (!kept(where, row)) continue;
        std::vector<std::string> line;
        for (std::size_t k = 0; k < cols.size(); ++k) {
            // An empty cell (a value that does not apply) leaves a number column right-aligned.
            double v = 0;
            if (!cell_number(row[cols[k]], v) && !is_not_applicable(row[cols[k]])) numeric[k] = false;
            bool cut = false;
            line.push_back(display(row[cols[k]], o.full, cut));
            cuts += cut;
        }
        cells.push_back(std::move(line));
    }
    if (kept_count) *kept_count = cells.size();
    if (cut_count) *cut_count = cuts;
    std::vector<std::size_t> w(cols.size());
    for (std::size_t k = 0; k < cols.size(); ++k) {
        w[k] = width(t.columns[cols[k]]);
        for (const auto& line : cells) w[k] = std::max(w[k], width(line[k]));
    }
    auto pad = [&](const std::string& s, std::size_t k) {
        const std::string fill(w[k] - width(s), ' ');
        return numeric[k] ? fill + s : s + fill;
    };
    std::string out;
    auto emit = [&](const std::vector<std::string>& line) {
        std::string s;
        for (std::size_t k = 0; k < line.size(); ++k) s += (k ? "  " : "") + pad(line[k], k);
        while (!s.empty() && s.back() == ' ') s.pop_back();
        out += s + "\n";
    };
    std::vector<std::string> head, rule;
    for (std::size_t k = 0; k < cols.size(); ++k) {
        head.push_back(t.columns[cols[k]]);
        rule.push_back(std::string(w[k], '-'));
    }
    emit(head);
    emit(rule);
    for (const auto& line : cells) emit(line);
    return out;
}

}  // namespace normlab
