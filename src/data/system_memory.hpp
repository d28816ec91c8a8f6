#pragma once
// The memory this process may use: the machine's (/proc/meminfo) lowered to the limits of
// the control groups it runs in (containers, systemd slices, job schedulers).
#include <cstddef>
#include <filesystem>
#include <string>

namespace normlab {

/// Physical memory this process may use: MemTotal from /proc/meminfo (sysconf as the
/// fallback), lowered to its control groups' memory limit (cgroup_memory_limit) when one is
/// set; 0 when neither can be read. Read on the first call and kept.
std::size_t physical_memory_bytes();

/// The machine's swap space (SwapTotal from /proc/meminfo); 0 when there is none or it
/// cannot be read.
std::size_t swap_bytes();

/// The smallest memory limit, in bytes, of the control group named for the memory
/// controller in `proc_self_cgroup` (the text of /proc/self/cgroup) and of its ancestors, as
/// files under `cgroup_root` (/sys/fs/cgroup) show them; 0 when none is set or none can be
/// read (a limit of 0 counts as none).
/// - cgroup v2 ("0::/path"; the unified hierarchy mounted at the root, or at root/unified
///   beside v1 controllers): memory.max of each directory from root/path up to the root
///   ("max": no limit).
/// - cgroup v1 ("4:memory:/path"): memory.limit_in_bytes under root/memory (values at or
///   above 2^62: no limit).
/// Under a cgroup namespace (the usual container) the path is "/" and the root's files are
/// the container's own. A path that does not exist under the root (another mount
/// namespace), or that climbs above it ("/..", a group outside the process's cgroup
/// namespace), falls back to the root's; no file above the root is read. A process limited
/// by its own group only (a systemd slice's MemoryMax, a batch scheduler's job) has the
/// limit on that group, not the root. The kernel's rules:
/// Documentation/admin-guide/cgroup-v2.rst ("memory.max", "/proc/$PID/cgroup").
std::size_t cgroup_memory_limit(const std::string& proc_self_cgroup, const std::filesystem::path& cgroup_root);

}  // namespace normlab
