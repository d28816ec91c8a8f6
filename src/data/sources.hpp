#pragma once
// Builds Batches from the "data" section of a config: one function per source, chosen by
// the "source" key.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "json/reader.hpp"
#include "data/batch.hpp"

namespace normlab {

/// What every source needs besides its own JSON object.
struct DataContext {
    std::filesystem::path base_dir;  ///< folder of the config file: relative paths resolve here
    std::uint64_t seed = 0;          ///< run seed (each data entry derives its own from it and its name)
    DType dtype = DType::float32;    ///< run dtype: values are rounded to it
};

/// Names of the known sources, in the order `normlab list` shows them.
const std::vector<std::string>& data_source_names();
/// Every source with the keys it takes (its own, then channel_axis and the mask keys) and
/// their defaults: the keys make_batch declares, as `normlab list` prints them.
std::vector<std::pair<std::string, std::vector<KeyInfo>>> data_source_keys();

/// Keys of a data entry, over every source, that can change its batch's shape, channel axis
/// or padding mask: all but those that only set values (mean, std, outlier_scale,
/// outlier_dims, smooth, clip, pad_value, vocab), "source" included. What a norm's or stack's
/// complaint about its data can depend on, to tell which override caused it.
std::vector<std::string> data_shape_keys();
/// The JSON pointers of those keys under the data entry at `entry` ("/data/x/shape", ...),
/// given or not: what an error about the batch's shape, channel axis or mask depends on
/// (JsonError::related), so that an override of one of them is named for it.
std::vector<std::string> data_shape_pointers(const JsonLocation& entry);

/// The channel axis make_batch gives data of `rank` >= 1 axes from `source` when its spec
/// has no "channel_axis": the source's default (1, or -1 for token sequences), axis 0 for
/// rank-1 data; nullopt for an unknown source. Not canonicalised.
std::optional<long long> default_channel_axis(const std::string& source, std::size_t rank);

/// A rectangular nested list of numbers ("nan", "inf" and "-inf" for the non-finite ones) as
/// an array whose shape is the nesting: [[1, 2, 3], [4, 5, 6]] has shape (2, 3). Throws
/// InputError at the offending pointer under `loc` for anything else: not a list, an empty
/// list, a ragged list (at the sublist that differs from the first), a non-number.
xt::xarray<double> nested_numbers(const Json& j, const JsonLocation& loc);

/// Builds the batch described by `spec` (the object under /data/<name>). Reads its own keys
/// with an ObjectReader (unknown keys rejected) and throws InputError naming the file and
/// JSON pointer for any problem: bad shape, missing file, bad npy, mask of the wrong shape.
Batch make_batch(const std::string& name, const Json& spec, const JsonLocation& loc,
                 const DataContext& ctx);

}  // namespace normlab
