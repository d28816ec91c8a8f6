// The stack's matrix products (stack/kernels.hpp): every op(A) @ op(B) against a plain
// triple loop in long double, and the allocations xt::linalg::dot makes for them: one, the
// result, whichever operand is transposed (a transposed operand is a view, not a copy).
// This binary replaces the global operator new to count allocations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "stack/kernels.hpp"

namespace {

// Allocations of at least kBig bytes while counting: the operands below are larger, so a
// copy of one would show; the small bookkeeping allocations of xtensor do not count.
constexpr std::size_t kBig = 1024;
bool g_counting = false;
std::vector<std::size_t>* g_sizes = nullptr;

}  // namespace

void* operator new(std::size_t n) {
    if (g_counting && n >= kBig && g_sizes) {
        g_counting = false;  // push_back may allocate
        g_sizes->push_back(n);
        g_counting = true;
    }
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
// GCC sees free() of memory from operator new; the replacement above takes it from malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

TEST_CASE_TEMPLATE("stack matmul: op(A) @ op(B) through xt::linalg::dot allocates only its result", T, float, double) {
    const std::size_t m = 24, k = 40, n = 32;  // op(A) (m, k), op(B) (k, n)
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            INFO("trans_a " << ta << " trans_b " << tb);
            // A stored (m, k) or, transposed, (k, m); B stored (k, n) or (n, k).
            const std::size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
            std::vector<T> a(ar * ac), b(br * bc);
            for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(std::sin(0.37 * double(i) + 1));
            for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<T>(std::cos(0.23 * double(i)));
            std::vector<std::size_t> sizes;
            g_sizes = &sizes;
            g_counting = true;
            const xt::xarray<T> c = normlab::stack_kernels::matmul<T>(a.data(), ar, ac, ta, b.data(), br, bc, tb);
            g_counting = false;
            g_sizes = nullptr;
            REQUIRE(sizes.size() == 1);
            CHECK(sizes[0] == m * n * sizeof(T));
            REQUIRE(c.shape()[0] == m);
            REQUIRE(c.shape()[1] == n);
            const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
            for (std::size_t i = 0; i < m; ++i)
                for (std::size_t j = 0; j < n; ++j) {
                    long double s = 0;
                    for (std::size_t p = 0; p < k; ++p) {
                        const T av = ta ? a[p * ac + i] : a[i * ac + p];
                        const T bv = tb ? b[j * bc + p] : b[p * bc + j];
                        s += static_cast<long double>(av) * static_cast<long double>(bv);
                    }
                    CHECK(std::fabs(static_cast<double>(c(i, j)) - static_cast<double>(s)) <= tol * k);
                }
        }
}
