#pragma once
// Numeric matrices from CSV text (RFC 4180 quoting within a line), for the "csv" source.
#include <cstddef>
#include <string>
#include <vector>

namespace normlab {

/// How to read a CSV file: the "csv" source's keys of the same names (configs/README.md).
struct CsvOptions {
    std::size_t skip_rows = 0;  ///< physical lines skipped before anything else (e.g. a size line)
    bool header = false;        ///< the first line after them holds column names
    char delimiter = ',';
    std::size_t max_rows = 0;   ///< 0: all data rows
};

/// The column layout of a CSV: the header names (empty without a header) and the number of
/// cells of the first data row.
struct CsvLayout {
    std::vector<std::string> names;
    std::size_t columns = 0;
};

/// A numeric matrix read from CSV.
struct CsvMatrix {
    std::size_t rows = 0, cols = 0;  ///< cols = kept columns
    std::vector<double> values;      ///< row-major rows x cols
};

/// Reads the header (if opt.header) and counts the cells of the first data row. Throws
/// InputError "<what>: no data rows ..." or when the header and the first row disagree.
CsvLayout csv_layout(const std::string& text, const CsvOptions& opt, const std::string& what);

/// Parses CSV text: blank lines are skipped, cells are trimmed, quoted cells unquoted; only
/// the columns in `keep` (indices into the layout, in output order) are parsed as numbers
/// (locale-independent; "nan", "inf", "-inf" accepted), so a dropped label column may hold
/// text. Quoted cells spanning lines are not supported. Throws InputError "<what>: ..." for
/// a ragged row ("line 7 has 13 cells, but line 2 (the first data row) has 14") or a
/// non-numeric cell ("line 5, column 3 (\"hue\"): \"abc\" is not a number"); lines and
/// columns count from 1, as editors show them.
CsvMatrix parse_csv(const std::string& text, const CsvOptions& opt, const std::string& what,
                    const std::vector<std::size_t>& keep);

}  // namespace normlab
