#pragma once
// The loop structure every kernel of the engine runs on: a row-major tensor walked in
// memory order as contiguous runs of its innermost (coalesced) axis, carrying the offsets
// of two broadcast operands (statistics, and a mask or the affine parameters). The walk is
// cut into chunks fixed by the shape alone (never by the thread count), which is what
// makes results identical for every number of threads. Kernels see plain offsets and
// increments, never multi-indices (the idea of PyTorch's TensorIterator).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tensor/tensor.hpp"

// Kernels run inside functions compiled for several instruction sets (engine.cpp): the
// walk and the per-run lambdas must be inlined into them, or they are compiled once, for
// the baseline, and the vector clones never run.
#if defined(__GNUC__)
#define NORMLAB_INLINE __attribute__((always_inline))
#else
#define NORMLAB_INLINE
#endif

namespace normlab {

/// Element strides of an operand over x's axes; 0 along axes the operand broadcasts over.
using Strides = std::vector<std::size_t>;

/// Whether axis d is among `axes`.
inline bool has_axis(const Axes& axes, std::size_t d) { return std::find(axes.begin(), axes.end(), d) != axes.end(); }

/// The axes of xs of size more than 1, in order (the layouts' view, where axes of 1 change
/// nothing); nullopt when an axis has size 0 (an empty batch, which no layout's kernels take).
std::optional<std::vector<std::size_t>> sized_axes(const Shape& xs);

/// Row-major strides of an array of shape `s` (same rank as xs, each dim equal to xs's or
/// 1), with 0 along its dims of 1.
Strides broadcast_strides(const Shape& xs, const Shape& s);
/// Strides of a parameter array whose shape is xs at `axes` (ascending), laid out row-major.
Strides param_strides(const Shape& xs, const Axes& axes);

/// Strides of a padding mask over x's shape xs. Throws InputError "mask of shape ... does
/// not broadcast to input of shape ..." unless the mask has xs's rank with each dim equal
/// to xs's or 1.
Strides mask_strides(const Shape& xs, const xt::xarray<std::uint8_t>& m);
/// Throws InputError "<what>: expected shape E, but got G" unless `a` has shape `expected`
/// (weight, bias and given statistics handed to the engine).
void check_operand_shape(const xt::xarray<double>& a, const Shape& expected, const char* what);

/// Reuses the array `a` when it already has shape s (no fresh pages touched: on these
/// machines a freshly mapped 4 KiB page costs about 13 us), else reallocates it.
template <class A>
void ensure_shape(A& a, const Shape& s) {
    if (a.dimension() != s.size() || !std::equal(s.begin(), s.end(), a.shape().begin()))
        a = A::from_shape(s);
}

/// One contiguous run of x: elements x+k for k < n, operand A at a + k*da, B at b + k*db.
struct Run {
    std::size_t x, a, b, n, da, db;
};

/// A walk over a tensor of shape xs with operands A and B, coalesced and cut into chunks of
/// at most `chunk_elems` elements (a run longer than that is cut into pieces).
class Walk {
public:
    Walk(const Shape& xs, const Strides& sa, const Strides& sb, std::size_t chunk_elems);
    std::size_t num_chunks() const { return m_chunks; }
    /// Operand A's stride along every run (0: each run lies in one statistic).
    std::size_t run_stride_a() const { return m_da.empty() ? 0 : m_da[0]; }
    /// Calls f(Run) for every run (or piece of a run) of chunk c, in memory order.
    template <class F>
    NORMLAB_INLINE inline void chunk(std::size_t c, F&& f) const;

private:
    void seek(std::size_t run, std::vector<std::size_t>& idx, std::size_t& a, std::size_t& b) const;
    std::vector<std::size_t> m_n, m_da, m_db;  // coalesced dims, innermost first
    std::size_t m_runs = 0, m_pieces = 1, m_piece_len = 0, m_runs_per_chunk = 1, m_chunks = 0;
};

template <class F>
NORMLAB_INLINE inline void Walk::chunk(std::size_t c, F&& f) const {
    const std::size_t n0 = m_n[0];
    std::vector<std::size_t> idx;
    std::size_t a = 0, b = 0;
    if (m_pieces > 1) {  // long runs: one piece of one run per chunk
        std::size_t run = c / m_pieces, p = c % m_pieces;
        seek(run, idx, a, b);
        std::size_t start = p * m_piece_len, len = std::min(m_piece_len, n0 - start);
        f(Run{run * n0 + start, a + start * m_da[0], b + start * m_db[0], len, m_da[0], m_db[0]});
        return;
    }
    std::size_t first = c * m_runs_per_chunk, last = std::min(m_runs, first + m_runs_per_chunk);
    seek(first, idx, a, b);
    for (std::size_t run = first;;) {
        f(Run{run * n0, a, b, n0, m_da[0], m_db[0]});
        if (++run == last) return;
        for (std::size_t k = 1; k < m_n.size(); ++k) {  // odometer over the outer dims
            a += m_da[k];
            b += m_db[k];
            if (++idx[k - 1] < m_n[k]) break;
            a -= m_da[k] * m_n[k];
            b -= m_db[k] * m_n[k];
            idx[k - 1] = 0;
        }
    }
}

}  // namespace normlab
