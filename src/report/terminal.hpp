#pragma once
// Result tables for a terminal (`normlab show`): columns aligned, numbers right-aligned and
// shortened to 6 significant digits unless asked for in full, text cells such as
// "[4,8,16]" printed whole (never split at their commas).
#include <string>
#include <utility>
#include <vector>

#include "report/table.hpp"

namespace normlab {

/// Which part of a table to print.
struct TerminalTableOptions {
    std::vector<std::string> columns;                          ///< these, in this order (empty: all)
    std::vector<std::pair<std::string, std::string>> where;    ///< keep rows whose column matches the value (cell_matches; all must hold)
    bool full = false;                                         ///< numbers in shortest round-trip form, long text whole
};

/// Text cells longer than this are cut (with "...") unless `full`.
inline constexpr std::size_t kTerminalTextWidth = 48;

/// Parses "column=value" for a --where option. Throws InputError without '=' or a column name.
std::pair<std::string, std::string> parse_where(const std::string& text);

/// True when the cell matches `value`: the same text, or both numbers and equal (so 1e-5
/// matches 1e-05 and 0.00001, not 1.2e-5), or both numbers that agree rounded to 6
/// significant digits, as show prints them, or to the value's own digits when it has more
/// (0.720305, show's display of 0.7203054671107697, matches it; 0.72 does not). Text that
/// is not a number matches only exactly.
bool cell_matches(const Cell& c, const std::string& value);

/// The table as aligned lines: a header, a rule, one line per kept row, "\n" line ends; the
/// number of kept rows in *kept_count and of text cells cut to kTerminalTextWidth in
/// *cut_count when given. Throws InputError naming an unknown column in `columns` or
/// `where` (with the columns the table has).
std::string terminal_table(const Table& t, const TerminalTableOptions& options, std::size_t* kept_count = nullptr,
                           std::size_t* cut_count = nullptr);

}  // namespace normlab
