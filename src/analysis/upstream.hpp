#pragma once
// The upstream gradient dy that `apply` (saving grad_*) and `gradients` back-propagate
// through a norm: the analysis key "upstream".
#include <cstdint>
#include <string>

#include "analysis/analysis.hpp"

namespace normlab {

/// An "upstream" value as the config gives it: "normal" (the default), "ones", a number, or
/// {"npy": "path"} (relative to the config's folder) holding an array of the data's shape.
struct Upstream {
    enum class Kind { normal, constant, npy };
    Kind kind = Kind::normal;
    double value = 1;            ///< Kind::constant ("ones" is 1)
    xt::xarray<double> values;   ///< Kind::npy: the file's values (read when the key is read)
    std::string label = "normal";  ///< the CSV's `upstream` cell: normal, ones, the number, the path as given
    JsonLocation loc;            ///< the key's location, for shape errors
    /// The "masked_loss" key: dy is 0 at padded positions, as for a loss over real positions
    /// only (a masked mean); needs data with a padding mask.
    bool masked_loss = false;
    JsonLocation masked_loc;     ///< the "masked_loss" key's location
};

/// Reads the optional "upstream" key (absent: normal) and "masked_loss" (absent: false) and
/// marks them known. Throws InputError at the key for any other string, a non-finite number,
/// another type, or an npy file that is missing or not a numeric .npy.
Upstream read_upstream(ObjectReader& r, const AnalysisSpec& spec);

/// Throws InputError at u.loc unless an npy upstream has b's shape (analysis `what` and
/// the data named; other kinds always fit), and at "masked_loss" when b has no padding mask.
void check_upstream(const Upstream& u, const Batch& b, const std::string& what);

/// The upstream gradient for batch b: b's shape, rounded once to `dtype` (a framework holds
/// dy in the data's dtype). normal: standard normal draws from derive_seed(seed, "upstream/"
/// + b.name), so every analysis and norm of a run back-propagates the same dy for the same
/// data; a constant everywhere; or the npy file's values; with masked_loss, 0 at b's padded
/// positions. Throws as check_upstream.
xt::xarray<double> make_upstream(const Upstream& u, const Batch& b, DType dtype, std::uint64_t seed,
                                 const std::string& what);

}  // namespace normlab
