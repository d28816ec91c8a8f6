#pragma once
// The five normalization presets. Each only resolves the generic NormSpec (reduction axes,
// centring, parameter axes, eps) from its usual parameters and owns its running statistics;
// the arithmetic is engine.hpp's forward() for all of them. A norm knows tensors and plain
// values only: where its definition was written (file, JSON pointer) and where its input came
// from are its callers' business, so its errors name the offending key (NormError).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "norm/engine.hpp"
#include "tensor/errors.hpp"

namespace normlab {

/// The five norms (DESIGN.md glossary): BatchNorm (Ioffe and Szegedy 2015), LayerNorm (Ba et
/// al. 2016), InstanceNorm (Ulyanov et al. 2016), GroupNorm (Wu and He 2018), RMSNorm (Zhang
/// and Sennrich 2019).
enum class NormType { batchnorm, layernorm, instancenorm, groupnorm, rmsnorm };
/// What GroupNorm's weight and bias are given per: each channel (shape (C): the paper,
/// PyTorch, ONNX GroupNormalization opset 21) or each group (shape (G), each value applied
/// to the group's C/G channels: ONNX GroupNormalization opset 18).
enum class AffinePer { channel, group };
/// Framework whose defaults and rules a norm follows (DESIGN.md "Conventions").
enum class Convention { torch, onnx, keras, flax };

/// Config names ("batchnorm", ..., "torch", ...) of a norm type and a convention, and the
/// lists of all of them in declaration order (for messages and `normlab list`).
std::string norm_type_name(NormType t);
std::string convention_name(Convention c);
const std::vector<std::string>& norm_type_names();
const std::vector<std::string>& convention_names();

/// Default eps of a norm type under a convention for inputs of `dtype`: torch 1e-5 (RMSNorm:
/// the machine epsilon of the type the arithmetic is done in, compute_dtype(dtype): float32's
/// 1.19e-7 for float16/bfloat16/float32 inputs, float64's 2.2e-16 for float64, as PyTorch
/// >= 2.6 resolves eps=None, pytorch/pytorch#142848; the storage type's 0.0078 for bfloat16
/// would swamp a mean square of 0.0034), onnx 1e-5, keras 1e-3 (RMSNorm 1e-6), flax 1e-5
/// for BatchNorm and 1e-6 for the others.
double default_eps(NormType t, Convention c, DType dtype);
/// Default momentum as the convention states it: torch 0.1 (weight of the new batch);
/// onnx 0.9, keras 0.99, flax 0.99 (weight of the old running value).
double default_momentum(Convention c);

struct NormDef;
/// The weight m of the new batch in a running-statistics update new = (1 - m) old + m batch,
/// from the norm's momentum in its convention's sense (torch: m itself; onnx, keras, flax:
/// 1 - momentum); nullopt for momentum null (PyTorch's cumulative average, m = 1/steps).
std::optional<double> new_batch_weight(const NormDef& d);
/// Whether the running variance is updated from the unbiased batch variance (n/(n-1) times
/// the biased one): PyTorch's BatchNorm and InstanceNorm; the other conventions use the
/// biased variance they normalise with.
bool unbiased_running_var(const NormDef& d);
/// Whether the norm keeps running statistics: BatchNorm unless track_running_stats is
/// false, InstanceNorm only when it is true (PyTorch's defaults), no other type.
bool keeps_running_stats(const NormDef& d);
/// Whether the norm has affine parameters: `affine`, or its default, true except for
/// InstanceNorm (PyTorch's BatchNorm, GroupNorm and LayerNorm default affine=True,
/// InstanceNorm affine=False).
bool is_affine(const NormDef& d);
/// A norm's momentum as it resolves, in its convention's sense, for messages: "null"
/// (PyTorch's cumulative average) or the number, the convention's default when not given.
std::string momentum_text(const NormDef& d);

/// A norm that does not fit its input or its own parameters. The message names the norm and
/// the data; key() is the norm's key at fault ("num_groups", "weight", "running_mean", "mask",
/// ...; empty for the norm as a whole; "param_axes/1" for an entry of a list, '/' between the
/// parts), so that a caller that knows where the norm was written can point there (the
/// config module: "file: /norms/<name>/<key>: message").
/// data() names the data the norm met when that is what failed, empty otherwise.
/// reason() is the message without the norm and the data, for a caller whose user named
/// neither (a command line); empty `reason`: the whole message.
class NormError : public InputError {
public:
    NormError(std::string norm, std::string key, const std::string& what, std::string data = {},
              std::string reason = {}, std::vector<std::string> related_keys = {})
        : InputError(what), m_norm(std::move(norm)), m_key(std::move(key)), m_data(std::move(data)),
          m_reason(reason.empty() ? what : std::move(reason)), m_related(std::move(related_keys)) {}
    const std::string& norm() const { return m_norm; }  ///< NormDef::name
    const std::string& key() const { return m_key; }
    const std::string& data() const { return m_data; }  ///< the data's name, or ""
    const std::string& reason() const { return m_reason; }
    /// Other keys of the norm the message depends on: the axes a param_axes entry was
    /// checked against, so that an override of those is named for it.
    const std::vector<std::string>& related_keys() const { return m_related; }

private:
    std::string m_norm, m_key, m_data, m_reason;
    std::vector<std::string> m_related;
};

/// How a weight, bias or running statistic is initialised.
struct ParamInit {
    enum class Kind { ones, zeros, constant, values, generated };
    Kind kind = Kind::ones;
    double constant = 0;         ///< Kind::constant: every element
    xt::xarray<double> values;   ///< Kind::values: as given (a list or an npy file)
    /// Kind::generated: the values for a shape, known only when the norm meets its data
    /// (seeded random draws, bound where the config is resolved).
    std::function<xt::xarray<double>(const Shape&)> generate;
};

/// A norm as the config defines it; unset optionals take the convention's defaults.
struct NormDef {
    std::string name;            ///< the key under "norms"; named in every error
    NormType type = NormType::layernorm;
    Convention convention = Convention::torch;
    std::optional<double> eps;
    std::optional<bool> affine;
    std::optional<ParamInit> weight, bias;
    std::optional<long long> channel_axis;            ///< batchnorm, instancenorm, groupnorm
    std::optional<std::vector<long long>> normalized_shape;  ///< layernorm, rmsnorm
    std::optional<std::vector<long long>> axes;              ///< layernorm, rmsnorm
    /// layernorm, rmsnorm: the normalized axes the weight and bias span (negative counts from
    /// the end), each broadcast along the other normalized axes: Flax's `feature_axes`, an
    /// ONNX LayerNormalization Scale/B of fewer dims than the normalized shape. Unset: every
    /// normalized axis (PyTorch's elementwise_affine parameters of normalized_shape).
    std::optional<std::vector<long long>> param_axes;
    long long num_groups = 0;                         ///< groupnorm
    std::optional<bool> training;
    /// Running-statistics momentum in the convention's sense; nullopt with momentum_null
    /// set means "cumulative average" (PyTorch momentum=None).
    std::optional<double> momentum;
    bool momentum_null = false;
    std::optional<bool> track_running_stats;
    std::optional<ParamInit> running_mean, running_var;
    bool mask = false;           ///< statistics from real positions only
    EpsPlacement eps_placement = EpsPlacement::inside_sqrt;
    VarianceEstimator variance = VarianceEstimator::biased;
    double weight_offset = 0;    ///< rmsnorm: 1 scales by (1 + weight) (Gemma)
    AffinePer affine_per = AffinePer::channel;                  ///< groupnorm
    AffineRounding affine_rounding = AffineRounding::once;      ///< float16/bfloat16 outputs
    /// batchnorm: data-parallel replicas, each normalising its slice of axis 0 (DataParallel,
    /// DistributedDataParallel). At most one of the two is set: the per-replica sample counts
    /// (summing to N), or a number R of equal slices (N divisible by R).
    std::vector<long long> replica_sizes;
    long long replica_count = 0;
    /// batchnorm with replicas: false = each replica's own statistics (DataParallel, DDP
    /// without SyncBatchNorm, ghost batch norm); true = the statistics of the whole batch,
    /// each replica weighted by its count (SyncBatchNorm).
    bool sync = false;
    bool has_replicas() const { return !replica_sizes.empty() || replica_count > 0; }
    /// Arithmetic of the output for float32 data ("float": the float path; "double": x - mean
    /// and the scaling in double); unset: default_compute(), the float path where the CPU has
    /// FMA instructions. Other dtypes always use double.
    std::optional<Compute> compute;
};

/// What a norm does to a batch of a given shape: pure shape logic, no data touched.
struct Resolution {
    NormSpec spec;               ///< in terms of view_shape
    Shape input_shape;
    Shape view_shape;            ///< the shape the engine sees (GroupNorm splits C into (G, C/G))
    Axes reduction_axes;         ///< in terms of the input's axes (GroupNorm: incl. the channel axis)
    /// Keep-dims statistics shape, in view_shape's rank. With per-replica statistics (see
    /// replicas) it is one replica's: ForwardResult's mean/var/rstd/batch are then
    /// (R, ...stats_shape), replica r's at index r of the leading axis.
    Shape stats_shape;
    /// Elements of stats_shape, and elements per statistic (per-replica statistics: the
    /// smallest replica's).
    std::size_t num_stats = 0, elems_per_stat = 0;
    /// Per-replica sample counts (along axis 0) when each replica normalises its slice with
    /// its own statistics (BatchNorm training with replicas, sync false); empty otherwise.
    std::vector<std::size_t> replicas;
    Shape param_shape;           ///< shape of weight (and bias) as the user gives them
    /// The input axes param_shape lies along: the channel axis (BatchNorm, InstanceNorm,
    /// GroupNorm, per channel or per group), else the normalized axes or param_axes.
    Axes param_axes;
    bool has_weight = false, has_bias = false;
    std::size_t num_params = 0;  ///< weight + bias elements
    std::size_t channel_axis = 0;  ///< canonical, for the norms that have one
    std::size_t channels = 0;
    bool use_batch_stats = true;   ///< false: normalise with the running statistics
    bool update_running = false;   ///< training step updates running statistics
    double eps = 0;
};

/// The engine inputs of one step, in the view's layout, kept so that its backward pass sees
/// exactly what its forward saw: weight and bias (the view's parameter shape: GroupNorm's
/// (G, C/G)), the padding mask (laid out for the view) and, in inference, the running
/// statistics broadcast to the statistics shape.
struct StepInputs {
    xt::xarray<double> weight, bias, given_mean, given_var;
    xt::xarray<std::uint8_t> mask;
    bool has_weight = false, has_bias = false, has_mask = false, given = false;
    /// Pointers to the arrays present, as forward() and backward() take them.
    ForwardInputs pointers() const;
};

/// One step's output and statistics (statistics in Resolution::stats_shape).
struct StepResult {
    Resolution res;
    ForwardResult fwd;           ///< fwd.y has the input's shape
    StepInputs in;               ///< what the engine was given
};

/// Gradients of one step in the user's shapes.
struct StepGradients {
    Tensor dx;                   ///< dL/dx: the input's shape and dtype
    /// dL/dweight and dL/dbias in Resolution::param_shape ((C) for GroupNorm, (G) with
    /// affine_per group); shape {0} when the norm has no such parameter.
    xt::xarray<double> dweight = xt::xarray<double>::from_shape(Shape{0});
    xt::xarray<double> dbias = xt::xarray<double>::from_shape(Shape{0});
};

/// Back-propagates the upstream gradient `dy` (the input's shape) through step `s`, which
/// NormLayer::forward computed on `x`: engine backward() (norm/backward.hpp: formulas and
/// sources) on the step's view, inputs and statistics, with dx reshaped to the input's shape
/// and the parameter gradients to the parameters' shape (per-replica statistics: each
/// replica's backward on its slice, parameter gradients summed, replicas.hpp). Batch
/// statistics couple the elements of a group; running statistics (inference) are
/// constants. Throws InputError when dy's shape is not the input's.
StepGradients step_backward(const Tensor& x, const StepResult& s, const xt::xarray<double>& dy);

/// A bound, stateful normalization layer: it keeps running statistics across steps.
class NormLayer {
public:
    NormLayer(NormDef def, DType dtype);

    const NormDef& def() const { return m_def; }
    /// Resolves axes and shapes for `x_shape` with the data's channel axis; `data_name` names
    /// the input in messages. Throws NormError naming the norm, the data and the key at fault
    /// for every PyTorch shape error: channels not divisible by num_groups, normalized_shape
    /// not the trailing shape, weight/bias/running statistics of the wrong shape (GroupNorm:
    /// naming the per-channel and the per-group shape), axes out of range, rank too small;
    /// for param_axes out of range, repeated or outside the normalized axes (key
    /// "param_axes/<i>", the entry at fault);
    /// and for replicas that do not split the batch (sizes not summing to N, R not dividing
    /// N, channels on axis 0) or, unsynchronised in training, a replica with one value per
    /// channel (PyTorch's error on that replica).
    Resolution resolve(const Shape& x_shape, std::size_t data_channel_axis,
                       const std::string& data_name) const;
    /// Throws NormError (key "mask") when the norm's mask is set and its input, `data_name`,
    /// has no padding mask: what forward() refuses.
    void require_mask(bool data_has_mask, const std::string& data_name) const;
    /// One forward step on `x` (any shape; channels on `channel_axis`): training with batch
    /// statistics (updating the running statistics: new = (1-m)*old + m*batch, running_var
    /// from the unbiased variance under the torch convention, biased otherwise; m = 1/steps
    /// for momentum null) or inference with the running statistics. BatchNorm with
    /// unsynchronised replicas normalises each slice with its own statistics and updates the
    /// running statistics from replica 0's, as DataParallel and DDP's default buffer
    /// broadcast keep them; synchronised, the whole batch's statistics are used, which is
    /// SyncBatchNorm's count-weighted merge of the per-replica moments. `mask` (1 = real
    /// position; x's rank, each dim x's or 1) is the padding mask the statistics skip when
    /// the norm's `mask` is set; nullptr when the input has none. Throws NormError as
    /// resolve(), for a norm with mask set and no mask given, and for BatchNorm/InstanceNorm
    /// training with one value per channel/instance (the running statistics are then left
    /// untouched).
    StepResult forward(const Tensor& x, std::size_t channel_axis, const std::string& data_name,
                       const xt::xarray<std::uint8_t>* mask = nullptr);
    /// forward() into `out`, reusing its buffers when the shapes match (no fresh memory
    /// touched on repeated steps).
    void forward(const Tensor& x, std::size_t channel_axis, const std::string& data_name,
                 const xt::xarray<std::uint8_t>* mask, StepResult& out);

    /// Running statistics of shape (C), empty until the first step binds C.
    const xt::xarray<double>& running_mean() const { return m_running_mean; }
    const xt::xarray<double>& running_var() const { return m_running_var; }
    long long num_batches_tracked() const { return m_steps; }
    bool has_running_stats() const;

private:
    NormDef m_def;
    DType m_dtype;
    // Shape {0} until the first step binds C (a default xarray is a 0-d array of size 1).
    xt::xarray<double> m_running_mean = xt::xarray<double>::from_shape(Shape{0});
    xt::xarray<double> m_running_var = xt::xarray<double>::from_shape(Shape{0});
    long long m_steps = 0;
};

/// A padding mask (rank of the input, dims equal to the input's or 1) laid out for
/// r.view_shape: GroupNorm splits the channel dim into (G, C/G).
xt::xarray<std::uint8_t> view_mask(const xt::xarray<std::uint8_t>& m, const Resolution& r);
/// The same row-major values viewed with another shape of equal size.
Tensor reshaped(Tensor t, const Shape& shape);

/// Fills an array of `shape` from an init; a list or npy must have exactly that shape
/// (a flat list is accepted when the shape has one axis). `what` is the parameter's key
/// ("weight", "running_var", ...). Throws NormError (norm `norm`, key `what`) otherwise.
xt::xarray<double> materialize(const ParamInit& init, const Shape& shape, const std::string& what,
                               const std::string& norm);

}  // namespace normlab
