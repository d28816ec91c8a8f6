#pragma once
// The output kernels of the engine (internal to norm/): y = (x - mean) * rstd * scale + shift
// over one chunk of a Walk, in double arithmetic for every dtype, or in float32 lanes for
// float32 data (the float path). engine.cpp decides which one runs and on which threads.
#include <cstddef>

#include "norm/parallel.hpp"
#include "norm/strided.hpp"

namespace normlab {

/// What the output formula needs besides x, the same for every chunk of one forward.
/// Walk operand A indexes the statistics, operand B the parameters.
struct NormalizeArgs {
    const double* mean = nullptr;   ///< per statistic; 0 when not centring
    const double* mean_lo = nullptr;///< per statistic: the mean's low part (Moments::mean_lo)
    const double* rstd = nullptr;   ///< per statistic
    const double* scale = nullptr;  ///< per parameter element: weight_offset + weight, or 1
    const double* shift = nullptr;  ///< per parameter element: bias, or 0
    const float* shift_f = nullptr; ///< float path: shift rounded once to float
    bool uniform_scale = false;     ///< every scale is 1 (no weight)
    bool uniform_shift = false;     ///< every shift is 0 (no bias)
    DType dtype = DType::float32;   ///< float16/bfloat16: outputs rounded once to that format
};

/// Double arithmetic: y = ((x - mean) - mean_lo) * (rstd * scale) + shift formed in double
/// and rounded once to the dtype (0.5 ulp of the float64 result for float32 and the half
/// formats; x - mean is exact where x is within a factor of 2 of the mean, so elements next
/// to the mean keep their digits too).
void normalize_chunk(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);
void normalize_chunk(const double* x, double* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// The float path for float32 data, in float32 lanes (twice as many as double):
///   hi, lo, lo2 = the mean (mean + mean_lo) split into three floats, each the rounding
///                 of what the previous ones leave (72 bits: two would leave 2^-49 of
///                 the mean, hundreds of ulps of y next to the mean on rows like mean 1e4
///                 std 1, where |x̂| can be 1e-6)
///   a = fl(rstd * scale)   folded in double, rounded once per (statistic, parameter element)
///   b = fl(shift)
///   y = (((x - hi) - lo) - lo2) * a + b,   each operation rounded to float
/// x - hi is exact when x lies within a factor of 2 of hi (Sterbenz), which is where
/// cancellation would hurt; each other rounding costs at most half an ulp of |x̂·scale|,
/// |shift| or |y|, and the subtraction of lo2 only rounds where lo's did not. Hence the
/// float path's contract: within 3 ulps of the float64 result, the ulp taken of the largest
/// of |x̂·scale|, |shift| and |y| at that element (scheme from DESIGN.md "Architecture";
/// Sterbenz 1974, "Floating-point computation"). Every layout computes the same expression,
/// so a value depends on its own input, statistic and parameters only: the same row gives
/// the same bits wherever it sits in a batch.
void normalize_chunk_f32(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// normalize_chunk_f32 for `rows` contiguous rows of n floats at x, each row a whole
/// statistic (row i: statistic first + i) and the parameters along it (pstep 1: element k of
/// every row takes parameter k) or one for all (pstep 0): LayerNorm/RMSNorm over trailing
/// axes. The same bits, without the walk.
void normalize_rows_f32(const float* x, float* y, std::size_t rows, std::size_t n, std::size_t first,
                        std::size_t pstep, const NormalizeArgs& a);

}  // namespace normlab
