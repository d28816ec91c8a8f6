// The "text" source: real sentences from a text file as padded token sequences (B, T, D):
// lower-cased words, a vocabulary in order of first appearance, embedded as the "tokens"
// source does. Lengths come from the real sentences; T is the longest of them (at most
// max_len).
#include <unordered_map>

#include "data/files.hpp"
#include "data/random.hpp"
#include "data/sequences.hpp"
#include "data/text.hpp"

namespace normlab {

SourceData build_text(const std::string& name, ObjectReader& r, const DataContext& ctx) {
    const Json& p = r.required("path");
    if (!p.is_string()) r.at("path").fail("expected a file path string, but got " + json_type_name(p));
    const std::size_t dim = read_positive(r, "dim");
    const bool by_line = r.choice("split", {"sentences", "lines"}, "sentences") == "lines";
    std::size_t max_sentences = 0, max_len = 0;  // 0: no limit
    if (r.has("max_sentences")) max_sentences = read_positive(r, "max_sentences");
    if (r.has("max_len")) max_len = read_positive(r, "max_len");
    const SequenceStyle style = read_sequence_style(r, dim);

    const auto path = resolve_path(ctx, p.get<std::string>());
    const std::string text = at_location(r.at("path"), [&] { return read_maybe_gzip(path); });
    auto sentences = split_sentences(text, by_line);
    if (sentences.empty()) r.at("path").fail(path.string() + ": no words found in the file");
    if (max_sentences && sentences.size() > max_sentences) sentences.resize(max_sentences);

    // T is the longest kept sentence: max_len cuts longer ones, it does not pad shorter
    // batches out to it (padding beyond the longest would only inflate the padding).
    std::size_t longest = 0;
    for (const auto& s : sentences) longest = std::max(longest, s.size());
    const std::size_t steps = max_len ? std::min(max_len, longest) : longest;

    std::unordered_map<std::string, std::uint64_t> vocab;
    std::vector<std::vector<std::uint64_t>> ids;
    for (const auto& s : sentences) {
        std::vector<std::uint64_t> seq;
        for (std::size_t t = 0; t < s.size() && t < steps; ++t)
            seq.push_back(vocab.emplace(s[t], vocab.size()).first->second);
        ids.push_back(std::move(seq));
    }
    return embed_sequences(ids, steps, dim, derive_seed(ctx.seed, name + "/embedding"),
                           static_cast<std::uint64_t>(vocab.size()), style);
}

}  // namespace normlab
