#include "data/sources.hpp"

#include <algorithm>

#include "data/masks.hpp"
#include "data/npy.hpp"
#include "data/sequences.hpp"
#include "data/source_impl.hpp"

namespace normlab {

namespace {

// The registry, in the order `normlab list` shows it. Default channel axes per DESIGN.md.
const std::vector<SourceDef>& registry() {
    auto with_style = [](std::vector<std::string> keys) {
        for (const auto& k : sequence_style_keys()) keys.push_back(k);
        return keys;
    };
    static const std::vector<SourceDef> defs = {
        {"gaussian", {"shape", "mean", "std"}, 1, false, &build_gaussian},
        {"values", {"values"}, 1, false, &build_values},
        {"images", {"shape", "channel_mean", "channel_std", "smooth", "clip"}, 1, false, &build_images},
        {"tokens", with_style({"batch", "max_len", "dim", "lengths", "min_len", "vocab"}), -1, true, &build_tokens},
        {"text", with_style({"path", "dim", "split", "max_sentences", "max_len"}), -1, true, &build_text},
        {"npy", {"path"}, 1, false, &build_npy},
        {"csv", {"path", "skip_rows", "header", "delimiter", "max_rows", "columns", "drop_columns", "row_shape"},
         1, false, &build_csv},
        {"image_files", {"paths", "folder", "patch", "mode", "channels", "max_patches"}, 1, false,
         &build_image_files},
    };
    return defs;
}

const SourceDef& find_source(ObjectReader& r) {
    const Json& j = r.required("source");
    if (!j.is_string())
        r.at("source").fail("expected a string, but got " + json_type_name(j) + " " + j.dump());
    const std::string s = r.choice("source", data_source_names(), "");
    for (const auto& d : registry())
        if (d.name == s) return d;
    r.at("source").fail("unknown source \"" + s + "\"");  // unreachable: choice() checked it
}

}  // namespace

std::filesystem::path resolve_path(const DataContext& ctx, const std::string& p) {
    std::filesystem::path path(p);
    return path.is_absolute() ? path : ctx.base_dir / path;
}

const std::vector<std::string>& data_source_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto& d : registry()) n.push_back(d.name);
        return n;
    }();
    return names;
}

Batch make_batch(const std::string& name, const Json& spec, const JsonLocation& loc,
                 const DataContext& ctx) {
    ObjectReader r(spec, loc);
    const SourceDef& def = find_source(r);
    // Unknown keys are reported before anything else, so that a misspelled "shap" gets its
    // did-you-mean instead of "missing required key shape".
    r.allow({"channel_axis"});
    if (!def.builds_mask) r.allow({"mask", "lengths", "padding_side"});
    for (const auto& k : def.keys) r.allow({k});
    r.finish();

    SourceData data = def.build(name, r, ctx);
    const Shape shape = data.tensor ? data.tensor->shape() : Shape(data.values.shape().begin(), data.values.shape().end());
    if (shape.empty()) loc.fail("data must have at least one axis, but got a scalar");
    // Statistics over nothing are 0/0: an empty batch is an input error, as in PyTorch.
    if (num_elements(shape) == 0) loc.fail("data has no elements (shape " + format_shape(shape) + ")");

    Batch b;
    b.name = name;
    b.source = def.name;
    // A rank-1 batch has only axis 0, which then holds the features.
    const long long fallback = std::min<long long>(def.default_channel_axis,
                                                   static_cast<long long>(shape.size()) - 1);
    const long long ca = r.integer("channel_axis", fallback);
    b.channel_axis = at_location(r.at("channel_axis"), [&] {
        return canonicalize_axis(ca, shape.size(), "channel_axis for data of shape " + format_shape(shape));
    });
    b.mask = std::move(data.mask);
    b.lengths = std::move(data.lengths);

    if (!def.builds_mask) {
        const auto mask_path = r.string("mask");
        const auto lengths = r.integers("lengths");
        const std::string side = r.choice("padding_side", {"right", "left"}, "right");
        if (mask_path && lengths)
            loc.fail("give either \"mask\" or \"lengths\", not both");
        if (r.has("padding_side") && !lengths)
            r.at("padding_side").fail("\"padding_side\" applies to \"lengths\", which is not given");
        if (mask_path) {
            b.mask = at_location(r.at("mask"), [&] {
                NpyArray m = read_npy(resolve_path(ctx, *mask_path));
                return fit_mask(m.values, shape, b.channel_axis);
            });
        }
        if (lengths) {
            std::vector<std::size_t> ls;
            for (std::size_t i = 0; i < lengths->size(); ++i) {
                if ((*lengths)[i] < 0)
                    r.at("lengths").child(i).fail("a length must be >= 0, but got " +
                                                  std::to_string((*lengths)[i]));
                ls.push_back(static_cast<std::size_t>((*lengths)[i]));
            }
            b.mask = at_location(r.at("lengths"), [&] {
                return mask_from_lengths(shape, b.channel_axis, ls, side == "left");
            });
            b.lengths = std::move(ls);
        }
    }
    b.x = data.tensor ? std::move(*data.tensor) : Tensor::from_double(data.values, ctx.dtype);
    return b;
}

}  // namespace normlab
