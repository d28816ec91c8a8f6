#pragma once
// Large allocations on transparent huge pages (huge_pages.cpp replaces operator new).
#include <cstddef>

namespace normlab {

/// Bytes of an x86-64 huge page (2 MiB): allocations of this size and more are aligned to
/// it and advised onto huge pages.
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Whether this build's operator new puts allocations of kHugePageBytes and more on
/// transparent huge pages: Linux builds without AddressSanitizer or ThreadSanitizer, whose
/// own operator new must pair with their operator delete.
bool huge_page_allocation();

}  // namespace normlab
