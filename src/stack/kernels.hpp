#pragma once
// The dense arithmetic of a stack's blocks, on row-major contiguous buffers of float or
// double: matrix products (OpenBLAS through xtensor-blas, never a hand-written loop nest),
// activations and their derivatives, residual sums and root-mean-squares.
#include <cstddef>

#include <xtensor/xarray.hpp>

namespace normlab::stack_kernels {

/// op(A) @ op(B) as a new row-major (m, n) array, with op(M) = M or M^T: A is stored
/// (a_rows, a_cols), B (b_rows, b_cols), both row-major and contiguous, and m, n are
/// op(A)'s rows and op(B)'s columns. Runs xt::linalg::dot (xtensor-blas, OpenBLAS's gemm)
/// on adaptors over the caller's buffers, a transposed operand as xt::transpose of its
/// adaptor: xtensor-blas 0.20 hands that strided view to gemm with its transpose flag
/// (dot's view_eval keeps any view with a data interface whose layout is dynamic), so
/// neither x^T @ dy nor dy @ W^T copies an operand. dot allocates its result; callers
/// move it into the buffer it replaces, so no copy follows either. A and B must not be
/// the same buffer with one of them transposed: dot then takes a syrk path that assumes
/// op(A) @ op(B) is A^T A or A A^T.
template <class T>
xt::xarray<T> matmul(const T* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const T* b,
                     std::size_t b_rows, std::size_t b_cols, bool trans_b);

/// h = act(a) elementwise over n values; act 0 relu, 1 gelu (tanh form), 2 identity (the
/// order of stack.hpp's Activation).
template <class T>
void activate(int act, const T* a, T* h, std::size_t n);
/// g *= act'(a) elementwise: the gradient through the activation. relu' is 1 for a > 0
/// and 0 otherwise (PyTorch's threshold_backward: 0 at a = 0); gelu' is the derivative of
/// the tanh form, as PyTorch's GeluBackward with approximate="tanh".
template <class T>
void activate_backward(int act, const T* a, T* g, std::size_t n);

/// y = alpha * x + f over n values (alpha = 1 for an ordinary residual).
template <class T>
void residual(const T* x, const T* f, T alpha, T* y, std::size_t n);
/// y += x over n values.
template <class T>
void add_into(const T* x, T* y, std::size_t n);
/// y = alpha * x over n values.
template <class T>
void scale(const T* x, T alpha, T* y, std::size_t n);

/// Root mean square of the rows (each `cols` values) whose `row_mask` entry is non-zero
/// (all rows when row_mask is null), accumulated in double. NaN when no row counts.
template <class T>
double rms_rows(const T* x, std::size_t rows, std::size_t cols, const unsigned char* row_mask);
/// sqrt(sum of squares) of n values, accumulated in double (the Frobenius norm).
template <class T>
double frobenius(const T* x, std::size_t n);

}  // namespace normlab::stack_kernels
