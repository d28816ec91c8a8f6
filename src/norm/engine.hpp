#pragma once
// The one generic normalization forward pass. Every preset (BatchNorm, LayerNorm,
// InstanceNorm, GroupNorm, RMSNorm) resolves to a NormSpec and calls forward(); adding a
// normalization means adding a preset, not a kernel (Flax linen/normalization.py
// `_compute_stats` + `_normalize`; PyTorch ATen's math_group_norm composite).
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/tensor.hpp"

namespace normlab {

/// Where eps enters: rstd = 1/sqrt(var + eps) (every framework's layers), or
/// rstd = 1/(sqrt(var) + eps) (a variant seen in hand-written ports).
enum class EpsPlacement { inside_sqrt, add_to_std };
/// Variance used to normalise: biased (divide by n, all frameworks' layers) or unbiased
/// (divide by n-1, torch.std's default, seen in ports).
enum class VarianceEstimator { biased, unbiased };

/// Where a float16/bfloat16 output is rounded when there are affine parameters: once, after
/// y = x_hat * w + b is formed in double (fused kernels, PyTorch's F.rms_norm and
/// F.layer_norm), or twice: x_hat is rounded to the dtype first, and x_hat * w + b is formed
/// from that in double and rounded again (the Llama reference RMSNorm,
/// `weight * hidden.to(dtype)`, huggingface/transformers#30236; with a bias, one fused
/// multiply-add). float32 and float64 outputs are always rounded once.
enum class AffineRounding { once, twice };

/// Arithmetic of the output for float32 data. float32: the float path (normalize.hpp),
/// within 3 ulps of the float64 result with the ulp of the largest of |x̂·w|, |b| and |y|,
/// statistics still in double; float64: x - mean and the scaling in double, rounded once
/// (0.5 ulp). float64, float16 and bfloat16 data always take double arithmetic.
enum class Compute { float32, float64 };

/// Whether the float path's FMAs (std::fma in its output kernels) are instructions on this
/// CPU: the build targets a CPU with FMA (FP_FAST_FMAF, __FMA__, aarch64), or it carries the
/// x86-64-v3 and v4 versions of the float kernels (GCC on x86-64, NORMLAB_FMA_CLONES) and
/// this CPU runs one of them. Otherwise each FMA is a call into libm's software fmaf: the
/// same bits, 7 to 15 times slower than the double path (one thread, AMD EPYC, a build
/// without those versions, (32,64,512): LayerNorm, two FMAs per element, 6.3 ms against
/// 0.43 ms; RMSNorm and GroupNorm, one, 2.7 and 3.1 ms against 0.37 and 0.41 ms). The
/// channels-last kernels choose their register width at run time instead (lanes.hpp): 4
/// and 8 lanes need FMA and issue it by instruction, the 2-lane version calls std::fma.
bool float_path_has_fma();

/// The arithmetic float32 data gets when a norm's config does not choose: the float path
/// where float_path_has_fma(), else the double path, the faster one there. Both meet the
/// precision contract; their results differ in the last bits.
Compute default_compute();

/// The config's name of an arithmetic: "float" (the float path) or "double".
const char* compute_name(Compute c);

/// The arithmetic compute_name calls `name` ("float" or "double"); nothing for other text.
std::optional<Compute> compute_from_name(const std::string& name);

/// The fields that determine a normalization (DESIGN.md "Architecture").
struct NormSpec {
    Axes reduction_axes;   ///< axes the statistics are taken over (canonical)
    bool center = true;    ///< false: RMSNorm (no mean; var is the mean square)
    VarianceEstimator variance = VarianceEstimator::biased;
    EpsPlacement eps_placement = EpsPlacement::inside_sqrt;
    double eps = 1e-5;
    /// rstd = 0, not inf, where the variance and eps are both exactly 0: the output is then
    /// the bias and nothing reaches the input's gradient. PyTorch's CPU batch_norm (and
    /// instance_norm, which calls it) with batch statistics does this (its InvStd, in
    /// aten/src/ATen/native/Normalization.cpp); its layer_norm and group_norm give NaN.
    bool zero_rstd_at_zero_var = false;
    /// Whether rstd is the constant 0 for a variance `var` under this spec (the rule above).
    bool rstd_is_zero(double var) const { return zero_rstd_at_zero_var && var == 0 && eps == 0; }
    Axes param_axes;       ///< axes weight/bias span; their dims, in order, are the param shape
    double weight_offset = 0;  ///< scale by (weight_offset + weight); 1 for Gemma's RMSNorm
    AffineRounding affine_rounding = AffineRounding::once;  ///< half dtypes only
    /// float32 data: the float path or double. Specs from a NormDef (presets.hpp) get
    /// default_compute() where the config does not choose.
    Compute compute = Compute::float32;
};

/// Batch statistics in the keep-dims statistics shape (reduced axes set to 1).
struct Moments {
    xt::xarray<double> mean;   ///< 0 everywhere when not centring
    /// What rounding the mean to one double lost: mean + mean_lo is the mean to about 100
    /// bits, so x - mean stays exact to double where x is within rounding of the mean.
    xt::xarray<double> mean_lo;
    xt::xarray<double> var;    ///< biased: sum((x-mean)^2)/count (mean square when not centring)
    xt::xarray<double> count;  ///< elements per statistic (real positions only under a mask)
};

/// Optional inputs of forward(); null pointers mean "absent".
struct ForwardInputs {
    const xt::xarray<double>* weight = nullptr;  ///< shape: x dims at spec.param_axes
    const xt::xarray<double>* bias = nullptr;    ///< same shape as weight
    /// 1 = real position, 0 = padding; rank of x, each dim equal to x's or 1 (broadcast).
    /// Statistics are taken over real positions only; every position is then normalised
    /// with them (padded positions too, so the output is defined everywhere).
    const xt::xarray<std::uint8_t>* mask = nullptr;
    /// Statistics to normalise with instead of the batch's (eval mode with running
    /// statistics): mean and var in the statistics shape; var is used as given.
    const xt::xarray<double>* given_mean = nullptr;
    const xt::xarray<double>* given_var = nullptr;
};

/// Output and statistics of one forward pass; statistics in the keep-dims statistics shape.
struct ForwardResult {
    Tensor y;                  ///< same shape and dtype as x
    xt::xarray<double> mean;   ///< mean used (0 when not centring)
    xt::xarray<double> mean_lo;  ///< low part of the mean used (Moments::mean_lo; 0 for given stats)
    xt::xarray<double> var;    ///< variance used to normalise (estimator per spec.variance)
    /// 1/sqrt(var+eps) (or 1/(sqrt(var)+eps) per eps_placement); 0 where var = eps = 0 with
    /// NormSpec::zero_rstd_at_zero_var
    xt::xarray<double> rstd;
    Moments batch;             ///< the batch moments (biased), empty when given stats were used
};

/// Threads the engine uses (>= 1; default: the machine's hardware threads; an OpenMP team
/// kept between calls). Work is split into chunks fixed by the shape alone and partial
/// statistics are merged in chunk order, so results are bit-identical for every thread count.
void set_engine_threads(unsigned n);
unsigned engine_threads();

/// Whether float32 LayerNorm/RMSNorm rows of 256 to 2048 values whose output is streamed (8
/// MiB and more) take the rows' pipeline (a few rows of one chunk's output, then as many rows
/// of the next chunk's moments) or whole chunks (the chunk's moments, then its output, the
/// next chunk read ahead). By default the pipeline on Intel CPUs alone: on a 2-core Xeon it
/// was 3 to 9% faster, on a 2-core AMD EPYC (Zen 5) LayerNorm (64,128,768) took 3.9 ms with
/// it against 2.0 without (scripts/PERFORMANCE.md). The bits are the same either way.
/// set_rows_pipeline(1) or (0) forces one, (-1) restores the CPU's default.
void set_rows_pipeline(int mode);
bool rows_pipeline();

/// Whether float32 one-pass forwards of streamed outputs bring the next chunk into L2 while
/// this chunk's output streams out (NormalizeArgs::prefetch) where they are walks (GroupNorm
/// and InstanceNorm in (N, C, ...), for instance) or rows longer than the rows' pipeline
/// takes (over 2048 values). By default on Intel CPUs alone: on a 2-core Xeon it cost
/// nothing on the walks (and gained in one run, GroupNorm 5.97 -> 3.40 ms, with the VM in a
/// slower state) and gained on long rows (LayerNorm (8,512,4096) 17.8 -> 14.6 ms); on a
/// 2-core AMD EPYC (Zen 5) it lost, one thread: GroupNorm (32,64,56,56) 2.03 ms with it
/// against 1.44 without, InstanceNorm 1.77 against 1.41, RMSNorm (8,512,4096) 5.40 against
/// 4.47 (scripts/PERFORMANCE.md). float64 chunks and rows of up to 2048 values keep their
/// prefetch. The bits are the same either way. set_read_ahead(1) or (0) forces one, (-1)
/// restores the CPU's default.
void set_read_ahead(int mode);
bool read_ahead();

/// Batch moments over `reduction_axes` of x viewed with `shape` (same element count as x;
/// GroupNorm's (N, G, C/G, ...) view of (N, C, ...)). One pass over memory: the data is
/// walked in cache-sized chunks (float64 BatchNorm planes whose channel holds at most 128
/// Ki values: a plane a chunk, as the one-pass forward reads them); within a chunk each
/// statistic gets its mean and sum of squared deviations in double, and chunks are merged
/// with the pairwise update of Chan, Golub and LeVeque (1979) - no E[x^2]-E[x]^2
/// cancellation (case B08), whatever x's dtype; the mean is kept to about 100 bits (mean +
/// mean_lo). Within a chunk, float data whose runs each lie in one statistic (reductions
/// over trailing axes, BatchNorm planes) take one read, shifted by 0 or by the statistic's
/// first element (moments_rows.hpp); the rest a corrected two-pass (Chan, Golub and LeVeque
/// 1983). Both are within a few units of double's rounding of the exact moments, not bit
/// for bit the same. Statistics that vary along the innermost axes (channels last:
/// BatchNorm, InstanceNorm and GroupNorm in (N, H, W, C)), without a mask, take kernels
/// across channels (channels_last.hpp): one read with per-channel sums shifted by the mean
/// of each block's first rows (or 0 where it lies near 0), channels of a GroupNorm group
/// merged the same way; with a mask, GroupNorm with channels last also takes moments per
/// channel first and merges them per group. BatchNorm's planes in (N, C, ...) of 512 values
/// or more, without a mask, take the same one read per plane (its own shift) and merge each
/// channel's planes in batch order. A statistic with count 0 (fully masked) gets mean and
/// var NaN. Throws InputError on a mask whose shape does not broadcast to `shape`.
Moments compute_moments(const Tensor& x, const Shape& shape, const Axes& reduction_axes,
                        bool center, const xt::xarray<std::uint8_t>* mask = nullptr);
/// compute_moments into `out`, whose arrays are reused where they already have the
/// statistics' size: repeated calls on one shape allocate nothing (a fresh array of a few
/// MiB costs its page faults on every call).
void compute_moments(const Tensor& x, const Shape& shape, const Axes& reduction_axes, bool center, Moments& out,
                     const xt::xarray<std::uint8_t>* mask = nullptr);
/// compute_moments over x's own shape.
Moments compute_moments(const Tensor& x, const Axes& reduction_axes, bool center,
                        const xt::xarray<std::uint8_t>* mask = nullptr);

/// y = (x - mean) * rstd * (weight_offset + weight) + bias over x viewed with `shape`,
/// broadcast per the spec (out.y gets `shape`). Arithmetic per spec.compute: float32 data
/// with Compute::float32 takes the float path (normalize.hpp: float32 lanes, within 3 ulps of the
/// float64 result, the ulp of the largest of |x̂·w|, |b| and |y|; elements whose float
/// constants would leave float32's range, float_range.hpp, get the double arithmetic after
/// it); Compute::float64 and the
/// other dtypes form (x - mean) - mean_lo and the scaling in double and round y once (0.5
/// ulp); for float16/bfloat16 with affine parameters and spec.affine_rounding twice, x_hat
/// is rounded to the dtype before the affine step. Statistics are always taken in double.
/// When every statistic is one contiguous
/// block of 2 to 16 Ki elements (reduction over trailing axes: LayerNorm, RMSNorm,
/// InstanceNorm, GroupNorm) and there is no mask or given statistics, each cache-sized
/// chunk gets its statistics and its output in one pass over memory - the same bits as
/// compute_moments followed by the same formula; so do channels-last InstanceNorm and
/// GroupNorm, one sample at a time, and BatchNorm's planes in (N, C, ...) where a channel
/// holds at most 128 Ki values and there are 4 channels a thread or more, one channel at a
/// time (planes_one_pass, moments_rows.hpp). Results are bit-identical for every thread
/// count, and a value depends only on its own input, statistic and parameters.
/// Reuses out's buffers when their shapes fit, so repeated calls do not touch fresh
/// memory. Float-path outputs of 8 MiB and more are written with streaming stores, past the
/// caches (the same bits; normalize_stream.hpp). var + eps = 0 gives rstd = inf and a non-finite y, reported by the caller (never
/// replaced silently). Throws InputError when weight/bias/given statistics/mask have the
/// wrong shape.
void forward(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
             ForwardResult& out);
/// forward over x's own shape, returning a fresh result.
ForwardResult forward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in = {});

}  // namespace normlab
