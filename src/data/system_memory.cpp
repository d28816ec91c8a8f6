#include "data/system_memory.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "data/estimate.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

// A /proc/meminfo line's value in bytes ("MemTotal:", "SwapTotal:"); 0 when absent.
std::size_t meminfo_bytes(const std::string& name) {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    unsigned long long value = 0;
    while (in >> key >> value) {
        std::getline(in, unit);
        if (key == name) return saturating_mul(static_cast<std::size_t>(value), 1024);  // kB
    }
    return 0;
}

std::size_t meminfo_total() {
    if (const std::size_t total = meminfo_bytes("MemTotal:")) return total;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

// v1 writes "no limit" as the largest page-aligned 64-bit value (9223372036854771712).
constexpr unsigned long long kNoLimitV1 = 1ULL << 62;

// The smaller of two limits, where 0 is none.
std::size_t smaller_limit(std::size_t a, std::size_t b) { return a == 0 || (b > 0 && b < a) ? b : a; }

// The limit in `file` (v2's "max" and v1's near-2^63 mean none); 0 when none or unreadable.
// Digits only: stoull would take "-1" as 2^64 - 1 and larger negatives as small limits. A
// limit of 0 (a group that may use no memory) reads as none too, as physical_memory_bytes'
// 0 means unknown.
std::size_t limit_in(const fs::path& file) {
    std::ifstream in(file);
    std::string s;
    if (!(in >> s) || s.find_first_not_of("0123456789") != std::string::npos) return 0;
    try {
        const unsigned long long v = std::stoull(s);
        return v < kNoLimitV1 ? static_cast<std::size_t>(v) : 0;
    } catch (const std::out_of_range&) {  // more digits than 64 bits hold: no limit either
        return 0;
    }
}

// `p` without "." and ".." steps and without a trailing separator.
fs::path plain(const fs::path& p) {
    fs::path n = p.lexically_normal();
    return n.has_filename() || !n.has_relative_path() ? n : n.parent_path();
}

// The smallest limit in `file_name` from `dir` up to `top` (both inclusive), never above
// `top`; 0 when none. `dir` lies under `top` (group_dir).
std::size_t smallest_up_to(fs::path dir, fs::path top, const char* file_name) {
    dir = plain(dir);
    top = plain(top);
    std::size_t best = 0;
    for (;;) {
        best = smaller_limit(best, limit_in(dir / file_name));
        const fs::path rel = dir.lexically_relative(top);
        if (rel.empty() || rel == "." || *rel.begin() == "..") break;
        dir = dir.parent_path();
    }
    return best;
}

// The hierarchy's directory for `path` ("/a/b") under `mount`: mount/a/b when it exists,
// else the mount itself: a path from another mount namespace, or one outside the process's
// cgroup namespace ("/..", which the kernel shows for a group above the namespace's root).
fs::path group_dir(const fs::path& mount, const std::string& path) {
    const fs::path rel = fs::path(path).relative_path().lexically_normal();
    const bool climbs = std::any_of(rel.begin(), rel.end(), [](const fs::path& step) { return step == ".."; });
    std::error_code ec;
    if (!rel.empty() && rel != "." && !climbs && fs::is_directory(mount / rel, ec)) return mount / rel;
    return mount;
}

}  // namespace

std::size_t cgroup_memory_limit(const std::string& proc_self_cgroup, const fs::path& cgroup_root) {
    std::istringstream lines(proc_self_cgroup);
    std::string line;
    std::size_t best = 0;
    auto take = [&](std::size_t v) { best = smaller_limit(best, v); };
    bool listed = false;
    while (std::getline(lines, line)) {
        // "hierarchy-ID:controller-list:cgroup-path"; the path may itself hold ':'.
        const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (id == "0" && controllers.empty()) {
            listed = true;
            // Unified alone (at the root) or beside v1 controllers (at root/unified).
            for (const fs::path& mount : {cgroup_root, cgroup_root / "unified"}) {
                std::error_code ec;
                if (!fs::exists(mount / "cgroup.controllers", ec)) continue;
                take(smallest_up_to(group_dir(mount, path), mount, "memory.max"));
                break;
            }
            continue;
        }
        std::istringstream list(controllers);
        std::string c;
        while (std::getline(list, c, ','))
            if (c == "memory") {
                listed = true;
                const fs::path mount = cgroup_root / "memory";
                take(smallest_up_to(group_dir(mount, path), mount, "memory.limit_in_bytes"));
            }
    }
    if (!listed) {
        // No /proc/self/cgroup to read: the roots' files, as a container shows its own there.
        take(limit_in(cgroup_root / "memory.max"));
        take(limit_in(cgroup_root / "memory" / "memory.limit_in_bytes"));
    }
    return best;
}

std::size_t physical_memory_bytes() {
    // Read once: every npy file read and each --max-memory message asks, and walking the
    // cgroup tree each time would repeat the same reads for the same answer.
    static const std::size_t bytes = [] {
        std::ifstream in("/proc/self/cgroup");
        std::ostringstream text;
        text << in.rdbuf();
        return smaller_limit(meminfo_total(), cgroup_memory_limit(in ? text.str() : std::string(), "/sys/fs/cgroup"));
    }();
    return bytes;
}

std::size_t swap_bytes() { return meminfo_bytes("SwapTotal:"); }

}  // namespace normlab
