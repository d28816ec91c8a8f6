#pragma once
// Splitting prose into sentences of lower-cased words, for the "text" source.
#include <string>
#include <vector>

namespace normlab {

/// Splits `text` into sentences of words. A word is a maximal run of letters, digits,
/// apostrophes or non-ASCII bytes (UTF-8 letters), lower-cased (ASCII only), where a '.'
/// or ',' between two digits stays inside ("3.5", "1,000"); everything else separates
/// words and leading/trailing apostrophes (quotes) are dropped. With `by_line`, each line is a sentence; otherwise a sentence
/// ends at '.', '!' or '?' followed by white space or the end, and at a blank line
/// (so "e.g., 3.5" does not end one, but "e.g. this" and "R.A. Fisher" do: there is no
/// abbreviation list). Sentences without words are dropped.
std::vector<std::vector<std::string>> split_sentences(const std::string& text, bool by_line);

}  // namespace normlab
