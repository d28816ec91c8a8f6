#include "data/sources.hpp"

#include <algorithm>
#include <set>

#include <xtensor/xbroadcast.hpp>

#include "data/masks.hpp"
#include "data/npy.hpp"
#include "data/sequences.hpp"
#include "data/source_impl.hpp"

namespace normlab {

namespace {

// The registry, in the order `normlab list` shows it. Default channel axes per DESIGN.md.
const std::vector<SourceDef>& registry() {
    auto with_style = [](std::vector<KeyInfo> keys) {
        for (const auto& k : sequence_style_keys()) keys.push_back(k);
        return keys;
    };
    const KeyInfo pad{"pad_value", "0"};
    static const std::vector<SourceDef> defs = {
        {"gaussian", {{"shape", "required"}, {"mean", "0"}, {"std", "1"}, pad}, 1, false, true, &build_gaussian},
        {"values", {{"values", "required"}}, 1, false, false, &build_values},
        {"images",
         {{"shape", "required"},
          {"channel_mean", "ImageNet's for C = 3, else 0.449"},
          {"channel_std", "ImageNet's for C = 3, else 0.226"},
          {"smooth", "0"},
          {"clip", "false"},
          pad},
         1, false, true, &build_images},
        {"tokens",
         with_style({{"batch", "required"}, {"max_len", "required"}, {"dim", "required"}, {"lengths", ""},
                     {"min_len", "1"}, {"vocab", "1000"}}),
         -1, true, true, &build_tokens},
        {"text",
         with_style({{"path", "required"}, {"dim", "required"}, {"split", "sentences"}, {"max_sentences", "all"},
                     {"max_len", "the longest sentence"}}),
         -1, true, false, &build_text},
        {"npy", {{"path", "required"}}, 1, false, false, &build_npy},
        {"csv",
         {{"path", "required"}, {"skip_rows", "0"}, {"header", "false"}, {"delimiter", "\",\""}, {"max_rows", "all"},
          {"columns", "all"}, {"drop_columns", ""}, {"row_shape", ""}},
         1, false, false, &build_csv},
        {"image_files",
         {{"paths", "or folder"}, {"folder", "or paths"}, {"patch", "the first image's size"}, {"mode", "center"},
          {"channels", "3"}, {"max_patches", "all"}},
         1, false, false, &build_image_files},
    };
    return defs;
}

// Keys every source takes besides its own.
std::vector<KeyInfo> common_keys(const SourceDef& d) {
    std::vector<KeyInfo> keys = {{"source", "required"}, {"channel_axis", d.default_channel_axis == 1 ? "1" : "-1"}};
    if (!d.builds_mask)
        keys.insert(keys.end(), {{"mask", "an .npy path: 1 real, 0 padding"},
                                 {"lengths", "a list, one per sequence"},
                                 {"padding_side", "right"}});
    return keys;
}

const SourceDef& find_source(const Json& spec, const JsonLocation& loc) {
    // Read by a reader that knows every source's keys: a misspelled "sourse" is found, and
    // no valid key is taken for one.
    ObjectReader r(spec, loc);
    for (const auto& d : registry()) {
        r.allow(key_names(d.keys));
        r.allow(key_names(common_keys(d)));
    }
    const Json& j = r.required("source");
    if (!j.is_string())
        r.at("source").fail("expected a string, but got " + json_type_name(j) + " " + j.dump());
    const std::string s = r.choice("source", data_source_names(), "");
    for (const auto& d : registry())
        if (d.name == s) return d;
    r.at("source").fail("unknown source \"" + s + "\"");  // unreachable: choice() checked it
}

// The channel axis of rank-`rank` data when its spec gives none: the source's default,
// axis 0 for rank-1 data (a rank-1 batch has only axis 0, which then holds the features).
long long default_axis(const SourceDef& d, std::size_t rank) {
    return std::min<long long>(d.default_channel_axis, static_cast<long long>(rank) - 1);
}

// Sets the positions that `mask` (Batch::mask layout: x's rank, each dim x's or 1) marks
// as padding to `value`.
template <class T>
void fill_padding(xt::xarray<T>& x, const xt::xarray<std::uint8_t>& mask, T value) {
    auto m = xt::broadcast(mask, x.shape());
    auto mi = m.cbegin();
    for (auto it = x.begin(); it != x.end(); ++it, ++mi)
        if (!*mi) *it = value;
}

}  // namespace

std::filesystem::path resolve_path(const DataContext& ctx, const std::string& p) {
    std::filesystem::path path(p);
    return path.is_absolute() ? path : ctx.base_dir / path;
}

std::vector<std::pair<std::string, std::vector<KeyInfo>>> data_source_keys() {
    std::vector<std::pair<std::string, std::vector<KeyInfo>>> out;
    for (const auto& d : registry()) {
        std::vector<KeyInfo> keys = d.keys;
        const auto common = common_keys(d);
        keys.insert(keys.end(), common.begin() + 1, common.end());  // "source" itself goes without saying
        out.emplace_back(d.name, keys);
    }
    return out;
}

std::vector<std::string> data_shape_keys() {
    // Keys that set values only; every other key may decide what the batch holds where.
    static const std::set<std::string> values_only = {"mean",   "std",  "outlier_scale", "outlier_dims",
                                                      "smooth", "clip", "pad_value",     "vocab"};
    std::set<std::string> keys = {"source"};
    for (const auto& [source, infos] : data_source_keys())
        for (const auto& k : infos)
            if (!values_only.count(k.name)) keys.insert(k.name);
    return {keys.begin(), keys.end()};
}

std::vector<std::string> data_shape_pointers(const JsonLocation& entry) {
    std::vector<std::string> out;
    for (const auto& k : data_shape_keys()) out.push_back(entry.child(k).pointer);
    return out;
}

std::optional<long long> default_channel_axis(const std::string& source, std::size_t rank) {
    for (const auto& d : registry())
        if (d.name == source) return default_axis(d, rank);
    return std::nullopt;
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
    const SourceDef& def = find_source(spec, loc);
    ObjectReader r(spec, loc);
    // Unknown keys are reported before anything else, so that a misspelled "shap" gets its
    // did-you-mean instead of "missing required key shape".
    r.declare(key_names(common_keys(def)));
    r.allow(key_names(def.keys));
    // The keys are read as the source says: an override of the source is named for what it
    // makes wrong in the file's other keys.
    const std::string source_at = loc.child("source").pointer;
    depends_on(source_at, [&] { r.finish(); });

    SourceData data = depends_on(source_at, [&] { return def.build(name, r, ctx); });
    const Shape shape = data.tensor ? data.tensor->shape() : Shape(data.values.shape().begin(), data.values.shape().end());
    // The shape comes from these keys' values (a file's path, a generator's shape): an
    // override of one of them is what to blame, not the config file.
    const std::vector<std::string> shape_from = data_shape_pointers(loc);
    if (shape.empty()) loc.fail("data must have at least one axis, but got a scalar", shape_from);
    // Statistics over nothing are 0/0: an empty batch is an input error, as in PyTorch.
    if (num_elements(shape) == 0) loc.fail("data has no elements (shape " + format_shape(shape) + ")", shape_from);

    Batch b;
    b.name = name;
    b.source = def.name;
    const long long ca = r.integer("channel_axis", default_axis(def, shape.size()));
    b.channel_axis = at_location(r.at("channel_axis"), [&] {
        return canonicalize_axis(ca, shape.size(), "channel_axis for data of shape " + format_shape(shape));
    });
    b.mask = std::move(data.mask);
    b.lengths = std::move(data.lengths);

    if (!def.builds_mask) {
        // An inline list is the likely mistake: the mask is a file, as large as the data.
        if (const Json* m = r.raw("mask"); m && !m->is_string())
            r.at("mask").fail("expected the path of an .npy file of 0/1 or bool values (1: a real position, 0: "
                              "padding), but got " + json_got(*m) + "; for sequences, \"lengths\" lists their lengths");
        const auto mask_path = r.string("mask");
        const auto lengths = r.integers("lengths");
        const std::string side = r.choice("padding_side", {"right", "left"}, "right");
        if (mask_path && lengths)
            loc.fail("give either \"mask\" or \"lengths\", not both", {r.at("mask").pointer, r.at("lengths").pointer});
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
    if (def.generated && !def.builds_mask) {
        // Generated values at padded positions would be noise no real batch holds: they get
        // pad_value, as the tokens source pads (what unmasked statistics see of padding).
        const double pad = r.number("pad_value", 0.0);
        if (r.has("pad_value") && !b.has_mask())
            r.at("pad_value").fail("\"pad_value\" applies to \"mask\" or \"lengths\", which is not given");
        if (b.has_mask()) {
            if (b.x.dtype == DType::float64) fill_padding(b.x.f64, b.mask, pad);
            else fill_padding(b.x.f32, b.mask, static_cast<float>(round_to(b.x.dtype, pad)));
        }
    }
    return b;
}

}  // namespace normlab
