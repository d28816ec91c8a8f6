#pragma once
// Typed access to a Tensor's storage, buffer reuse and the engine's thread count, for the
// stack's passes.
#include <limits>
#include <utility>

#include "norm/engine.hpp"
#include "tensor/tensor.hpp"

namespace normlab::stack_buffers {

/// The value of a column that does not apply (a block without a branch, norm or weight).
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The storage of t that holds values of type T (f32 for float, f64 for double).
template <class T> xt::xarray<T>& values(Tensor& t);
template <> inline xt::xarray<float>& values<float>(Tensor& t) { return t.f32; }
template <> inline xt::xarray<double>& values<double>(Tensor& t) { return t.f64; }
template <class T> const xt::xarray<T>& values(const Tensor& t) { return values<T>(const_cast<Tensor&>(t)); }

/// Gives t the shape and dtype and returns its data, keeping the buffer when the element
/// count already fits: on these machines writing fresh pages costs more than the arithmetic.
template <class T>
T* shaped(Tensor& t, const Shape& shape, DType dtype) {
    t.dtype = dtype;
    auto& v = values<T>(t);
    Shape cur(v.shape().begin(), v.shape().end());
    if (cur != shape) {
        if (v.size() == num_elements(shape)) v.reshape(shape);
        else v.resize(shape);
    }
    return v.data();
}

/// Makes v, reshaped to `shape` (same element count), t's storage in `dtype`: a product's
/// new array (stack_kernels::matmul) takes the place of the buffer it replaces, uncopied.
template <class T>
void take(Tensor& t, xt::xarray<T>&& v, const Shape& shape, DType dtype) {
    t.dtype = dtype;
    auto& dst = values<T>(t);
    dst = std::move(v);
    dst.reshape(shape);
}

/// Runs the norm engine on one thread for its lifetime, then restores the thread count.
/// Inside a stack OpenBLAS's threads take the cores for the products, and OpenMP workers
/// left spinning after a parallel norm (libgomp spins before it sleeps unless
/// OMP_WAIT_POLICY=passive) take a core from them: measured, 73% of a forward+backward
/// pass's cycles in libgomp's wait loop (L=4, N=256, D=128, H=512, float32). A norm is a
/// small part of a block next to its products, so one thread costs little.
class SingleThreadedNorms {
public:
    SingleThreadedNorms() : m_saved(engine_threads()) { set_engine_threads(1); }
    ~SingleThreadedNorms() { set_engine_threads(m_saved); }
    SingleThreadedNorms(const SingleThreadedNorms&) = delete;
    SingleThreadedNorms& operator=(const SingleThreadedNorms&) = delete;

private:
    unsigned m_saved;
};

}  // namespace normlab::stack_buffers
