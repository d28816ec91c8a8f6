#include "json/text.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tensor/errors.hpp"

namespace normlab {

Json parse_json_text(const std::string& text, const std::string& what) {
    check_json_nesting(text, what);
    try {
        return Json::parse(text);
    } catch (const Json::parse_error& e) {
        // nlohmann's message already says "parse error at line L, column C: ..."; keep it
        // after our own prefix so the line starts with the file.
        std::string msg = e.what();
        auto pos = msg.find("parse error");
        if (pos != std::string::npos) msg = msg.substr(pos);
        throw InputError(what + ": malformed JSON: " + msg);
    } catch (const Json::out_of_range& e) {
        // A number beyond a double's range ("1e400"): nlohmann names the token but not
        // where it is, so find it.
        const std::string msg = e.what();
        const auto q1 = msg.find('\''), q2 = msg.rfind('\'');
        const std::string token = q1 != std::string::npos && q2 > q1 ? msg.substr(q1 + 1, q2 - q1 - 1) : std::string();
        std::string where;
        if (const auto at = token.empty() ? std::string::npos : text.find(token); at != std::string::npos) {
            const std::size_t line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
            const std::size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
            const std::size_t column = line_start == std::string::npos || at == 0 ? at + 1 : at - line_start;
            where = "line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
        }
        throw InputError(what + ": " + where + "number " + (token.empty() ? std::string() : token + " ") +
                         "is out of range (a double holds magnitudes up to 1.8e308)");
    }
}

Json load_json_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError(path.string() + ": is a directory, expected a JSON config file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path.string() + ": cannot open config file (missing or unreadable)");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_json_text(ss.str(), path.string());
}

}  // namespace normlab
