#include "data/text.hpp"

#include <cctype>

namespace normlab {

namespace {
bool word_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '\'' ||
           c >= 0x80;
}
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
}  // namespace

std::vector<std::vector<std::string>> split_sentences(const std::string& text, bool by_line) {
    std::vector<std::vector<std::string>> out;
    std::vector<std::string> sentence;
    std::string word;
    auto end_word = [&] {
        // Apostrophes only join letters ("don't"); quotes around a word are not part of it.
        while (!word.empty() && word.back() == '\'') word.pop_back();
        std::size_t lead = word.find_first_not_of('\'');
        if (lead != std::string::npos && !word.empty()) sentence.push_back(word.substr(lead));
        word.clear();
    };
    auto end_sentence = [&] {
        end_word();
        if (!sentence.empty()) out.push_back(std::move(sentence));
        sentence.clear();
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const auto u = static_cast<unsigned char>(c);
        const bool in_number = (c == '.' || c == ',') && i > 0 && i + 1 < text.size() &&
                               std::isdigit(static_cast<unsigned char>(text[i - 1])) &&
                               std::isdigit(static_cast<unsigned char>(text[i + 1]));
        if (word_char(u) || in_number) {
            word += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
            continue;
        }
        end_word();
        if (c == '\n') {
            if (by_line) {
                end_sentence();
                continue;
            }
            // A blank line (only white space up to the next newline) ends a paragraph.
            std::size_t j = i + 1;
            while (j < text.size() && space(text[j]) && text[j] != '\n') ++j;
            if (j < text.size() && text[j] == '\n') end_sentence();
        } else if (!by_line && (c == '.' || c == '!' || c == '?')) {
            if (i + 1 == text.size() || space(text[i + 1])) end_sentence();
        }
    }
    end_sentence();
    return out;
}

}  // namespace normlab
