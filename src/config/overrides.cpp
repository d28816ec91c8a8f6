#include "config/overrides.hpp"

#include <algorithm>
#include <sstream>

#include "json/reader.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Splits a dotted path or JSON pointer into unescaped tokens.
std::vector<std::string> path_tokens(const std::string& path) {
    std::vector<std::string> out;
    const bool pointer = !path.empty() && path[0] == '/';
    std::stringstream ss(pointer ? path.substr(1) : path);
    std::string tok;
    while (std::getline(ss, tok, pointer ? '/' : '.')) {
        if (!pointer) {
            out.push_back(tok);
            continue;
        }
        std::string t;
        for (std::size_t i = 0; i < tok.size(); ++i) {
            if (tok[i] == '~' && i + 1 < tok.size()) t += tok[++i] == '0' ? '~' : '/';
            else t += tok[i];
        }
        out.push_back(t);
    }
    // "a/" and "a." end in an empty token that getline drops: keep it (it is a key "").
    if (!path.empty() && path != "/" && path.back() == (pointer ? '/' : '.')) out.push_back("");
    return out;
}

bool at_or_under(const std::string& pointer, const std::string& base) {
    return pointer == base || (pointer.size() > base.size() && pointer.compare(0, base.size(), base) == 0 &&
                               pointer[base.size()] == '/');
}

std::vector<std::string> object_keys(const Json& o) {
    std::vector<std::string> keys;
    for (auto it = o.begin(); it != o.end(); ++it) keys.push_back(it.key());
    return keys;
}

// The value at the first `depth` of `tokens` (the last of them may be a new key of an object
// when `may_add`), walked from `config`; `walked` receives its JSON pointer. InputError naming
// `who` for a step that does not exist (with a note when `dotted`, the path given with dots,
// split a key that holds dots), an array index that is not one, or a step into a number or string.
Json* walk_path(Json& config, const std::vector<std::string>& tokens, std::size_t depth, bool may_add, bool dotted,
                const std::string& who, std::string& walked) {
    Json* node = &config;
    walked.clear();
    for (std::size_t i = 0; i < depth; ++i) {
        const std::string& t = tokens[i];
        const bool last = i + 1 == depth;
        if (node->is_object()) {
            if ((!last || !may_add) && !node->contains(t)) {
                // A key holding dots (a sweep's "norms.ln.eps") that the dotted path split up.
                std::string key = t, note;
                for (std::size_t j = i + 1; dotted && j < tokens.size() && note.empty(); ++j) {
                    key += "." + tokens[j];
                    if (!node->contains(key)) continue;
                    JsonLocation at = JsonLocation{"", walked}.child(key);
                    for (std::size_t k = j + 1; k < tokens.size(); ++k) at = at.child(tokens[k]);
                    note = " (the key " + quoted_text(key) + " holds dots: give the path as a JSON pointer, " +
                           plain_or_quoted(at.pointer) + ")";
                }
                throw InputError(who + ": " + plain_or_quoted(JsonLocation{"", walked}.child(t).pointer) + " does not exist in the config" +
                                 (note.empty() ? did_you_mean_note(t, object_keys(*node)) : note));
            }
            walked = JsonLocation{"", walked}.child(t).pointer;
            node = &(*node)[t];
        } else if (node->is_array()) {
            walked = JsonLocation{"", walked}.child(t).pointer;
            std::size_t idx = 0;
            try {
                std::size_t used = 0;
                idx = std::stoul(t, &used);
                if (used != t.size() || t.empty() || t[0] == '-' || t[0] == '+') throw std::invalid_argument(t);
            } catch (const std::exception&) {
                throw InputError(who + ": " + plain_or_quoted(walked) + ": expected an array index, but got " + quoted_text(t));
            }
            if (idx >= node->size())
                throw InputError(who + ": " + plain_or_quoted(walked) + ": index out of range (the array has " +
                                 std::to_string(node->size()) + " elements)");
            node = &(*node)[idx];
        } else {
            // The value in the way is shown: the fault is often there, in the file (a shape
            // written "8x4x5x5"), not in the path that tried to go through it.
            throw InputError(who + ": " + plain_or_quoted(JsonLocation{"", walked}.child(t).pointer) + ": cannot descend into " +
                             (walked.empty() ? "/" : plain_or_quoted(walked)) + ", which is " + json_got(*node) +
                             ", not an object or an array");
        }
    }
    return node;
}

}  // namespace

std::string set_config_value(Json& config, const std::string& path, Json value, const std::string& who) {
    const auto tokens = path_tokens(path);
    if (tokens.empty()) throw InputError(who + ": empty path");
    std::string walked;
    *walk_path(config, tokens, tokens.size(), true, path[0] != '/', who, walked) = std::move(value);
    return walked;
}

std::string config_pointer(const std::string& path) {
    JsonLocation at;
    for (const auto& t : path_tokens(path)) at = at.child(t);
    return at.pointer;
}

std::string remove_config_value(Json& config, const std::string& path, const std::string& who) {
    const auto tokens = path_tokens(path);
    if (tokens.empty()) throw InputError(who + ": empty path");
    const std::string key = tokens.back();
    std::string walked;
    Json* parent = walk_path(config, tokens, tokens.size() - 1, false, path[0] != '/', who, walked);
    const std::string pointer = JsonLocation{"", walked}.child(key).pointer;
    if (!parent->is_object())
        throw InputError(who + ": " + plain_or_quoted(pointer) + ": only a key of an object can be removed (" +
                         (walked.empty() ? "/" : plain_or_quoted(walked)) + " is a" + (parent->is_array() ? "n array" : " " + json_type_name(*parent)) +
                         "; --set replaces a whole list)");
    if (!parent->contains(key))
        throw InputError(who + ": " + plain_or_quoted(pointer) + " does not exist in the config" +
                         did_you_mean_note(key, object_keys(*parent)));
    parent->erase(key);
    return pointer;
}

std::string apply_override(Json& config, const std::string& assignment) {
    // Bytes that are not UTF-8 (a Latin-1 path, say) cannot be a JSON key or string: taken in,
    // they would fail only when the report is written.
    if (!is_utf8(assignment))
        throw InputError("--set " + quoted_text(assignment) +
                         ": not valid UTF-8 (a config's keys and strings are JSON text, which is UTF-8)");
    auto eq = assignment.find('=');
    // As typed, so that it can be found on the command line; escaped only where a control
    // character would break the one-line message.
    const std::string who = "--set " + plain_or_quoted(assignment);
    if (eq == std::string::npos || eq == 0)
        throw InputError(who + ": expected PATH=VALUE (e.g. norms.ln.eps=1e-3)");
    const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    Json value;
    check_json_nesting(text, who);
    try {
        check_duplicate_keys(text, who, config_pointer(path));
    } catch (const JsonError& e) {
        throw InputError(e.what());  // "--set PATH=VALUE: /path/key: key given twice ...": the config's pointer
    }
    try {
        value = Json::parse(text);
    } catch (const Json::parse_error& e) {
        // A value that opens a list or an object was meant as JSON: taken as a string, a
        // typo in it would surface as a wrong type ("expected a list of integers, but got string").
        const std::size_t first = text.find_first_not_of(" \t\n\r");
        if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
            std::string msg = e.what();
            if (const auto at = msg.find("parse error"); at != std::string::npos) msg = msg.substr(at);
            throw InputError(who + ": the value starts with '" + text[first] + "' but is not valid JSON: " + msg +
                             nonfinite_literal_note(text, e.byte) + " (to set a string, quote it as JSON: '\"...\"')");
        }
        value = text;  // not JSON: a plain string such as a path or a name
    } catch (const Json::out_of_range&) {
        // "1e999,2" is a list typed without brackets, not one number: taken as the string it
        // is, the reader's message shows how to write the list.
        const std::size_t first = text.find_first_not_of(" \t\n\r");
        const bool json_like = first != std::string::npos && (text[first] == '[' || text[first] == '{');
        if (json_like || text.find(',') == std::string::npos)
            throw InputError(who + ": the number is out of range (a double holds magnitudes up to 1.8e308)");
        value = text;
    }
    return set_config_value(config, path, std::move(value), who);
}

void Provenance::record(const std::string& pointer, const std::string& label) {
    m_origins.erase(std::remove_if(m_origins.begin(), m_origins.end(),
                                   [&](const Origin& o) { return at_or_under(o.pointer, pointer); }),
                    m_origins.end());
    m_origins.push_back({pointer, label});
}

const Provenance::Origin* Provenance::origin_of(const std::string& pointer) const {
    const Origin* best = nullptr;
    for (const auto& o : m_origins)
        if (at_or_under(pointer, o.pointer) && (!best || o.pointer.size() > best->pointer.size())) best = &o;
    return best;
}

std::string Provenance::setter(const std::string& pointer, const std::vector<std::string>& related) const {
    if (const Origin* o = origin_of(pointer)) return o->label;
    // The value itself is the file's: name whoever set a value it was checked against. A
    // related value counts as set when it, an ancestor or anything under it was (a swept
    // data.x.shape.2 sets part of /data/x).
    std::vector<std::string> labels;
    auto add = [&](const std::string& label) {
        if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
    };
    for (const auto& r : related) {
        if (const Origin* o = origin_of(r)) add(o->label);
        for (const auto& o : m_origins)
            if (o.pointer != r && at_or_under(o.pointer, r)) add(o.label);
    }
    std::string out;
    for (const auto& l : labels) out += (out.empty() ? "" : " and ") + l;
    return out;
}

std::string Provenance::blame(const JsonError& e) const {
    const std::string who = setter(e.where.pointer, e.related);
    if (who.empty()) return "";
    if (!e.unknown_key.empty()) {
        const std::string& p = e.where.pointer;
        const std::string object = p.substr(0, p.rfind('/'));
        return who + ": unknown key " + quoted_text(e.unknown_key) + " in " + (object.empty() ? "/" : object) +
               (!e.note.empty() ? " (" + e.note + ")" : e.hint.empty() ? "" : " (did you mean " + quoted_text(e.hint) + "?)");
    }
    return JsonLocation{who, e.where.pointer}.message(e.reason);
}

std::string Provenance::message(const JsonLocation& at, const std::string& reason,
                                const std::vector<std::string>& related) const {
    const std::string who = setter(at.pointer, related);
    if (who.empty()) return at.message(reason);
    return JsonLocation{who, at.pointer}.message(reason);
}

}  // namespace normlab
