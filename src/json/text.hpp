#pragma once
// JSON text to a document, with messages that name the file, line and column.
#include <filesystem>
#include <string>

#include "json/reader.hpp"

namespace normlab {

enum class DType;  // tensor/tensor.hpp

/// Throws JsonError "what: /pointer/key: key given twice in one object ..." for the first
/// key that an object of `text` gives twice (RFC 8259 leaves duplicate names to the parser;
/// nlohmann keeps the last without a word), and for a number literal below a double's
/// smallest magnitude ("1e-400", which would read as 0). `base` is the JSON pointer where
/// `text`'s value goes in its document ("/norms/ln" for a --set of norms.ln), so that the
/// pointers name the document's place. Malformed text is left to the parser.
void check_duplicate_keys(const std::string& text, const std::string& what, const std::string& base = "");

/// `s` in double quotes for a one-line message, with '"', '\\' and control characters
/// escaped as JSON escapes them ("a\u0000b", "a\nb"; nlohmann's dump): a NUL would end the
/// message where it is printed, a newline split it. Bytes that are not UTF-8 show as U+FFFD.
std::string quoted_text(const std::string& s);

/// `s` as it is when it has no control character, else quoted_text(s): for what a message
/// shows as typed (a JSON pointer, a --set assignment, an option's value), where a NUL or a
/// newline would still cut the line or split it. An empty `s` shows as "" (--out ""), and
/// one that starts or ends with a space is quoted too, so that the space shows.
std::string plain_or_quoted(const std::string& s);

/// `message` with each control character written as JSON escapes it ("\n", "\t",
/// "\u0000"), other bytes as they are: what normlab prints as one line of stderr (an error,
/// a note) stays one line whatever path or value it names.
std::string one_line(const std::string& message);

/// The dtype named `name` (dtype_from_name); throws InputError "unknown dtype \"...\" (expected
/// float16, ...)" with the name as quoted_text shows it, so that a typed newline stays escaped.
DType parse_dtype(const std::string& name);

/// Whether `s` is valid UTF-8, as JSON text's strings must be (nlohmann's own check, the one
/// its dump applies).
bool is_utf8(const std::string& s);

/// " (JSON has no NaN or infinity: write the strings "nan", "inf" or "-inf", ...)" when
/// `word`, after an optional sign, is NaN, Infinity or inf in any case (as Python's json.dump
/// and JavaScript write them, where a config reads only those three strings); "" otherwise.
std::string nonfinite_note(const std::string& word);

/// The note for a string where a number goes: nonfinite_note for one spelt as JavaScript or
/// Python write a non-finite number ("NaN", "Infinity"), most often a --set value, which
/// reaches the config as a string because it is no JSON. For a string that reads as a finite number (".001" or
/// "+5" from --set, which JSON does not take as written, or "1e-5" quoted in a file), how
/// JSON writes it: " (as a number, JSON writes it 0.001, without quotes)", as given where it
/// is a JSON number already ("1e-5"). "" for anything else.
std::string string_number_note(const Json& j);

/// nonfinite_note for the word of `text` that a parse error at `byte` (nlohmann's, 1-based)
/// stopped in or just after: "eps": NaN in a file, [1, NaN] in a --set value.
std::string nonfinite_literal_note(const std::string& text, std::size_t byte);

/// Parses JSON text; `what` names it in messages. Throws InputError "what: malformed JSON:
/// parse error at line L, column C: ...", "what: line L, column C: number 1e400 is out of
/// range ...", "what: line L, column C: JSON nested deeper than 100 levels ...", or
/// check_duplicate_keys' JsonError.
Json parse_json_text(const std::string& text, const std::string& what);

/// Reads and parses a JSON file; the path "-" reads standard input to its end (a config piped
/// from jq or a script, as most Unix tools read "-"). Throws InputError "file: line L,
/// column C (byte B): ..." for malformed JSON, and naming the path when it cannot be read.
Json load_json_file(const std::filesystem::path& path);

}  // namespace normlab
