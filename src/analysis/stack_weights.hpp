#pragma once
// The initial weights of a residual stack bound to data with D features: given ones as
// they are, the others drawn from the stack's init with the run's portable RNG.
#include <cstdint>
#include <string>

#include "stack/model.hpp"

namespace normlab {

/// Weights for `def` at feature size `features`, in `dtype`: each slot of weight_slots()
/// is taken from def.given when present (used as given: DeepNorm's beta is not applied),
/// otherwise drawn from def.init for its (fan_in, fan_out) and multiplied by
/// def.init_scale() (DeepNorm's beta). Draws come from the stream
/// derive_seed(seed, "stack/<name>/<weight>") in row-major (layer, fan_in, fan_out) order,
/// straight into the dtype's storage (no double copy of a large stack). Throws StackError
/// (key weights/<name>) when a given weight's shape is not the slot's.
StackWeights make_stack_weights(const StackDef& def, std::size_t features, DType dtype, std::uint64_t seed);

}  // namespace normlab
