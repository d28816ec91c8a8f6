#pragma once
// Reading a result folder back: report.json and the per-analysis tables it holds (the same
// rows as the CSVs, typed), for `normlab report` and `normlab show`.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/table.hpp"

namespace normlab {

/// Throws InputError unless `dir` is a folder holding a report.json written by normlab:
/// "DIR: no such folder", "DIR: not a folder (...)", "DIR/report.json: not a normlab result
/// folder (...)", or, for a report.json that is there but empty or malformed, "DIR/report.json:
/// exists but cannot be read: ..." with the parse error and its position.
void check_result_folder(const std::filesystem::path& dir);

/// DIR/report.json. Throws InputError as check_result_folder, or when its report.json
/// cannot be parsed.
nlohmann::ordered_json load_report(const std::filesystem::path& dir);

/// One table per analysis type, in the order the types first appear in report["analyses"],
/// each with the rows of every analysis of that type (= <type>.csv). Throws InputError when
/// "analyses" is malformed or two analyses of one type have different columns, naming `file`
/// (the report.json's path).
std::vector<std::pair<std::string, Table>> result_tables(const nlohmann::ordered_json& report,
                                                         const std::string& file = "report.json");

/// The CSV columns of the swept paths (report["sweep"]["columns"]); empty without a sweep.
std::vector<std::string> sweep_columns(const nlohmann::ordered_json& report);

}  // namespace normlab
