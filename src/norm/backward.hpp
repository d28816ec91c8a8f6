#pragma once
// The one generic normalization backward pass, the derivative of engine.hpp's forward():
// every preset (BatchNorm, LayerNorm, InstanceNorm, GroupNorm, RMSNorm) and every option of
// NormSpec goes through the same formula.
//
// Notation, per statistic (group) s with n real positions (all of them without a mask):
//   mu   = sum_real x / n                          (0 when not centring)
//   var0 = sum_real (x - mu)^2 / n                 (the mean square when not centring)
//   v    = var0, or var0 * n / (n - 1) (unbiased estimator)
//   r    = rstd = (v + eps)^-1/2 (eps inside the square root), or 1 / (sqrt(v) + eps);
//          0 where v = eps = 0 with NormSpec::zero_rstd_at_zero_var (a constant: no terms)
//   xhat = (x - mu) * r,  y = xhat * (weight_offset + w) + b,  at every position (padded too)
// With g = dy * (weight_offset + w), the chain rule through r and mu gives, for position j
// of group s (m_j = 1 at real positions, 0 at padded ones):
//   dx_j = r * g_j + m_j * (c1 + c2 * (x_j - mu))
//   c1 = -r * sum_all(g) / n                       (0 when not centring)
//   c2 = (2 / n) * dv/dvar0 * dr/dv * sum_all(g * (x - mu))
//   dv/dvar0 = 1 (biased) or n / (n - 1) (unbiased)
//   dr/dv = -r^3 / 2 (eps inside the square root) or -r^2 / (2 sqrt(v)) (eps added to the std)
// where sum_all runs over every position of the group, padded ones included: padded outputs
// are normalised with the real positions' statistics, so their upstream gradient reaches
// the real inputs through mu and r, while only real inputs move the statistics (m_j). The
// derivative of var0 through mu vanishes because sum_real (x - mu) = 0. For LayerNorm
// (centred, biased, eps inside, no mask) this is the textbook
//   dx = r * (g - mean(g) - xhat * mean(g * xhat))
// of Ioffe & Szegedy, "Batch Normalization" (2015), section 3, and of PyTorch's CPU kernels
// LayerNormBackwardKernelImplInternal (aten/src/ATen/native/cpu/layer_norm_kernel.cpp) and
// batch_norm_backward_cpu_template (aten/src/ATen/native/Normalization.cpp), which also
// write it as dx = a * dy + b * x + c per group. With given (running) statistics, mu and r are
// constants: dx = r * g (PyTorch's batch_norm backward in eval mode).
// The parameter gradients sum over every position of each parameter element:
//   dweight = sum dy * xhat,  dbias = sum dy.
#include "norm/engine.hpp"

namespace normlab {

/// Gradients of one forward pass with respect to its input and affine parameters.
struct BackwardResult {
    Tensor dx;                  ///< dL/dx: the view shape, x's dtype (rounded once from double)
    /// dL/dweight in the weight's shape (x dims at spec.param_axes); shape {0} without weight.
    xt::xarray<double> dweight = xt::xarray<double>::from_shape(Shape{0});
    /// dL/dbias in the bias's shape; shape {0} without bias.
    xt::xarray<double> dbias = xt::xarray<double>::from_shape(Shape{0});
};

/// Back-propagates the upstream gradient `dy` through forward(x, shape, spec, in) whose
/// result is `fwd` (mean, var, rstd and, with batch statistics, batch.count are read; y is
/// not). `in` is the same ForwardInputs the forward took: weight and bias (their presence
/// decides whether dweight and dbias are computed), the mask, and given statistics (when
/// set, the statistics are constants and have no gradient terms). `dy` holds x's element
/// count in row-major order, shaped like x or like `shape`.
/// Formulas and sources: see the top of this header. Sums are accumulated in double over
/// chunks fixed by the shape (as the forward's) and merged in chunk order, so the result
/// is bit-identical for every thread count; dx is rounded once to x's dtype (float16 and
/// bfloat16 by round_to). A statistic whose variance is 0 with eps added to the standard
/// deviation has no derivative (sqrt at 0) and gives NaN in its group; a fully masked
/// group gives NaN as its forward does, unless dy is 0 throughout it (a masked loss): its
/// outputs then do not reach the loss, so with finite x there it adds nothing to dweight
/// and its dx is 0 (what PyTorch gives for the norm run on every position, loss masked).
/// Reuses out.dx's buffer when its shape fits, so repeated calls do not touch fresh memory.
/// Throws InputError when dy, weight, bias, mask or the statistics have the wrong shape.
void backward(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
              const ForwardResult& fwd, const xt::xarray<double>& dy, BackwardResult& out);
/// backward over x's own shape, returning a fresh result.
BackwardResult backward(const Tensor& x, const NormSpec& spec, const ForwardInputs& in, const ForwardResult& fwd,
                        const xt::xarray<double>& dy);

}  // namespace normlab
