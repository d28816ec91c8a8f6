#pragma once
// Small measurements and checks several analyses share.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analysis.hpp"
#include "data/batch.hpp"
#include "data/estimate.hpp"  // saturating_mul, saturating_add: estimates from unbounded settings
#include "json/reader.hpp"
#include "analysis/output_pool.hpp"
#include "norm/presets.hpp"

namespace normlab {

/// The most training steps an analysis takes (depth's train_steps, train_eval's and
/// port_check's steps; configs/README.md and results/README.md give it): every step is a
/// forward pass of each norm or stack, so a count far beyond it would run for hours.
constexpr long long kMaxTrainingSteps = 1000000;
/// Integer `key` of r (`fallback` when absent), a count of training steps: throws JsonError
/// at the key ("<key> must be in [lo, 1000000], but got ...") outside [lo, kMaxTrainingSteps].
long long training_steps(ObjectReader& r, const std::string& key, long long fallback, long long lo);

/// For the memory estimate (AnalysisType::work_bytes, rows), before any batch is built:
/// bytes a tensor of dtype d holds per value (8 for float64, else 4: half formats are kept
/// in float32).
std::size_t value_bytes(DType d);
/// The statistics groups norm `name` has on the data `w` describes, as one forward step
/// binds it; nullopt when that cannot be told before the batch is built (shape or channel
/// axis unknown, a norm that does not fit, which check() reports).
std::optional<std::size_t> groups_on(const std::string& name, const WorkInputs& w);
/// The most statistics groups any of `norms` has on that data (groups_on), or all its
/// elements when that cannot be told.
std::size_t most_groups(const std::vector<std::string>& norms, const WorkInputs& w);
/// Bytes a forward step keeps per statistics group: the mean (and its low part), variance
/// and rstd it used and the batch moments (mean, low part, variance, count), in float64.
constexpr std::size_t kStepGroupBytes = 64;

/// The `save` key as `normlab list` shows it: a list, and the arrays it may name.
KeyInfo save_key(const std::vector<std::string>& arrays);
/// What a forward step of one of `norms` keeps for its statistics per element of its input
/// (kStepGroupBytes per group, rounded up): 0 to 64 bytes, 4 for a LayerNorm over 16 values.
std::size_t step_stats_per_element(const std::vector<std::string>& norms, const WorkInputs& w);
/// A size that saturates at SIZE_MAX instead of wrapping around (saturating_mul,
/// saturating_add), for the estimate's products of settings nobody bounded (a batch size
/// of 10^15): (Sat(E) * 8 + Sat(G) * 64).n.
struct Sat {
    std::size_t n = 0;
    Sat(std::size_t v = 0) : n(v) {}  // implicit: plain sizes mix in
    friend Sat operator*(Sat a, Sat b) { return Sat(saturating_mul(a.n, b.n)); }
    friend Sat operator+(Sat a, Sat b) { return Sat(saturating_add(a.n, b.n)); }
    friend bool operator<(Sat a, Sat b) { return a.n < b.n; }
    friend bool operator>(Sat a, Sat b) { return a.n > b.n; }
};
/// `<type> "<norm>" on data "<data>"`, the names quoted as JSON (quoted_text): the pair a
/// message about one norm on one data entry names, as the engine's bind-time errors do.
std::string norm_on_data(NormType type, const std::string& norm, const std::string& data);

/// `key` when analysis entry `spec` sets it, else "": the key a refusal of the estimate
/// points at (WorkBytes::key, TableRows::key).
std::string key_if_set(const AnalysisSpec& spec, const std::string& key);
/// Of keys `a` and `b` of `spec`, each multiplying an estimate by its factor (`by_a`, `by_b`),
/// the one the refusal points at: the set one with the larger factor, the one set when the
/// other is not, "" when neither is (key_if_set).
std::string larger_key(const AnalysisSpec& spec, const std::string& a, double by_a, const std::string& b,
                       double by_b);

/// For an analysis asked to save data entry `data`'s padding mask (`save: "mask"`; `at` is
/// that entry of the save list): throws JsonError at `at`, naming the data entry as
/// related, when batch b has no mask ("<analysis> on data "<data>": cannot save its padding
/// mask, it has none ...").
void require_mask_to_save(const JsonLocation& at, const std::string& analysis, const std::string& data,
                          const Batch& b);

/// max |a - b| over all elements (NaN if either holds a NaN at the same place). Shapes must
/// match (std::logic_error otherwise: a programming error, not an input error).
double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b);

/// Per-group mean and std (biased) of `y`, grouped as the norm's statistics are (the
/// resolution's reduction axes, GroupNorm's groups included), over real positions when a
/// mask is given. Returns arrays in the statistics shape. With center false (RMSNorm's
/// own measure of spread) mean is 0 and std is the root mean square about 0. A group
/// without a real position (count 0: a padded token under LayerNorm over D) has mean and
/// std NaN: summaries skip it (range_over_groups) and count it (empty_groups).
struct GroupSummary {
    xt::xarray<double> mean, std;
    xt::xarray<double> count;  ///< real positions per group
};
GroupSummary group_summary(const Tensor& y, const Resolution& res,
                           const xt::xarray<std::uint8_t>* mask, bool center = true);

/// Euclidean norm of the n values at p.
double l2_norm(const double* p, std::size_t n);
/// (min, max) of per-group `values` over the groups with count > 0, as value_range: NaN
/// when such a group holds a NaN (a NaN input is not hidden), NaN also when every group is
/// empty. `count` has the same size (GroupSummary::count, Moments::count).
std::pair<double, double> range_over_groups(const xt::xarray<double>& values, const xt::xarray<double>& count);
/// Groups with count 0: without any real position.
std::size_t empty_groups(const xt::xarray<double>& count);
/// Range and non-finite count of a norm's output `y` over the elements of the groups with
/// count > 0 (`count` per group of res.stats_shape): the NaN a fully padded group gets is
/// not a value of the output anyone reads. Range as value_range (NaN if a counted element
/// is NaN or none is left).
struct OutputSummary {
    double min = 0, max = 0;
    std::size_t nonfinite = 0;
};
OutputSummary summarize_output(const Tensor& y, const Resolution& res, const xt::xarray<double>& count);

/// Number of non-finite (NaN or +-inf) values.
std::size_t count_nonfinite(const xt::xarray<double>& a);
/// Same, read in place from a tensor of any dtype (no float64 copy of a large batch).
std::size_t count_nonfinite(const Tensor& t);
/// (min, max) of a tensor read in place; (NaN, NaN) when it holds a NaN or is empty.
std::pair<double, double> value_range(const Tensor& t);
/// Same for a float64 array (e.g. per-group statistics).
std::pair<double, double> value_range(const xt::xarray<double>& a);

/// Unit in the last place of `v` in dtype `d`: the spacing of d's values at |v|, i.e.
/// 2^(max(floor(log2|v|), emin) - p) with p explicit mantissa bits (float16 10, bfloat16 7,
/// float32 23, float64 52) and emin the smallest normal exponent (-14, -126, -126, -1022).
/// ulp(d, 0) is d's smallest subnormal (float16: 5.96e-8). NaN for a non-finite v.
double ulp(DType d, double v);

/// How far an output `y` is from a reference `ref` (same shape), element by element:
/// |y - ref|, where two NaNs or two equal infinities agree (difference 0) and a
/// non-finite value facing a different one (finite, the other infinity, NaN) counts as an
/// infinite difference, so a NaN output never hides from a maximum.
struct Deviation {
    double max_abs = 0;            ///< max |y - ref|
    double max_rel = 0;            ///< max |y - ref| / |ref| (0/0 = 0; d/0 = inf for d > 0)
    double max_ulp = 0;            ///< max |y - ref| / ulp(ulp_dtype, basis), basis |ref| by default
    std::size_t nonfinite = 0;     ///< non-finite values of y among the compared elements
    std::size_t worst = 0;         ///< flat index of the first element with the max |y - ref|
    std::size_t compared = 0;      ///< elements compared (real positions under a mask)
};
/// Compares y with ref over all elements, or over those where `include` is non-zero
/// (`include`: a flat 0/1 array of the same size, or nullptr). ulp_dtype sets the unit of
/// max_ulp, taken at |ref|, or at `ulp_basis` where given (same size: the precision
/// contract's max(|x̂·w|, |b|, |y|), DESIGN.md). std::logic_error when sizes differ (a
/// programming error).
Deviation deviation(const xt::xarray<double>& y, const xt::xarray<double>& ref, DType ulp_dtype,
                    const std::vector<std::uint8_t>* include = nullptr,
                    const xt::xarray<double>* ulp_basis = nullptr);
/// The element-wise difference deviation() uses: 0 when both are NaN or equal (infinities
/// included), +inf when exactly one is non-finite or they are different infinities, else |a - b|.
double elementwise_diff(double a, double b);

/// For every element of a row-major array of shape `xs`, the flat (row-major) offset of the
/// element of a broadcast operand of shape `os` (same rank as xs, each dim equal to xs's or
/// 1) that it meets: the statistic of a keep-dims statistics shape, a mask position, a
/// parameter. Throws std::logic_error when os does not broadcast to xs.
std::vector<std::size_t> broadcast_offsets(const Shape& xs, const Shape& os);

/// For every element of the input (row-major), the flat index of the statistic it was
/// normalised with in a step's mean/var/rstd arrays: the keep-dims statistics offset, plus
/// r * res.num_stats for the elements of replica r when the statistics are per replica
/// (Resolution::replicas; the arrays are then (R, ...stats_shape)).
std::vector<std::size_t> statistic_offsets(const Resolution& res);

/// Element layout of a norm applied to a batch (view_shape order = the input's row-major
/// order): the statistic (group) and affine parameter each element belongs to, and which
/// elements enter the statistics. Computed once, used by analyses that re-implement the
/// statistics (precision) or report per-group values (port_check).
struct GroupLayout {
    std::size_t num_groups = 0;            ///< elements of res.stats_shape
    std::vector<std::size_t> group;        ///< per element: flat index into res.stats_shape
    std::vector<std::size_t> param;        ///< per element: flat index into the (view) params
    std::vector<std::uint8_t> real;        ///< per element: 1 = enters the statistics
    /// Per group, the elements entering its statistics, in row-major order.
    std::vector<std::vector<std::size_t>> members;
    /// Per group, all its elements (padding included), in row-major order.
    std::vector<std::vector<std::size_t>> all;
};
/// One forward step of `layer` on batch `b`: its values, channel axis, name (in messages)
/// and padding mask, if any, into output buffers from the current pool (output_pool.hpp),
/// which get them back when the step is destroyed. Throws NormError as NormLayer::forward.
Step forward_batch(NormLayer& layer, const Batch& b);
/// A fresh layer of `def` in `dtype` applied once to `b` (no running state carried over).
Step apply_norm(const NormDef& def, DType dtype, const Batch& b);
/// `def` in training (true) or inference (false) mode.
NormDef with_training(NormDef def, bool training);

/// Builds the layout for `res` (from NormLayer::resolve); `mask` (the batch's padding mask,
/// input rank) restricts the statistics to real positions when non-null and non-empty.
GroupLayout group_layout(const Resolution& res, const xt::xarray<std::uint8_t>* mask);

/// Largest finite value of d: 65504 (float16), 3.3895e38 (bfloat16), 3.4028e38 (float32),
/// 1.7977e308 (float64).
double max_finite(DType d);

/// What keeping the statistics in dtype d (instead of the engine's double) would do, read
/// off exact statistics: eps as d holds it (0 when it underflows, e.g. 1e-12 in float16,
/// whose smallest subnormal is 5.96e-8), and the groups whose variance, or whose sum of
/// squares n*(var + mean^2) (what a one-pass accumulator holds), exceeds max_finite(d).
/// The engine itself never suffers these (it works in double): analyses report them so the
/// effects of half formats stay visible.
struct NarrowStats {
    double eps_in_dtype = 0;
    std::size_t var_overflow_groups = 0;
    std::size_t sumsq_overflow_groups = 0;
};
/// `batch`: the engine's batch moments (ForwardResult::batch: biased var, count per group);
/// a default-constructed Moments (inference with running statistics) has no groups.
NarrowStats narrow_stats(DType d, double eps, const Moments& batch);

/// Default tolerance of the "same output" verdicts (equivalence, padding invariance):
/// 8 x machine_eps(d) x max(1, max |finite y|), the max over the elements where `include`
/// (flat 0/1, as deviation() takes it) is set, or over all. Two correct computations that
/// each round once to d, or sum the same values in another order, differ by a few ulps.
double rounding_tolerance(DType d, const xt::xarray<double>& y,
                          const std::vector<std::uint8_t>* include = nullptr);

}  // namespace normlab
