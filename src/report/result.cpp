#include "report/result.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "json/text.hpp"
#include "report/output.hpp"
#include "tensor/errors.hpp"

namespace normlab {

using Json = nlohmann::ordered_json;

void check_result_folder(const std::filesystem::path& dir) {
    std::error_code ec;
    const auto status = std::filesystem::status(dir, ec);
    if (!std::filesystem::exists(status)) throw InputError(dir.string() + ": no such folder");
    if (!std::filesystem::is_directory(status))
        throw InputError(dir.string() + ": not a folder (give the result folder, the one that holds report.json)");
    if (!is_normlab_result(dir)) {
        const auto path = dir / "report.json";
        if (std::filesystem::exists(path, ec)) {
            // It is there: say why it cannot serve, not that it is missing.
            const std::string what = path.string() + ": exists but cannot be read";
            if (std::filesystem::is_directory(path, ec)) throw InputError(what + ": it is a folder, not a file");
            std::ifstream in(path, std::ios::binary);
            if (!in) throw InputError(what + ": cannot open it (" + std::strerror(errno) + ")");
            std::stringstream ss;
            ss << in.rdbuf();
            const std::string text = ss.str();
            if (text.find_first_not_of(" \t\r\n") == std::string::npos)
                throw InputError(what + ": the file is empty (expected the JSON report normlab writes)");
            parse_json_text(text, what);  // throws with the parse error and its line and column
            throw InputError(path.string() + ": not a normlab result folder (this report.json was not written by "
                             "normlab: expected an object with \"tool\": \"normlab\")");
        }
        throw InputError(path.string() + ": not a normlab result folder (no report.json written by normlab)");
    }
}

Json load_report(const std::filesystem::path& dir) {
    const auto path = dir / "report.json";
    check_result_folder(dir);
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        return Json::parse(ss.str());
    } catch (const Json::exception& e) {
        throw InputError(path.string() + ": cannot be parsed: " + e.what());
    }
}

std::vector<std::pair<std::string, Table>> result_tables(const Json& report, const std::string& file) {
    std::vector<std::pair<std::string, Table>> out;
    const auto it = report.find("analyses");
    if (it == report.end()) return out;
    if (!it->is_array()) throw InputError(file + ": /analyses is not an array");
    for (std::size_t i = 0; i < it->size(); ++i) {
        const Json& a = (*it)[i];
        const std::string where = file + ": /analyses/" + std::to_string(i);
        if (!a.is_object() || !a.contains("type") || !a["type"].is_string() || !a.contains("rows"))
            throw InputError(where + ": expected an object with \"type\" and \"rows\"");
        Table t;
        try {
            t = table_from_json(a["rows"]);
        } catch (const std::invalid_argument& e) {
            throw InputError(where + "/rows: " + e.what());
        }
        const std::string type = a["type"].get<std::string>();
        auto same = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == type; });
        if (same == out.end()) {
            out.push_back({type, std::move(t)});
        } else if (!t.rows.empty()) {
            if (same->second.rows.empty()) same->second.columns = t.columns;
            if (t.columns != same->second.columns) throw InputError(where + ": columns differ from the earlier " + quoted_text(type) + " rows");
            same->second.append(t);
        }
    }
    return out;
}

std::vector<std::string> sweep_columns(const Json& report) {
    std::vector<std::string> out;
    if (!report.contains("sweep") || !report["sweep"].contains("columns")) return out;
    for (const auto& c : report["sweep"]["columns"])
        if (c.is_string()) out.push_back(c.get<std::string>());
    return out;
}

}  // namespace normlab
