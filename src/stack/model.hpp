#pragma once
// A residual stack bound to data of one shape: per-layer norm instances (own weight, bias
// and running statistics), the weights, and the forward pass that keeps what the backward
// pass needs. Dense products go through stack/kernels.hpp (xtensor-blas).
#include <cstdint>
#include <string>
#include <vector>

#include "norm/backward.hpp"
#include "norm/presets.hpp"
#include "stack/stack.hpp"
#include "tensor/tensor.hpp"

namespace normlab {

/// A stack's weights in the run dtype, layer axis first (see weight_slots): w (L, D, D)
/// for linear blocks; w1 (L, D, H) and w2 (L, H, D) for ffn blocks; empty otherwise.
struct StackWeights {
    Tensor w, w1, w2;
};

/// What one forward pass keeps of block l (x_{l-1} -> x_l) for the backward pass.
struct BlockTrace {
    StepResult norm;    ///< N's statistics; norm.fwd.y is N's output when it feeds F (pre, sandwich)
    StepResult norm2;   ///< sandwich: N2's statistics and output
    /// The norm's input when it is not x_{l-1}: alpha x + F(x) (post, deepnorm); F's output
    /// (sandwich, the input of N2). Data shape.
    Tensor s;
    Tensor a;           ///< ffn: the pre-activation z @ W1, (rows, H)
    double branch_rms = 0;   ///< rms of F's output (NaN without a branch: norm_only)
    double norm_in_rms = 0;  ///< rms of the input of N (NaN without a norm: none)
};

/// The activations of one forward pass.
struct StackTrace {
    std::vector<Tensor> x;          ///< x_0 (the input) ... x_L, each in the data's shape
    std::vector<BlockTrace> blocks; ///< blocks[l-1] describes block l
    bool has_final = false;         ///< pre with final_norm: y = N_final(x_L)
    StepResult final_norm;          ///< its statistics and output
    /// The stack output y: N_final(x_L) with a final norm, x_L otherwise.
    const Tensor& y() const { return has_final ? final_norm.fwd.y : x.back(); }
};

/// What backward() keeps beyond the per-layer summaries.
struct StackGradOptions {
    bool keep_dx = false;        ///< StackGrads::dx, every d loss / d x_l
    bool keep_params = false;    ///< StackGrads::dw..., dgamma...: every layer's parameter gradients
};

/// The gradients of one backward pass. Summaries always; full tensors when asked.
struct StackGrads {
    std::vector<double> grad_x_rms;     ///< L+1: rms of d loss / d x_l over real rows
    std::vector<double> grad_w_norm;    ///< L: Frobenius norm of d loss / d W (W2 for ffn); NaN without weights
    std::vector<double> grad_w1_norm;   ///< L: ffn's W1; NaN otherwise
    std::vector<double> grad_gamma_norm;///< L: Frobenius norm of d loss / d weight of N; NaN without
    std::vector<double> grad_gamma2_norm;///< L: the same for sandwich's N2; NaN for other placements
    std::vector<Tensor> dx;             ///< keep_dx: d loss / d x_l, l = 0 ... L, data shape, run dtype
    /// keep_params: d loss / d w, w1, w2 in the weights' shapes (L, fan_in, fan_out), run dtype.
    Tensor dw, dw1, dw2;
    /// keep_params: d loss / d weight and bias of each instance of N, (L, *param_shape);
    /// "2" for sandwich's N2, "_final" for pre's final norm ((1, *param_shape)); shape {0} when absent.
    xt::xarray<double> dgamma, dbeta, dgamma2, dbeta2, dgamma_final, dbeta_final;
};

/// Bytes a stack bound to data of `data_shape` (features last) holds through one forward
/// and backward pass in `dtype`: its weights (given ones also as the parsed doubles), the
/// activations the forward keeps, the backward's buffers, and with `keep_grads` every
/// layer's d loss / d x_l and weight gradients. For memory estimates before anything is
/// built; saturates at SIZE_MAX.
std::size_t stack_memory_bytes(const StackDef& def, const Shape& data_shape, DType dtype, bool keep_grads);

/// A StackDef bound to data of one shape, (N, D) or (B, T, D) with the features last.
class Stack {
public:
    /// Binds `def` to data `data_name` of shape `data_shape` in `dtype`, after check().
    /// Weights must have the shapes weight_slots(def, D) names, in `dtype` (StackError
    /// "weights/<name>" otherwise).
    Stack(const StackDef& def, StackWeights weights, const Shape& data_shape, DType dtype,
          const std::string& data_name);

    /// Everything binding `def` to data of `data_shape` (features on the last axis) would
    /// refuse, without touching data or drawing weights: StackError (naming the stack and
    /// the data) when the data has no feature axis (rank other than 2 or 3, or
    /// `channel_axis` not the last axis), the dtype is not float32 or float64, an ffn has no
    /// hidden size, or a given weight's shape is not its slot's; NormError when the norm
    /// does not fit the data (e.g. a normalized_shape other than [D]).
    static void check(const StackDef& def, const Shape& data_shape, std::size_t channel_axis, DType dtype,
                      const std::string& data_name);

    const StackDef& def() const { return m_def; }
    const StackWeights& weights() const { return m_weights; }
    std::size_t rows() const { return m_rows; }
    std::size_t features() const { return m_features; }
    const Shape& data_shape() const { return m_shape; }
    DType dtype() const { return m_dtype; }

    /// Runs x (data shape, the stack's dtype) through every block, keeping the activations
    /// in `trace` (its buffers are reused when the shapes match). `mask` is the data's padding
    /// mask, 1 = real position, x's rank with each dim x's or 1 (shape {0}: none); norms with
    /// mask: true take their statistics from real positions only. Under a norm whose statistics
    /// each lie within a row (LayerNorm or RMSNorm over the features, GroupNorm on (N, D)) a
    /// row without any real position would have no statistics (NaN): it is normalised over all
    /// its own values instead, as PyTorch does, and real rows keep their mask. Nothing real
    /// depends on a padded row, and with d loss / d y 0 there its gradient stays 0, so no
    /// weight gradient counts it (unless the padded row itself gives NaN: constant padding
    /// with eps 0). Norms in training mode update their running statistics. Throws NormError
    /// from the norms (e.g. mask: true without a mask).
    void forward(const Tensor& x, const xt::xarray<std::uint8_t>& mask, StackTrace& trace);

    /// Back-propagates dy = d loss / d y (y's shape, the stack's dtype) through the pass
    /// `trace` recorded (which must come from this stack's last forward): every block's
    /// branch by the chain rule through its products (xtensor-blas), its activation and the
    /// residual sum (scaled by alpha for deepnorm), every norm by the generic norm backward
    /// (norm/backward.hpp). Gradients flow in the run dtype between blocks; parameter
    /// gradients of the norms are summed in double. Weights are not updated.
    void backward(const StackTrace& trace, const Tensor& dy, StackGrads& grads,
                  const StackGradOptions& opts = {});

    /// A copy whose norms run in inference mode with this stack's current running
    /// statistics (norms without running statistics are unchanged).
    Stack eval_copy() const;

    /// Per-layer norm instances: N of block l is norms()[l-1]; N2 (sandwich) and the final
    /// norm (pre) are separate instances.
    const std::vector<NormLayer>& norms() const { return m_norms; }
    const std::vector<NormLayer>& norms2() const { return m_norms2; }
    const std::vector<NormLayer>& final_norm() const { return m_final; }  ///< 0 or 1 entries

    /// One per row of the data: 1 for a real row, 0 for padding (all 1 without a mask).
    const std::vector<unsigned char>& row_mask() const { return m_row_mask; }

    /// The norm's affine weight and bias of a layer instance in its view shape (what the
    /// engine takes), empty (shape {0}) when the norm has none.
    const xt::xarray<double>& norm_weight() const { return m_norm_weight; }
    const xt::xarray<double>& norm_bias() const { return m_norm_bias; }

private:
    template <class T> void forward_impl(const Tensor& x, StackTrace& trace);
    /// F(z) of block l into f (data shape, the run dtype); ffn keeps its pre-activation in bt.a.
    template <class T> void branch(std::size_t l, const Tensor& z, BlockTrace& bt, Tensor& f);
    template <class T> void backward_impl(const StackTrace& trace, const Tensor& dy, StackGrads& g,
                                          const StackGradOptions& opts);
    /// d loss / d z of block l's branch into dz (data shape) from df = d loss / d F, and
    /// the weight gradients' norms (with `keep`, the gradients themselves) into g.
    template <class T> void branch_backward(std::size_t l, const Tensor& z, const BlockTrace& bt,
                                            const T* df, Tensor& dz, StackGrads& g, bool keep);
    /// dx of one norm instance: x its input, st its forward, dy the upstream gradient in T;
    /// writes the parameter gradients' norms/tensors for layer slot l of `dgamma`/`dbeta`.
    template <class T> const Tensor& norm_backward(const Tensor& x, const StepResult& st, const T* dy,
                                                   double& gamma_norm, xt::xarray<double>* dgamma,
                                                   xt::xarray<double>* dbeta, std::size_t l);
    void run_norm(NormLayer& layer, const Tensor& in, StepResult& out);
    void set_mask(const xt::xarray<std::uint8_t>& mask);

    StackDef m_def;
    StackWeights m_weights;
    Shape m_shape;
    DType m_dtype;
    std::string m_data_name;
    std::size_t m_rows = 0, m_features = 0, m_hidden = 0;
    std::vector<NormLayer> m_norms, m_norms2, m_final;
    xt::xarray<double> m_norm_weight = xt::xarray<double>::from_shape(Shape{0});
    xt::xarray<double> m_norm_bias = xt::xarray<double>::from_shape(Shape{0});
    /// The mask the norms take: the data's (shape {0}: none), with the rows that have no real
    /// position set to ones where each statistic lies within a row (forward()).
    xt::xarray<std::uint8_t> m_norm_mask = xt::xarray<std::uint8_t>::from_shape(Shape{0});
    bool m_stats_within_rows = false;     ///< the norm's statistics each lie within one row
    std::vector<unsigned char> m_row_mask;
    Tensor m_f, m_h;                      ///< scratch: F's output, the ffn's activation
    Tensor m_g, m_gn, m_dz, m_dh;        ///< backward scratch: d/dx_l, d/dx_{l-1}, d/dz, d/dh
    xt::xarray<double> m_dyd;             ///< the norms' upstream gradient in double
    BackwardResult m_nb;                  ///< the norm backward's result buffers
};

}  // namespace normlab
