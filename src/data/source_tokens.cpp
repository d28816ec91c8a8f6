// The "tokens" source: padded token sequences (B, T, D) with a padding mask, the batches
// of sequence models. Token ids are drawn from a vocabulary and embedded with a
// seeded table, so a repeated token has the same vector.
#include "data/random.hpp"
#include "data/sequences.hpp"

namespace normlab {

SourceData build_tokens(const std::string& name, ObjectReader& r, const DataContext& ctx) {
    const std::size_t batch = read_positive(r, "batch");
    const std::size_t max_len = read_positive(r, "max_len");
    const std::size_t dim = read_positive(r, "dim");
    const long long vocab = r.integer("vocab", 1000);
    if (vocab <= 0) r.at("vocab").fail("vocab must be a positive integer, but got " + std::to_string(vocab));
    const SequenceStyle style = read_sequence_style(r, dim);

    Rng rng(derive_seed(ctx.seed, name));
    std::vector<std::size_t> lengths;
    if (const auto given = r.integers("lengths")) {
        if (r.has("min_len"))
            r.location().fail("give either \"lengths\" or \"min_len\", not both",
                              {r.at("lengths").pointer, r.at("min_len").pointer});
        if (given->size() != batch)
            r.at("lengths").fail("expected " + count_noun(batch, "length") + " (one per sequence, batch = " +
                                 std::to_string(batch) + "), but got " + std::to_string(given->size()));
        for (std::size_t i = 0; i < given->size(); ++i) {
            const long long l = (*given)[i];
            if (l < 0 || l > static_cast<long long>(max_len))
                r.at("lengths").child(i).fail("a length must be in 0.." + std::to_string(max_len) +
                                              " (max_len), but got " + std::to_string(l));
            lengths.push_back(static_cast<std::size_t>(l));
        }
    } else {
        const long long min_len = r.integer("min_len", 1);
        if (min_len < 0 || min_len > static_cast<long long>(max_len))
            r.at("min_len").fail("min_len must be in 0.." + std::to_string(max_len) + " (max_len), but got " +
                                 std::to_string(min_len));
        for (std::size_t b = 0; b < batch; ++b)
            lengths.push_back(static_cast<std::size_t>(rng.between(min_len, static_cast<long long>(max_len))));
    }

    std::vector<std::vector<std::uint64_t>> ids(batch);
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t t = 0; t < lengths[b]; ++t) ids[b].push_back(rng.below(static_cast<std::uint64_t>(vocab)));
    // The pad token is id `vocab`, one past the real vocabulary.
    return embed_sequences(ids, max_len, dim, derive_seed(ctx.seed, name + "/embedding"),
                           static_cast<std::uint64_t>(vocab), style);
}

}  // namespace normlab
