#include "json/reader.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "json/foreign.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"
#include "tensor/numbers.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

namespace {

// RFC 6901 escaping of one reference token.
std::string escape_token(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j)
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                               prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

}  // namespace

JsonLocation JsonLocation::child(const std::string& key) const {
    return {file, pointer + "/" + escape_token(key)};
}

JsonLocation JsonLocation::child(std::size_t index) const {
    return {file, pointer + "/" + std::to_string(index)};
}

std::string JsonLocation::message(const std::string& what) const {
    std::string where = file.empty() ? std::string() : file + ": ";
    // A key may hold a NUL or a newline, which would cut the printed line or split it.
    const std::string shown = pointer.empty() ? std::string("/") : plain_or_quoted(pointer);
    return where + shown + ": " + what;
}

void JsonLocation::fail(const std::string& what, std::vector<std::string> related) const {
    JsonError e(*this, what);
    e.related = std::move(related);
    throw e;
}

JsonError::JsonError(JsonLocation where_, std::string reason_, std::string unknown_key_, std::string hint_,
                     std::string note_)
    : InputError(where_.message(reason_)), where(std::move(where_)), reason(std::move(reason_)),
      unknown_key(std::move(unknown_key_)), hint(std::move(hint_)), note(std::move(note_)) {}

std::optional<double> json_number(const Json& j) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) return parse_nonfinite(j.get<std::string>());
    return std::nullopt;
}

void check_json_nesting(const std::string& text, const std::string& what) {
    std::size_t depth = 0, line = 1, column = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        ++column;
        if (c == '\n') ++line, column = 0;
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                throw InputError(what + ": line " + std::to_string(line) + ", column " + std::to_string(column) +
                                 ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                 " levels (normlab's limit; a tensor of that rank is not a batch)");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
}

std::vector<std::string> key_names(const std::vector<KeyInfo>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys) out.push_back(k.name);
    return out;
}

std::string describe_keys(const std::vector<KeyInfo>& keys) {
    std::string out;
    for (const auto& k : keys) {
        out += (out.empty() ? "" : ", ") + k.name;
        if (k.fallback.empty()) continue;
        // A value reads as key=value; a description ("the data's", "or axes") in brackets.
        if (k.fallback.find(' ') == std::string::npos && k.fallback != "required") out += "=" + k.fallback;
        else out += " (" + k.fallback + ")";
    }
    return out;
}

std::string json_type_name(const Json& j) {
    if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
    return j.type_name();
}

std::string json_got(const Json& j) {
    if (j.is_null()) return "null";
    // A message is one line: a long value (an inline mask as large as its data) is cut,
    // at a character boundary, with its length said.
    constexpr std::size_t kShown = 60;
    std::string text = j.dump();
    if (text.size() > kShown + 20) {
        const std::size_t full = text.size();
        std::size_t cut = kShown;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 continuation
        text = text.substr(0, cut) + "... (" + std::to_string(full) + " characters)";
    }
    return json_type_name(j) + " " + text;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_d = std::numeric_limits<std::size_t>::max();
    // Case is no typo: "RMSNorm" is "rmsnorm".
    const std::string w = lower_case(word);
    for (const auto& c : candidates) {
        std::size_t d = edit_distance(w, lower_case(c));
        if (d < best_d) best_d = d, best = c;
    }
    std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
    return best_d <= limit ? best : std::string();
}

std::string did_you_mean_note(const std::string& word, const std::vector<std::string>& candidates,
                              std::size_t min_size) {
    if (word.empty() || word.size() < min_size) return "";
    std::string best = did_you_mean(word, candidates);
    if (best.empty()) {
        // A shortened name ("padd" for "padding") is further from it than a typo: taken when
        // it begins one candidate only.
        std::vector<std::string> begun;
        for (const auto& c : candidates)
            if (c.rfind(word, 0) == 0) begun.push_back(c);
        if (begun.size() == 1) best = begun.front();
    }
    return best.empty() ? "" : " (did you mean " + quoted_text(best) + "?)";
}

ObjectReader::ObjectReader(const Json& obj, JsonLocation loc) : m_obj(obj), m_loc(std::move(loc)) {
    if (!obj.is_object())
        m_loc.fail("expected an object, but got " + json_type_name(obj));
}

bool ObjectReader::has(const std::string& key) const { return m_obj.contains(key); }

const Json* ObjectReader::raw(const std::string& key) {
    if (m_strict && !m_declared.count(key))
        throw std::logic_error("ObjectReader at " + m_loc.pointer + ": key \"" + key +
                               "\" is read but not declared");
    m_known.insert(key);
    auto it = m_obj.find(key);
    return it == m_obj.end() ? nullptr : &*it;
}

const Json& ObjectReader::required(const std::string& key) {
    const Json* j = raw(key);
    if (!j) missing(key);
    return *j;
}

void ObjectReader::missing(const std::string& key, const std::string& detail) const {
    missing_one_of({key}, "missing required key \"" + key + "\"" + detail);
}

namespace {

// The unknown key `key` of the object at `loc`, when it is another framework's name for one
// of `candidates` (foreign_name): refused with whose name it is and normlab's.
void throw_if_foreign(const JsonLocation& loc, const std::string& key, const std::vector<std::string>& candidates) {
    if (const ForeignName f = foreign_name(key, candidates); !f.ours.empty())
        throw JsonError(loc.child(key), "unknown key " + quoted_text(key) + " (" + f.note + ")", key, f.ours, f.note);
}

}  // namespace

void ObjectReader::missing_one_of(const std::vector<std::string>& keys, const std::string& message) const {
    // A key nobody asked for that is close to a missing one is its misspelling, or another
    // framework's name for it ("groups" for num_groups).
    for (auto it = m_obj.begin(); it != m_obj.end(); ++it) {
        if (m_known.count(it.key())) continue;
        throw_if_foreign(m_loc, it.key(), keys);
        const std::string hint = did_you_mean(it.key(), keys);
        if (!hint.empty())
            throw JsonError(m_loc.child(it.key()), "unknown key " + quoted_text(it.key()) + "; did you mean " + quoted_text(hint) + "?",
                            it.key(), hint);
    }
    if (m_strict) finish();
    // Related to the missing keys themselves: an --unset that removed one is to blame.
    std::vector<std::string> related;
    for (const auto& k : keys) related.push_back(m_loc.child(k).pointer);
    m_loc.fail(message, related);
}

std::optional<double> ObjectReader::number(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    const auto v = json_number(*j);
    if (!v) at(key).fail("expected a number, but got " + json_got(*j) + string_number_note(*j));
    return v;
}

double ObjectReader::number(const std::string& key, double fallback) {
    return number(key).value_or(fallback);
}

std::optional<double> ObjectReader::nonnegative(const std::string& key) {
    const auto v = number(key);
    if (v && !(*v >= 0 && std::isfinite(*v))) at(key).fail(key + " must be >= 0 and finite, but got " + format_number(*v));
    return v;
}

double ObjectReader::nonnegative(const std::string& key, double fallback) {
    return nonnegative(key).value_or(fallback);
}

double ObjectReader::finite(const std::string& key, double fallback) {
    const double v = number(key, fallback);
    if (!std::isfinite(v)) at(key).fail(key + " must be finite, but got " + format_number(v));
    return v;
}

namespace {
long long to_integer(const Json& j, const JsonLocation& loc) {
    // nlohmann's is_number_integer() is also true for unsigned values: test unsigned first.
    if (j.is_number_unsigned()) {
        auto u = j.get<unsigned long long>();
        if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
            loc.fail("integer " + j.dump() + " is too large");
        return static_cast<long long>(u);
    }
    if (j.is_number_integer()) return j.get<long long>();
    if (j.is_number_float()) {
        double d = j.get<double>();
        if (std::floor(d) == d && std::fabs(d) < 9e15) return static_cast<long long>(d);
    }
    loc.fail("expected an integer, but got " + json_got(j));
}
}  // namespace

std::optional<long long> ObjectReader::integer(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    return to_integer(*j, at(key));
}

long long ObjectReader::integer(const std::string& key, long long fallback) {
    return integer(key).value_or(fallback);
}

std::optional<bool> ObjectReader::boolean(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    if (!j->is_boolean())
        at(key).fail("expected true or false, but got " + json_got(*j));
    return j->get<bool>();
}

bool ObjectReader::boolean(const std::string& key, bool fallback) {
    return boolean(key).value_or(fallback);
}

std::optional<std::string> ObjectReader::string(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    if (!j->is_string())
        at(key).fail("expected a string, but got " + json_got(*j));
    return j->get<std::string>();
}

std::string ObjectReader::string(const std::string& key, const std::string& fallback) {
    return string(key).value_or(fallback);
}

std::string ObjectReader::choice(const std::string& key, const std::vector<std::string>& allowed,
                                 const std::string& fallback) {
    auto s = string(key);
    if (!s) return fallback;
    if (std::find(allowed.begin(), allowed.end(), *s) != allowed.end()) return *s;
    const std::string list = join_words(allowed);
    // Another framework's name first: "tensorflow" is closer to nothing, "pytorch" is close
    // to "torch" but the note says why.
    if (const ForeignName f = foreign_name(*s, allowed); !f.ours.empty())
        at(key).fail("unknown value " + quoted_text(*s) + " (expected one of: " + list + "); " + f.note);
    std::string hint = did_you_mean(*s, allowed);
    at(key).fail("unknown value " + quoted_text(*s) + " (expected one of: " + list + ")" +
                 (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?"));
}

namespace {

// The pieces of `s` between commas, each without the spaces around it; nullopt when one is
// empty ("", "a,,b", "a, ").
std::optional<std::vector<std::string>> comma_pieces(const std::string& s) {
    std::vector<std::string> pieces;
    for (std::size_t at = 0; at <= s.size();) {
        const std::size_t end = std::min(s.find(',', at), s.size());
        const std::size_t first = s.find_first_not_of(' ', at);
        if (first >= end) return std::nullopt;
        const std::size_t last = s.find_last_not_of(' ', end - 1);
        pieces.push_back(s.substr(first, last - first + 1));
        at = end + 1;
    }
    return pieces;
}

}  // namespace

std::string bracket_hint(const Json& j) {
    if (!j.is_string()) return "";
    const std::string s = j.get<std::string>();
    if (s.find(',') == std::string::npos) return "";
    const auto pieces = comma_pieces(s);
    if (!pieces) return "";
    std::string list;
    for (const auto& piece : *pieces) {
        // Printable ASCII only: the parser would stop at a NUL and take "1\0" for 1.
        for (char ch : piece)
            if (ch < 0x21 || ch > 0x7e) return "";
        if (!Json::parse(piece, nullptr, false).is_number()) return "";
        list += (list.empty() ? "" : ",") + piece;  // as typed
    }
    // A long list is not repeated: the message stays one readable line.
    return list.size() > 60 ? "; a list is written in brackets: [v1,v2,...]"
                            : "; a list is written in brackets: [" + list + "]";
}

namespace {

// For a string where a list of strings belongs ("tok", or "a,b" as --set key=a,b gives it):
// "; a list is written in brackets: [\"a\",\"b\"]". Empty for anything else.
std::string string_list_hint(const Json& j) {
    if (!j.is_string()) return "";
    const auto pieces = comma_pieces(j.get<std::string>());
    if (!pieces) return "";
    const std::string text = Json(*pieces).dump();
    // A long list is not repeated: the message stays one readable line.
    return text.size() > 60 ? "; a list is written in brackets: [\"a\",\"b\",...]"
                             : "; a list is written in brackets: " + text;
}

}  // namespace

std::vector<long long> read_integers(const Json& j, const JsonLocation& loc) {
    if (!j.is_array()) loc.fail("expected a list of integers, but got " + json_got(j) + bracket_hint(j));
    std::vector<long long> out;
    for (std::size_t i = 0; i < j.size(); ++i) out.push_back(to_integer(j[i], loc.child(i)));
    return out;
}

std::vector<double> read_numbers(const Json& j, const JsonLocation& loc) {
    if (!j.is_array()) loc.fail("expected a list of numbers, but got " + json_got(j) + bracket_hint(j));
    std::vector<double> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const auto v = json_number(j[i]);
        if (!v)
            loc.child(i).fail("expected a number, but got " + json_got(j[i]) + string_number_note(j[i]));
        out.push_back(*v);
    }
    return out;
}

std::optional<std::vector<long long>> ObjectReader::integers(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    return read_integers(*j, at(key));
}

std::optional<std::vector<double>> ObjectReader::numbers(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    return read_numbers(*j, at(key));
}

std::optional<std::vector<std::string>> ObjectReader::strings(const std::string& key) {
    const Json* j = raw(key);
    if (!j) return std::nullopt;
    if (!j->is_array()) at(key).fail("expected a list of strings, but got " + json_got(*j) + string_list_hint(*j));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < j->size(); ++i) {
        if (!(*j)[i].is_string())
            at(key).child(i).fail("expected a string, but got " + json_got((*j)[i]));
        out.push_back((*j)[i].get<std::string>());
    }
    return out;
}

void ObjectReader::allow(std::initializer_list<std::string> keys) {
    for (const auto& k : keys) m_known.insert(k);
    if (m_strict) m_declared.insert(keys.begin(), keys.end());
}

void ObjectReader::allow(const std::vector<std::string>& keys) {
    for (const auto& k : keys) m_known.insert(k);
    if (m_strict) m_declared.insert(keys.begin(), keys.end());
}

void ObjectReader::declare(const std::vector<std::string>& keys) {
    m_strict = true;
    m_declared.insert(m_known.begin(), m_known.end());
    m_declared.insert(keys.begin(), keys.end());
    m_known.insert(keys.begin(), keys.end());
}

void ObjectReader::finish() const {
    std::vector<std::string> known(m_known.begin(), m_known.end());
    for (auto it = m_obj.begin(); it != m_obj.end(); ++it) {
        if (m_known.count(it.key())) continue;
        // Another framework's name for a key of this object says whose it is: "epsilon" is
        // too far from "eps" for a did-you-mean, and a port is the usual way to write it.
        throw_if_foreign(m_loc, it.key(), known);
        std::string hint = did_you_mean(it.key(), known);
        throw JsonError(m_loc.child(it.key()),
                        "unknown key " + quoted_text(it.key()) + (hint.empty() ? "" : "; did you mean " + quoted_text(hint) + "?"),
                        it.key(), hint);
    }
}

}  // namespace normlab
