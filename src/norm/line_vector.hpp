#pragma once
// Vectors whose data starts on a cache line (internal to norm/), for the per-element
// constants the vector kernels load a register at a time: the effective scale and shift
// (LayerNorm/RMSNorm's run along each row), the per-channel and per-element constants of
// channels-last runs. malloc aligns a block to 16 bytes, so 64-byte loads from an ordinary
// std::vector straddle two lines three times in four. Measured on a 2-core AMD EPYC (Zen 5, AVX-512), one thread, the same kernels with
// the parameters 64-byte aligned, medians of 3 alternating rounds: RMSNorm (64,128,768)
// 1.61 -> 1.22 ms, LayerNorm (64,128,768) 1.66 -> 1.40, RMSNorm (32,64,512) 0.165 -> 0.136
// (scripts/PERFORMANCE.md).
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
