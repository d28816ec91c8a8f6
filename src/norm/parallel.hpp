#pragma once
// How the engine's kernels (forward and backward) share out work: a walk cut into chunks
// fixed by the shape alone, chunks run on the engine's threads, per-chunk partial sums
// merged in chunk order by the caller. That is what makes every result bit-identical for
// any thread count.
#include <algorithm>
#include <cstddef>

#include <omp.h>

#include "norm/engine.hpp"

// The hot chunk kernels are compiled for AVX-512, AVX2 and the baseline x86-64, and the
// loader picks one at run time: 8 or 4 doubles per instruction where the CPU has them, a
// portable binary everywhere. Contraction into FMA is off (src/norm/module.cmake), and
// each lane rounds exactly as scalar code does, so all versions give bit-identical results.
//
// The float path's output kernels round y = (x - hi) * a + c once with an FMA (std::fma,
// exact by definition), so their versions are the x86-64 levels that have FMA (v4: AVX-512,
// v3: AVX2 and FMA) and the baseline, where each std::fma is a call into libm's exact
// software fmaf: the same bits, slower (normalize.hpp).
//
// NORMLAB_NO_FMA_CLONES (CMake NORMLAB_FMA_CLONES=OFF) leaves the FMA versions out, so that
// a CPU with FMA runs the baseline as one without does.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NORMLAB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NORMLAB_VECTOR_CLONES
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(NORMLAB_NO_FMA_CLONES)
#define NORMLAB_FMA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define NORMLAB_HAS_FMA_CLONES 1
#else
#define NORMLAB_FMA_CLONES
#endif

namespace normlab {

/// Elements per chunk: 16 Ki values (64 KiB of float32) stay in L2 between the two passes
/// of a kernel.
constexpr std::size_t kChunk = 16384;

/// Elements per chunk of the one-pass forward, whose chunks hold whole statistics (moments,
/// then output, while the chunk is in cache): 64 Ki values, 256 KiB of float32, within a
/// 1 MiB L2; float64 takes half as many values, the same bytes (engine.cpp). Against
/// kChunk, alternating builds on a 2-core AMD EPYC: GroupNorm and InstanceNorm
/// (32,64,56,56) 10 to 15% faster on one thread in five of six pairs, float32 LayerNorm
/// (64,128,768) 4 to 5%, float64 2 to 7%; on two threads mostly faster, within the
/// machine's spread.
constexpr std::size_t kWholeChunk = 4 * kChunk;

/// Runs f(begin, end, thread) once per thread, up to engine_threads() threads, on its
/// contiguous block of chunks [begin, end) of [0, chunks): for kernels that carry work from
/// one chunk to the next (a pipeline). On one thread: f(0, chunks, 0); nothing for no
/// chunks. OpenMP keeps its threads between calls (a thread start costs tens of
/// microseconds, as much as normalising a small batch), as PyTorch's CPU kernels do.
template <class F>
void parallel_blocks(std::size_t chunks, F&& f) {
    const std::size_t threads = std::min<std::size_t>(engine_threads(), chunks);
    if (threads <= 1) {
        if (chunks) f(std::size_t{0}, chunks, std::size_t{0});
        return;
    }
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
        const std::size_t n = static_cast<std::size_t>(omp_get_num_threads());
        f(chunks * t / n, chunks * (t + 1) / n, t);
    }
}

/// Runs f(chunk, thread) for every chunk in [0, chunks), each thread taking a contiguous
/// block of chunks (parallel_blocks). What a chunk computes never depends on who computes it.
template <class F>
void parallel_chunks(std::size_t chunks, F&& f) {
    parallel_blocks(chunks, [&](std::size_t begin, std::size_t end, std::size_t t) {
        for (std::size_t c = begin; c < end; ++c) f(c, t);
    });
}

/// Runs f(first, count) over `rows` contiguous rows of n values each, in chunks of whole
/// rows of about `values` values (at least one row), with parallel_chunks. For kernels
/// whose rows are whole statistics: a row's result does not depend on the chunking.
template <class F>
void parallel_rows(std::size_t rows, std::size_t n, F&& f, std::size_t values = kWholeChunk) {
    const std::size_t per = std::max<std::size_t>(1, values / std::max<std::size_t>(1, n));
    parallel_chunks((rows + per - 1) / per, [&](std::size_t c, std::size_t) {
        f(c * per, std::min(per, rows - c * per));
    });
}

}  // namespace normlab
