#pragma once
// This process's peak resident memory, per benchmark case (Linux /proc, see proc(5)).

namespace normlab {

/// Lowers the kernel's record of this process's peak resident memory (VmHWM) to what is
/// resident now, so that the next peak_rss_mib() is one case's own peak (Linux >= 4.0:
/// writing 5 to /proc/self/clear_refs). The heap that earlier cases freed is first handed
/// back to the kernel (glibc's malloc_trim): glibc keeps freed heap resident, and a small
/// case after a large one counted it (RMSNorm (32,64,512) alone 16.6 MiB, after
/// (64,128,768) 33.8 MiB). False when the kernel refuses the reset.
bool reset_peak_rss();

/// VmHWM from /proc/self/status in MiB: the peak resident memory since the last
/// reset_peak_rss() (since the start without one); NaN when it cannot be read.
double peak_rss_mib();

}  // namespace normlab
