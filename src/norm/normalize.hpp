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
    /// Streaming writers (normalize_stream.hpp; the register writers on AVX-512 and AVX2, the
    /// block writer on SSE2 and for short runs): while writing x + i, bring x + i + prefetch
    /// into L2, one cache line per line written; 0: none. The one-pass forwards set it to
    /// their chunk's length, so the next chunk's input is read while this chunk's output
    /// streams out (float32 walks, and rows of over 2048 values, only where read_ahead());
    /// BatchNorm's one-pass forward to a plane's, the other forwards to kWholeChunk for
    /// float64 outputs, 0 for the rest. No effect on the bits.
    std::size_t prefetch = 0;
    /// Streaming chunk writers: fence the chunk's streamed stores at its end. False where the
    /// caller writes many short chunks and fences once after them (fence_stream_stores):
    /// a fence waits for the stores in flight, and one per plane of 3136 values cost
    /// BatchNorm (32,64,56,56) float32 a fifth of its time on one thread (3.6 -> 2.92 ms).
    bool fence = true;
};

/// Double arithmetic: y = ((x - mean) - mean_lo) * (rstd * scale) + shift formed in double
/// and rounded once to the dtype (0.5 ulp of the float64 result for float32 and the half
/// formats; x - mean is exact where x is within a factor of 2 of the mean, so elements next
/// to the mean keep their digits too).
void normalize_chunk(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);
void normalize_chunk(const double* x, double* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// The float path for float32 data, in float32 lanes (twice as many as double):
///   hi, lo = the mean (mean + mean_lo) as two floats: hi = fl(mean), lo = fl(mean - hi)
///   a = fl(rstd * scale)     folded in double, rounded once
///   b = fl(shift)
///   c = fma(-lo, a, b)       b - lo * a rounded once (b where lo is 0)
///   y = fma(x - hi, a, c)    (x - hi) * a + c rounded once
/// per (statistic, parameter element). x - hi is exact where x lies within a factor of 2 of
/// hi (Sterbenz 1974), which is where cancellation would hurt; there the part of the mean a
/// float cannot carry enters through c. hi is the float nearest the mean (to double
/// precision), so |lo| <= |x - mean| (1 + 2^-24) for every float x: lo * a is at most about
/// x̂ * scale. Where x - hi rounds, |x - hi| > |hi| / 2 and |lo| <= 2^-24 |hi|, so lo * a is
/// under 2^-23 of (x - hi) * a. Each rounding (of a, b, lo, c, x - hi and the last fma) costs
/// about half an ulp of the largest of |x̂ * scale|, |shift| and |y|, up to a whole one where
/// a product or c crosses a binade; summed, these bounds exceed 3, so the float path's
/// contract, 3 such ulps of the float64 result (scheme from DESIGN.md "Architecture"), rests
/// on measurement: worst 2.59 ulps over 9e8 elements of rows built to break it
/// (scripts/float_path_stress.cpp; 3.17 for the earlier (((x - hi) - lo) - lo2) * a + b,
/// each step rounded), and the precision tests. The fma is std::fma: an instruction in the
/// x86-64-v3 and v4 versions of the kernels (NORMLAB_FMA_CLONES), a call into libm's exact
/// fmaf in the baseline one and in builds by other compilers, so the bits are the same on
/// every CPU (test_norm checks the kernels' bits against libm's fmaf element by element).
/// The software fmaf is many times slower than the double path, which is why norms take
/// the float path by default only where float_path_has_fma() (engine.hpp).
/// Every layout computes the same expression from the same constants, so a value depends on
/// its own input, statistic and parameters only: the same row gives the same bits wherever
/// it sits in a batch. The bounds above hold while hi, lo, a, c and x - hi are normal
/// floats; forward() gives the elements where they would not be the double arithmetic
/// (float_range.hpp).
void normalize_chunk_f32(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// normalize_chunk_f32 for `rows` contiguous rows of n floats at x, each row a whole
/// statistic (row i: statistic first + i) and the parameters along it (pstep 1: element k of
/// every row takes parameter k) or one for all (pstep 0): LayerNorm/RMSNorm over trailing
/// axes. The same bits, without the walk.
void normalize_rows_f32(const float* x, float* y, std::size_t rows, std::size_t n, std::size_t first,
                        std::size_t pstep, const NormalizeArgs& a);

}  // namespace normlab
