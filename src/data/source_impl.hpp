#pragma once
// Internal interface between make_batch (sources.cpp) and the individual sources
// (source_*.cpp). Not part of the data module's public API.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "json/reader.hpp"
#include "data/sources.hpp"
#include "tensor/errors.hpp"

namespace normlab {

/// What a source builds before the common keys (channel_axis, mask, lengths) are applied.
struct SourceData {
    xt::xarray<double> values;         ///< full precision; make_batch rounds to the run dtype
    /// Set instead of `values` by a source that builds its values directly in the run dtype,
    /// so a large float32 batch never exists as doubles too (peak memory).
    std::optional<Tensor> tensor;
    /// Built by the source (tokens, text), in the Batch::mask layout; else empty (shape {0}:
    /// a default-constructed xarray is 0-d with one element).
    xt::xarray<std::uint8_t> mask = xt::xarray<std::uint8_t>::from_shape(Shape{0});
    std::vector<std::size_t> lengths;  ///< sequence lengths when the source knows them
};

/// One source: its name, its own keys with their defaults (besides the common ones:
/// source, channel_axis, and mask, lengths, padding_side for a source that builds no mask),
/// its default channel axis, whether it builds its own mask (then it reads "lengths" itself
/// and "mask" is not accepted), whether it generates its values (then positions that a
/// mask or lengths mark as padding get its "pad_value", as the tokens source fills them),
/// and the builder. The builder reads its keys from `r` and reports errors at r.at(key).
struct SourceDef {
    std::string name;
    std::vector<KeyInfo> keys;
    long long default_channel_axis;
    bool builds_mask;
    bool generated;
    SourceData (*build)(const std::string& name, ObjectReader& r, const DataContext& ctx);
};

/// A path from the config, resolved against the config's folder unless absolute.
std::filesystem::path resolve_path(const DataContext& ctx, const std::string& p);

/// Runs f(); an InputError it throws is rethrown with `loc`'s "file: pointer: " prefix, so
/// that loader messages ("x.npy: truncated ...") say which config entry named the file.
template <class F>
auto at_location(const JsonLocation& loc, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (const InputError& e) {
        loc.fail(e.what());
    }
}

/// A required list of positive dimensions under `key` (error at its pointer otherwise).
Shape read_positive_shape(ObjectReader& r, const std::string& key);

/// One builder per source type (source_<type>.cpp): reads the entry `name`'s keys from r,
/// builds its batch; InputError at the offending key for bad values, files or shapes.
SourceData build_values(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_gaussian(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_npy(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_images(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_tokens(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_text(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_csv(const std::string& name, ObjectReader& r, const DataContext& ctx);
SourceData build_image_files(const std::string& name, ObjectReader& r, const DataContext& ctx);

}  // namespace normlab
