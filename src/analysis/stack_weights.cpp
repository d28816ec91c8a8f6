#include "analysis/stack_weights.hpp"

#include "data/random.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

template <class T>
void draw(xt::xarray<T>& out, const Shape& shape, const InitDistribution& dist, double factor, Rng& rng) {
    out.resize(shape);
    const double s = dist.scale * factor;
    if (dist.uniform)
        for (auto& v : out) v = static_cast<T>(s * (2.0 * rng.uniform() - 1.0));
    else
        for (auto& v : out) v = static_cast<T>(s * rng.normal());
}

}  // namespace

StackWeights make_stack_weights(const StackDef& def, std::size_t features, DType dtype, std::uint64_t seed) {
    StackWeights w;
    for (const auto& slot : weight_slots(def, features)) {
        Tensor& t = slot.name == "w" ? w.w : slot.name == "w1" ? w.w1 : w.w2;
        t.dtype = dtype;
        const xt::xarray<double>* given = nullptr;
        for (const auto& [name, values] : def.given)
            if (name == slot.name) given = &values;
        if (given) {
            const Shape got(given->shape().begin(), given->shape().end());
            if (got != slot.shape)
                throw StackError(def.name, "weights/" + slot.name,
                                 "stack " + quoted_text(def.name) + ": weight " + quoted_text(slot.name) + " must have shape " +
                                     format_shape(slot.shape) + " (layers, fan_in, fan_out), but the given array has " +
                                     format_shape(got));
            t = Tensor::from_double(*given, dtype);
            continue;
        }
        Rng rng(derive_seed(seed, "stack/" + def.name + "/" + slot.name));
        const InitDistribution dist = init_distribution(def.init, slot.shape[1], slot.shape[2]);
        if (dtype == DType::float64) draw(t.f64, slot.shape, dist, def.init_scale(), rng);
        else draw(t.f32, slot.shape, dist, def.init_scale(), rng);
        if (dtype == DType::float16 || dtype == DType::bfloat16)  // keep Tensor's invariant
            for (auto& v : t.f32) v = static_cast<float>(round_to(dtype, v));
    }
    return w;
}

}  // namespace normlab
