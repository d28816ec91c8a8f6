#pragma once
// Vectors whose data starts on a cache line (internal to norm/), for the per-element
// constants the vector kernels load a register at a time: the effective scale and shift
// (LayerNorm/RMSNorm's run along each row), the per-channel and per-element constants of
// channels-last runs. malloc aligns a block to 16 bytes, so 64-byte loads from an ordinary
// std::vector straddle two lines three times in four. On a 2-core AMD EPYC (Zen 5,
// AVX-512), the build before against these vectors, medians of 3 alternating rounds:
// RMSNorm (64,128,768) 1.52 -> 1.33 ms on one thread, 0.815 -> 0.620 on two; RMSNorm
// (32,64,512) on two threads 0.132 -> 0.087 (scripts/PERFORMANCE.md, 7 December, late night).
#include <cstddef>
#include <new>
#include <vector>

namespace normlab {

/// Bytes of a cache line and of the widest register (AVX-512) on x86-64.
constexpr std::size_t kLineBytes = 64;

/// std::allocator's contract with every block aligned to kLineBytes (C++17 aligned
/// operator new). Throws std::bad_alloc as operator new does.
template <class T>
struct LineAllocator {
    using value_type = T;
    LineAllocator() = default;
    template <class U>
    LineAllocator(const LineAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) {
        return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kLineBytes}));
    }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kLineBytes}); }
    template <class U>
    bool operator==(const LineAllocator<U>&) const noexcept {
        return true;
    }
    template <class U>
    bool operator!=(const LineAllocator<U>&) const noexcept {
        return false;
    }
};

/// A std::vector whose data() is 64-byte aligned (LineAllocator).
template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace normlab
