#pragma once
// Sums over runs in a fixed number of logical lanes (internal to norm/), laid over the
// registers the CPU has: W doubles per register, W = 8 (AVX-512), 4 (AVX2 with FMA) or 2
// (baseline x86-64). Element k + j of a block goes to logical lane j whatever W is, and
// lanes are added up in one fixed tree, so every width gives the same bits. GCC's generic
// vectors are written out because the auto-vectoriser leaves a loop with two accumulators
// scalar; lane-wise operations round exactly as scalar ones (contraction is off in this
// module).
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "norm/strided.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NORMLAB_TARGET_AVX512 __attribute__((target("avx512f,fma")))
#define NORMLAB_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define NORMLAB_LANE_DISPATCH 1
#else
#define NORMLAB_LANE_DISPATCH 0
#endif

namespace normlab {

/// Register width the CPU runs the sums with, in doubles: 8 (AVX-512 with FMA), 4 (AVX2
/// with FMA) or 2 (checked once).
int lane_width();

/// The width the dispatched kernels use now: lane_width(), or a narrower one set by
/// set_lane_width.
int active_lane_width();

/// Runs every dispatched kernel (moments, channels-last kernels, streaming stores) with
/// registers of w doubles (8: AVX-512, 4: AVX2 with FMA, 2: SSE2), or the CPU's widest when
/// w is 0 or wider than the CPU has: for tests that every instruction set gives the same bits.
/// Not meant to change while a forward runs.
void set_lane_width(int w);

/// Vector type of W doubles.
template <int W>
struct Lanes {
    typedef double D __attribute__((vector_size(8 * W)));
};

/// Logical lanes of the double sums.
constexpr int kDoubleLanes = 16;

/// Sets the n registers at regs to zero, one vector store each. An aggregate `= {}` on an
/// array of registers becomes a memset, which GCC 12 emits as `rep stos` wherever registers
/// are narrower than 64 bytes (AVX2, SSE2): on AMD Zen 3 two of them per row cost a third
/// of the LayerNorm (4096,16,64) moments.
template <class V>
NORMLAB_INLINE inline void zero_registers(V* regs, int n) {
    for (int r = 0; r < n; ++r) regs[r] = V{};
}

/// Register r of a block of kDoubleLanes values at p, as doubles (exact for float).
template <int W, class T>
NORMLAB_INLINE inline void load_lanes(const T* p, int r, typename Lanes<W>::D& v) {
    if constexpr (std::is_same_v<T, float>) {
        // Element by element: GCC 12 turns this into one vcvtps2pd per register, where
        // __builtin_convertvector of 8 floats took two conversions and a shuffle (15% of the
        // moments' time).
        for (int j = 0; j < W; ++j) v[j] = static_cast<double>(p[r * W + j]);
    } else {
        std::memcpy(&v, p + r * W, sizeof v);
    }
}

/// d -= k, then s1 += d and s2 += d * d with plain operations (k one register, or one double
/// for every lane): the row sums' step, and deviation_step's without FMA.
template <class V, class K>
NORMLAB_INLINE inline void plain_deviation_step(V& d, const K& k, V& s1, V& s2) {
    d -= k;
    s1 += d;
    s2 += d * d;
}

/// d = v - k, then s1 += d and s2 += d * d, lane-wise, each operation rounded once as its
/// scalar form is. In registers of 4 and 8 doubles (AVX2 with FMA, AVX-512) the subtraction
/// and the first addition are FMAs with a multiplier of 1: v·1 − k and d·1 + s1 round once,
/// to the same doubles as v − k and d + s1, so every width still gives the same bits. AMD Zen
/// runs FMAs and additions on separate units, and these sums were bound by the additions
/// (shifted sums of 64 channels of float32 in cache, Zen 4: 0.141 → 0.117 ns per element in
/// a microbenchmark; an FMA for d·d + s2 would be faster still but round once less). For the
/// channels-last moments, where many registers of sums interleave: an FMA takes 4 cycles on
/// Zen 4 against 3 for an addition, and the row sums, whose 16 lanes are two AVX-512
/// registers, wait on that latency (LayerNorm rows of 64 ran 8 to 12% slower with it), so
/// they keep plain operations. Inline assembly, because the callers are templates inlined
/// into each instruction set's function, where intrinsics' target attributes do not reach;
/// the register width follows the operands.
template <int W>
NORMLAB_INLINE inline void deviation_step(typename Lanes<W>::D v, const typename Lanes<W>::D& k,
                                          typename Lanes<W>::D& s1, typename Lanes<W>::D& s2) {
#if NORMLAB_LANE_DISPATCH
    if constexpr (W >= 4) {
        typename Lanes<W>::D one;
        for (int j = 0; j < W; ++j) one[j] = 1.0;
        // Through a local: an asm operand naming an array element keeps the whole array on
        // the stack.
        typename Lanes<W>::D a = s1;
        __asm__("vfmsub132pd %[one], %[k], %[v]" : [v] "+v"(v) : [k] "v"(k), [one] "v"(one));
        __asm__("vfmadd231pd %[one], %[v], %[s]" : [s] "+v"(a) : [v] "v"(v), [one] "v"(one));
        s1 = a;
        s2 += v * v;
        return;
    }
#endif
    plain_deviation_step(v, k, s1, s2);
}

/// s2 += v * v, lane-wise, for v holding floats as doubles: their squares are exact in double
/// (24-bit significands give 48-bit products, far from overflow and underflow), so one FMA
/// rounds as the product and the sum do, to the same bits. In registers of 4 and 8 doubles
/// (AVX2 with FMA, AVX-512) it is an FMA: Zen runs FMAs on other units than the conversions
/// from float and the additions, which bound the product-then-sum (RMSNorm's sums of squares
/// over rows of 512 in cache, Zen 4, a test loop: 0.091 -> 0.068 ns per element). Unlike the
/// centred row sums (deviation_step), the FMA's longer latency on the s2 chain does not show:
/// without the subtraction and the s1 sum the units, not the chain, bound the loop, and rows
/// of 64 got faster too ((4096,16,64), one thread: 1.74-1.91 -> 1.57-1.61 ms).
template <int W>
NORMLAB_INLINE inline void square_step(typename Lanes<W>::D v, typename Lanes<W>::D& s2) {
#if NORMLAB_LANE_DISPATCH
    if constexpr (W >= 4) {
        typename Lanes<W>::D a = s2;  // a local, as in deviation_step
        __asm__("vfmadd231pd %[v], %[v], %[s]" : [s] "+v"(a) : [v] "v"(v));
        s2 = a;
        return;
    }
#endif
    s2 += v * v;
}

/// The fixed tree over logical lanes: lane j + n/2 onto lane j until one is left.
template <class V>
NORMLAB_INLINE inline double fold_lanes(const V* regs, int n) {
    double l[kDoubleLanes];
    std::memcpy(l, regs, sizeof(double) * static_cast<std::size_t>(n));
    for (int h = n / 2; h >= 1; h /= 2)
        for (int j = 0; j < h; ++j) l[j] += l[j + h];
    return l[0];
}

/// The fixed tree (fold_lanes) within one register of W lanes: halves added as vectors.
template <int W>
NORMLAB_INLINE inline double fold_register(typename Lanes<W>::D v) {
    if constexpr (W == 2) {
        return v[0] + v[1];
    } else {
        typename Lanes<W / 2>::D half[2];
        std::memcpy(half, &v, sizeof half);
        return fold_register<W / 2>(half[0] + half[1]);
    }
}

/// fold_lanes over the kDoubleLanes / W registers of a lane sum, with vector additions: the
/// tree's steps span whole registers, then halves of one, so it adds the same lanes in the
/// same order (the same bits) without going through memory.
template <int W>
NORMLAB_INLINE inline double fold_registers(typename Lanes<W>::D* regs) {
    for (int h = kDoubleLanes / W / 2; h >= 1; h /= 2)
        for (int r = 0; r < h; ++r) regs[r] += regs[r + h];
    return fold_register<W>(regs[0]);
}

/// sum(x) (sum(x^2) when Square) over a contiguous run, in double.
template <int W, bool Square, class T>
NORMLAB_INLINE inline double lane_sum(const T* x, std::size_t n) {
    constexpr int R = kDoubleLanes / W;
    typename Lanes<W>::D acc[R];
    zero_registers(acc, R);
    std::size_t k = 0;
    for (; k + kDoubleLanes <= n; k += kDoubleLanes)
        for (int r = 0; r < R; ++r) {
            typename Lanes<W>::D v;
            load_lanes<W>(x + k, r, v);
            if constexpr (Square) v *= v;
            acc[r] += v;
        }
    double tail = 0;
    for (; k < n; ++k) {
        const double v = static_cast<double>(x[k]);
        tail += Square ? v * v : v;
    }
    return fold_lanes(acc, kDoubleLanes) + tail;
}

/// s1 += sum(x - mu) and s2 += sum((x - mu)^2) over a contiguous run, in double.
template <int W, class T>
NORMLAB_INLINE inline void lane_deviation_sums(const T* x, std::size_t n, double mu, double& s1, double& s2) {
    constexpr int R = kDoubleLanes / W;
    typename Lanes<W>::D a1[R], a2[R];
    zero_registers(a1, R);
    zero_registers(a2, R);
    std::size_t k = 0;
    for (; k + kDoubleLanes <= n; k += kDoubleLanes)
        for (int r = 0; r < R; ++r) {
            typename Lanes<W>::D d;
            load_lanes<W>(x + k, r, d);
            plain_deviation_step(d, mu, a1[r], a2[r]);
        }
    double t1 = 0, t2 = 0;
    for (; k < n; ++k) {
        const double d = static_cast<double>(x[k]) - mu;
        t1 += d;
        t2 += d * d;
    }
    s1 += fold_lanes(a1, kDoubleLanes) + t1;
    s2 += fold_lanes(a2, kDoubleLanes) + t2;
}

}  // namespace normlab
