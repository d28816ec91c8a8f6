// operator new for the whole program: allocations of 2 MiB and more (batches, outputs,
// products of the residual stacks) are aligned to 2 MiB and advised MADV_HUGEPAGE before
// their first touch, so that the kernel backs them with 2 MiB pages where transparent huge
// pages are set to "madvise" (Debian's default) or "always"; "never" leaves them on 4 KiB
// pages (the alignment and the advice stay, and do nothing). A pass over a 25 MiB batch then
// crosses 13 pages instead of 6400, each a TLB miss and a page walk. PyTorch's CPU
// allocator does the same for allocations of 2 MiB and more under THP_MEM_ALLOC_ENABLE=1
// (c10/core/alloc_cpu.cpp), off by default there.
// Memory comes from posix_memalign and malloc, so libstdc++'s operator delete (free)
// releases it. At start-up glibc is told to serve requests of 2 MiB and more that its heap
// has no free block for by a mapping of their own, unmapped when freed (M_MMAP_THRESHOLD,
// which also stops the threshold from rising as large blocks are freed): else a freed batch
// stays in the heap, advised, and the small allocations that reuse it fault in 2 MiB pages
// each (a sweep over six batch shapes peaked at 131 MiB against 82 without huge pages).
#include "tensor/huge_pages.hpp"

#include <cstdlib>
#include <new>

#ifdef NORMLAB_HUGE_NEW
#include <malloc.h>
#include <sys/mman.h>
#endif

namespace normlab {

bool huge_page_allocation() {
#ifdef NORMLAB_HUGE_NEW
    return true;
#else
    return false;
#endif
}

}  // namespace normlab

#ifdef NORMLAB_HUGE_NEW
namespace {

// Before main, while one thread runs: glibc's mallopt is not safe against other threads'
// malloc and free.
const bool g_own_maps = mallopt(M_MMAP_THRESHOLD, static_cast<int>(normlab::kHugePageBytes)) == 1;

void* try_allocate(std::size_t n) {
    if (n < normlab::kHugePageBytes) return std::malloc(n ? n : 1);
    void* p = nullptr;
    if (posix_memalign(&p, normlab::kHugePageBytes, n) != 0) return nullptr;
    // Advice only: where the kernel declines, the memory stays on 4 KiB pages.
    madvise(p, n / normlab::kHugePageBytes * normlab::kHugePageBytes, MADV_HUGEPAGE);
    return p;
}

}  // namespace

// The replaceable operator new ([new.delete.single]): the new-handler loop the standard
// asks for, then std::bad_alloc. libstdc++'s nothrow and array forms call this one; its
// aligned forms (over-aligned types) call aligned_alloc and keep 4 KiB pages.
void* operator new(std::size_t n) {
    for (;;) {
        if (void* p = try_allocate(n)) return p;
        const std::new_handler h = std::get_new_handler();
        if (!h) throw std::bad_alloc();
        h();
    }
}
#endif
