// The "gaussian" source: i.i.d. normal values of a given shape, seeded per entry so that
// the same config gives the same bytes on every platform (data/random.hpp).

#include "data/random.hpp"
#include "data/source_impl.hpp"
#include "tensor/numbers.hpp"

namespace normlab {

/// Reads a required list of positive dimensions (shared with the other generators).
Shape read_positive_shape(ObjectReader& r, const std::string& key) {
    const Json& j = r.required(key);
    const std::vector<long long> dims = read_integers(j, r.at(key));
    if (dims.empty()) r.at(key).fail("expected at least one dimension");
    Shape shape;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] <= 0)
            r.at(key).child(i).fail("dimensions must be positive, but got " + std::to_string(dims[i]));
        shape.push_back(static_cast<std::size_t>(dims[i]));
        if (!checked_num_elements(shape)) r.at(key).fail("shape has too many elements");
    }
    return shape;
}

SourceData build_gaussian(const std::string& name, ObjectReader& r, const DataContext& ctx) {
    const Shape shape = read_positive_shape(r, "shape");
    const double mean = r.finite("mean", 0.0);
    const double std = r.nonnegative("std", 1.0);
    Rng rng(derive_seed(ctx.seed, name));
    SourceData d;
    Tensor t;
    t.dtype = ctx.dtype;
    // Drawn in double and rounded once to the dtype, exactly as Tensor::from_double would.
    if (ctx.dtype == DType::float64) {
        t.f64 = xt::xarray<double>::from_shape(shape);
        for (double& v : t.f64) v = rng.normal(mean, std);
    } else {
        t.f32 = xt::xarray<float>::from_shape(shape);
        for (float& v : t.f32) v = static_cast<float>(round_to(ctx.dtype, rng.normal(mean, std)));
    }
    d.tensor = std::move(t);
    return d;
}

}  // namespace normlab
