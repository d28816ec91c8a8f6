#pragma once
// Typed, path-aware access to one JSON object of a config. Every error names the config
// file and the JSON pointer of the offending value ("cfg.json: /norms/gn/num_groups: ...").
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/errors.hpp"

namespace normlab {

/// JSON values as nlohmann/json reads them, keeping the file's key order (reports and
/// messages list keys as the user wrote them).
using Json = nlohmann::ordered_json;

/// Where a JSON value sits: the config file (for messages) and its JSON pointer.
struct JsonLocation {
    std::string file;     ///< as the user named it; may be empty (command-line JSON)
    std::string pointer;  ///< RFC 6901, e.g. "/norms/gn"
    JsonLocation child(const std::string& key) const;
    JsonLocation child(std::size_t index) const;
    /// "file: pointer: message" as one line.
    std::string message(const std::string& what) const;
    /// Throws JsonError (an InputError) with message(what). `related`: the JSON pointers of
    /// other values the error depends on (JsonError::related).
    [[noreturn]] void fail(const std::string& what, std::vector<std::string> related = {}) const;
};

/// An input error at a JSON location. what() is the whole line, "file: pointer: reason";
/// the parts are kept so that a caller who knows where the value came from (a --set
/// override, a sweep point) can blame that instead of the config file.
struct JsonError : InputError {
    JsonError(JsonLocation where, std::string reason, std::string unknown_key = {}, std::string hint = {},
              std::string note = {});
    JsonLocation where;       ///< the value at fault (for an unknown key: the key's own pointer)
    std::string reason;       ///< the message without the location
    std::string unknown_key;  ///< set when the error is an unknown key: that key
    std::string hint;         ///< the unknown key's did-you-mean or normlab's counterpart, or ""
    /// When the unknown key is another framework's name (json/foreign.hpp): whose it is and
    /// normlab's counterpart ("Keras, Flax and ONNX name it so; normlab's is "eps""), else "".
    std::string note;
    /// JSON pointers of the other values the error depends on: the other key of a "give
    /// either a or b" conflict, the data entry a norm met. The value at `where` may come from
    /// the file while one of these was set by an override, which is then the one to name.
    std::vector<std::string> related;
};

/// Calls f(); a JsonError it throws gets `pointer` added to its related values
/// (JsonError::related). For reading the rest of an object whose keys mean what one of
/// them says (a norm's or an analysis' "type"): an override or sweep point that set that
/// key is then named for what it made wrong in the file's other keys.
template <class F>
auto depends_on(const std::string& pointer, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (JsonError& e) {
        e.related.push_back(pointer);
        throw;
    }
}

/// How deeply JSON may nest in a config or a --set value. Deeper documents are refused
/// before they are parsed: copying or printing a JSON value recurses once per level, and a
/// few hundred thousand '[' overflow the stack.
constexpr std::size_t kMaxJsonDepth = 100;

/// Throws InputError "<what>: line L, column C: JSON nested deeper than 100 levels ..." when
/// arrays and objects in `text` nest deeper than kMaxJsonDepth (brackets inside strings do
/// not count). Malformed text is left to the parser.
void check_json_nesting(const std::string& text, const std::string& what);

/// A number as users may write it: a JSON number, or one of the strings "nan", "inf",
/// "-inf" (JSON has no non-finite numbers; reports write them so). std::nullopt otherwise.
std::optional<double> json_number(const Json& j);

/// "number", "string", "array", ... as messages name JSON types.
std::string json_type_name(const Json& j);
/// What a message says it got: the type and the value ("string \"a\"", "integer 3"), or
/// "null" alone, not "null null". A value of over 80 characters as JSON is shown by its
/// first 60 and its length.
std::string json_got(const Json& j);
/// For a string of numbers between commas ("4,5,8": a list typed without its brackets, as
/// --set key=4,5,8 gives it): "; a list is written in brackets: [4,5,8]", to follow an
/// "expected a list" message. Empty for anything else.
std::string bracket_hint(const Json& j);
/// The closest of `candidates` to `word` by edit distance, or "" when none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);
/// " (did you mean "X"?)" when `word` is close to one of `candidates` (did_you_mean) or
/// begins exactly one of them ("padd": "padding"), else "": the command line's form of the
/// hint. A word shorter than `min_size` is close to too many names for the guess to help
/// ("-x" to every short option).
std::string did_you_mean_note(const std::string& word, const std::vector<std::string>& candidates,
                              std::size_t min_size = 0);

/// A key an object may hold, with its default as `normlab list` shows it: "" when it has
/// none worth printing, "required" when it must be given. The readers declare their keys
/// from these lists (ObjectReader::declare), so the listing is the reader's own.
struct KeyInfo {
    std::string name;
    std::string fallback;
};
/// The names of `keys`, in order.
std::vector<std::string> key_names(const std::vector<KeyInfo>& keys);
/// "name=fallback" for a value, "name (fallback)" for a description or "required", plain
/// "name" without a fallback; comma-separated: one line of `normlab list`.
std::string describe_keys(const std::vector<KeyInfo>& keys);

/// Reads the fields of one JSON object. Each getter records the key as known; finish()
/// rejects the keys nobody asked for (with a did-you-mean, or normlab's counterpart of
/// another framework's name: "epsilon" is "eps"), because a misspelled "epsx" must not
/// silently leave eps at its default. A missing required key is reported as the
/// misspelling it usually is: an unknown key close to it ("normalised_shape") comes first,
/// with its did-you-mean, and so does any unknown key of an object whose keys are declared.
class ObjectReader {
public:
    /// Throws InputError if `obj` is not an object.
    ObjectReader(const Json& obj, JsonLocation loc);

    bool has(const std::string& key) const;
    /// The raw value, or nullptr when absent (the key is marked known).
    const Json* raw(const std::string& key);
    /// Required variants throw "missing required key" naming the key (see missing()).
    const Json& required(const std::string& key);
    /// Throws for a required key that is absent: "unknown key "k"; did you mean "key"?" at
    /// an unknown key k close to it; else, when the keys are declared, the first unknown
    /// key (finish()); else "missing required key "key"" + detail at the object.
    [[noreturn]] void missing(const std::string& key, const std::string& detail = {}) const;
    /// The same for "one of these keys is required": `message` is the missing-key text.
    [[noreturn]] void missing_one_of(const std::vector<std::string>& keys, const std::string& message) const;

    /// A number, or one of the strings "nan", "inf", "-inf" (json_number).
    std::optional<double> number(const std::string& key);
    double number(const std::string& key, double fallback);
    /// A finite number >= 0 (an eps, a standard deviation), or nullopt when absent. Another
    /// number, "inf" or "nan" is refused at the key (InputError): "<key> must be >= 0 and
    /// finite, but got inf".
    std::optional<double> nonnegative(const std::string& key);
    double nonnegative(const std::string& key, double fallback);
    /// A finite number (a mean, an offset); "inf" or "nan" is refused at the key:
    /// "<key> must be finite, but got nan".
    double finite(const std::string& key, double fallback);
    /// Integers are read as signed and range-checked: -1 never becomes 2^64-1.
    std::optional<long long> integer(const std::string& key);
    long long integer(const std::string& key, long long fallback);
    std::optional<bool> boolean(const std::string& key);
    bool boolean(const std::string& key, bool fallback);
    std::optional<std::string> string(const std::string& key);
    std::string string(const std::string& key, const std::string& fallback);
    /// A string that must be one of `allowed`; another one is refused with a did-you-mean,
    /// or with the allowed value another framework's name stands for ("tensorflow": "keras").
    std::string choice(const std::string& key, const std::vector<std::string>& allowed,
                       const std::string& fallback);
    std::optional<std::vector<long long>> integers(const std::string& key);
    std::optional<std::vector<double>> numbers(const std::string& key);
    std::optional<std::vector<std::string>> strings(const std::string& key);

    /// Declares keys as known without reading them (read by someone else).
    void allow(std::initializer_list<std::string> keys);
    void allow(const std::vector<std::string>& keys);
    /// Declares every key this object may hold, before reading: they count as known, and
    /// reading a key outside them afterwards is a programming error (std::logic_error), so
    /// a declaration that lists keys for `normlab list` cannot fall behind the reader.
    void declare(const std::vector<std::string>& keys);
    /// Throws on the first key that no getter asked for.
    void finish() const;

    const JsonLocation& location() const { return m_loc; }
    JsonLocation at(const std::string& key) const { return m_loc.child(key); }

private:
    const Json& m_obj;
    JsonLocation m_loc;
    std::set<std::string> m_known;
    std::set<std::string> m_declared;  ///< empty: nothing declared (any key may be read)
    bool m_strict = false;             ///< declare() was called
};

/// Reads j as a list of integers (error at loc otherwise).
std::vector<long long> read_integers(const Json& j, const JsonLocation& loc);
/// Reads j as a list of numbers, each a number or "nan", "inf", "-inf" (error at loc otherwise).
std::vector<double> read_numbers(const Json& j, const JsonLocation& loc);

}  // namespace normlab
