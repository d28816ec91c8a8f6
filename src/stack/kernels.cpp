#include "stack/kernels.hpp"

#include <array>
#include <cmath>
#include <limits>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>

namespace normlab::stack_kernels {

template <class T>
xt::xarray<T> matmul(const T* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const T* b,
                     std::size_t b_rows, std::size_t b_cols, bool trans_b) {
    // Adaptors over the caller's buffers: no copies. xt::transpose gives a strided view of
    // dynamic layout, which dot passes to gemm as the same buffer with its transpose flag.
    const auto A = xt::adapt(a, a_rows * a_cols, xt::no_ownership(), std::array<std::size_t, 2>{a_rows, a_cols});
    const auto B = xt::adapt(b, b_rows * b_cols, xt::no_ownership(), std::array<std::size_t, 2>{b_rows, b_cols});
    if (trans_a && trans_b) return xt::linalg::dot(xt::transpose(A), xt::transpose(B));
    if (trans_a) return xt::linalg::dot(xt::transpose(A), B);
    if (trans_b) return xt::linalg::dot(A, xt::transpose(B));
    return xt::linalg::dot(A, B);
}

namespace {

// PyTorch's constants for the tanh form of GELU (aten/src/ATen/native/cpu/Activation.cpp):
// kBeta = sqrt(2/pi), kKappa = 0.044715.
constexpr double kGeluBeta = 0.7978845608028654;
constexpr double kGeluKappa = 0.044715;

}  // namespace

template <class T>
void activate(int act, const T* a, T* h, std::size_t n) {
    switch (act) {
        case 0:
            for (std::size_t i = 0; i < n; ++i) h[i] = a[i] > T(0) ? a[i] : T(0);
            break;
        case 1:
            for (std::size_t i = 0; i < n; ++i) {
                const T x = a[i];
                const T inner = T(kGeluBeta) * (x + T(kGeluKappa) * x * x * x);
                h[i] = T(0.5) * x * (T(1) + std::tanh(inner));
            }
            break;
        default:
            if (h != a)
                for (std::size_t i = 0; i < n; ++i) h[i] = a[i];
    }
}

template <class T>
void activate_backward(int act, const T* a, T* g, std::size_t n) {
    switch (act) {
        case 0:  // a select, not a branch: the loop vectorises
            for (std::size_t i = 0; i < n; ++i) g[i] = a[i] > T(0) ? g[i] : T(0);
            break;
        case 1:
            // d/dx 0.5 x (1 + tanh(u)), u = b (x + k x^3):
            // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) b (1 + 3 k x^2).
            for (std::size_t i = 0; i < n; ++i) {
                const T x = a[i];
                const T t = std::tanh(T(kGeluBeta) * (x + T(kGeluKappa) * x * x * x));
                const T du = T(kGeluBeta) * (T(1) + T(3 * kGeluKappa) * x * x);
                g[i] *= T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
            }
            break;
        default: break;
    }
}

template <class T>
void residual(const T* x, const T* f, T alpha, T* y, std::size_t n) {
    if (alpha == T(1))
        for (std::size_t i = 0; i < n; ++i) y[i] = x[i] + f[i];
    else
        for (std::size_t i = 0; i < n; ++i) y[i] = alpha * x[i] + f[i];
}

template <class T>
void add_into(const T* x, T* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] += x[i];
}

template <class T>
void scale(const T* x, T alpha, T* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

template <class T>
double rms_rows(const T* x, std::size_t rows, std::size_t cols, const unsigned char* row_mask) {
    double s = 0;
    std::size_t count = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        if (row_mask && !row_mask[r]) continue;
        const T* p = x + r * cols;
        double rs = 0;
        for (std::size_t j = 0; j < cols; ++j) rs += static_cast<double>(p[j]) * static_cast<double>(p[j]);
        s += rs;
        count += cols;
    }
    return count ? std::sqrt(s / static_cast<double>(count)) : std::numeric_limits<double>::quiet_NaN();
}

template <class T>
double frobenius(const T* x, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return std::sqrt(s);
}

#define NORMLAB_STACK_KERNELS(T)                                                                      \
    template xt::xarray<T> matmul<T>(const T*, std::size_t, std::size_t, bool, const T*, std::size_t, \
                                     std::size_t, bool);                                              \
    template void activate<T>(int, const T*, T*, std::size_t);                                        \
    template void activate_backward<T>(int, const T*, T*, std::size_t);                               \
    template void residual<T>(const T*, const T*, T, T*, std::size_t);                                \
    template void add_into<T>(const T*, T*, std::size_t);                                             \
    template void scale<T>(const T*, T, T*, std::size_t);                                             \
    template double rms_rows<T>(const T*, std::size_t, std::size_t, const unsigned char*);            \
    template double frobenius<T>(const T*, std::size_t);
NORMLAB_STACK_KERNELS(float)
NORMLAB_STACK_KERNELS(double)
#undef NORMLAB_STACK_KERNELS

}  // namespace normlab::stack_kernels
