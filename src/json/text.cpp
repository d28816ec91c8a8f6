#include "json/text.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <vector>

#include "tensor/errors.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

namespace {

// A SAX pass that refuses the second of two equal keys in one object, naming its JSON
// pointer. A pass of its own: nlohmann's parse callbacks would do it in the same pass, but
// with one its DOM builder scans the parent container each time an object ends, quadratic
// in an array of objects (50,000 small objects: 2.4 s against 13 ms).
class DuplicateKeys : public nlohmann::json_sax<Json> {
public:
    DuplicateKeys(std::string what, std::string base) : m_what(std::move(what)), m_base(std::move(base)) {}

    bool null() override { return member_done(); }
    bool boolean(bool) override { return member_done(); }
    bool number_integer(number_integer_t) override { return member_done(); }
    bool number_unsigned(number_unsigned_t) override { return member_done(); }
    // A literal below a double's smallest magnitude ("1e-400") parses as 0 without a word;
    // refused, as one beyond its largest is, where 0 was not written.
    bool number_float(number_float_t v, const string_t& text) override {
        if (v == 0) {
            const auto mantissa_end = text.find_first_of("eE");
            const std::string mantissa = text.substr(0, mantissa_end);
            if (mantissa.find_first_of("123456789") != std::string::npos)
                here().fail("number " + text +
                            " is below a double's smallest magnitude (about 4.9e-324) and would read as 0; write 0 "
                            "if 0 is meant");
        }
        return member_done();
    }
    bool string(string_t&) override { return member_done(); }
    bool binary(binary_t&) override { return member_done(); }
    bool start_object(std::size_t) override {
        m_levels.push_back(Level{});
        return true;
    }
    bool key(string_t& k) override {
        Level& l = m_levels.back();
        l.key = k;
        if (!l.keys.insert(k).second)
            here().fail("key given twice in one object (JSON would keep only the last, silently); remove one");
        return true;
    }
    bool end_object() override {
        m_levels.pop_back();
        return member_done();
    }
    bool start_array(std::size_t) override {
        m_levels.push_back(Level{true, 0, {}, {}});
        return true;
    }
    bool end_array() override {
        m_levels.pop_back();
        return member_done();
    }
    // Malformed text, or a number out of range: the parse that follows reports it.
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

private:
    // The JSON pointer of the value being read.
    JsonLocation here() const {
        JsonLocation at{m_what, m_base};
        for (const Level& outer : m_levels) at = outer.array ? at.child(outer.count) : at.child(outer.key);
        return at;
    }
    // A value ended: in an array, the index moves on.
    bool member_done() {
        if (!m_levels.empty() && m_levels.back().array) ++m_levels.back().count;
        return true;
    }
    struct Level {
        bool array = false;
        std::size_t count = 0;       // an array's members so far: the index of the next
        std::set<std::string> keys;  // an object's keys so far
        std::string key;             // an object's current key
    };
    std::string m_what;
    std::string m_base;           // the pointer of the text's value in its document
    std::vector<Level> m_levels;  // the containers open, outermost first
};

}  // namespace

std::string nonfinite_literal_note(const std::string& text, std::size_t byte) {
    // nlohmann's byte is 1-based and may lie just past the word it stopped in.
    std::size_t end = std::min(byte, text.size()), start = end;
    while (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) --start;
    while (end < text.size() && std::isalpha(static_cast<unsigned char>(text[end]))) ++end;
    return nonfinite_note(text.substr(start, end - start));
}

std::string nonfinite_note(const std::string& word) {
    std::string w = !word.empty() && (word[0] == '-' || word[0] == '+') ? word.substr(1) : word;
    for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (w != "nan" && w != "infinity" && w != "inf") return "";
    return " (JSON has no NaN or infinity: write the strings \"nan\", \"inf\" or \"-inf\", which normlab reads as "
           "those numbers wherever a config gives a number)";
}

std::string string_number_note(const Json& j) {
    if (!j.is_string()) return "";
    const std::string& s = j.get<std::string>();
    std::string note = nonfinite_note(s);
    if (!note.empty() || s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return note;
    // A number JSON does not take as written (".001", "+5", "5."), or one given in quotes.
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return "";
    // Already a JSON number ("1e-5" in quotes): shown as written, not as nlohmann would print it (1e-05).
    if (Json::accept(s)) return " (as a number, JSON writes it " + s + ", without quotes)";
    const bool whole = std::floor(v) == v && std::abs(v) < 1e15;
    return " (as a number, JSON writes it " + (whole ? Json(static_cast<long long>(v)) : Json(v)).dump() +
           ", without quotes)";
}

std::string quoted_text(const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string plain_or_quoted(const std::string& s) {
    const bool plain = !s.empty() && s.front() != ' ' && s.back() != ' ' &&
                       std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    return plain ? s : quoted_text(s);
}

std::string one_line(const std::string& message) {
    std::string out;
    out.reserve(message.size());
    for (char c : message) {
        if (static_cast<unsigned char>(c) >= 0x20) out += c;
        else {
            const std::string q = quoted_text(std::string(1, c));  // "\n" with its quotes
            out += q.substr(1, q.size() - 2);
        }
    }
    return out;
}

DType parse_dtype(const std::string& name) {
    if (auto d = dtype_from_name(name)) return *d;
    throw InputError("unknown dtype " + quoted_text(name) + " (expected " + kDtypeNames + ")");
}

bool is_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::type_error&) {
        return false;
    }
}

void check_duplicate_keys(const std::string& text, const std::string& what, const std::string& base) {
    DuplicateKeys keys(what, base);
    Json::sax_parse(text, &keys);
}

Json parse_json_text(const std::string& text, const std::string& what) {
    check_json_nesting(text, what);
    check_duplicate_keys(text, what);
    try {
        return Json::parse(text);
    } catch (const Json::parse_error& e) {
        // nlohmann's message already says "parse error at line L, column C: ..."; keep it
        // after our own prefix so the line starts with the file.
        std::string msg = e.what();
        auto pos = msg.find("parse error");
        if (pos != std::string::npos) msg = msg.substr(pos);
        throw InputError(what + ": malformed JSON: " + msg + nonfinite_literal_note(text, e.byte));
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

namespace {

// The text of a config read whole, parsed; an empty or blank one is named as such rather than
// as a parse error at line 1, column 1.
Json parse_config_text(const std::string& text, const std::string& what) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw InputError(what + (what == "-" ? " (standard input)" : "") + ": is empty, expected a JSON object (a config)");
    return parse_json_text(text, what);
}

}  // namespace

Json load_json_file(const std::filesystem::path& path) {
    std::stringstream ss;
    if (path == "-") {
        ss << std::cin.rdbuf();
        if (std::cin.bad()) throw InputError("-: cannot read the config from standard input");
        return parse_config_text(ss.str(), "-");
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError(path.string() + ": is a directory, expected a JSON config file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path.string() + ": cannot open config file (missing or unreadable)");
    ss << in.rdbuf();
    return parse_config_text(ss.str(), path.string());
}

}  // namespace normlab
