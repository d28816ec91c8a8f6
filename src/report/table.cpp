#include "report/table.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "json/text.hpp"

namespace normlab {

void Table::add_row(std::vector<Cell> row) {
    if (row.size() != columns.size())
        throw std::logic_error("Table::add_row: " + std::to_string(row.size()) + " cells for " +
                               std::to_string(columns.size()) + " columns");
    rows.push_back(std::move(row));
}

void Table::append(const Table& other) {
    if (other.columns != columns) throw std::logic_error("Table::append: columns differ");
    rows.insert(rows.end(), other.rows.begin(), other.rows.end());
}

std::string format_number_short(double v) {
    if (!std::isfinite(v)) return format_number(v);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

namespace {

// Bracketed lists (shapes, axes) are always quoted, so "[512]" and "[1,3,1,1]" look alike.
std::string quote_csv(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos && (s.empty() || s[0] != '[')) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::string cell_text(const Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return quote_csv(*s);
    return cell_to_string(c);
}

}  // namespace

std::string cell_to_string(const Cell& c) {
    if (auto s = std::get_if<std::string>(&c)) return *s;
    if (auto d = std::get_if<double>(&c)) return format_number(*d);
    if (auto i = std::get_if<long long>(&c)) return std::to_string(*i);
    return std::get<bool>(c) ? "true" : "false";
}

bool cell_number(const Cell& c, double& out) {
    if (auto d = std::get_if<double>(&c)) out = *d;
    else if (auto i = std::get_if<long long>(&c)) out = static_cast<double>(*i);
    else return false;
    return true;
}

void write_csv(std::ostream& out, const Table& t) {
    for (std::size_t i = 0; i < t.columns.size(); ++i) out << (i ? "," : "") << quote_csv(t.columns[i]);
    out << '\n';
    for (const auto& row : t.rows) {
        for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << cell_text(row[i]);
        out << '\n';
    }
}

nlohmann::ordered_json number_to_json(double v) {
    if (std::isfinite(v)) return v;
    return format_number(v);
}

nlohmann::ordered_json table_to_json(const Table& t) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& row : t.rows) {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (std::size_t i = 0; i < row.size(); ++i) {
            const Cell& c = row[i];
            if (auto s = std::get_if<std::string>(&c)) o[t.columns[i]] = *s;
            else if (auto d = std::get_if<double>(&c)) o[t.columns[i]] = number_to_json(*d);
            else if (auto n = std::get_if<long long>(&c)) o[t.columns[i]] = *n;
            else o[t.columns[i]] = std::get<bool>(c);
        }
        rows.push_back(std::move(o));
    }
    return rows;
}

Table table_from_json(const nlohmann::ordered_json& rows) {
    Table t;
    if (!rows.is_array()) throw std::invalid_argument("table rows: expected an array");
    if (rows.empty()) return t;
    if (!rows[0].is_object()) throw std::invalid_argument("table rows: row 0 is not an object");
    for (const auto& [key, value] : rows[0].items()) t.columns.push_back(key);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const auto& o = rows[r];
        if (!o.is_object() || o.size() != t.columns.size())
            throw std::invalid_argument("table rows: row " + std::to_string(r) + " does not have the columns of row 0");
        std::vector<Cell> row;
        for (const auto& col : t.columns) {
            auto it = o.find(col);
            if (it == o.end()) throw std::invalid_argument("table rows: row " + std::to_string(r) + " lacks " + quoted_text(col));
            const auto& v = *it;
            if (v.is_boolean()) row.push_back(v.get<bool>());
            else if (v.is_number_integer() && !v.is_number_unsigned()) row.push_back(v.get<long long>());
            else if (v.is_number_unsigned() && v.get<unsigned long long>() <= 9223372036854775807ull) row.push_back(v.get<long long>());
            else if (v.is_number()) row.push_back(v.get<double>());
            else if (v.is_string()) {
                const std::string& s = v.get_ref<const std::string&>();
                if (s == "nan") row.push_back(std::nan(""));
                else if (s == "inf") row.push_back(HUGE_VAL);
                else if (s == "-inf") row.push_back(-HUGE_VAL);
                else row.push_back(s);
            } else {
                throw std::invalid_argument("table rows: row " + std::to_string(r) + ", " + quoted_text(col) + ": a " +
                                            std::string(v.type_name()) + " is not a table cell");
            }
        }
        t.rows.push_back(std::move(row));
    }
    return t;
}

}  // namespace normlab
