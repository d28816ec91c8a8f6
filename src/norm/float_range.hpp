#pragma once
// Where the float path (normalize.hpp) leaves float32's range, and the double arithmetic for
// the elements where it does. The float path's constants are floats: the mean's two parts
// hi and lo, a = fl(rstd * scale), c = fma(-lo, a, b), and x - hi. Data of subnormal size,
// values near FLT_MAX or a product rstd * scale beyond it (a tiny spread under a large
// weight) overflow them or lose their digits below float's normal range, where the float64
// result is finite and ordinary: the float path gave -inf for a LayerNorm (eps 0) of
// [1e-39, 2e-39, 3e-39, 4e-39], whose float64 result is about -1.34.
#include <cstdint>
#include <vector>

#include "norm/engine.hpp"
#include "norm/line_vector.hpp"
#include "norm/strided.hpp"

namespace normlab {

/// What float_path_unsafe flags for one statistic.
enum FloatRangeFlag : std::uint8_t {
    kFloatSafe = 0,
    /// Every element of the statistic: its mean's float parts or x - hi leave the range.
    kWholeStatistic = 1,
    /// Only the elements whose own parameter puts a = fl(rstd * scale) or c = fma(-lo, a, b)
    /// outside it (renormalize_in_double tests each), so a value still depends on its own
    /// input, statistic and parameters alone.
    kSomeParameters = 2,
};

/// Per statistic of `out` (its keep-dims statistics arrays after a float-path forward), the
/// elements for which the float path cannot be trusted to meet its 3-ulp contract; empty
/// when there are none (ordinary data). A whole statistic where
///  - the mean's low part lo = fl((mean - hi) + mean_lo) lies below 2^-126 with bits a
///    float cannot hold (subnormal data; a mean that cancels to below 2^-126): x - mean
///    then rests on a part that lost its digits;
///  - |mean| is over 2^100 and x - hi may overflow: |x - mean| is bounded by
///    sqrt(count * var) <= 2^126 only for batch statistics without a mask (padded positions
///    are normalised too, and given statistics say nothing of x);
///  - rstd is infinite with given statistics (var + eps = 0: the float path gives NaN or
///    +-inf where the double arithmetic gives +-inf).
/// Some parameters where rstd * s, for the smallest or largest non-zero |s| of `scale`,
/// leaves [2^-125, 2^127], or |lo| * rstd * max|s| + max|shift| exceeds 2^127.
/// A NaN statistic (a fully masked group) gives NaN on both paths and is not flagged, nor
/// is rstd infinite for batch statistics (a constant group: x - mean is 0 on both paths).
/// `center` false (RMSNorm): x enters unshifted and exact, so only a and c count.
std::vector<std::uint8_t> float_path_unsafe(const ForwardResult& out, bool center, bool given, bool masked,
                                            const LineVector<double>& scale, const LineVector<double>& shift);

/// Rewrites y for the elements `unsafe` flags (float_path_unsafe) with the double
/// arithmetic of the double path (y = ((x - mean) - mean_lo) * (rstd * scale) + shift,
/// formed in double, rounded once; normalize_double.hpp): x and y of shape xs, statistics
/// at strides sa (broadcast_strides of the statistics shape), scale and shift at strides sb.
/// Other elements keep their bits.
void renormalize_in_double(const float* x, float* y, const Shape& xs, const Strides& sa, const Strides& sb,
                           const ForwardResult& out, const std::vector<std::uint8_t>& unsafe, const double* scale,
                           const double* shift);

}  // namespace normlab
