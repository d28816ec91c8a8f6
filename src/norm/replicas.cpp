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

// Slot r of `all`, shape (R, ...s), as an array of shape s.
xt::xarray<double> slot(const xt::xarray<double>& all, std::size_t r, const Shape& s) {
    xt::xarray<double> out = xt::xarray<double>::from_shape(s);
    std::copy_n(all.data() + r * out.size(), out.size(), out.data());
    return out;
}

// x's values viewed as `shape` split along axis 0: sizes sum to shape[0].
void check_split(const Tensor& x, const Shape& shape, const std::vector<std::size_t>& sizes) {
    if (shape.empty() || x.size() != num_elements(shape))
        throw InputError("cannot view input of shape " + format_shape(x.shape()) + " as " + format_shape(shape));
    std::size_t total = 0;
    for (std::size_t n : sizes) total += n;
    if (sizes.empty() || total != shape[0])
        throw InputError("replicas of " + count_noun(total, "sample") + " in all do not split axis 0 of shape " +
                         format_shape(shape));
}

// Replica r's slice of x (rows [first, first + n) of `shape`) and of the mask, when the mask
// has a row per sample (else it broadcasts over every slice as it is). in.mask points into
// the slice itself, so a Slice is filled in place and never copied.
struct Slice {
    Tensor x;
    xt::xarray<std::uint8_t> mask;
    ForwardInputs in;
    Slice() = default;
    Slice(const Slice&) = delete;
    Slice& operator=(const Slice&) = delete;
};
void take_slice(Slice& s, const Tensor& x, const Shape& shape, const ForwardInputs& in, std::size_t first,
                std::size_t n) {
    s.x.dtype = x.dtype;
    if (x.dtype == DType::float64) s.x.f64 = rows(x.f64.data(), shape, first, n);
    else s.x.f32 = rows(x.f32.data(), shape, first, n);
    s.in = in;
    if (in.mask && in.mask->dimension() == shape.size() && in.mask->shape()[0] == shape[0]) {
        s.mask = rows(in.mask->data(), Shape(in.mask->shape().begin(), in.mask->shape().end()), first, n);
        s.in.mask = &s.mask;
    }
}

}  // namespace

void forward_replicas(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
                      const std::vector<std::size_t>& sizes, ForwardResult& out) {
    if (in.given_mean || in.given_var) throw std::logic_error("forward_replicas: given statistics");
    check_split(x, shape, sizes);

    Shape rs = keepdims_shape(shape, spec.reduction_axes);
    rs.insert(rs.begin(), sizes.size());
    out.y.dtype = x.dtype;
    if (x.dtype == DType::float64) out.y.f64 = xt::xarray<double>::from_shape(shape);
    else out.y.f32 = xt::xarray<float>::from_shape(shape);
    for (auto* a : {&out.mean, &out.var, &out.rstd, &out.batch.mean, &out.batch.var, &out.batch.count})
        *a = xt::xarray<double>::from_shape(rs);

    const std::size_t per = num_elements(shape) / shape[0];
    std::size_t first = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
        Slice sl;
        take_slice(sl, x, shape, in, first, sizes[r]);
        const ForwardResult fr = forward(sl.x, spec, sl.in);
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

void backward_replicas(const Tensor& x, const Shape& shape, const NormSpec& spec, const ForwardInputs& in,
                       const std::vector<std::size_t>& sizes, const ForwardResult& fwd, const xt::xarray<double>& dy,
                       BackwardResult& out) {
    check_split(x, shape, sizes);
    if (dy.size() != x.size())
        throw InputError("upstream gradient: expected " + count_noun(x.size(), "value") + ", but got " +
                         std::to_string(dy.size()));
    const Shape ss = keepdims_shape(shape, spec.reduction_axes);
    out.dx.dtype = x.dtype;
    if (x.dtype == DType::float64) out.dx.f64 = xt::xarray<double>::from_shape(shape);
    else out.dx.f32 = xt::xarray<float>::from_shape(shape);
    out.dweight = xt::xarray<double>::from_shape(Shape{0});
    out.dbias = xt::xarray<double>::from_shape(Shape{0});
    const std::size_t per = num_elements(shape) / shape[0];
    std::size_t first = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
        Slice sl;
        take_slice(sl, x, shape, in, first, sizes[r]);
        ForwardResult fr;
        fr.mean = slot(fwd.mean, r, ss);
        fr.var = slot(fwd.var, r, ss);
        fr.rstd = slot(fwd.rstd, r, ss);
        fr.batch.mean = slot(fwd.batch.mean, r, ss);
        fr.batch.var = slot(fwd.batch.var, r, ss);
        fr.batch.count = slot(fwd.batch.count, r, ss);
        const BackwardResult br = backward(sl.x, spec, sl.in, fr, rows(dy.data(), shape, first, sizes[r]));
        if (x.dtype == DType::float64) std::copy_n(br.dx.f64.data(), br.dx.size(), out.dx.f64.data() + first * per);
        else std::copy_n(br.dx.f32.data(), br.dx.size(), out.dx.f32.data() + first * per);
        // Shared parameters: the replicas' gradients add up.
        if (r == 0) out.dweight = br.dweight, out.dbias = br.dbias;
        else out.dweight += br.dweight, out.dbias += br.dbias;
        first += sizes[r];
    }
}

}  // namespace normlab
