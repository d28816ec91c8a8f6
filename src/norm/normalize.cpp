#include "norm/normalize.hpp"

#include "norm/line_vector.hpp"
#include "norm/normalize_double.hpp"
#include "norm/normalize_f32.hpp"

#include <cmath>
#include <vector>

namespace normlab {

namespace {

// y = (x - mean) * (rstd * scale) + shift over one chunk in double.
template <class T>
NORMLAB_INLINE inline void normalize_double(const T* x, T* y, const Walk& w, std::size_t c, const NormalizeArgs& args) {
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE { normalize_run_double(x + r.x, y + r.x, r, args); });
}

// Per-element constants of a run whose statistic or parameter varies along it, in float.
// Within a chunk, channels-last runs repeat the same statistics and parameters (BatchNorm
// (N, H, W, C): every run is the same C channels), so a run reuses the previous one's.
struct RunConstants {
    LineVector<float> hi, a, c;
    std::size_t key_a = 0, key_b = 0, key_n = 0;
    bool valid = false;
    void reserve(std::size_t n) {
        if (hi.size() < n)
            for (auto* v : {&hi, &a, &c}) v->resize(n);
    }
};

RunConstants& run_constants() {
    thread_local RunConstants rc;
    return rc;
}

// fma(x - hi, a, c) with everything per element (channels last).
NORMLAB_INLINE inline void normalize_run_f32(const float* xp, float* yp, std::size_t n, const RunConstants& rc) {
    const float *hi = rc.hi.data(), *a = rc.a.data(), *c = rc.c.data();
    for (std::size_t k = 0; k < n; ++k) yp[k] = std::fma(xp[k] - hi[k], a[k], c[k]);
}

}  // namespace

NORMLAB_VECTOR_CLONES void normalize_chunk(const float* x, float* y, const Walk& w, std::size_t c,
                                           const NormalizeArgs& a) {
    normalize_double(x, y, w, c, a);
}

NORMLAB_VECTOR_CLONES void normalize_chunk(const double* x, double* y, const Walk& w, std::size_t c,
                                           const NormalizeArgs& a) {
    normalize_double(x, y, w, c, a);
}

NORMLAB_FMA_CLONES void normalize_chunk_f32(const float* x, float* y, const Walk& w, std::size_t c,
                                               const NormalizeArgs& args) {
    const double* mean = args.mean;
    const double* mlo = args.mean_lo;
    const double* rstd = args.rstd;
    const double* scale = args.scale;
    RunConstants& rc = run_constants();
    rc.valid = false;  // statistics differ from one forward to the next
    w.chunk(c, [&](const Run& r) NORMLAB_INLINE {
        const float* xp = x + r.x;
        float* yp = y + r.x;
        if (r.da == 0) {
            rc.reserve(r.n);
            normalize_stat_run_f32(xp, yp, r, args, rc.a.data(), rc.c.data());
            return;
        }
        // Statistics along the run (channels last): everything per element.
        if (!rc.valid || rc.key_a != r.a || rc.key_b != r.b || rc.key_n != r.n) {
            rc.reserve(r.n);
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t s = r.a + k * r.da, p = r.b + k * r.db;
                const MeanParts m = split_mean(mean[s], mlo[s]);
                rc.hi[k] = m.hi;
                rc.a[k] = fold(rstd[s], scale[p]);
                rc.c[k] = offset(m.lo, rc.a[k], args.shift_f[p]);
            }
            rc.key_a = r.a, rc.key_b = r.b, rc.key_n = r.n, rc.valid = true;
        }
        normalize_run_f32(xp, yp, r.n, rc);
    });
}

NORMLAB_FMA_CLONES void normalize_rows_f32(const float* x, float* y, std::size_t rows, std::size_t n,
                                              std::size_t first, std::size_t pstep, const NormalizeArgs& args) {
    for (std::size_t i = 0; i < rows; ++i) {
        // pstep 0 or 1 never needs the gather buffers of normalize_stat_run_f32.
        const Run r{i * n, first + i, 0, n, 0, pstep};
        normalize_stat_run_f32(x + i * n, y + i * n, r, args, nullptr, nullptr);
    }
}

bool float_path_has_fma() {
#if defined(FP_FAST_FMAF) || defined(__FMA__) || defined(__aarch64__)
    // Compiled for FMA hardware (clang defines __FMA__ but not FP_FAST_FMAF; every aarch64
    // CPU has FMA): std::fma is an instruction in every version of the kernels.
    return true;
#elif defined(NORMLAB_HAS_FMA_CLONES)
    // The loader's choice among NORMLAB_FMA_CLONES makes the same test.
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v3");
#else
    return false;
#endif
}

const char* compute_name(Compute c) { return c == Compute::float32 ? "float" : "double"; }

std::optional<Compute> compute_from_name(const std::string& name) {
    for (Compute c : {Compute::float32, Compute::float64})
        if (name == compute_name(c)) return c;
    return std::nullopt;
}

Compute default_compute() {
    static const Compute c = float_path_has_fma() ? Compute::float32 : Compute::float64;
    return c;
}

}  // namespace normlab
