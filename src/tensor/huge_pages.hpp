#pragma once
// Large allocations on transparent huge pages (huge_pages.cpp replaces operator new).
#include <cstddef>

// Whether this build replaces operator new: Linux with glibc on x86-64 (2 MiB huge pages),
// without AddressSanitizer or ThreadSanitizer, whose own operator new must pair with their
// operator delete. GCC names the sanitizers by macro, clang by __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NORMLAB_SANITIZED_NEW 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NORMLAB_SANITIZED_NEW 1
#endif
#if defined(__linux__) && defined(__GLIBC__) && defined(__x86_64__) && !defined(NORMLAB_SANITIZED_NEW)
#define NORMLAB_HUGE_NEW 1
#endif

namespace normlab {

/// Bytes of an x86-64 huge page (2 MiB): allocations of this size and more are aligned to
/// it and advised onto huge pages.
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// Whether this build's operator new puts allocations of kHugePageBytes and more on
/// transparent huge pages (NORMLAB_HUGE_NEW above), as compiled into huge_pages.cpp.
bool huge_page_allocation();

}  // namespace normlab
