#pragma once
// Memory estimates of data entries, made before anything large is allocated:
// every source knows its shape from its spec (generators) or from file headers and sizes
// (loaders), so a run that would not fit is refused before it starts instead of failing,
// swapping or being killed halfway.
#include <cstddef>
#include <optional>
#include <string>

#include "json/reader.hpp"
#include "data/sources.hpp"

namespace normlab {

/// What building one data entry will cost.
struct DataEstimate {
    std::size_t elements = 0;     ///< elements of the batch
    std::size_t batch_bytes = 0;  ///< memory the finished batch keeps: values in the run dtype + mask
    std::size_t build_bytes = 0;  ///< extra memory while it is built (file bytes, double values,
                                  ///< embedding tables), freed when make_batch returns
    std::string shape;            ///< the shape when known ("[2, 3]"), else a description
    Shape dims;                   ///< the shape when known, else empty
    std::optional<std::size_t> channel_axis;  ///< canonical, when dims and the spec's axis are known
};

/// Estimates the memory make_batch(name, spec, ...) would use, without building the batch:
/// from the spec for generated sources (gaussian, images, tokens, values), from the header
/// for npy files, from the image headers for image_files, and by streaming through the
/// text (decompressing gzip without keeping it) for csv and text; text reads and splits
/// the file when its size fits under `stop_above`. Never throws: a spec make_batch would
/// reject yields what could be read (possibly 0), and make_batch reports the problem.
/// Products saturate at SIZE_MAX. Scanning stops early once the estimate is above
/// `stop_above` (the caller's limit), so a huge or hostile file costs no more than that.
DataEstimate estimate_batch(const std::string& name, const Json& spec, const DataContext& ctx,
                            std::size_t stop_above = static_cast<std::size_t>(-1));

/// a * b and a + b, saturating at SIZE_MAX instead of wrapping around.
std::size_t saturating_mul(std::size_t a, std::size_t b);
std::size_t saturating_add(std::size_t a, std::size_t b);

/// "512 B", "1.5 KiB", "18.2 TiB": a byte count for messages (binary units).
std::string format_bytes(std::size_t bytes);

}  // namespace normlab
