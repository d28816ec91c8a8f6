// The "csv" source: a numeric table (rows = samples, columns = features), plain or gzip
// compressed, with header handling and column selection.
#include <algorithm>

#include "data/csv.hpp"
#include "data/files.hpp"
#include "data/source_impl.hpp"
#include "json/text.hpp"

namespace normlab {

namespace {

// Column references from the config: integers (negative from the end) or header names.
struct ColumnRef {
    long long index = 0;
    std::string name;  // non-empty: by name
    JsonLocation loc;
};

std::vector<ColumnRef> read_column_refs(ObjectReader& r, const std::string& key) {
    std::vector<ColumnRef> refs;
    const Json* j = r.raw(key);
    if (!j) return refs;
    if (!j->is_array()) r.at(key).fail("expected a list of column indices or names, but got " + json_type_name(*j));
    for (std::size_t i = 0; i < j->size(); ++i) {
        const Json& e = (*j)[i];
        ColumnRef ref;
        ref.loc = r.at(key).child(i);
        if (e.is_string()) ref.name = e.get<std::string>();
        else if (e.is_number_integer()) ref.index = e.get<long long>();
        else ref.loc.fail("expected a column index (integer) or a header name, but got " + e.dump());
        refs.push_back(ref);
    }
    return refs;
}

// Header names a "no column named" message lists.
constexpr std::size_t kNamesShown = 12;

std::size_t resolve(const ColumnRef& ref, std::size_t ncols, const std::vector<std::string>& names) {
    if (!ref.name.empty()) {
        if (names.empty()) ref.loc.fail("column names need \"header\": true");
        auto it = std::find(names.begin(), names.end(), ref.name);
        if (it == names.end()) {
            std::vector<std::string> shown;
            for (std::size_t k = 0; k < names.size() && k < kNamesShown; ++k) shown.push_back(quoted_text(names[k]));
            std::string listed = join_words(shown);
            if (names.size() > kNamesShown) listed += ", ... (" + count_noun(names.size(), "column") + ")";
            ref.loc.fail("no column named " + quoted_text(ref.name) + " in the header" + did_you_mean_note(ref.name, names, 3) +
                         "; it has " + listed);
        }
        return static_cast<std::size_t>(it - names.begin());
    }
    return at_location(ref.loc, [&] { return canonicalize_index(ref.index, ncols, "column", "a table with " + count_noun(ncols, "column")); });
}

}  // namespace

SourceData build_csv(const std::string&, ObjectReader& r, const DataContext& ctx) {
    const Json& p = r.required("path");
    if (!p.is_string()) r.at("path").fail("expected a file path string, but got " + json_type_name(p));
    CsvOptions opt;
    const long long skip = r.integer("skip_rows", 0);
    if (skip < 0) r.at("skip_rows").fail("skip_rows must be >= 0, but got " + std::to_string(skip));
    opt.skip_rows = static_cast<std::size_t>(skip);
    opt.header = r.boolean("header", false);
    const std::string delim = r.string("delimiter", ",");
    if (delim.size() != 1 || delim == "\"" || delim == "\n")
        r.at("delimiter").fail("delimiter must be one character (not a quote or newline), but got " + quoted_text(delim));
    opt.delimiter = delim[0];
    const long long max_rows = r.integer("max_rows", 0);
    if (max_rows < 0 || (r.has("max_rows") && max_rows == 0))
        r.at("max_rows").fail("max_rows must be a positive integer, but got " + std::to_string(max_rows));
    opt.max_rows = static_cast<std::size_t>(max_rows);
    const auto columns = read_column_refs(r, "columns");
    const auto drops = read_column_refs(r, "drop_columns");
    if (r.has("columns") && columns.empty()) r.at("columns").fail("expected at least one column");
    std::optional<Shape> row_shape;
    if (r.has("row_shape")) row_shape = read_positive_shape(r, "row_shape");

    const auto path = resolve_path(ctx, p.get<std::string>());
    const std::string text = at_location(r.at("path"), [&] { return read_maybe_gzip(path); });
    const CsvLayout layout = at_location(r.at("path"), [&] { return csv_layout(text, opt, path.string()); });
    std::vector<std::size_t> keep;
    if (columns.empty()) {
        for (std::size_t c = 0; c < layout.columns; ++c) keep.push_back(c);
    } else {
        for (const auto& ref : columns) keep.push_back(resolve(ref, layout.columns, layout.names));
    }
    for (const auto& ref : drops) {
        const std::size_t c = resolve(ref, layout.columns, layout.names);
        keep.erase(std::remove(keep.begin(), keep.end(), c), keep.end());
    }
    if (keep.empty()) r.location().fail("no columns left after \"columns\" and \"drop_columns\"");
    const CsvMatrix m = at_location(r.at("path"), [&] { return parse_csv(text, opt, path.string(), keep); });

    Shape shape{m.rows, m.cols};
    if (row_shape) {
        if (num_elements(*row_shape) != m.cols)
            r.at("row_shape").fail("row_shape " + format_shape(*row_shape) + " has " +
                                   count_noun(num_elements(*row_shape), "element") + ", but each row has " +
                                   count_noun(m.cols, "selected column"));
        shape = {m.rows};
        shape.insert(shape.end(), row_shape->begin(), row_shape->end());
    }
    SourceData d;
    d.values = xt::xarray<double>::from_shape(shape);
    std::copy(m.values.begin(), m.values.end(), d.values.begin());
    return d;
}

}  // namespace normlab
