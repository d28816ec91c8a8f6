#pragma once
// The float path's output written past the caches (internal to norm/), for outputs too
// large to stay in them: a plain store first reads the line it writes into the cache (one
// more pass over memory), a streaming store does not.
#include <cstddef>
#include <cstdint>

#include "norm/normalize.hpp"

namespace normlab {

/// Outputs of this many bytes and more are written with streaming stores. Measured on a
/// 2-core AMD EPYC with 32 MiB of L3, y = a x + b over float32 buffers: equal at 8 MiB
/// (input and output fit the cache together), 1.3 to 2.5 times faster from 12 MiB.
constexpr std::size_t kStreamBytes = std::size_t{8} << 20;

/// Elements of T from the start of p's 64-byte cache line to p (p aligned to sizeof(T)): where
/// the streaming writers cut their blocks, so that streamed stores fill whole lines.
template <class T>
std::size_t line_offset(const T* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 64 / sizeof(T);
}

/// normalize_chunk_f32 for walks whose runs each lie in one statistic (r.da == 0: the
/// one-pass forward's walks), the same bits, written to y with streaming stores. On AVX-512
/// and AVX2, runs of 256 values or more whose parameters are fixed (planes) are formed in
/// registers and streamed from there; other runs a block at a time in a small buffer that
/// stays in L1, then streamed out; a fence at the end of the chunk (unless a.fence is false)
/// makes the stores visible before the caller's threads join.
void normalize_chunk_f32_stream(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// normalize_rows_f32 (normalize.hpp) with streaming stores: the same bits. Rows of 256
/// values or more on AVX-512, 64 or more on AVX2, are formed in registers and streamed from
/// there; shorter ones a block of whole rows at a time, so each stream covers about 4 KiB.
/// A fence at the end, unless a.fence is false (the caller fences after its last rows).
void normalize_rows_f32_stream(const float* x, float* y, std::size_t rows, std::size_t n, std::size_t first,
                               std::size_t pstep, const NormalizeArgs& a);

/// normalize_chunk (the double arithmetic, normalize.hpp) with streaming stores: the same
/// bits. On AVX-512, runs of 256 values or more with a fixed statistic (planes,
/// LayerNorm/RMSNorm rows; not float16/bfloat16 outputs) are formed in registers and
/// streamed from there; other runs a block at a time in an L1 buffer, then streamed out. A
/// fence at the end, unless a.fence is false.
void normalize_chunk_stream(const float* x, float* y, const Walk& w, std::size_t c, const NormalizeArgs& a);
void normalize_chunk_stream(const double* x, double* y, const Walk& w, std::size_t c, const NormalizeArgs& a);

/// Orders the calling thread's streamed stores before whatever follows (sfence): for
/// writers called with NormalizeArgs::fence false, before the thread's work is handed on.
void fence_stream_stores();

}  // namespace normlab
