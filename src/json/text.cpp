#include "json/text.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "tensor/errors.hpp"

namespace normlab {

namespace {

// nlohmann keeps the last of two equal keys in an object without a word, so that a setting
// given twice (a pasted line, a merge) would silently replace the first. This parser
// callback refuses the second. nlohmann's depths: an object's or array's members carry the
// container's depth + 1, and a member ends with a `value` event (scalars) or its own
// object_end/array_end at that depth.
class DuplicateKeys {
public:
    explicit DuplicateKeys(std::string file) : m_file(std::move(file)) {}

    bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
        using E = Json::parse_event_t;
        const std::size_t d = static_cast<std::size_t>(depth);
        if (event == E::object_start || event == E::array_start) {
            if (m_levels.size() < d + 2) m_levels.resize(d + 2);
            m_levels[d + 1] = Level{event == E::array_start, 0, {}, {}};
        } else if (event == E::key) {
            Level& l = m_levels[d];
            l.key = parsed.get<std::string>();
            if (!l.keys.insert(l.key).second) {
                JsonLocation at{m_file, ""};
                for (std::size_t i = 1; i < d; ++i)
                    at = m_levels[i].array ? at.child(m_levels[i].count) : at.child(m_levels[i].key);
                at.child(l.key).fail("key given twice in one object (JSON would keep only the last, silently); remove one");
            }
        }
        if ((event == E::value || event == E::object_end || event == E::array_end) && d < m_levels.size())
            ++m_levels[d].count;
        return true;
    }

private:
    struct Level {
        bool array = false;
        std::size_t count = 0;        // members ended so far (an array's: the next index)
        std::set<std::string> keys;   // an object's keys so far
        std::string key;              // an object's current key
    };
    std::string m_file;
    std::vector<Level> m_levels;  // by depth; [0] unused
};

}  // namespace

Json parse_json_text(const std::string& text, const std::string& what) {
    check_json_nesting(text, what);
    try {
        return Json::parse(text, DuplicateKeys(what));
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
