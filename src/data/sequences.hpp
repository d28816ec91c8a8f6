#pragma once
// Padded token sequences as (B, T, D) batches: the embedding and padding shared by the
// "tokens" and "text" sources. Internal to the data module.
#include <cstdint>
#include <string>
#include <vector>

#include "data/source_impl.hpp"

namespace normlab {

/// How token vectors and padding look. Read from the source's keys by read_sequence_style.
struct SequenceStyle {
    std::vector<double> scale;   ///< per dimension (D), applied to every token vector
    std::vector<double> offset;  ///< per dimension (D), added after the scale
    enum class Pad { constant, learned, vector } pad = Pad::constant;
    double pad_constant = 0.0;       ///< Pad::constant: every padded value
    std::vector<double> pad_vector;  ///< Pad::vector: the padded vector (D)
    bool pad_left = false;           ///< padding_side "left": real tokens at the end
};

/// The keys read_sequence_style reads, with their defaults (for the source registry).
const std::vector<KeyInfo>& sequence_style_keys();

/// Reads scale, offset (a number or a list of D numbers; defaults 1 and 0), outlier_dims
/// (list of dimension indices, negative allowed, multiplied by outlier_scale, default 20:
/// real hidden states have a few dimensions with much larger magnitude), pad_value (a
/// number, default 0; "learned": the embedding of a dedicated pad token; or a list of D
/// numbers) and padding_side ("right", default, or "left"). Errors at the key's pointer.
SequenceStyle read_sequence_style(ObjectReader& r, std::size_t dim);

/// Builds the (B, T, D) batch of the token id sequences `ids` (B of them, each at most
/// max_len long): token t's vector is row t of a seeded N(0, 1) embedding table, generated
/// per token from `table_seed` (so a repeated token has the same vector and the table is
/// never materialised), then scaled and offset. Padding follows `style`; "learned" padding
/// uses the row of token id `pad_id`. The mask is (B, T, 1), lengths the sequence lengths.
SourceData embed_sequences(const std::vector<std::vector<std::uint64_t>>& ids, std::size_t max_len,
                           std::size_t dim, std::uint64_t table_seed, std::uint64_t pad_id,
                           const SequenceStyle& style);

/// Reads a required positive integer (error at its pointer otherwise).
std::size_t read_positive(ObjectReader& r, const std::string& key);

}  // namespace normlab
