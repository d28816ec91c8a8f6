#include "norm/replicas.hpp"

#include <algorithm>
#include <stdexcept>

#include "tensor/errors.hpp"

namespace normlab {

namespace {

// Rows [first, first + n) of axis 0 of the row-major values `a` viewed as shape s, with
// shape s and axis 0 = n (a slice of axis 0 is one contiguous block).
template <class T>
xt::xarray<T> rows(const T* a, const Shape& s, std::size_t first, std::size_t n) {
    Shape rs = s;
    rs[0] = n;
    const std::size_t per = s[0] ? num_elements(s) / s[0] : 0;
    xt::xarray<T> out = xt::xarray<T>::from_shape(rs);
    std::copy_n(a + first * per, n * per, out.data());
    return out;
}

// Copies `part` into slot r of `all`, shape (R, ...part's shape).
void put(xt::xarray<double>& all, std::size_t r, const xt::xarray<double>& part) {
    std::copy_n(part.data(), part.size(), all.data() + r * part.size());
}

}  // namespace

void forward_replicas(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
                      const std::vector<std::size_t>& sizes, ForwardResult& out) {
    if (in.given_mean || in.given_var) throw std::logic_error("forward_replicas: given statistics");
    if (shape.empty() || x.size() != num_elements(shape))
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(shape));
    std::size_t total = 0;
    for (std::size_t n : sizes) total += n;
    if (sizes.empty() || total != shape[0])
        throw InputError("replicas of " + std::to_string(total) + " samples in all do not split axis 0 of shape " +
                         format_shape(shape));

    Shape rs = keepdims_shape(shape, spec.reduction_axes);
    rs.insert(rs.begin(), sizes.size());
    out.y.dtype = x.dtype;
    if (x.dtype == DType::float64) out.y.f64 = xt::xarray<double>::from_shape(shape);
    else out.y.f32 = xt::xarray<float>::from_shape(shape);
    for (auto* a : {&out.mean, &out.var, &out.rstd, &out.batch.mean, &out.batch.var, &out.batch.count})
        *a = xt::xarray<double>::from_shape(rs);

    const bool slice_mask = in.mask && in.mask->dimension() == shape.size() && in.mask->shape()[0] == shape[0];
    const Shape ms = in.mask ? Shape(in.mask->shape().begin(), in.mask->shape().end()) : Shape{};
    const std::size_t per = num_elements(shape) / shape[0];
    std::size_t first = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
        Tensor xr;
        xr.dtype = x.dtype;
        if (x.dtype == DType::float64) xr.f64 = rows(x.f64.data(), shape, first, sizes[r]);
        else xr.f32 = rows(x.f32.data(), shape, first, sizes[r]);
        xt::xarray<std::uint8_t> mr;
        ForwardInputs ir = in;
        if (slice_mask) {
            mr = rows(in.mask->data(), ms, first, sizes[r]);
            ir.mask = &mr;
        }
        const ForwardResult fr = forward(xr, spec, ir);
        if (x.dtype == DType::float64) std::copy_n(fr.y.f64.data(), fr.y.size(), out.y.f64.data() + first * per);
        else std::copy_n(fr.y.f32.data(), fr.y.size(), out.y.f32.data() + first * per);
        put(out.mean, r, fr.mean);
        put(out.var, r, fr.var);
        put(out.rstd, r, fr.rstd);
        put(out.batch.mean, r, fr.batch.mean);
        put(out.batch.var, r, fr.batch.var);
        put(out.batch.count, r, fr.batch.count);
        first += sizes[r];
    }
}

}  // namespace normlab
