// The float path's output with streaming stores (normalize_stream.hpp).
#include "norm/normalize_stream.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "norm/lanes.hpp"
#include "norm/normalize_double.hpp"
#include "norm/normalize_f32.hpp"

#if NORMLAB_LANE_DISPATCH
#include <immintrin.h>
#endif

namespace normlab {

namespace {

// Elements per block: the block's output, and its parameters where they are gathered, stay
// in L1 (12 KiB).
constexpr std::size_t kBlock = 1024;
static_assert(kBlock * sizeof(float) % 64 == 0, "blocks of whole cache lines");
// The longest block: a run's last block takes in a rest shorter than a cache line
// (stream_run).
constexpr std::size_t kBlockMax = kBlock + 16;
// Rows and planes this long and longer are streamed straight from the registers
// (stream_row_avx512, stream_plane_avx512, stream_double_avx512; stream_row_avx2 and
// stream_plane_avx2 for the float path on AVX2): on shorter ones the
// generic arithmetic at a run's two ends costs more than the copy it saves (float32 rows of
// 64 took longer; the double writer takes the same threshold, not measured apart).
constexpr std::size_t kDirectRow = 256;
// The float rows' threshold on AVX2 (stream_row_avx2, stream_plane_avx2): rows of 64 gain
// there ((4096,16,64) on an AMD EPYC (Zen 3), three alternating runs: the normalize pass
// 0.71 to 0.78 -> 0.57 to 0.66 ns per element, LayerNorm on one thread 4.7 to 5.0 -> 2.9
// to 4.2 ms), where the copy out of L1 costs more than on AVX-512.
constexpr std::size_t kDirectRowAvx2 = 64;

// Brings the line of x `ahead` elements past p into L2 (NormalizeArgs::prefetch; prefetcht1).
// The address is formed as an integer: it may lie past the end of x (the last chunk's),
// which a prefetch, unlike a load, may name.
template <class T>
inline void prefetch_ahead(const T* p, std::size_t ahead) {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p) + ahead * sizeof(T);
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 2);
}

#if NORMLAB_LANE_DISPATCH
// dst[k] = src[k] for k < n (float or double), the aligned middle with streaming stores of
// the widest register.
template <class T>
NORMLAB_TARGET_AVX512 void stream_avx512(T* dst, const T* src, std::size_t n) {
    std::size_t k = 0;
    for (; k < n && reinterpret_cast<std::uintptr_t>(dst + k) % 64; ++k) dst[k] = src[k];
    for (; k + 64 / sizeof(T) <= n; k += 64 / sizeof(T)) {
        if constexpr (std::is_same_v<T, float>) _mm512_stream_ps(dst + k, _mm512_loadu_ps(src + k));
        else _mm512_stream_pd(dst + k, _mm512_loadu_pd(src + k));
    }
    for (; k < n; ++k) dst[k] = src[k];
}
template <class T>
NORMLAB_TARGET_AVX2 void stream_avx2(T* dst, const T* src, std::size_t n, const T* xp, std::size_t ahead) {
    std::size_t k = 0;
    for (; k < n && reinterpret_cast<std::uintptr_t>(dst + k) % 32; ++k) dst[k] = src[k];
    for (; k + 32 / sizeof(T) <= n; k += 32 / sizeof(T)) {
        if (ahead && reinterpret_cast<std::uintptr_t>(dst + k) % 64 == 0) prefetch_ahead(xp + k, ahead);
        if constexpr (std::is_same_v<T, float>) _mm256_stream_ps(dst + k, _mm256_loadu_ps(src + k));
        else _mm256_stream_pd(dst + k, _mm256_loadu_pd(src + k));
    }
    for (; k < n; ++k) dst[k] = src[k];
}
template <class T>
void stream_sse(T* dst, const T* src, std::size_t n, const T* xp, std::size_t ahead) {
    std::size_t k = 0;
    for (; k < n && reinterpret_cast<std::uintptr_t>(dst + k) % 16; ++k) dst[k] = src[k];
    for (; k + 16 / sizeof(T) <= n; k += 16 / sizeof(T)) {
        if (ahead && reinterpret_cast<std::uintptr_t>(dst + k) % 64 == 0) prefetch_ahead(xp + k, ahead);
        if constexpr (std::is_same_v<T, float>) _mm_stream_ps(dst + k, _mm_loadu_ps(src + k));
        else _mm_stream_pd(dst + k, _mm_loadu_pd(src + k));
    }
    for (; k < n; ++k) dst[k] = src[k];
}
#endif

// `width`: active_lane_width(), read once per chunk by the caller. xp: the input at dst's
// place, whose line `ahead` values on is prefetched per line streamed (0: none), on AVX2
// and SSE2. The block writer serves every run on SSE2, the double arithmetic's runs on AVX2,
// and otherwise only runs shorter than the register writers' thresholds (kDirectRow,
// kDirectRowAvx2). On AVX-512 those short runs, whose arithmetic limits them, were no faster
// with the prefetch (rows of 64, (4096,16,64): 2.76 -> 2.83 ms on one thread, 1.84 -> 1.93
// on two).
template <class T>
void stream_out(int width, T* dst, const T* src, std::size_t n, const T* xp, std::size_t ahead) {
#if NORMLAB_LANE_DISPATCH
    if (width == 8) return stream_avx512(dst, src, n);
    if (width == 4) return stream_avx2(dst, src, n, xp, ahead);
    return stream_sse(dst, src, n, xp, ahead);
#else
    (void)width, (void)xp, (void)ahead;
    std::memcpy(dst, src, n * sizeof(T));
#endif
}

// The block's arithmetic, one instance per instruction set (as normalize_chunk_f32).
NORMLAB_FMA_CLONES void normalize_block(const float* xp, float* out, const Run& r, const NormalizeArgs& args,
                                        float* a_buf, float* c_buf) {
    normalize_stat_run_f32(xp, out, r, args, a_buf, c_buf);
}

// The block's double arithmetic, one instance per instruction set (as normalize_chunk).
NORMLAB_VECTOR_CLONES void normalize_block_double(const float* xp, float* out, const Run& r, const NormalizeArgs& args) {
    normalize_run_double(xp, out, r, args);
}
NORMLAB_VECTOR_CLONES void normalize_block_double(const double* xp, double* out, const Run& r,
                                                  const NormalizeArgs& args) {
    normalize_run_double(xp, out, r, args);
}

// y for run r of x, a block of about kBlock values at a time: block(xp, out, b) forms block
// b in `out` (kBlockMax values), which stays in L1, and the block is then streamed to y. The
// first block ends where a cache line of y starts, so every later block starts on one and
// only the run's two ends take scalar stores: blocks cut from the run's start put a line
// shared by two blocks, written in part by scalar stores and in part streamed, at every
// block's end wherever y is not 64-byte aligned (as malloc's large blocks were not before
// operator new aligned those of 2 MiB and more to 2 MiB; smaller ones and views still are not):
// GroupNorm (32,64,56,56) on one thread, alternating builds, 2.32 to 2.49 -> 2.04 to 2.11 ms
// (2.04 to 2.09 with the tensors allocated 64-byte aligned, as a test). A rest shorter than
// a line joins the last block rather than make one more. The rows' writer keeps blocks cut from each row's start (`at_lines` false): cut at
// lines, LayerNorm (8,512,4096) on one thread ran 6.9 to 8.0 ms against 6.45 to 7.0 in
// alternating builds, though its output pass alone got faster (0.54 to 0.59 ns per element
// against 0.56 to 0.62); the cause was not found. `ahead`: stream_out's prefetch distance.
template <class T, class Block>
void stream_run(const T* x, T* y, const Run& r, T* out, int width, bool at_lines, std::size_t ahead, Block&& block) {
    constexpr std::size_t line = 64 / sizeof(T);
    const std::size_t skew = at_lines ? line_offset(y + r.x) : 0;
    for (std::size_t k = 0, len = kBlock - skew; k < r.n; k += len, len = kBlock) {
        if (r.n - k < len + line) len = r.n - k;
        const Run b{r.x + k, r.a + k * r.da, r.b + k * r.db, len, r.da, r.db};
        block(x + b.x, out, b);
        stream_out(width, y + b.x, out, b.n, x + b.x, ahead);
    }
}

// Orders the calling thread's streamed stores before whatever follows (its chunk's end).
inline void fence_streams() {
#if NORMLAB_LANE_DISPATCH
    _mm_sfence();
#endif
}

#if NORMLAB_LANE_DISPATCH
typedef double D8 __attribute__((vector_size(64)));
typedef float F8 __attribute__((vector_size(32)));

// Two registers of 8 doubles rounded to floats, as one register of 16 (lo first). GCC's
// vector conversions: its _mm512_cvtpd_ps and _mm512_castps256_ps512 trip
// -Wmaybe-uninitialized in GCC 12's own headers.
NORMLAB_TARGET_AVX512 inline __m512 narrow(__m512d lo, __m512d hi) {
    const F8 f0 = __builtin_convertvector(static_cast<D8>(lo), F8);
    const F8 f1 = __builtin_convertvector(static_cast<D8>(hi), F8);
    return static_cast<__m512>(__builtin_shufflevector(f0, f1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

// A run of n values at y split for streaming stores: `head` values before y's first 64-byte
// line, then `body` values in whole lines (one 64-byte register each); the rest after them.
struct LineSplit {
    std::size_t head, body;
};
template <class T>
LineSplit line_split(const T* y, std::size_t n) {
    constexpr std::size_t line = 64 / sizeof(T);
    const std::size_t head = std::min(n, (line - line_offset(y)) % line);
    return {head, (n - head) / line * line};
}

// The register writers below form runs in AVX-512 registers and stream them straight to y,
// without the block in L1 and the copy out of it (15% of a LayerNorm (64,128,768)
// forward's samples), with the generic arithmetic's operations element by element
// (normalize_stat_run_f32; normalize_run_double for the last one), so the same bits. The
// ends outside whole lines of y take the generic arithmetic with plain stores. The float
// path's uncentred form fma(x, a, c) is fma(x - hi, a, c) with hi = +0 (x - (+0) is x, -0
// and NaN included), so its loops take the centred form alone.

// A LayerNorm/RMSNorm row with its weight and bias along the row (r.db == 1): a = fl(rstd *
// scale) in double, c = fma(-lo, a, b), y = fma(x - hi, a, c). LayerNorm (8,512,4096) on a
// 2-core Xeon, the two writers alternating, 5 rounds: 15.5 to 20.1 ms against 19.3 to 23.6
// on one thread, 8.7 to 10.2 against 10.3 to 12.0 on two (scripts/PERFORMANCE.md).
NORMLAB_TARGET_AVX512 void stream_row_avx512(const float* xp, float* yp, const Run& r, const NormalizeArgs& args) {
    const auto [head, body] = line_split(yp, r.n);
    if (head) normalize_stat_run_f32(xp, yp, Run{r.x, r.a, r.b, head, 0, 1}, args, nullptr, nullptr);
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    const double* sc = args.scale + r.b;
    const float* sh = args.shift_f + r.b;
    const __m512d rs = _mm512_set1_pd(args.rstd[r.a]);
    const __m512 hi = _mm512_set1_ps(m.hi), neg_lo = _mm512_set1_ps(-m.lo);
    const bool lo_zero = m.lo == 0;
    for (std::size_t k = head; k < head + body; k += 16) {
        const __m512 a = narrow(_mm512_mul_pd(rs, _mm512_loadu_pd(sc + k)), _mm512_mul_pd(rs, _mm512_loadu_pd(sc + k + 8)));
        const __m512 b = _mm512_loadu_ps(sh + k);
        const __m512 c = lo_zero ? b : _mm512_fmadd_ps(neg_lo, a, b);
        if (args.prefetch) prefetch_ahead(xp + k, args.prefetch);
        _mm512_stream_ps(yp + k, _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xp + k), hi), a, c));
    }
    if (head + body < r.n)
        normalize_stat_run_f32(xp + head + body, yp + head + body,
                               Run{r.x + head + body, r.a, r.b + head + body, r.n - head - body, 0, 1}, args, nullptr,
                               nullptr);
}

// Rows interleaved by stream_rows_avx512: the rows of a group read each register of the
// parameters once.
constexpr std::size_t kRowGroup = 4;
// Rows long enough to interleave: the row writer reads 16 bytes per value (x, the double
// scale, the float shift), and once a row's exceed 32 KiB its parameters no longer stay in
// L1 from one row to the next. Rows of n values, the row writer against kRowGroup rows
// interleaved (a stand-alone loop of the same operations, 128 MiB of rows, on a 2-core AMD
// EPYC (Zen 5, AVX-512)): 2048: 0.20 to 0.23 ns per element against 0.23 to 0.24; 3072:
// 0.30 -> 0.23; 4096: 0.35 to 0.36 -> 0.22 to 0.25; 8192: 0.37 to 0.49 -> 0.23 to 0.27.
// Two rows gained less (0.28 to 0.30 at 4096), and blocks of 512 or 1024 columns across
// the group lost (0.35).
constexpr std::size_t kInterleaveRow = 2049;

// kRowGroup LayerNorm/RMSNorm rows of n values (a multiple of 16, so that every row starts
// at the same place in a cache line) with their weight and bias along the row, statistics
// first, first + 1, ...: stream_row_avx512's operations on each row, the parameters loaded
// once per register for the group, so the same bits.
NORMLAB_TARGET_AVX512 void stream_rows_avx512(const float* xp, float* yp, std::size_t n, std::size_t first,
                                              const NormalizeArgs& args) {
    constexpr std::size_t G = kRowGroup;
    const auto [head, body] = line_split(yp, n);
    __m512d rs[G];
    __m512 hi[G], neg_lo[G];
    bool lo_zero[G];
    for (std::size_t i = 0; i < G; ++i) {
        const std::size_t a = first + i;
        if (head) normalize_stat_run_f32(xp + i * n, yp + i * n, Run{i * n, a, 0, head, 0, 1}, args, nullptr, nullptr);
        const MeanParts m = split_mean(args.mean[a], args.mean_lo[a]);
        rs[i] = _mm512_set1_pd(args.rstd[a]);
        hi[i] = _mm512_set1_ps(m.hi), neg_lo[i] = _mm512_set1_ps(-m.lo);
        lo_zero[i] = m.lo == 0;
    }
    for (std::size_t k = head; k < head + body; k += 16) {
        const __m512d s0 = _mm512_loadu_pd(args.scale + k), s1 = _mm512_loadu_pd(args.scale + k + 8);
        const __m512 b = _mm512_loadu_ps(args.shift_f + k);
#pragma GCC unroll 4
        for (std::size_t i = 0; i < G; ++i) {
            const __m512 a = narrow(_mm512_mul_pd(rs[i], s0), _mm512_mul_pd(rs[i], s1));
            const __m512 c = lo_zero[i] ? b : _mm512_fmadd_ps(neg_lo[i], a, b);
            const float* xr = xp + i * n;
            if (args.prefetch) prefetch_ahead(xr + k, args.prefetch);
            _mm512_stream_ps(yp + i * n + k, _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + k), hi[i]), a, c));
        }
    }
    if (head + body < n)
        for (std::size_t i = 0; i < G; ++i)
            normalize_stat_run_f32(xp + i * n + head + body, yp + i * n + head + body,
                                   Run{i * n + head + body, first + i, head + body, n - head - body, 0, 1}, args,
                                   nullptr, nullptr);
}

// A run whose statistic and parameters are both fixed (fixed_params: planes of BatchNorm,
// InstanceNorm and GroupNorm; rows without affine parameters): one a and one c,
// y = fma(x - hi, a, c).
NORMLAB_TARGET_AVX512 void stream_plane_avx512(const float* xp, float* yp, const Run& r, const NormalizeArgs& args) {
    const auto [head, body] = line_split(yp, r.n);
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    const float a = fold(args.rstd[r.a], args.scale[r.b]);
    const float c = offset(m.lo, a, args.shift_f[r.b]);
    if (head) normalize_run_f32(xp, yp, head, m, a, c);
    const __m512 av = _mm512_set1_ps(a), cv = _mm512_set1_ps(c), hi = _mm512_set1_ps(m.hi);
    for (std::size_t k = head; k < head + body; k += 16) {
        if (args.prefetch) prefetch_ahead(xp + k, args.prefetch);
        _mm512_stream_ps(yp + k, _mm512_fmadd_ps(_mm512_sub_ps(_mm512_loadu_ps(xp + k), hi), av, cv));
    }
    if (head + body < r.n) normalize_run_f32(xp + head + body, yp + head + body, r.n - head - body, m, a, c);
}

// Two registers of 4 doubles rounded to floats, as one register of 8 (lo first), with GCC's
// vector conversions as narrow.
typedef double D4 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
NORMLAB_TARGET_AVX2 inline __m256 narrow(__m256d lo, __m256d hi) {
    const F4 f0 = __builtin_convertvector(static_cast<D4>(lo), F4);
    const F4 f1 = __builtin_convertvector(static_cast<D4>(hi), F4);
    return static_cast<__m256>(__builtin_shufflevector(f0, f1, 0, 1, 2, 3, 4, 5, 6, 7));
}

// stream_row_avx512 and stream_plane_avx512 in registers of 8 floats (AVX2 with FMA): two
// registers per 64-byte line of y, the same operations on the same operands, so the same
// bits. Against the block writer (the run formed in L1, then copied out with streaming
// stores) on a 2-core AMD EPYC (Zen 3), three alternating runs of each: LayerNorm
// (64,128,768) on one thread 4.19 to 4.35 -> 2.85 to 3.47 ms, GroupNorm (32,64,56,56) 3.86
// to 4.38 -> 2.63 to 3.30 ms, on two threads 2.19 to 2.33 -> 1.66 to 1.95 ms.
NORMLAB_TARGET_AVX2 void stream_row_avx2(const float* xp, float* yp, const Run& r, const NormalizeArgs& args) {
    const auto [head, body] = line_split(yp, r.n);
    if (head) normalize_stat_run_f32(xp, yp, Run{r.x, r.a, r.b, head, 0, 1}, args, nullptr, nullptr);
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    const double* sc = args.scale + r.b;
    const float* sh = args.shift_f + r.b;
    const __m256d rs = _mm256_set1_pd(args.rstd[r.a]);
    const __m256 hi = _mm256_set1_ps(m.hi), neg_lo = _mm256_set1_ps(-m.lo);
    const bool lo_zero = m.lo == 0;
    for (std::size_t k = head; k < head + body; k += 16) {
        if (args.prefetch) prefetch_ahead(xp + k, args.prefetch);
        for (std::size_t e = k; e < k + 16; e += 8) {
            const __m256 a =
                narrow(_mm256_mul_pd(rs, _mm256_loadu_pd(sc + e)), _mm256_mul_pd(rs, _mm256_loadu_pd(sc + e + 4)));
            const __m256 b = _mm256_loadu_ps(sh + e);
            const __m256 c = lo_zero ? b : _mm256_fmadd_ps(neg_lo, a, b);
            _mm256_stream_ps(yp + e, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xp + e), hi), a, c));
        }
    }
    if (head + body < r.n)
        normalize_stat_run_f32(xp + head + body, yp + head + body,
                               Run{r.x + head + body, r.a, r.b + head + body, r.n - head - body, 0, 1}, args, nullptr,
                               nullptr);
}

NORMLAB_TARGET_AVX2 void stream_plane_avx2(const float* xp, float* yp, const Run& r, const NormalizeArgs& args) {
    const auto [head, body] = line_split(yp, r.n);
    const MeanParts m = split_mean(args.mean[r.a], args.mean_lo[r.a]);
    const float a = fold(args.rstd[r.a], args.scale[r.b]);
    const float c = offset(m.lo, a, args.shift_f[r.b]);
    if (head) normalize_run_f32(xp, yp, head, m, a, c);
    const __m256 av = _mm256_set1_ps(a), cv = _mm256_set1_ps(c), hi = _mm256_set1_ps(m.hi);
    for (std::size_t k = head; k < head + body; k += 16) {
        if (args.prefetch) prefetch_ahead(xp + k, args.prefetch);
        _mm256_stream_ps(yp + k, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xp + k), hi), av, cv));
        _mm256_stream_ps(yp + k + 8, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(xp + k + 8), hi), av, cv));
    }
    if (head + body < r.n) normalize_run_f32(xp + head + body, yp + head + body, r.n - head - body, m, a, c);
}

// The float path's register writer for run r at this width (8 or 4): the plane writer where
// its parameters are fixed (fixed_params), else the row writer.
void stream_direct_f32(int width, const float* xp, float* yp, const Run& r, const NormalizeArgs& args) {
    const bool plane = fixed_params(r, args);
    if (width == 8) plane ? stream_plane_avx512(xp, yp, r, args) : stream_row_avx512(xp, yp, r, args);
    else plane ? stream_plane_avx2(xp, yp, r, args) : stream_row_avx2(xp, yp, r, args);
}

// The double arithmetic's writer from the registers, for runs whose statistic is fixed
// (r.da == 0) and whose parameters are fixed (r.db == 0: planes) or step by one (r.db == 1:
// LayerNorm/RMSNorm rows, with or without a weight): ((x - mean) - mean_lo) * (rstd * scale)
// + shift, rounded once to T, normalize_run_double's operations one by one on the same
// operands (the module contracts no FMA), so the same bits. Not for float16/bfloat16
// outputs: those are rounded once from double to that format, which this writer does not
// do. Float64, 2-core Xeon, the two writers
// alternating, 5 rounds: LayerNorm (64,128,768) 9.49 against 11.1 ms on one thread, 3.98
// against 4.50 on two; BatchNorm (32,64,56,56) 9.78 against 11.6 and 4.22 against 5.07
// (scripts/PERFORMANCE.md). Float64 runs from 32 values (4 lines) on: their line holds 8
// values, so the generic ends are shorter than float's; float64 LayerNorm (4096,16,64) on a
// 2-core AMD EPYC (Zen 5), five alternating runs: 3.84 -> 3.35 ms on one thread, 2.09 ->
// 1.56 on two; rows of 100 5.14 -> 4.48. Float data on the double arithmetic keep 256: rows
// of 100 lost with 32 (4.78 -> 5.20 ms), rows of 64 gained (3.30 -> 2.60).
constexpr std::size_t kDirectRowDouble = 32;
template <class T>
bool double_direct(const Run& r, bool half) {
    const std::size_t least = std::is_same_v<T, double> ? kDirectRowDouble : kDirectRow;
    return !half && r.n >= least && r.da == 0 && r.db <= 1;
}

// 8 values of x as doubles (exact; load_lanes: one conversion per register).
template <class T>
NORMLAB_TARGET_AVX512 inline __m512d load_pd(const T* p) {
    Lanes<8>::D v;
    load_lanes<8>(p, 0, v);
    return static_cast<__m512d>(v);
}

// The part [from, from + n) of run r (r.da == 0) with the generic double arithmetic.
template <class T>
void double_part(const T* xp, T* yp, const Run& r, std::size_t from, std::size_t n, const NormalizeArgs& args) {
    normalize_run_double(xp + from, yp + from, Run{r.x + from, r.a, r.b + from * r.db, n, 0, r.db}, args);
}

template <bool Fixed, class T>
NORMLAB_TARGET_AVX512 void stream_double_avx512(const T* xp, T* yp, const Run& r, const NormalizeArgs& args) {
    constexpr std::size_t line = 64 / sizeof(T);
    const auto [head, body] = line_split(yp, r.n);
    if (head) double_part(xp, yp, r, 0, head, args);
    const double* sc = args.scale + r.b;
    const double* sh = args.shift + r.b;
    const __m512d mu = _mm512_set1_pd(args.mean[r.a]), ml = _mm512_set1_pd(args.mean_lo[r.a]);
    const __m512d rs = _mm512_set1_pd(args.rstd[r.a]);
    const __m512d fa = _mm512_set1_pd(args.rstd[r.a] * sc[0]), fb = _mm512_set1_pd(sh[0]);
    for (std::size_t k = head; k < head + body; k += line) {
        if (args.prefetch) prefetch_ahead(xp + k, args.prefetch);
        __m512d v[line / 8];
        for (std::size_t h = 0; h < line / 8; ++h) {
            const std::size_t e = k + 8 * h;
            const __m512d a = Fixed ? fa : _mm512_mul_pd(rs, _mm512_loadu_pd(sc + e));
            const __m512d b = Fixed ? fb : _mm512_loadu_pd(sh + e);
            v[h] = _mm512_add_pd(_mm512_mul_pd(_mm512_sub_pd(_mm512_sub_pd(load_pd(xp + e), mu), ml), a), b);
        }
        if constexpr (std::is_same_v<T, double>) _mm512_stream_pd(yp + k, v[0]);
        else _mm512_stream_ps(yp + k, narrow(v[0], v[1]));
    }
    if (head + body < r.n) double_part(xp, yp, r, head + body, r.n - head - body, args);
}
#endif

template <class T>
void chunk_stream_double(const T* x, T* y, const Walk& w, std::size_t c, const NormalizeArgs& args) {
    alignas(64) T out[kBlockMax];
    const int width = active_lane_width();
#if NORMLAB_LANE_DISPATCH
    const bool half = args.dtype == DType::float16 || args.dtype == DType::bfloat16;
#endif
    w.chunk(c, [&](const Run& r) {
#if NORMLAB_LANE_DISPATCH
        if (width == 8 && double_direct<T>(r, half)) {
            if (r.db == 0) stream_double_avx512<true>(x + r.x, y + r.x, r, args);
            else stream_double_avx512<false>(x + r.x, y + r.x, r, args);
            return;
        }
#endif
        stream_run(x, y, r, out, width, true, args.prefetch,
                   [&](const T* xp, T* o, const Run& b) { normalize_block_double(xp, o, b, args); });
    });
    if (args.fence) fence_streams();
}

}  // namespace

void fence_stream_stores() { fence_streams(); }

void normalize_rows_f32_stream(const float* x, float* y, std::size_t rows, std::size_t n, std::size_t first,
                               std::size_t pstep, const NormalizeArgs& args) {
    alignas(64) float out[kBlockMax];
    const int width = active_lane_width();
#if NORMLAB_LANE_DISPATCH
    if (width >= 4 && n >= (width == 4 ? kDirectRowAvx2 : kDirectRow)) {
        std::size_t i = 0;
        const Run row{0, first, 0, n, 0, pstep};
        if (width == 8 && n >= kInterleaveRow && n % 16 == 0 && !fixed_params(row, args))
            for (; i + kRowGroup <= rows; i += kRowGroup) stream_rows_avx512(x + i * n, y + i * n, n, first + i, args);
        for (; i < rows; ++i)
            stream_direct_f32(width, x + i * n, y + i * n, Run{i * n, first + i, 0, n, 0, pstep}, args);
        if (args.fence) fence_streams();
        return;
    }
#endif
    if (n > kBlock) {  // long rows: a block of a row at a time
        for (std::size_t i = 0; i < rows; ++i)
            stream_run(x, y, Run{i * n, first + i, 0, n, 0, pstep}, out, width, false, args.prefetch,
                       [&](const float* xp, float* o, const Run& b) { normalize_block(xp, o, b, args, nullptr, nullptr); });
    } else {  // short rows: as many whole rows as fill a block, streamed out together
        const std::size_t per = kBlock / n;
        for (std::size_t i = 0; i < rows; i += per) {
            const std::size_t m = std::min(per, rows - i);
            normalize_rows_f32(x + i * n, out, m, n, first + i, pstep, args);
            stream_out(width, y + i * n, out, m * n, x + i * n, args.prefetch);
        }
    }
    if (args.fence) fence_streams();
}

void normalize_chunk_f32_stream(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& args) {
    alignas(64) float out[kBlockMax], a_buf[kBlockMax], c_buf[kBlockMax];
    const int width = active_lane_width();
    w.chunk(c, [&](const Run& r) {
#if NORMLAB_LANE_DISPATCH
        if (width >= 4 && r.n >= kDirectRow && fixed_params(r, args)) {
            stream_direct_f32(width, x + r.x, y + r.x, r, args);
            return;
        }
#endif
        stream_run(x, y, r, out, width, true, args.prefetch,
                   [&](const float* xp, float* o, const Run& b) { normalize_block(xp, o, b, args, a_buf, c_buf); });
    });
    if (args.fence) fence_streams();
}

void normalize_chunk_stream(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& args) {
    chunk_stream_double(x, y, w, c, args);
}
void normalize_chunk_stream(const double* x, double* y, const Walk& w, std::size_t c, const NormalizeArgs& args) {
    chunk_stream_double(x, y, w, c, args);
}

}  // namespace normlab
