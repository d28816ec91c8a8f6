#pragma once
// Data-parallel normalisation without synchronised statistics: the batch is split along
// axis 0 into replicas (DataParallel's scatter, DistributedDataParallel's per-process
// batches, "ghost batch norm") and each slice is normalised with its own statistics.
#include <vector>

#include "norm/backward.hpp"
#include "norm/engine.hpp"

namespace normlab {

/// forward() on each slice [s_r, s_r + sizes[r]) of axis 0 of x viewed as `shape` (sizes
/// sum to shape[0]), with that slice's own batch statistics. out.y has `shape` and holds
/// every slice's output in place; out.mean, var, rstd and batch (mean, var, count) are
/// (R, ...keep-dims statistics shape of one slice), replica r's at index r of the leading
/// axis. in.weight and in.bias apply to every slice; in.mask is sliced with x when its
/// axis 0 has shape[0] entries and broadcast to every slice when it has 1. Given statistics
/// are refused (std::logic_error: with them there is nothing per replica to compute).
/// Throws InputError as forward().
void forward_replicas(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
                      const std::vector<std::size_t>& sizes, ForwardResult& out);

/// The backward pass of forward_replicas: backward() on each slice with that slice's
/// statistics (slot r of fwd's (R, ...) arrays) and dy's rows; dx (view `shape`, x's dtype)
/// holds every slice's in place, dweight and dbias are the sums over the replicas (the
/// parameters are shared, as DataParallel's gradient reduction adds them). `dy` as for
/// backward(). Throws InputError as backward().
void backward_replicas(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
                       const std::vector<std::size_t>& sizes, const ForwardResult& fwd, const xt::xarray<double>& dy,
                       BackwardResult& out);

}  // namespace normlab
