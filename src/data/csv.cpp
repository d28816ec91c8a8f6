#include "data/csv.hpp"

#include <charconv>

#include "tensor/errors.hpp"
#include "json/text.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

namespace {

std::string trim(const std::string& s) {
    const char* ws = " \t\r";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Splits one line at the delimiter outside double quotes; "" inside quotes is a quote.
std::vector<std::string> split_cells(const std::string& line, char delim) {
    std::vector<std::string> cells;
    std::string cur;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
            else if (c == '"') quoted = false;
            else cur += c;
        } else if (c == '"') {
            quoted = true;
        } else if (c == delim) {
            cells.push_back(trim(cur));
            cur.clear();
        } else {
            cur += c;
        }
    }
    cells.push_back(trim(cur));
    return cells;
}

bool parse_number(const std::string& cell, double& out) {
    if (cell.empty()) return false;
    const char* first = cell.data();
    const char* last = cell.data() + cell.size();
    if (*first == '+') ++first;  // from_chars does not take a leading '+'
    auto res = std::from_chars(first, last, out);
    return res.ec == std::errc() && res.ptr == last;
}

std::string quoted(const std::string& s) { return quoted_text(s.size() > 40 ? s.substr(0, 40) + "..." : s); }

// Why a cell is no number, and the key that would fix it where one would: a word in the
// first data row is a header; another separator in the cell, the delimiter; a number beyond
// double's range, what it is.
std::string not_a_number(const std::string& cell, bool first_row, const CsvOptions& opt) {
    if (cell.empty())
        return "empty cell is not a number (missing values are not read; fill them, or drop the column with "
               "\"drop_columns\")";
    double v;
    const char* first = cell.data() + (cell[0] == '+' ? 1 : 0);
    const auto res = std::from_chars(first, cell.data() + cell.size(), v);
    if (res.ec == std::errc::result_out_of_range && res.ptr == cell.data() + cell.size())
        return "number " + quoted(cell) + " is out of range (double holds magnitudes from about 4.9e-324 to 1.8e308)";
    for (char d : {';', '\t', '|'})  // not ',': in '1,5' under ';' it is a decimal comma
        if (d != opt.delimiter && cell.find(d) != std::string::npos)
            return quoted(cell) + " is not a number (the file may separate its cells by " +
                   (d == '\t' ? std::string("tabs: \"delimiter\": \"\\t\"") : "'" + std::string(1, d) + "': \"delimiter\": \"" + std::string(1, d) + "\"") + ")";
    if (first_row && !opt.header) return quoted(cell) + " is not a number (a header line? \"header\": true, or \"skip_rows\")";
    return quoted(cell) + " is not a number";
}

}  // namespace

namespace {

// Walks the data rows: fn(line_no, cells, header) for each, after skip_rows and the header
// (empty without opt.header). Returns the header. Stops when fn returns false.
template <class F>
std::vector<std::string> for_each_row(const std::string& text, const CsvOptions& opt, F&& fn) {
    std::vector<std::string> header;
    bool header_done = !opt.header;
    // A UTF-8 byte order mark, which spreadsheets write ahead of "CSV UTF-8", is no part of
    // the first cell.
    std::size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0, line_no = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (line_no <= opt.skip_rows || trim(line).empty()) continue;
        std::vector<std::string> cells = split_cells(line, opt.delimiter);
        if (!header_done) {
            header = std::move(cells);
            header_done = true;
            continue;
        }
        if (!fn(line_no, cells, header)) break;
    }
    return header;
}

[[noreturn]] void no_rows(const CsvOptions& opt, const std::string& what) {
    throw InputError(what + ": no data rows" +
                     (opt.skip_rows || opt.header ? " after the skipped/header lines" : std::string()));
}

}  // namespace

CsvLayout csv_layout(const std::string& text, const CsvOptions& opt, const std::string& what) {
    CsvLayout layout;
    std::size_t first_line = 0;
    layout.names = for_each_row(text, opt, [&](std::size_t line_no, const std::vector<std::string>& cells,
                                               const std::vector<std::string>&) {
        layout.columns = cells.size();
        first_line = line_no;
        return false;
    });
    if (first_line == 0) no_rows(opt, what);
    if (opt.header && layout.names.size() != layout.columns)
        throw InputError(what + ": the header has " + count_noun(layout.names.size(), "name") +
                         ", but line " + std::to_string(first_line) + " (the first data row) has " +
                         count_noun(layout.columns, "cell"));
    return layout;
}

CsvMatrix parse_csv(const std::string& text, const CsvOptions& opt, const std::string& what,
                    const std::vector<std::size_t>& keep) {
    CsvMatrix m;
    m.cols = keep.size();
    std::size_t ncells = 0, first_line = 0;
    for_each_row(text, opt, [&](std::size_t line_no, const std::vector<std::string>& cells,
                                const std::vector<std::string>& header) {
        if (first_line == 0) ncells = cells.size(), first_line = line_no;
        if (cells.size() != ncells)
            throw InputError(what + ": line " + std::to_string(line_no) + " has " + count_noun(cells.size(), "cell") +
                             ", but line " + std::to_string(first_line) + " (the first data row) has " +
                             std::to_string(ncells));
        for (std::size_t c : keep) {
            double v;
            if (!parse_number(cells[c], v)) {
                const std::string name = c < header.size() ? " (" + quoted(header[c]) + ")" : std::string();
                throw InputError(what + ": line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) +
                                 name + ": " + not_a_number(cells[c], line_no == first_line, opt));
            }
            m.values.push_back(v);
        }
        ++m.rows;
        return opt.max_rows == 0 || m.rows < opt.max_rows;
    });
    if (m.rows == 0) no_rows(opt, what);
    return m;
}

}  // namespace normlab
