#pragma once
// report.html for a result (written by `normlab run` and `normlab merge`, and by
// `normlab report DIR` for an existing folder) and `normlab show`, which prints a result's
// tables in the terminal.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/html.hpp"
#include "report/terminal.hpp"

namespace normlab {

/// One section per analysis type of `report` (report.json's content), with the figures its
/// registered type declares; a type this build does not know gets its table and no figure.
/// `file` names the report.json in messages about its malformed parts.
std::vector<ReportSection> report_sections(const nlohmann::ordered_json& report,
                                           const std::string& file = "report.json");

/// The files the HTML report adds (figures/<name>.vl.json..., report.html), as
/// (relative path, bytes); `report`'s "files" gains their names (report.json is written after).
/// `file` as for report_sections.
std::vector<std::pair<std::string, std::string>> add_report_files(nlohmann::ordered_json& report,
                                                                  const std::string& file = "report.json");

/// Writes report.html and figures/ into the existing result folder `dir` (each file through a
/// temporary file and a rename) and lists them in its report.json. Returns the paths written.
/// InputError when `dir` holds no normlab result; EnvError when a file cannot be written.
std::vector<std::filesystem::path> write_report(const std::filesystem::path& dir);

/// What `normlab show` prints.
struct ShowOptions {
    std::string analysis;             ///< one analysis type; empty: every table
    TerminalTableOptions table;
};

/// The tables of the result in `dir` as aligned text, each under a "== <analysis> (N rows)"
/// line and followed by the path of its figure (and report.html when it exists); a table
/// that --where left empty says which condition matched no row, with that column's values
/// and a did-you-mean for a name, or that no row meets them all. InputError
/// for a folder without a normlab result, an analysis type the result does not have (naming
/// those it has), or unknown columns.
std::string show_result(const std::filesystem::path& dir, const ShowOptions& options);

}  // namespace normlab
