#pragma once
// Tidy result tables and their CSV/JSON forms (DESIGN.md "The output folder").
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/numbers.hpp"  // format_number: cells are written with it

namespace normlab {

/// One CSV cell. Shapes and axis lists are strings in compact form, e.g. "[1,3,1,1]".
using Cell = std::variant<std::string, double, long long, bool>;

/// The cell of a value that does not apply to a row (a parameter the norm does not have, a
/// check that was turned off): an empty CSV field and "" in report.json, as text columns
/// leave out a value, so that nan/inf always mean a computed value that is not finite.
inline Cell not_applicable() { return std::string(); }
/// Whether `c` is such a cell (an empty string).
inline bool is_not_applicable(const Cell& c) {
    const auto* s = std::get_if<std::string>(&c);
    return s && s->empty();
}

/// One table: a header and rows of equal length; one observation per row.
struct Table {
    std::vector<std::string> columns;
    std::vector<std::vector<Cell>> rows;

    /// Appends a row; throws std::logic_error if its length differs from the header's.
    void add_row(std::vector<Cell> row);
    /// Appends all rows of `other` (same columns required; std::logic_error otherwise).
    void append(const Table& other);
};

/// A double for people to read: 6 significant digits (printf %.6g: 0.000123457, 1.23457e+07),
/// "nan", "inf", "-inf".
std::string format_number_short(double v);
/// RFC 4180 CSV: header row, fields quoted when they hold a comma, quote or newline,
/// "\n" line ends, booleans as true/false.
void write_csv(std::ostream& out, const Table& t);
/// The table as a JSON array of row objects. Non-finite numbers become the strings
/// "nan", "inf", "-inf" (JSON has no such numbers and nlohmann would write null).
nlohmann::ordered_json table_to_json(const Table& t);
/// A double as JSON under the same non-finite rule.
nlohmann::ordered_json number_to_json(double v);
/// The inverse of table_to_json (report.json's "rows"): JSON integers become long long,
/// other numbers double, the strings "nan", "inf", "-inf" the non-finite doubles, booleans
/// bool, other strings string. Columns come from the first row's keys (an empty table for
/// no rows). Throws std::invalid_argument for a row that is not an object with those keys,
/// or a cell that is null, an array or an object.
Table table_from_json(const nlohmann::ordered_json& rows);
/// A cell as text without CSV quoting: strings as they are, numbers as format_number,
/// booleans true/false.
std::string cell_to_string(const Cell& c);
/// Sets `out` to the cell's value and returns true when the cell is a number (double or
/// integer); returns false for strings and booleans.
bool cell_number(const Cell& c, double& out);

}  // namespace normlab
