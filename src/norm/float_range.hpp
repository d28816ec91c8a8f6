#pragma once
// Where the float path (normalize.hpp) leaves float32's range, and the double arithmetic for
// the statistics where it does. The float path's constants are floats: the mean's two parts,
// a = fl(rstd * scale) and x - hi. Data of subnormal size, values near FLT_MAX or a product
// rstd * scale beyond it (a tiny spread under a large weight) overflow them or lose their
// digits to float's subnormal floor, where the float64 result is finite and ordinary: the
// float path gave -inf for a LayerNorm (eps 0) of [1e-39, 2e-39, 3e-39, 4e-39], whose
// float64 result is about -1.34.
#include <cstdint>
#include <vector>

#include "norm/engine.hpp"
#include "norm/strided.hpp"

namespace normlab {

/// Per statistic of `out` (its keep-dims statistics arrays after a float-path forward), 1
/// where the float path cannot be trusted to meet its 3-ulp contract, else 0; empty when no
/// statistic is flagged:
///  - a spread (sqrt of the biased variance of batch statistics) under 2^-100 but not 0:
///    x - mean then rests on the mean's low part, which a float carries no finer than 2^-149;
///  - |mean| over 2^100 (over 2^100 and a spread over 2^126 for batch statistics): x - hi
///    may overflow;
///  - a mean under 2^-100 but not 0 for given statistics, whose data spread is not known;
///  - rstd * s outside [2^-125, 2^127] for a non-zero scale s of `scale` (its smallest and
///    largest magnitudes, over the whole call): a is then a subnormal or infinite float;
///  - rstd infinite with given statistics (var + eps = 0: the float path gives NaN where
///    x != mean, the double arithmetic +-inf).
/// A NaN statistic (a fully masked group) gives NaN on both paths and is not flagged, nor is
/// rstd infinite for batch statistics (a constant group: x - mean is 0 on both paths).
/// `center` false (RMSNorm): x enters unshifted and exact, so only a's range counts.
std::vector<std::uint8_t> float_path_unsafe(const ForwardResult& out, bool center, bool given,
                                            const std::vector<double>& scale);

/// Rewrites y for the statistics `unsafe` flags with the double arithmetic of the double path
/// (y = ((x - mean) - mean_lo) * (rstd * scale) + shift, formed in double, rounded once;
/// normalize_double.hpp): x and y of shape xs, statistics at strides sa (broadcast_strides
/// of the statistics shape), scale and shift at strides sb. Other elements keep their bits,
/// so a value still depends on its own input, statistic and parameters only.
void renormalize_in_double(const float* x, float* y, const Shape& xs, const Strides& sa, const Strides& sb,
                           const ForwardResult& out, const std::vector<std::uint8_t>& unsafe, const double* scale,
                           const double* shift);

}  // namespace normlab
