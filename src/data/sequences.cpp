#include "data/sequences.hpp"

#include <cmath>
#include <map>

#include "data/random.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

namespace {

std::vector<double> per_dim(ObjectReader& r, const std::string& key, std::size_t dim, double fallback) {
    const Json* j = r.raw(key);
    if (!j) return std::vector<double>(dim, fallback);
    if (json_number(*j)) return std::vector<double>(dim, r.finite(key, fallback));
    if (!j->is_array())
        r.at(key).fail("expected a number or a list of " + count_noun(dim, "number") +
                       " (one per dimension), but got " + json_type_name(*j));
    std::vector<double> v = read_numbers(*j, r.at(key));
    if (v.size() != dim)
        r.at(key).fail("expected " + count_noun(dim, "number") + " (one per dimension, dim = " +
                       std::to_string(dim) + "), but got " + std::to_string(v.size()));
    for (std::size_t i = 0; i < v.size(); ++i)
        if (!std::isfinite(v[i])) r.at(key).child(i).fail(key + " must be finite, but got " + format_number(v[i]));
    return v;
}

}  // namespace

const std::vector<KeyInfo>& sequence_style_keys() {
    static const std::vector<KeyInfo> keys = {{"scale", "1"},         {"offset", "0"},
                                              {"outlier_dims", ""},    {"outlier_scale", "20"},
                                              {"pad_value", "0"},      {"padding_side", "right"}};
    return keys;
}

std::size_t read_positive(ObjectReader& r, const std::string& key) {
    (void)r.required(key);
    const long long v = *r.integer(key);
    if (v <= 0) r.at(key).fail(key + " must be a positive integer, but got " + std::to_string(v));
    return static_cast<std::size_t>(v);
}

SequenceStyle read_sequence_style(ObjectReader& r, std::size_t dim) {
    SequenceStyle s;
    s.scale = per_dim(r, "scale", dim, 1.0);
    s.offset = per_dim(r, "offset", dim, 0.0);
    const double outlier_scale = r.finite("outlier_scale", 20.0);
    if (auto dims = r.integers("outlier_dims")) {
        for (std::size_t i = 0; i < dims->size(); ++i) {
            const std::size_t d = at_location(r.at("outlier_dims").child(i), [&] {
                return canonicalize_index((*dims)[i], dim, "outlier dimension", "features of dim " + std::to_string(dim));
            });
            s.scale[d] *= outlier_scale;
        }
    } else if (r.has("outlier_scale")) {
        r.at("outlier_scale").fail("\"outlier_scale\" applies to \"outlier_dims\", which is not given");
    }
    if (const Json* p = r.raw("pad_value")) {
        if (const auto v = json_number(*p)) {
            s.pad_constant = *v;
        } else if (p->is_string() && p->get<std::string>() == "learned") {
            s.pad = SequenceStyle::Pad::learned;
        } else if (p->is_array()) {
            s.pad = SequenceStyle::Pad::vector;
            s.pad_vector = per_dim(r, "pad_value", dim, 0.0);
        } else {
            r.at("pad_value").fail("expected a number, \"learned\" or a list of " + std::to_string(dim) +
                                   " numbers, but got " + p->dump());
        }
    }
    s.pad_left = r.choice("padding_side", {"right", "left"}, "right") == "left";
    return s;
}

SourceData embed_sequences(const std::vector<std::vector<std::uint64_t>>& ids, std::size_t max_len,
                           std::size_t dim, std::uint64_t table_seed, std::uint64_t pad_id,
                           const SequenceStyle& style) {
    const std::size_t batch = ids.size();
    // Rows of the embedding table, generated on first use: row t comes from its own stream,
    // so it does not depend on which other tokens occur or in which order.
    std::map<std::uint64_t, std::vector<double>> table;
    auto row = [&](std::uint64_t id) -> const std::vector<double>& {
        auto it = table.find(id);
        if (it != table.end()) return it->second;
        Rng rng(splitmix64(table_seed ^ splitmix64(id)));
        std::vector<double> v(dim);
        for (std::size_t d = 0; d < dim; ++d) v[d] = style.offset[d] + style.scale[d] * rng.normal();
        return table.emplace(id, std::move(v)).first->second;
    };

    SourceData out;
    out.values = xt::xarray<double>::from_shape({batch, max_len, dim});
    out.mask = xt::zeros<std::uint8_t>({batch, max_len, std::size_t{1}});
    for (std::size_t b = 0; b < batch; ++b) {
        const std::size_t len = ids[b].size();
        const std::size_t first = style.pad_left ? max_len - len : 0;
        out.lengths.push_back(len);
        for (std::size_t t = 0; t < max_len; ++t) {
            double* dst = &out.values(b, t, 0);
            const bool real = t >= first && t < first + len;
            if (real) {
                out.mask(b, t, 0) = 1;
                const auto& v = row(ids[b][t - first]);
                std::copy(v.begin(), v.end(), dst);
            } else if (style.pad == SequenceStyle::Pad::constant) {
                std::fill(dst, dst + dim, style.pad_constant);
            } else if (style.pad == SequenceStyle::Pad::vector) {
                std::copy(style.pad_vector.begin(), style.pad_vector.end(), dst);
            } else {
                const auto& v = row(pad_id);
                std::copy(v.begin(), v.end(), dst);
            }
        }
    }
    return out;
}

}  // namespace normlab
