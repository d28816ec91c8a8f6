// What this machine's memory allows a forward over a float32 batch, outside the engine: the
// median time of a bare read of the batch (a sum, as a normalisation's moments read it), a
// write with streaming stores, a streaming copy (y = 1.5 x: a read and a write, what any
// normalisation's output pass moves) and memcpy (the bench's copy yardstick), on 1 thread
// and on `threads`, each share a contiguous slice. A BatchNorm forward with channels last (or
// with channels too large for L2) reads the batch twice and writes it once, so it takes at
// least the read plus the streaming copy; GroupNorm and InstanceNorm, one sample at a time,
// and BatchNorm in (N, C, H, W), one channel at a time, at least the streaming copy, and at
// least "sample by sample" where, as in normlab, a sample's read (its moments) and its
// streamed output do not overlap: each sample summed, then written from cache as y = x + s.
// scripts/PERFORMANCE.md sets these floors against the targets. Repeated calls read a batch
// that may sit in part in L3 (32 MiB on the development VM), so the read is a lower bound.
//
//   g++ -O2 -fopenmp -mavx512f -o /tmp/memory_floors scripts/memory_floors.cpp
//   /tmp/memory_floors 6422528 2 200704  # values (the (32,64,56,56) batch, 25.7 MB), threads,
//                                        # values per sample (default 56*56*64)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// Median of `reps` timed calls of f, in ms, after one untimed call.
template <class F>
double median_ms(F&& f, int reps) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// The sum of x[a, b) (b - a a multiple of 64) in four registers.
__m512 sum_of(const float* x, std::size_t a, std::size_t b) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = a; i < b; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_load_ps(x + i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(x + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(x + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(x + i + 48));
    }
    return _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));
}

// Runs f(first, last) over [0, n) cut into `threads` contiguous slices of whole vectors.
template <class F>
void slices(std::size_t n, int threads, F&& f) {
#pragma omp parallel num_threads(threads)
    {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()), k = static_cast<std::size_t>(threads);
        f(n / 64 * t / k * 64, t + 1 == k ? n : n / 64 * (t + 1) / k * 64);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) / 64 * 64 : 6422528;
    const int most = argc > 2 ? std::atoi(argv[2]) : 2;
    const std::size_t sample = argc > 3 ? std::strtoull(argv[3], nullptr, 10) / 64 * 64 : 56 * 56 * 64;
    if (n == 0 || most < 1 || sample == 0 || sample > n) {
        std::fprintf(stderr, "usage: memory_floors VALUES THREADS [SAMPLE] (VALUES >= 64, THREADS >= 1, "
                             "64 <= SAMPLE <= VALUES)\n");
        return 2;
    }
    const std::size_t samples = n / sample;
    float* x = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    float* y = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 1e-3f;
    std::memset(y, 0, n * sizeof(float));
    volatile float sink = 0;
    std::printf("%zu float32 values (%.1f MB), medians of 51 calls\n", n, n * 4e-6);
    for (int threads = 1; threads <= most; threads = threads == most ? most + 1 : most) {
        const double read = median_ms([&] {
            slices(n, threads, [&](std::size_t a, std::size_t b) {
                alignas(64) float lanes[16];
                _mm512_store_ps(lanes, sum_of(x, a, b));
                float total = 0;
                for (float v : lanes) total += v;
                sink = sink + total;
            });
        }, 51);
        const double write = median_ms([&] {
            slices(n, threads, [&](std::size_t a, std::size_t b) {
                const __m512 v = _mm512_set1_ps(1.0f);
                for (std::size_t i = a; i < b; i += 16) _mm512_stream_ps(y + i, v);
                _mm_sfence();
            });
        }, 51);
        const double copy = median_ms([&] {
            slices(n, threads, [&](std::size_t a, std::size_t b) {
                const __m512 k = _mm512_set1_ps(1.5f);
                for (std::size_t i = a; i < b; i += 16) _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_load_ps(x + i), k));
                _mm_sfence();
            });
        }, 51);
        const double mcp = median_ms([&] {
            slices(n, threads, [&](std::size_t a, std::size_t b) { std::memcpy(y + a, x + a, (b - a) * sizeof(float)); });
        }, 51);
        // Each thread's samples in turn: a sample's sum, then its output from cache.
        const double by_sample = median_ms([&] {
#pragma omp parallel num_threads(threads)
            {
                const std::size_t t = static_cast<std::size_t>(omp_get_thread_num()), k = static_cast<std::size_t>(threads);
                for (std::size_t o = samples * t / k; o < samples * (t + 1) / k; ++o) {
                    const __m512 s = sum_of(x, o * sample, (o + 1) * sample);
                    for (std::size_t i = o * sample; i < (o + 1) * sample; i += 16)
                        _mm512_stream_ps(y + i, _mm512_add_ps(_mm512_load_ps(x + i), s));
                }
                _mm_sfence();
            }
        }, 51);
        std::printf("threads %d: read %.3f ms, streamed write %.3f ms, streamed copy %.3f ms, memcpy %.3f ms, "
                    "sample by sample %.3f ms (%zu samples)\n", threads, read, write, copy, mcp, by_sample, samples);
    }
    std::free(x);
    std::free(y);
    return 0;
}
