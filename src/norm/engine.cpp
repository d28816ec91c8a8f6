// The forward pass: checks, the choice between the one-pass and the two-phase walk, and
// the arithmetic of the output (norm/normalize.hpp); moments in norm/moments.cpp.
#include "norm/engine.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <type_traits>

#include <xtensor/xbroadcast.hpp>

#include "norm/channels_last.hpp"
#include "norm/float_range.hpp"
#include "norm/line_vector.hpp"
#include "norm/moments.hpp"
#include "norm/moments_rows.hpp"
#include "norm/normalize.hpp"
#include "norm/normalize_stream.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

unsigned g_threads = std::max(1u, std::thread::hardware_concurrency());

// The variance the spec normalises with: Bessel's correction n/(n-1) when unbiased; n = 1
// gives 0/0 = NaN, as torch.var does.
double spec_var(const NormSpec& spec, double var, double count) {
    return spec.variance == VarianceEstimator::unbiased ? var * count / (count - 1) : var;
}
double spec_rstd(const NormSpec& spec, double var) {
    if (spec.rstd_is_zero(var)) return 0.0;
    return spec.eps_placement == EpsPlacement::inside_sqrt ? 1.0 / std::sqrt(var + spec.eps)
                                                           : 1.0 / (std::sqrt(var) + spec.eps);
}

// One chunk's output with the arithmetic `f32` selects (float lanes for float32 data, else
// double: normalize.hpp), with streaming stores when `stream` (normalize_stream.hpp).
template <class T>
NORMLAB_INLINE inline void normalize_any(const T* x, T* y, const Walk& w, std::size_t c, const NormalizeArgs& args,
                                         bool f32, bool stream) {
    if constexpr (std::is_same_v<T, float>) {
        if (f32 && stream) return normalize_chunk_f32_stream(x, y, w, c, args);
        if (f32) return normalize_chunk_f32(x, y, w, c, args);
    }
    if (stream) return normalize_chunk_stream(x, y, w, c, args);
    normalize_chunk(x, y, w, c, args);
}

// Whether y is written past the caches: outputs of kStreamBytes and more, on walks whose
// runs each lie in one statistic (normalize_stream.hpp), in either arithmetic.
bool streams(const Walk& w, std::size_t bytes) { return w.run_stride_a() == 0 && bytes >= kStreamBytes; }

template <class T>
void normalize_impl(const T* x, T* y, const Walk& w, const NormalizeArgs& args, bool f32, std::size_t count) {
    const bool stream = streams(w, count * sizeof(T));
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) { normalize_any(x, y, w, c, args, f32, stream); });
}

// Where the one-pass forwards put a statistic: the batch moments and the spec's variance
// and rstd, from a chunk's Partial.
struct StatsOut {
    double *bmean, *blo, *bvar, *bcount, *mean, *lo, *var, *rstd;
    explicit StatsOut(ForwardResult& out)
        : bmean(out.batch.mean.data()), blo(out.batch.mean_lo.data()), bvar(out.batch.var.data()),
          bcount(out.batch.count.data()), mean(out.mean.data()), lo(out.mean_lo.data()), var(out.var.data()),
          rstd(out.rstd.data()) {}
    void store(const Partial& p, const NormSpec& spec) const {
        const double v = biased_var(p.m2, p.count);
        bmean[p.stat] = mean[p.stat] = p.mean;
        blo[p.stat] = lo[p.stat] = p.mean_lo;
        bvar[p.stat] = v;
        bcount[p.stat] = p.count;
        var[p.stat] = spec_var(spec, v, p.count);
        rstd[p.stat] = spec_rstd(spec, var[p.stat]);
    }
};

// The statistics of rows [0, m) of n values each from their moments (m2 in bvar): the
// arithmetic of StatsOut::store, over arrays, so that its divisions and square roots run in
// vector registers (one row at a time they cost a fifth of the forward on rows of 64).
// IEEE division and square root round alike at every width, so every clone gives the same
// bits (the module is built with -fno-math-errno, which lets sqrt be a vector instruction).
NORMLAB_VECTOR_CLONES void finish_rows(std::size_t m, double n, const NormSpec& spec, const double* __restrict mean,
                                       const double* __restrict lo, double* __restrict bvar,
                                       double* __restrict bcount, double* __restrict out_mean,
                                       double* __restrict out_lo, double* __restrict var,
                                       double* __restrict rstd) {
    for (std::size_t i = 0; i < m; ++i) {
        bvar[i] = bvar[i] / n;  // biased_var with a count n > 0
        bcount[i] = n;
        out_mean[i] = mean[i];
        out_lo[i] = lo[i];
        var[i] = spec_var(spec, bvar[i], n);
        rstd[i] = spec_rstd(spec, var[i]);
    }
}

// Statistics and output in one pass over memory, for walks whose chunks hold whole
// statistics (whole_stat_chunk): each chunk's moments are final, so they are finished and
// the chunk normalised while it is still in cache. Same arithmetic, so the same bits, as
// compute_moments followed by normalize_impl.
// `wn` is the normalize walk over x (shape xs, statistic strides sa), cut into chunks of
// `whole` values, whole statistics each. Float data's moments take compute_moments' walk,
// cut alike. Each statistic of such a walk is a contiguous row of x, so float64 data take
// the row kernel (row_moments, the same bits as the walk, and no moments walk to build;
// float32 GroupNorm and InstanceNorm lost with the float one, see scripts/PERFORMANCE.md),
// chunk c being rows [c * whole / n, (c + 1) * whole / n).
template <class T>
void fused_impl(const T* x, T* y, const Shape& xs, const Strides& sa, const Walk& wn, std::size_t whole,
                const NormSpec& spec, NormalizeArgs args, bool f32, ForwardResult& out) {
    std::optional<Walk> wm;
    if constexpr (!std::is_same_v<T, double>) wm.emplace(xs, sa, Strides(xs.size(), 0), whole);
    const std::size_t stats = out.rstd.size();
    const StatsOut so(out);
    args.mean = so.mean;
    args.mean_lo = so.lo;
    args.rstd = so.rstd;
    const bool stream = streams(wn, out.y.size() * sizeof(T));
    const std::size_t n = stats ? out.y.size() / stats : 0, per = n ? whole / n : 0;
    parallel_chunks(wn.num_chunks(), [&](std::size_t c, std::size_t) {
        if constexpr (std::is_same_v<T, double>) {
            const std::size_t f = c * per, m = std::min(per, stats - f);
            row_moments(x + f * n, m, n, spec.center, RowSums{so.bmean + f, so.blo + f, so.bvar + f});
            finish_rows(m, static_cast<double>(n), spec, so.bmean + f, so.blo + f, so.bvar + f, so.bcount + f,
                        so.mean + f, so.lo + f, so.var + f, so.rstd + f);
        } else {
            thread_local std::vector<Partial> parts;
            parts.clear();
            chunk_moments(x, nullptr, *wm, c, spec.center, stats, parts);
            for (const Partial& p : parts) so.store(p, spec);
        }
        normalize_any(x, y, wn, c, args, f32, stream);
    });
}

// fused_impl for BatchNorm's planes in (N, C, ...) (planes_layout), where the statistics
// span the batch and no chunk holds a whole one: statistic by statistic, the moments of its
// planes (plane_stat_moments: compute_moments' arithmetic), then its output while they are
// in cache: x is read once, where compute_moments followed by normalize_impl read it twice.
// Plane (o, k + 1) is the next in memory after (o, k), so where the output is streamed
// (8 MiB and more), each plane's output brings in the next statistic's plane. `wm` and `wn`
// are cut into chunks of one plane.
template <class T>
void planes_impl(const T* x, T* y, const Planes& pl, const Walk& wm, const Walk& wn, const NormSpec& spec,
                 NormalizeArgs args, bool f32, ForwardResult& out) {
    const StatsOut so(out);
    args.mean = so.mean;
    args.mean_lo = so.lo;
    args.rstd = so.rstd;
    args.prefetch = pl.plane;
    args.fence = false;
    const bool stream = streams(wn, out.y.size() * sizeof(T));
    parallel_chunks(pl.stats, [&](std::size_t k, std::size_t) {
        so.store(plane_stat_moments(x, pl, wm, k, spec.center), spec);
        for (std::size_t o = 0; o < pl.outer; ++o) normalize_any(x, y, wn, o * pl.stats + k, args, f32, stream);
        if (stream) fence_stream_stores();
    });
}

// Rows [f, f + m) of n values of y from their statistics in args (normalize_rows_f32), with
// streaming stores when `stream`.
void write_rows(const float* x, float* y, std::size_t f, std::size_t m, std::size_t n, std::size_t pstep,
                const NormalizeArgs& args, bool stream) {
    if (stream) normalize_rows_f32_stream(x + f * n, y + f * n, m, n, f, pstep, args);
    else normalize_rows_f32(x + f * n, y + f * n, m, n, f, pstep, args);
}

// Rows of kPipelinedRowMin to kPipelinedRowMax values whose output streams take rows_impl's
// pipeline, kPipelinedGroupValues values (at least a row) at a time. 2-core Xeon (2 MiB L2
// per core, 480 MiB L3), alternating runs: LayerNorm (64,128,768) 2.40 -> 2.22 ms on one
// thread, 1.19 -> 1.11 on two; rows of 256 to 2048 3 to 9% faster; rows of 64 and 128 no
// faster, rows of 3072 and 4096 slower (the read-ahead kept there: (8,512,4096) 6.6 -> 11.7
// ms with the pipeline on one thread). On a 2-core AMD EPYC (Zen 5, AVX-512) the
// pipeline lost: LayerNorm (64,128,768) 2.02 -> 3.91 ms on one thread, 0.83 -> 1.21 on two,
// RMSNorm 2.16 -> 3.42 and 0.79 -> 1.40 (medians of 5 alternating rounds), so it is taken
// on Intel CPUs alone (rows_pipeline).
constexpr std::size_t kPipelinedRowMin = 256, kPipelinedRowMax = 2048, kPipelinedGroupValues = 2048;

// Values per chunk of rows_impl's rows whose output is not streamed (under kStreamBytes,
// the batch and its output served from L2 and L3): half of kWholeChunk. 2-core Xeon, the
// two builds alternating, 5 rounds, medians: LayerNorm (32,64,512) 0.373 -> 0.362 ms on
// one thread, 0.199 -> 0.192 on two; (16,64,768) 0.286 -> 0.276 and 0.153 -> 0.150
// (scripts/PERFORMANCE.md). Streamed outputs keep kWholeChunk.
constexpr std::size_t kCachedRowsChunk = kWholeChunk / 2;

// fused_impl for float32 data on the float path where every row of n values is a whole
// statistic (LayerNorm/RMSNorm over trailing axes; row_param_step): chunks of whole rows,
// each row's moments, then the chunk's output, with no walk. On rows of tens to hundreds of
// values the walk's per-run work cost more than the arithmetic. The same arithmetic on the
// same values: the bits of fused_impl. The caller guarantees what fused_impl's walks would
// see here: no mask, no given statistics, rows > 0 of 1 < n <= kChunk values each
// (whole_stat_chunk), pstep 0 or 1, and no second rounding of the affine step after it
// (float32 data never takes one).
void rows_impl(const float* x, float* y, std::size_t n, std::size_t pstep, const NormSpec& spec, NormalizeArgs args,
               ForwardResult& out) {
    const std::size_t rows = out.rstd.size();
    const StatsOut so(out);
    args.mean = so.mean;
    args.mean_lo = so.lo;
    args.rstd = so.rstd;
    const bool stream = out.y.size() * sizeof(float) >= kStreamBytes;
    auto moments = [&](std::size_t f, std::size_t m) {
        row_moments(x + f * n, m, n, spec.center, RowSums{so.bmean + f, so.blo + f, so.bvar + f});
        finish_rows(m, static_cast<double>(n), spec, so.bmean + f, so.blo + f, so.bvar + f, so.bcount + f, so.mean + f,
                    so.lo + f, so.var + f, so.rstd + f);
    };
    if (!stream || n < kPipelinedRowMin || n > kPipelinedRowMax || !rows_pipeline()) {
        parallel_rows(
            rows, n,
            [&](std::size_t f, std::size_t m) {
                moments(f, m);
                write_rows(x, y, f, m, n, pstep, args, stream);
            },
            stream ? kWholeChunk : kCachedRowsChunk);
        return;
    }
    // Mid-length rows: each thread's chunks in a pipeline, a few rows of this chunk's output
    // streamed out, then as many of the next chunk's rows read for their moments, so the
    // loads and the streaming stores share the time; no read-ahead, one fence per thread.
    args.prefetch = 0;
    args.fence = false;
    const std::size_t group = std::max<std::size_t>(1, kPipelinedGroupValues / n);
    const std::size_t per = std::max<std::size_t>(1, kWholeChunk / n), chunks = (rows + per - 1) / per;
    parallel_blocks(chunks, [&](std::size_t c0, std::size_t c1, std::size_t) {
        moments(c0 * per, std::min(per, rows - c0 * per));
        for (std::size_t c = c0; c < c1; ++c) {
            const std::size_t f = c * per, m = std::min(per, rows - f);
            const std::size_t nf = f + m, nm = c + 1 < c1 ? std::min(per, rows - nf) : 0;
            for (std::size_t i = 0; i < std::max(m, nm); i += group) {
                if (i < m) write_rows(x, y, f + i, std::min(group, m - i), n, pstep, args, true);
                if (i < nm) moments(nf + i, std::min(group, nm - i));
            }
        }
        fence_stream_stores();
    });
}

// The output alone of rows that are whole statistics, with the statistics given (in args):
// rows_impl's writer over the same chunks, so the same bits as the walk's output.
void rows_output(const float* x, float* y, std::size_t rows, std::size_t n, std::size_t pstep,
                 const NormalizeArgs& args) {
    const bool stream = rows * n * sizeof(float) >= kStreamBytes;
    parallel_rows(rows, n, [&](std::size_t f, std::size_t m) { write_rows(x, y, f, m, n, pstep, args, stream); });
}

// For a forward whose statistics are the contiguous rows of x (the trailing axes reduced):
// 1 when the parameters lie along those rows (parameter k for element k of every row,
// LayerNorm/RMSNorm), 0 when one parameter serves every element, -1 otherwise.
int row_param_step(const Shape& xs, const Axes& reduced, const Strides& sb) {
    bool along = true, none = true;
    std::size_t expect = 1;
    for (std::size_t d = xs.size(); d-- > 0;) {
        if (xs[d] == 1) continue;
        const bool r = has_axis(reduced, d);
        none = none && sb[d] == 0;
        along = along && sb[d] == (r ? expect : 0);
        if (r) expect *= xs[d];
    }
    return none ? 0 : along ? 1 : -1;
}

// y = round(y * scale + shift) in place, y holding x_hat already rounded to its half dtype:
// the second rounding of AffineRounding::twice. The product of two half values is exact in
// double (and in float32), so without a bias this is a framework's half multiply; with a
// bias it is one fused multiply-add (torch.addcmul), not a multiply and an add rounded apart.
void affine_rounded_twice(float* y, const Shape& xs, const Strides& sb, const double* scale, const double* shift,
                          DType dtype) {
    Walk w(xs, Strides(xs.size(), 0), sb, kChunk);
    parallel_chunks(w.num_chunks(), [&](std::size_t c, std::size_t) {
        w.chunk(c, [&](const Run& r) {
            for (std::size_t k = 0; k < r.n; ++k) {
                const std::size_t p = r.b + k * r.db;
                float& v = y[r.x + k];
                v = static_cast<float>(round_to(dtype, static_cast<double>(v) * scale[p] + shift[p]));
            }
        });
    });
}

// Every statistics array of the one-pass forwards in the statistics shape ss.
void ensure_stats(ForwardResult& out, const Shape& ss) {
    for (auto* a : {&out.batch.mean, &out.batch.mean_lo, &out.batch.var, &out.batch.count, &out.mean, &out.mean_lo,
                    &out.var})
        ensure_shape(*a, ss);
}

void check_size(const Tensor& x, const Shape& shape) {
    if (num_elements(shape) != x.size())
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(shape));
}

}  // namespace

void set_engine_threads(unsigned n) { g_threads = std::max(1u, n); }
unsigned engine_threads() { return g_threads; }

namespace {
std::atomic<int> g_rows_pipeline{-1}, g_read_ahead{-1};  // -1: the CPU's default

// The memory-access choices below (rows_pipeline, read_ahead) were measured on Intel,
// where they gained or cost nothing, and on AMD, where they lost, only: other CPUs take AMD's.
bool cpu_is_intel() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static const bool intel = [] {
        __builtin_cpu_init();
        return __builtin_cpu_is("intel") != 0;
    }();
    return intel;
#else
    return false;
#endif
}

// A setting's mode: 1 or 0 when forced (mode > 0, mode == 0), -1 for the CPU's default.
void store_mode(std::atomic<int>& setting, int mode) {
    setting.store(mode < 0 ? -1 : mode > 0, std::memory_order_relaxed);
}

// The forced mode, else the default: on where the CPU is Intel's.
bool mode_or_intel(const std::atomic<int>& setting) {
    const int mode = setting.load(std::memory_order_relaxed);
    return mode >= 0 ? mode == 1 : cpu_is_intel();
}
}  // namespace

void set_rows_pipeline(int mode) { store_mode(g_rows_pipeline, mode); }
bool rows_pipeline() { return mode_or_intel(g_rows_pipeline); }

void set_read_ahead(int mode) { store_mode(g_read_ahead, mode); }
bool read_ahead() { return mode_or_intel(g_read_ahead); }

namespace {

// The effective per-parameter scale (offset + weight, or 1) and shift (bias, or 0), np of
// each, on a cache line: the row writers load them a register at a time (line_vector.hpp).
void affine_params(const NormSpec& spec, const ForwardInputs& in, std::size_t np, LineVector<double>& scale,
                   LineVector<double>& shift) {
    scale.assign(np, 1.0);
    shift.assign(np, 0.0);
    if (in.weight)
        for (std::size_t i = 0; i < np; ++i) scale[i] = spec.weight_offset + in.weight->data()[i];
    if (in.bias)
        for (std::size_t i = 0; i < np; ++i) shift[i] = in.bias->data()[i];
}

// forward() after the operands' shapes are checked and before the float path's range is
// (float_range.hpp), with the effective parameters `scale` and `shift` (affine_params),
// which that check uses too.
void forward_kernels(const Tensor& x, const Shape& xs, const NormSpec& spec, const ForwardInputs& in,
                     const LineVector<double>& scale, const LineVector<double>& shift, ForwardResult& out) {
    Shape ss = keepdims_shape(xs, spec.reduction_axes);
    if (in.mask) mask_strides(xs, *in.mask);
    const bool given = in.given_mean || in.given_var;
    if (given) {
        if (!in.given_mean || !in.given_var) throw InputError("given statistics need both mean and var");
        check_operand_shape(*in.given_mean, ss, "mean");
        check_operand_shape(*in.given_var, ss, "var");
    }

    const std::size_t np = scale.size();
    // Rounding twice: the kernels write x_hat rounded to the dtype (unit scale, no shift),
    // and the affine step follows on those values.
    const bool twice = spec.affine_rounding == AffineRounding::twice && compute_dtype(x.dtype) != x.dtype &&
                       (in.weight || in.bias);
    LineVector<double> unit_scale, no_shift;
    if (twice) unit_scale.assign(np, 1.0), no_shift.assign(np, 0.0);
    // The float path: float32 data unless the spec asks for double arithmetic.
    const bool f32 = x.dtype == DType::float32 && spec.compute == Compute::float32;
    LineVector<float> shift_f;
    if (f32) shift_f.assign(shift.begin(), shift.end());
    NormalizeArgs args;
    args.scale = twice ? unit_scale.data() : scale.data();
    args.shift = twice ? no_shift.data() : shift.data();
    args.shift_f = shift_f.data();
    args.uniform_scale = !in.weight || twice;
    args.uniform_shift = !in.bias || twice;
    args.dtype = x.dtype;

    out.y.dtype = x.dtype;
    if (x.dtype == DType::float64) ensure_shape(out.y.f64, xs);
    else ensure_shape(out.y.f32, xs);
    ensure_shape(out.rstd, ss);
    const Strides sa = broadcast_strides(xs, ss), sb = param_strides(xs, spec.param_axes);
    // Rows that are whole statistics on the float path (LayerNorm/RMSNorm over trailing
    // axes): the row kernels, with or without given statistics, not the walk.
    const int pstep = f32 && !in.mask && whole_stat_chunk(xs, spec.reduction_axes)
                          ? row_param_step(xs, spec.reduction_axes, sb)
                          : -1;

    // Chunks of 256 KiB whatever the dtype: the one-pass forward holds this chunk and, read
    // ahead, the next one in L2, and two float64 chunks of kWholeChunk values (1 MiB) did
    // not fit a 1 MiB L2 (2-core AMD EPYC, Zen 5, five alternating bench runs, float64
    // LayerNorm (64,128,768): 5.41 -> 4.18 ms on one thread, 2.89 -> 2.10 on two; GroupNorm
    // (32,64,56,56) 5.20 -> 4.79 and 2.51 -> 1.56; scripts/PERFORMANCE.md).
    const std::size_t chunk_values = x.dtype == DType::float64 ? kWholeChunk / 2 : kWholeChunk;
    const std::size_t whole = given || in.mask ? 0 : whole_stat_chunk(xs, spec.reduction_axes, chunk_values);
    if (whole) {
        // Each chunk's moments read it from memory, its output from cache: the next chunk
        // is brought in while this one's output streams out, so reads and writes overlap.
        // 2-core Xeon, alternating builds, 5 rounds: LayerNorm (8,512,4096) 17.8 -> 14.6 ms
        // on one thread, RMSNorm 8.39 -> 5.55 on two, float64 LayerNorm (64,128,768) 9.91 ->
        // 6.95 on one; rows of 768 on two threads unchanged (scripts/PERFORMANCE.md). Float32
        // rows of 256 to 2048 values take rows_impl's pipeline instead on Intel; float32 walks
        // and rows of over 2048 values read ahead where read_ahead() says so.
        ensure_stats(out, ss);
        const bool long_rows = pstep >= 0 && out.rstd.size() && x.size() / out.rstd.size() > kPipelinedRowMax;
        const bool float_walk = pstep < 0 && x.dtype != DType::float64;
        args.prefetch = (long_rows || float_walk) && !read_ahead() ? 0 : whole;
        if (pstep >= 0) {
            if (out.rstd.size())  // else an empty batch: nothing to compute
                rows_impl(x.f32.data(), out.y.f32.data(), x.size() / out.rstd.size(), static_cast<std::size_t>(pstep),
                          spec, args, out);
            return;
        }
        const Walk wn(xs, sa, sb, whole);
        if (x.dtype == DType::float64)
            fused_impl(x.f64.data(), out.y.f64.data(), xs, sa, wn, whole, spec, args, f32, out);
        else
            fused_impl(x.f32.data(), out.y.f32.data(), xs, sa, wn, whole, spec, args, f32, out);
        if (twice) affine_rounded_twice(out.y.f32.data(), xs, sb, scale.data(), shift.data(), x.dtype);
        return;
    }

    // BatchNorm's planes, a statistic at a time (planes_impl). 2-core Xeon, alternating
    // builds, 5 rounds: float64 (32,64,56,56) 6.91 -> 5.49 ms on one thread, 3.40 -> 2.74 on
    // two; float32 (8,64,56,56) 0.815 -> 0.662 and 0.443 -> 0.328; float32 (32,64,56,56)
    // 2.81 -> 2.78 and 1.52 -> 1.46, but slower on a Zen 5, so float32 batches of 8 MiB and
    // more take the two passes (planes_one_pass; scripts/PERFORMANCE.md).
    const auto pl = given || in.mask ? std::nullopt : planes_layout(xs, spec.reduction_axes);
    if (pl && planes_one_pass(*pl, engine_threads(), x.dtype == DType::float64)) {
        ensure_stats(out, ss);
        Walk wm(xs, sa, Strides(xs.size(), 0), pl->plane), wn(xs, sa, sb, pl->plane);
        if (x.dtype == DType::float64)
            planes_impl(x.f64.data(), out.y.f64.data(), *pl, wm, wn, spec, args, f32, out);
        else
            planes_impl(x.f32.data(), out.y.f32.data(), *pl, wm, wn, spec, args, f32, out);
        if (twice) affine_rounded_twice(out.y.f32.data(), xs, sb, scale.data(), shift.data(), x.dtype);
        return;
    }

    // Statistics along the contiguous innermost axes (channels last): the kernels across
    // channels (channels_last.hpp), one outer group at a time where there are enough groups.
    const bool plain = x.dtype == DType::float32 || x.dtype == DType::float64;
    const auto cl = plain && !in.mask ? channels_last_layout(xs, spec.reduction_axes, spec.param_axes) : std::nullopt;
    if (cl && !given && channels_last_fuses(*cl)) {
        for (auto* a : {&out.batch.mean, &out.batch.mean_lo, &out.batch.var, &out.batch.count}) {
            ensure_shape(*a, ss);
            std::fill(a->begin(), a->end(), 0.0);
        }
        for (auto* a : {&out.mean, &out.mean_lo, &out.var}) ensure_shape(*a, ss);
        const RawMoments raw{out.batch.count.data(), out.batch.mean.data(), out.batch.mean_lo.data(),
                             out.batch.var.data()};
        args.mean = out.mean.data();
        args.mean_lo = out.mean_lo.data();
        args.rstd = out.rstd.data();
        // The arithmetic of compute_moments followed by the lines below, per group.
        const FinishStats finish = [&](std::size_t first, std::size_t n) {
            for (std::size_t i = first; i < first + n; ++i) {
                const double v = biased_var(raw.m2[i], raw.count[i]);
                raw.m2[i] = v;
                out.mean.data()[i] = raw.mean[i];
                out.mean_lo.data()[i] = raw.mean_lo[i];
                out.var.data()[i] = spec_var(spec, v, raw.count[i]);
                out.rstd.data()[i] = spec_rstd(spec, out.var.data()[i]);
            }
        };
        if (x.dtype == DType::float64)
            channels_last_forward(x.f64.data(), out.y.f64.data(), *cl, spec.center, raw, args, false, finish);
        else
            channels_last_forward(x.f32.data(), out.y.f32.data(), *cl, spec.center, raw, args, f32, finish);
        return;
    }

    if (given) {
        // Into the arrays of the last call where the sizes match (no allocation per batch).
        for (auto* a : {&out.mean, &out.mean_lo, &out.var}) ensure_shape(*a, ss);
        std::copy(in.given_mean->begin(), in.given_mean->end(), out.mean.begin());
        std::fill(out.mean_lo.begin(), out.mean_lo.end(), 0.0);
        std::copy(in.given_var->begin(), in.given_var->end(), out.var.begin());
        out.batch = Moments{};
    } else {
        compute_moments(x, xs, spec.reduction_axes, spec.center, out.batch, in.mask);
        out.mean = out.batch.mean;
        out.mean_lo = out.batch.mean_lo;
        out.var = out.batch.var;
        for (std::size_t i = 0; i < out.var.size(); ++i)
            out.var.data()[i] = spec_var(spec, out.var.data()[i], out.batch.count.data()[i]);
    }
    for (std::size_t i = 0; i < out.rstd.size(); ++i) out.rstd.data()[i] = spec_rstd(spec, out.var.data()[i]);

    // Where the statistics would make runs of a few elements (short_suffix), they are
    // repeated per element of the short axes, so the walk runs along whole channels.
    args.mean = out.mean.data();
    args.mean_lo = out.mean_lo.data();
    args.rstd = out.rstd.data();
    if (pstep >= 0 && out.rstd.size()) {
        rows_output(x.f32.data(), out.y.f32.data(), out.rstd.size(), x.size() / out.rstd.size(),
                    static_cast<std::size_t>(pstep), args);
        return;
    }
    if (cl) {
        if (x.dtype == DType::float64) channels_last_normalize(x.f64.data(), out.y.f64.data(), *cl, args, false);
        else channels_last_normalize(x.f32.data(), out.y.f32.data(), *cl, args, f32);
        return;
    }
    Strides sn = sa;
    xt::xarray<double> mean_e, lo_e, rstd_e;
    const Axes suffix = short_suffix(xs, spec.reduction_axes);
    if (!suffix.empty()) {
        Shape fs = keepdims_shape(xs, without(spec.reduction_axes, suffix));
        mean_e = xt::broadcast(out.mean, fs);
        lo_e = xt::broadcast(out.mean_lo, fs);
        rstd_e = xt::broadcast(out.rstd, fs);
        args.mean = mean_e.data();
        args.mean_lo = lo_e.data();
        args.rstd = rstd_e.data();
        sn = broadcast_strides(xs, fs);
    }
    Walk w(xs, sn, sb, kChunk);
    // Float64 output streamed from the registers gains from reading 512 KiB ahead into L2
    // (BatchNorm (32,64,56,56), a scratch build alternating, 5 rounds: 13.0 -> 10.6 ms on
    // one thread, 6.09 -> 4.42 on two, measured before that batch took planes_impl; the
    // two passes now serve larger batches and given statistics); float32 output lost with
    // it (3.75 -> 4.14 ms at 512 KiB ahead, 3.40 -> 3.63 at 256 KiB), so it has none.
    if (x.dtype == DType::float64) {
        args.prefetch = kWholeChunk;
        normalize_impl(x.f64.data(), out.y.f64.data(), w, args, false, x.size());
    } else normalize_impl(x.f32.data(), out.y.f32.data(), w, args, f32, x.size());
    if (twice) affine_rounded_twice(out.y.f32.data(), xs, sb, scale.data(), shift.data(), x.dtype);
}

}  // namespace

void forward(const Tensor& x, const Shape& xs, const NormSpec& spec, const ForwardInputs& in,
             ForwardResult& out) {
    check_size(x, xs);
    const Shape ps = select_dims(xs, spec.param_axes);
    if (in.weight) check_operand_shape(*in.weight, ps, "weight");
    if (in.bias) check_operand_shape(*in.bias, ps, "bias");
    LineVector<double> scale, shift;
    affine_params(spec, in, std::max<std::size_t>(1, num_elements(ps)), scale, shift);
    forward_kernels(x, xs, spec, in, scale, shift, out);
    if (x.dtype != DType::float32 || spec.compute != Compute::float32) return;
    // The elements whose float constants would leave float32's range take the double
    // arithmetic; the check costs a pass over the statistics and parameters, not the data.
    const bool given = in.given_mean || in.given_var;
    const std::vector<std::uint8_t> unsafe = float_path_unsafe(out, spec.center, given, in.mask != nullptr, scale, shift);
    if (unsafe.empty()) return;
    renormalize_in_double(x.f32.data(), out.y.f32.data(), xs, broadcast_strides(xs, keepdims_shape(xs, spec.reduction_axes)),
                          param_strides(xs, spec.param_axes), out, unsafe, scale.data(), shift.data());
}

ForwardResult forward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in) {
    ForwardResult out;
    forward(x, x.shape(), spec, in, out);
    return out;
}

}  // namespace normlab
