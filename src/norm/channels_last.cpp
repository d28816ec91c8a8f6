// Channels-last kernels: the layout, the moments across channels, the output as one stream
// with per-channel constants, and the forward one outer group at a time.
#include "norm/channels_last.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "norm/lanes.hpp"
#include "norm/line_vector.hpp"
#include "norm/moments.hpp"
#include "norm/normalize_f32.hpp"
#include "norm/normalize_stream.hpp"
#include "norm/parallel.hpp"

#if NORMLAB_LANE_DISPATCH
#include <immintrin.h>
#endif

namespace normlab {

namespace {

// Rows at the start of a block whose mean is the shift K of the block's sums.
constexpr std::size_t kPilotRows = 16;
// Channels of one moments chunk: wider rows are cut into blocks of channels.
constexpr std::size_t kChunkChannels = 2048;
// Values per block of rows of the moments: about 1 MiB of float32, 4096 rows of 64 channels.
// Blocks of kChunk values (256 such rows) spent about a fifth of the moments from one block
// to the next, in each channel's finish and merge (BatchNorm (32,56,56,64), one thread,
// alternating builds: moments 0.172 -> 0.142 ns per element). Long blocks need the mean
// carried through the merges (merge_partial) to keep the double path's 0.5 ulp.
constexpr std::size_t kBlockValues = 16 * kChunk;
// Per-channel constants are stored kWrap entries past C (entry C + k repeats entry k mod C),
// so a vector of up to kWrap lanes starting at any channel reads them contiguously.
constexpr std::size_t kWrap = 16;

// The shift K of a block: its pilot mean rounded to float, so that for float data x - K is
// a difference of two floats, exact in double; the double mean where float's range ends
// (the same choice as the corrected two-pass in moments.cpp); 0 where the mean is not finite
// (an infinite K would make the mean NaN where numpy's is infinite).
NORMLAB_INLINE inline double shift_of(double mu) {
    if (!std::isfinite(mu)) return 0.0;
    const double f = static_cast<double>(static_cast<float>(mu));
    return std::isfinite(f) ? f : mu;
}

// Whether the squares of T's values are exact in double (float and narrower formats).
template <class T>
constexpr bool kExactSquares = !std::is_same_v<T, double>;
// A channel's pilot mean within sqrt(kCentredSpread) pilot standard deviations of 0 makes its
// shift 0, and a block whose shifts are all 0 takes its sums in four operations per register
// instead of six (BatchNorm (32,56,56,64) float32, one thread, alternating builds: 2.84 ->
// 2.44 ms). A shift that ends up more than 4 standard deviations from the mean is taken again
// (block_moments), so the cancellation costs at most log2(17) bits, as in the row moments.
constexpr double kCentredSpread = 4.0;

// The first n < W values at p as doubles, the other lanes 0.
template <int W, class T>
NORMLAB_INLINE inline void load_part(const T* p, std::size_t n, typename Lanes<W>::D& v) {
    T t[W] = {};
    std::memcpy(t, p, n * sizeof(T));
    for (int k = 0; k < W; ++k) v[k] = static_cast<double>(t[k]);
}

// Moments of NR registers of W channels (and, when Tail, one register of `tail` < W more)
// of a block of n rows of stride C starting at x: per channel, sums shifted by K, then mean,
// mean_lo and m2. K is the mean of the block's first kPilotRows rows rounded to float, or 0
// where that mean lies near 0 (kCentredSpread); a channel whose K ends up more than 4
// standard deviations from its mean (far_shift) is summed again about that mean. Each
// channel's sums are one chain over the rows in order, and its shifts depend on its own
// values, so any W gives the same bits.
template <int W, int NR, bool Tail, class T>
NORMLAB_INLINE inline void block_moments(const T* x, std::size_t C, std::size_t n, std::size_t tail, bool center,
                                         double* mean, double* lo, double* m2) {
    using V = typename Lanes<W>::D;
    constexpr int R = NR + (Tail ? 1 : 0);
    auto load = [&](const T* row, int j, V& v) NORMLAB_INLINE {
        if (Tail && j == NR) load_part<W>(row + NR * W, tail, v);
        else load_lanes<W>(row, j, v);
    };
    V k[R], s1[R], s2[R];
    for (int j = 0; j < R; ++j) k[j] = s1[j] = s2[j] = V{};
    bool zero = true;  // every shift 0: the sums skip the subtraction
    if (center) {
        const std::size_t p = std::min(n, kPilotRows);
        for (std::size_t r = 0; r < p; ++r)
            for (int j = 0; j < R; ++j) {
                V v;
                load(x + r * C, j, v);
                k[j] += v;
                s2[j] += v * v;
            }
        const double pn = static_cast<double>(p);
        for (int j = 0; j < R; ++j) {
            for (int e = 0; e < W; ++e) {
                const double mu = k[j][e] / pn, var = s2[j][e] / pn - mu * mu;
                k[j][e] = !kExactSquares<T> || mu * mu > kCentredSpread * var ? shift_of(mu) : 0.0;
                zero = zero && k[j][e] == 0;
            }
            s2[j] = V{};
        }
    }
    const double cnt = static_cast<double>(n);
    const std::size_t lanes = static_cast<std::size_t>(NR * W) + (Tail ? tail : 0);
    // A second pass where a shift lies more than 4 standard deviations from its channel's
    // mean in the block (pilot rows unlike the rest): those channels are summed again about
    // that mean rounded to float, the others to the same sums, as the row moments do.
    for (int pass = 0; pass < 2; ++pass) {
        if (zero) {
            // x - 0 is x and s2 + x * x rounds once either way (square_step): the same sums
            // as the loop below, in four operations per register instead of six.
            for (std::size_t r = 0; r < n; ++r)
#pragma GCC unroll 16
                for (int j = 0; j < R; ++j) {
                    V d;
                    load(x + r * C, j, d);
                    s1[j] += d;
                    if constexpr (kExactSquares<T>) square_step<W>(d, s2[j]);
                    else s2[j] += d * d;
                }
        } else {
            // Unrolled, or GCC keeps k, s1 and s2 on the stack and each sum waits on a store
            // and a load (moments 14% slower on (8, 56, 56, 64) float32, in cache).
            for (std::size_t r = 0; r < n; ++r)
#pragma GCC unroll 16
                for (int j = 0; j < R; ++j) {
                    V d;
                    load(x + r * C, j, d);
                    deviation_step<W>(d, k[j], s1[j], s2[j]);
                }
        }
        if (!center || pass == 1) break;
        bool again = false;
        for (int j = 0; j < R; ++j)
            for (int e = 0; e < W; ++e) {
                if (static_cast<std::size_t>(j * W + e) >= lanes || !far_shift(s1[j][e], s2[j][e], cnt)) continue;
                const double m = shift_of(k[j][e] + s1[j][e] / cnt);
                if (m == k[j][e]) continue;
                k[j][e] = m;
                again = true;
            }
        if (!again) break;
        zero = false;
        for (int j = 0; j < R; ++j) s1[j] = s2[j] = V{};
    }
    for (int j = 0; j < R; ++j)
        for (int e = 0; e < W; ++e) {
            const std::size_t c = static_cast<std::size_t>(j * W + e);
            if (c >= lanes) break;
            if (center) {
                shifted_moments(k[j][e], s1[j][e], s2[j][e], cnt, mean[c], lo[c], m2[c]);
                infinite_moments(k[j][e], s1[j][e], cnt, mean[c], lo[c], m2[c]);
            } else {
                mean[c] = lo[c] = 0;
                m2[c] = s2[j][e];
            }
        }
}

// The channels left after the full blocks: `full` < NR + 1 registers and `tail` channels.
template <int W, int NR, class T>
NORMLAB_INLINE inline void rest_moments(const T* x, std::size_t C, std::size_t n, std::size_t full, std::size_t tail,
                                        bool center, double* mean, double* lo, double* m2) {
    if constexpr (NR > 0) {
        if (full < static_cast<std::size_t>(NR)) return rest_moments<W, NR - 1>(x, C, n, full, tail, center, mean, lo, m2);
        if (!tail) return block_moments<W, NR, false>(x, C, n, 0, center, mean, lo, m2);
    }
    if (tail) block_moments<W, NR, true>(x, C, n, tail, center, mean, lo, m2);
}

// Registers of sums per block of channels: three arrays of them (K, s1, s2) stay in the 32
// AVX-512 or 16 SSE2 vector registers. AVX2's 16 registers hold three arrays of 8 only in
// part (GCC spills some), but each block of channels reads every row of the data once more,
// at a stride of C values: with 32 channels a block rather than 16, the moments of
// (32,56,56,64) and (32,28,28,256) on one thread of an AMD EPYC (Zen 3), three alternating
// runs, took 0.31 to 0.38 ns per element against 0.42 to 0.61 (64 channels a block: 0.26
// to 0.29 on the first, but 0.42 to 0.46 on the second and slower in cache).
template <int W>
constexpr int kRegs = W == 2 ? 4 : 8;

// Moments of channels [0, cw) of a block of n rows of stride C at x (block_moments).
template <int W, class T>
NORMLAB_INLINE inline void chunk_moments_cl(const T* x, std::size_t C, std::size_t cw, std::size_t n, bool center,
                                            double* mean, double* lo, double* m2) {
    constexpr std::size_t block = static_cast<std::size_t>(kRegs<W> * W);
    std::size_t c = 0;
    for (; c + block <= cw; c += block)
        block_moments<W, kRegs<W>, false>(x + c, C, n, 0, center, mean + c, lo + c, m2 + c);
    if (c < cw)
        rest_moments<W, kRegs<W> - 1>(x + c, C, n, (cw - c) / W, (cw - c) % W, center, mean + c, lo + c, m2 + c);
}

// Per-channel constants of one outer group, kWrap entries past C (see kWrap). The float
// path's: hi and lo = the mean's two floats, a = fl(rstd * scale), c = fl(b - lo * a); the double
// arithmetic's: mean, mean_lo, rstd * scale and shift.
struct GroupConstants {
    LineVector<float> hi, a, c;
    LineVector<double> mean, mlo, da, db;
};

void build_constants(const ChannelsLast& l, std::size_t o, const NormalizeArgs& args, bool f32, GroupConstants& k) {
    const std::size_t C = l.channels, n = C + kWrap;
    if (f32) {
        for (auto* v : {&k.hi, &k.a, &k.c}) v->resize(n);
    } else {
        for (auto* v : {&k.mean, &k.mlo, &k.da, &k.db}) v->resize(n);
    }
    for (std::size_t e = 0; e < n; ++e) {
        const std::size_t c = e % C, s = o * l.stats + l.stat[c], p = l.param[c];
        if (f32) {
            const MeanParts m = split_mean(args.mean[s], args.mean_lo[s]);
            k.hi[e] = m.hi;
            k.a[e] = fold(args.rstd[s], args.scale[p]);
            k.c[e] = offset(m.lo, k.a[e], args.shift_f[p]);
        } else {
            k.mean[e] = args.mean[s], k.mlo[e] = args.mean_lo[s];
            k.da[e] = args.rstd[s] * args.scale[p];
            k.db[e] = args.shift[p];
        }
    }
}

// Non-temporal stores of one vector register (aligned to its size): outputs too large to
// stay in cache go around it, so they neither evict the input (which BatchNorm's second
// pass and the next call read again) nor cost a read of each line before it is written.
#if NORMLAB_LANE_DISPATCH
NORMLAB_TARGET_AVX512 inline void stream_vector(float* p, __m512 v) { _mm512_stream_ps(p, v); }
NORMLAB_TARGET_AVX2 inline void stream_vector(float* p, __m256 v) { _mm256_stream_ps(p, v); }
inline void stream_vector(float* p, __m128 v) { _mm_stream_ps(p, v); }
#endif

// Orders a thread's streamed stores before whatever follows (the parallel region's end):
// once per thread, as a fence per chunk stalled the stores it waited for.
inline void fence_streams(bool stream) {
#if NORMLAB_LANE_DISPATCH
    if (stream) _mm_sfence();
#else
    (void)stream;
#endif
}

template <bool Stream, class V, class T>
NORMLAB_INLINE inline void put(T* p, const V& v) {
#if NORMLAB_LANE_DISPATCH
    if constexpr (Stream && sizeof(V) == 64) return stream_vector(reinterpret_cast<float*>(p), (__m512)v);
    if constexpr (Stream && sizeof(V) == 32) return stream_vector(reinterpret_cast<float*>(p), (__m256)v);
    if constexpr (Stream && sizeof(V) == 16) return stream_vector(reinterpret_cast<float*>(p), (__m128)v);
#endif
    std::memcpy(p, &v, sizeof v);
}

// The float path over n elements at x, x[0] of channel 0: y = fma(x - hi, a, c) per
// element, the same expression as normalize_chunk_f32, in vectors of 2W floats whose
// channels start at phase ph.
NORMLAB_INLINE inline float f32_value(float x, const GroupConstants& k, std::size_t c) {
    return std::fma(x - k.hi[c], k.a[c], k.c[c]);
}

// Registers of 2W floats.
template <int W>
struct FloatLanes {
    typedef float F __attribute__((vector_size(8 * W)));
};
// v = fma(v, a, c) lane by lane, each rounded once as std::fma: one vfmadd in registers of 8
// or 16 floats (AVX2 with FMA, AVX-512; inline assembly, as deviation_step, because this is
// inlined into each instruction set's function), std::fma per lane in registers of 4
// (baseline x86-64: libm's exact fmaf). References, as vectors passed or returned by value
// would change the ABI of the baseline version.
template <int W>
NORMLAB_INLINE inline void fma_lanes(typename FloatLanes<W>::F& v, const typename FloatLanes<W>::F& a,
                                     const typename FloatLanes<W>::F& c) {
#if NORMLAB_LANE_DISPATCH
    if constexpr (W >= 4) {
        __asm__("vfmadd132ps %[a], %[c], %[v]" : [v] "+v"(v) : [a] "v"(a), [c] "v"(c));
        return;
    }
#endif
    for (int j = 0; j < 2 * W; ++j) v[j] = std::fma(v[j], a[j], c[j]);
}

// Spans of C = NV * 2W elements starting at channel ph (at most kWrap, so that the span's
// constants are contiguous): the constants of a span stay in registers.
template <int W, int NV, bool Stream>
NORMLAB_INLINE inline void rows_f32(const float* x, float* y, std::size_t rows, std::size_t ph,
                                    const GroupConstants& k) {
    typedef typename FloatLanes<W>::F F;
    constexpr std::size_t WF = 2 * W, C = NV * WF;
    F h[NV], va[NV], vc[NV];
    for (int j = 0; j < NV; ++j) {
        std::memcpy(&h[j], k.hi.data() + ph + j * WF, sizeof(F));
        std::memcpy(&va[j], k.a.data() + ph + j * WF, sizeof(F));
        std::memcpy(&vc[j], k.c.data() + ph + j * WF, sizeof(F));
    }
    for (std::size_t r = 0; r < rows; ++r)
        for (int j = 0; j < NV; ++j) {
            F v;
            std::memcpy(&v, x + r * C + j * WF, sizeof v);
            v -= h[j];
            fma_lanes<W>(v, va[j], vc[j]);
            put<Stream>(y + r * C + j * WF, v);
        }
}

template <int W, bool Stream>
NORMLAB_INLINE inline void range_f32(const float* x, float* y, std::size_t n, std::size_t C,
                                     const GroupConstants& k) {
    typedef typename FloatLanes<W>::F F;
    constexpr std::size_t WF = 2 * W;
    std::size_t i = 0;
    if (C % WF == 0 && C <= 4 * WF) {
        // Up to the first aligned element one at a time, then whole spans of C from there.
        if (Stream)
            for (; i < n && reinterpret_cast<std::uintptr_t>(y + i) % sizeof(F) != 0; ++i)
                y[i] = f32_value(x[i], k, i % C);
        const std::size_t rows = (n - i) / C, ph = i % C;
        if (ph <= kWrap) {
            if (C == WF) rows_f32<W, 1, Stream>(x + i, y + i, rows, ph, k);
            else if (C == 2 * WF) rows_f32<W, 2, Stream>(x + i, y + i, rows, ph, k);
            else if (C == 3 * WF) rows_f32<W, 3, Stream>(x + i, y + i, rows, ph, k);
            else rows_f32<W, 4, Stream>(x + i, y + i, rows, ph, k);
            for (i += rows * C; i < n; ++i) y[i] = f32_value(x[i], k, i % C);
            return;
        }
    }
    const float *hi = k.hi.data(), *a = k.a.data(), *c = k.c.data();
    const std::size_t step = WF % C;
    std::size_t ph = i % C;
    if (Stream)
        for (; i < n && reinterpret_cast<std::uintptr_t>(y + i) % sizeof(F) != 0; ++i) {
            y[i] = f32_value(x[i], k, ph);
            if (++ph == C) ph = 0;
        }
    for (; i + WF <= n; i += WF) {
        F v, h, va, vc;
        std::memcpy(&v, x + i, sizeof v);
        std::memcpy(&h, hi + ph, sizeof h);
        std::memcpy(&va, a + ph, sizeof va);
        std::memcpy(&vc, c + ph, sizeof vc);
        v -= h;
        fma_lanes<W>(v, va, vc);
        put<Stream>(y + i, v);
        ph += step;
        if (ph >= C) ph -= C;
    }
    for (; i < n; ++i) {
        y[i] = f32_value(x[i], k, ph);
        if (++ph == C) ph = 0;
    }
}

// Double arithmetic over n elements at x, x[0] of channel 0: y = ((x - mean) - mean_lo) *
// (rstd * scale) + shift rounded once to T, as normalize_chunk, in pairs of registers of W
// doubles.
template <class T>
NORMLAB_INLINE inline T double_value(T x, const GroupConstants& k, std::size_t c) {
    return static_cast<T>(((static_cast<double>(x) - k.mean[c]) - k.mlo[c]) * k.da[c] + k.db[c]);
}

template <int W, bool Stream, class T>
NORMLAB_INLINE inline void range_double(const T* x, T* y, std::size_t n, std::size_t C,
                                        const GroupConstants& k) {
    using V = typename Lanes<W>::D;
    typedef float H __attribute__((vector_size(4 * W)));
    constexpr std::size_t WF = 2 * W;
    const double *m = k.mean.data(), *ml = k.mlo.data(), *a = k.da.data(), *b = k.db.data();
    const std::size_t step = WF % C;
    std::size_t i = 0, ph = 0;
    if (Stream)
        for (; i < n && reinterpret_cast<std::uintptr_t>(y + i) % (8 * W) != 0; ++i) {
            y[i] = double_value(x[i], k, ph);
            if (++ph == C) ph = 0;
        }
    for (; i + WF <= n; i += WF) {
        V r[2];
        for (int h = 0; h < 2; ++h) {
            V v, vm, vl, va, vb;
            load_lanes<W>(x + i, h, v);
            std::memcpy(&vm, m + ph + h * W, sizeof vm);
            std::memcpy(&vl, ml + ph + h * W, sizeof vl);
            std::memcpy(&va, a + ph + h * W, sizeof va);
            std::memcpy(&vb, b + ph + h * W, sizeof vb);
            r[h] = ((v - vm) - vl) * va + vb;
        }
        if constexpr (std::is_same_v<T, float>) {
            typedef float F __attribute__((vector_size(8 * W)));
            const H h0 = __builtin_convertvector(r[0], H), h1 = __builtin_convertvector(r[1], H);
            F f;
            std::memcpy(&f, &h0, sizeof h0);
            std::memcpy(reinterpret_cast<char*>(&f) + sizeof h0, &h1, sizeof h1);
            put<Stream>(y + i, f);
        } else {
            put<Stream>(y + i, r[0]);
            put<Stream>(y + i + W, r[1]);
        }
        ph += step;
        if (ph >= C) ph -= C;
    }
    for (; i < n; ++i) {
        y[i] = double_value(x[i], k, ph);
        if (++ph == C) ph = 0;
    }
}

template <int W, class T>
NORMLAB_INLINE inline void range_any(const T* x, T* y, std::size_t n, std::size_t C,
                                     const GroupConstants& k, bool f32, bool stream) {
    bool done = false;
    if constexpr (std::is_same_v<T, float>) {
        if (f32) {
            if (stream) range_f32<W, true>(x, y, n, C, k);
            else range_f32<W, false>(x, y, n, C, k);
            done = true;
        }
    }
    if (!done && stream) range_double<W, true>(x, y, n, C, k);
    else if (!done) range_double<W, false>(x, y, n, C, k);
}

// One instance of each kernel per register width, compiled for its instruction set. The
// kernels are vectorised by hand; GCC 12's loop vectoriser, let loose on their row loops,
// changed the sums of squares of the SSE2 version (float64 data, channels ending mid-
// register: 3, 20, 100), so its bits no longer matched the AVX2 and AVX-512 versions: it
// is off here.
#if defined(__GNUC__) && !defined(__clang__)
#define NORMLAB_HAND_VECTORISED __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define NORMLAB_HAND_VECTORISED
#endif
template <class T>
struct Kernels {
    void (*moments)(const T*, std::size_t, std::size_t, std::size_t, bool, double*, double*, double*);
    void (*range)(const T*, T*, std::size_t, std::size_t, const GroupConstants&, bool, bool);
};

// The kernels' signatures: a moments chunk (x, C, channels, rows, centre, mean, mean_lo,
// m2) and an output range (x, y, elements from the start of a row of C channels, C,
// constants, float path, streaming).
#define NORMLAB_CL_MOMENTS(name, W, attrs)                                                                   \
    template <class T>                                                                                       \
    attrs NORMLAB_HAND_VECTORISED void name(const T* x, std::size_t C, std::size_t cw, std::size_t n,        \
                                            bool center, double* m, double* lo, double* m2) {                \
        chunk_moments_cl<W>(x, C, cw, n, center, m, lo, m2);                                                 \
    }
#define NORMLAB_CL_RANGE(name, W, attrs)                                                                     \
    template <class T>                                                                                       \
    attrs NORMLAB_HAND_VECTORISED void name(const T* x, T* y, std::size_t n, std::size_t C,                  \
                                            const GroupConstants& k, bool f32, bool stream) {                \
        range_any<W>(x, y, n, C, k, f32, stream);                                                            \
    }
NORMLAB_CL_MOMENTS(moments_generic, 2, )
NORMLAB_CL_RANGE(range_generic, 2, )
#if NORMLAB_LANE_DISPATCH
NORMLAB_CL_MOMENTS(moments_avx2, 4, NORMLAB_TARGET_AVX2)
NORMLAB_CL_RANGE(range_avx2, 4, NORMLAB_TARGET_AVX2)
NORMLAB_CL_MOMENTS(moments_avx512, 8, NORMLAB_TARGET_AVX512)
NORMLAB_CL_RANGE(range_avx512, 8, NORMLAB_TARGET_AVX512)
#endif

template <class T>
const Kernels<T>& kernels() {
    static const Kernels<T> generic{moments_generic<T>, range_generic<T>};
#if NORMLAB_LANE_DISPATCH
    static const Kernels<T> avx2{moments_avx2<T>, range_avx2<T>}, avx512{moments_avx512<T>, range_avx512<T>};
    const int use = active_lane_width();
    if (use == 8) return avx512;
    if (use == 4) return avx2;
#endif
    return generic;
}

// Whether an output of `bytes` goes around the cache: the engine's threshold
// (normalize_stream.hpp).
bool streams(std::size_t bytes) { return bytes >= kStreamBytes; }

// How the moments cut the data: blocks of rows (about kBlockValues elements) by blocks of
// channels (at most kChunkChannels), fixed by the shape alone.
struct Plan {
    std::size_t cw = 1, ncb = 1, rb = 1, nrb = 1;
    std::size_t per_group() const { return ncb * nrb; }
};

Plan plan_of(const ChannelsLast& l) {
    Plan p;
    const std::size_t C = l.channels, R = l.rows;
    p.cw = std::min(C, kChunkChannels);
    p.ncb = (C + p.cw - 1) / p.cw;
    const std::size_t target = std::max<std::size_t>(1, kBlockValues / p.cw);
    p.nrb = (R + target - 1) / target;
    p.rb = (R + p.nrb - 1) / p.nrb;
    return p;
}

// Partial moments of chunk `i` of group o (row block i / ncb, channel block i % ncb): mean,
// mean_lo and m2 of its channels at q, q + cw and q + 2 cw.
template <class T>
void chunk_of_group(const Kernels<T>& kern, const T* x, const ChannelsLast& l, const Plan& p, std::size_t o,
                    std::size_t i, bool center, double* q) {
    const std::size_t C = l.channels, c0 = (i % p.ncb) * p.cw, r0 = i / p.ncb * p.rb;
    kern.moments(x + (o * l.rows + r0) * C + c0, C, std::min(p.cw, C - c0), std::min(p.rb, l.rows - r0), center, q,
                 q + p.cw, q + 2 * p.cw);
}

// Per-channel sums of one group while its chunks are merged.
struct Fine {
    std::vector<double> count, mean, lo, m2;
    void reset(std::size_t C) {
        for (auto* v : {&count, &mean, &lo, &m2}) v->assign(C, 0.0);
    }
};

// Merges one group's chunk partials (at parts, in chunk order) per channel, for channels
// [ca, cb) into f.
void merge_chunks(const ChannelsLast& l, const Plan& p, const double* parts, bool center, std::size_t ca,
                  std::size_t cb, Fine& f) {
    for (std::size_t i = 0; i < p.per_group(); ++i) {
        const double* q = parts + i * 3 * p.cw;
        const std::size_t c0 = (i % p.ncb) * p.cw, c1 = std::min(c0 + p.cw, l.channels);
        const double n = static_cast<double>(std::min(p.rb, l.rows - (i / p.ncb) * p.rb));
        for (std::size_t c = std::max(c0, ca); c < std::min(c1, cb); ++c)
            merge_partial(f.count.data(), f.mean.data(), f.lo.data(), f.m2.data(), c, n, q[c - c0],
                          q[p.cw + c - c0], q[2 * p.cw + c - c0], center);
    }
}

// Merges the channels of group o (their moments in f) into their statistics, in channel
// order.
void merge_channels(const ChannelsLast& l, std::size_t o, const Fine& f, bool center, const RawMoments& out) {
    for (std::size_t c = 0; c < l.channels; ++c)
        merge_partial(out.count, out.mean, out.mean_lo, out.m2, o * l.stats + l.stat[c], f.count[c], f.mean[c], f.lo[c],
                      f.m2[c], center);
}

void merge_group(const ChannelsLast& l, const Plan& p, std::size_t o, const double* parts, bool center, Fine& f,
                 const RawMoments& out) {
    f.reset(l.channels);
    merge_chunks(l, p, parts, center, 0, l.channels, f);
    merge_channels(l, o, f, center, out);
}

// Channel merges (one chunk's partial sums into a channel's) below which moments_impl merges
// on the calling thread.
constexpr std::size_t kShareMerges = 4096;

template <class T>
void moments_impl(const T* x, const ChannelsLast& l, bool center, const RawMoments& out) {
    const Plan p = plan_of(l);
    const std::size_t stride = 3 * p.cw, per = p.per_group(), chunks = l.outer * per;
    thread_local std::vector<double> scratch;  // the calling thread's, kept between calls
    if (scratch.size() < chunks * stride) scratch.resize(chunks * stride);
    double* parts = scratch.data();
    const Kernels<T>& kern = kernels<T>();
    parallel_chunks(chunks, [&](std::size_t c, std::size_t) {
        chunk_of_group(kern, x, l, p, c / per, c % per, center, parts + c * stride);
    });
    // The merges are shared out too (each channel's chunks still in chunk order): by group
    // where there are enough, else by slices of channels. A few thousand merges take
    // microseconds, less than the threads' start and join; on a machine whose cores are busy
    // with other work, a thread waiting for its partner cost a time slice per call (BatchNorm
    // of (8,4) in a 2000-step train_eval beside a 2-thread benchmark: 5.9 s on two threads,
    // 0.47 on one), so they stay on the calling thread.
    const std::size_t threads = l.outer * per * l.channels >= kShareMerges ? engine_threads() : 1;
    if (threads > 1 && l.outer >= threads) {
        parallel_chunks(l.outer, [&](std::size_t o, std::size_t) {
            thread_local Fine f;
            merge_group(l, p, o, parts + o * per * stride, center, f, out);
        });
        return;
    }
    thread_local Fine fine;
    Fine& f = fine;  // the calling thread's, filled by every thread below
    const std::size_t C = l.channels, slices = std::min(threads, C);
    for (std::size_t o = 0; o < l.outer; ++o) {
        f.reset(C);
        parallel_chunks(slices, [&](std::size_t s, std::size_t) {
            merge_chunks(l, p, parts + o * per * stride, center, C * s / slices, C * (s + 1) / slices, f);
        });
        merge_channels(l, o, f, center, out);
    }
}

// Constants of the group a thread worked on last, valid for one call (`epoch`).
struct CachedConstants {
    GroupConstants k;
    std::size_t epoch = 0, group = 0;
};
std::atomic<std::size_t> g_epoch{0};

template <class T>
void normalize_impl(const T* x, T* y, const ChannelsLast& l, const NormalizeArgs& a, bool f32) {
    const std::size_t C = l.channels, epoch = ++g_epoch;
    const bool stream = streams(sizeof(T) * l.outer * l.rows * C);
    // Each thread takes a contiguous range of blocks (the output is elementwise: the split
    // changes no bit) and fences its streamed stores once. Blocks of about kChunk values,
    // finer than the moments' (kBlockValues), so that batches of a few of those still share
    // out over the threads.
    const std::size_t rb = std::max<std::size_t>(1, kChunk / C), nrb = (l.rows + rb - 1) / rb;
    const std::size_t blocks = l.outer * nrb, parts = std::min<std::size_t>(engine_threads(), blocks);
    const Kernels<T>& kern = kernels<T>();
    parallel_chunks(parts, [&](std::size_t t, std::size_t) {
        thread_local CachedConstants cache;
        for (std::size_t c = blocks * t / parts; c < blocks * (t + 1) / parts; ++c) {
            const std::size_t o = c / nrb, r0 = (c % nrb) * rb, n = std::min(rb, l.rows - r0);
            if (cache.epoch != epoch || cache.group != o) {
                build_constants(l, o, a, f32, cache.k);
                cache.epoch = epoch, cache.group = o;
            }
            const std::size_t at = (o * l.rows + r0) * C;
            kern.range(x + at, y + at, n * C, C, cache.k, f32, stream);
        }
        fence_streams(stream);
    });
}

template <class T>
void forward_impl(const T* x, T* y, const ChannelsLast& l, bool center, const RawMoments& raw, const NormalizeArgs& a,
                  bool f32, const FinishStats& finish) {
    const Plan p = plan_of(l);
    const std::size_t C = l.channels, R = l.rows, per = p.per_group(), stride = 3 * p.cw;
    const bool stream = streams(sizeof(T) * l.outer * R * C);
    const std::size_t threads = std::min<std::size_t>(engine_threads(), l.outer);
    // Each thread takes a contiguous range of groups: a group's moments, then its output
    // while the group is still in L2 or L3. Taking the next group's moments in steps between
    // steps of this group's output, so that the arithmetic would overlap the streamed
    // stores, gained on a 2-core AMD EPYC whose copy ran at 50 GB/s (GroupNorm (32,56,56,64)
    // float32, two threads, 1.30 -> 1.19 ms) and lost on the 2-core Xeon of the compare
    // table (alternating, two runs of 5 rounds: GroupNorm 1.92 and 1.94 -> 1.73 and 1.70 ms
    // without it, InstanceNorm 1.79 and 1.84 -> 1.73 and 1.64; scripts/PERFORMANCE.md).
    const Kernels<T>& kern = kernels<T>();
    parallel_chunks(threads, [&](std::size_t t, std::size_t) {
        thread_local std::vector<double> parts;
        thread_local Fine fine;
        thread_local GroupConstants k;
        if (parts.size() < per * stride) parts.resize(per * stride);
        for (std::size_t o = l.outer * t / threads; o < l.outer * (t + 1) / threads; ++o) {
            for (std::size_t i = 0; i < per; ++i) chunk_of_group(kern, x, l, p, o, i, center, parts.data() + i * stride);
            merge_group(l, p, o, parts.data(), center, fine, raw);
            finish(o * l.stats, l.stats);
            build_constants(l, o, a, f32, k);
            kern.range(x + o * R * C, y + o * R * C, R * C, C, k, f32, stream);
        }
        fence_streams(stream);
    });
}

}  // namespace

std::optional<ChannelsLast> channels_last_layout(const Shape& xs, const Axes& reduced, const Axes& params) {
    const auto sized = sized_axes(xs);
    if (!sized) return std::nullopt;
    const std::vector<std::size_t>& dims = *sized;
    // Channels: the trailing axes back to the last kept one and the kept ones before it.
    std::size_t i = dims.size(), short_block = 1;
    bool kept = false;
    for (; i > 0; --i) {
        const bool r = has_axis(reduced, dims[i - 1]);
        if (r && kept) break;
        if (r) short_block *= xs[dims[i - 1]];
        else kept = true;
    }
    if (!kept || short_block >= kShortRun) return std::nullopt;
    std::size_t j = i;  // rows: the reduced axes right before the channels
    while (j > 0 && has_axis(reduced, dims[j - 1])) --j;
    if (j == i) return std::nullopt;
    for (std::size_t k = 0; k < j; ++k)
        if (has_axis(reduced, dims[k])) return std::nullopt;
    for (auto a : params)
        if (xs[a] > 1 && a < dims[i]) return std::nullopt;

    ChannelsLast l;
    for (std::size_t k = 0; k < j; ++k) l.outer *= xs[dims[k]];
    for (std::size_t k = j; k < i; ++k) l.rows *= xs[dims[k]];
    for (std::size_t k = i; k < dims.size(); ++k) {
        l.channels *= xs[dims[k]];
        if (!has_axis(reduced, dims[k])) l.stats *= xs[dims[k]];
    }
    const Strides sa = broadcast_strides(xs, keepdims_shape(xs, reduced)), sb = param_strides(xs, params);
    std::vector<std::size_t> idx(dims.size() - i, 0);
    for (std::size_t c = 0; c < l.channels; ++c) {
        std::size_t s = 0, p = 0;
        for (std::size_t k = 0; k < idx.size(); ++k) s += idx[k] * sa[dims[i + k]], p += idx[k] * sb[dims[i + k]];
        l.stat.push_back(s);
        l.param.push_back(p);
        l.per_channel = l.per_channel && s == c;
        for (std::size_t k = idx.size(); k-- > 0;)
            if (++idx[k] < xs[dims[i + k]]) break;
            else idx[k] = 0;
    }
    return l;
}

void channels_last_moments(const float* x, const ChannelsLast& l, bool center, const RawMoments& out) {
    moments_impl(x, l, center, out);
}
void channels_last_moments(const double* x, const ChannelsLast& l, bool center, const RawMoments& out) {
    moments_impl(x, l, center, out);
}

void channels_last_normalize(const float* x, float* y, const ChannelsLast& l, const NormalizeArgs& a, bool f32) {
    normalize_impl(x, y, l, a, f32);
}
void channels_last_normalize(const double* x, double* y, const ChannelsLast& l, const NormalizeArgs& a, bool) {
    normalize_impl(x, y, l, a, false);
}


bool channels_last_fuses(const ChannelsLast& l) {
    const std::size_t t = engine_threads();
    return l.outer > 1 && (l.outer % t == 0 || l.outer >= 4 * t);
}

void channels_last_forward(const float* x, float* y, const ChannelsLast& l, bool center, const RawMoments& raw,
                           const NormalizeArgs& a, bool f32, const FinishStats& finish) {
    forward_impl(x, y, l, center, raw, a, f32, finish);
}
void channels_last_forward(const double* x, double* y, const ChannelsLast& l, bool center, const RawMoments& raw,
                           const NormalizeArgs& a, bool, const FinishStats& finish) {
    forward_impl(x, y, l, center, raw, a, false, finish);
}

}  // namespace normlab
