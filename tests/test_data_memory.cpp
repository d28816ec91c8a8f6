// The memory limit of this process's control groups (data/system_memory.hpp), on cgroup
// trees built in a temporary folder the way the kernel lays them out.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "data/system_memory.hpp"

using namespace normlab;

namespace {

namespace fs = std::filesystem;

// A file under `root` holding `text` (its folders made as needed).
void put(const fs::path& root, const std::string& rel, const std::string& text) {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
}

struct Tree {
    fs::path root = fs::temp_directory_path() / ("normlab_test_cgroup_" + std::to_string(::getpid()));
    Tree() { fs::remove_all(root); }
    ~Tree() { fs::remove_all(root); }
};

// v1 writes "no limit" as this value.
const std::string kV1None = "9223372036854771712";

}  // namespace

TEST_CASE("cgroup memory limit: the process's own group and its ancestors, v2 and v1") {
    struct Case {
        const char* what;
        std::vector<std::pair<std::string, std::string>> files;  // path under the root, content
        std::string proc_self_cgroup;
        std::size_t want;
    };
    const std::vector<Case> cases = {
        {"v2: a limit on the process's own group, none above it",
         {{"cgroup.controllers", "memory"}, {"user.slice/job.scope/memory.max", "1000"}, {"user.slice/memory.max", "max"}},
         "0::/user.slice/job.scope", 1000},
        {"v2: an ancestor's limit is smaller than the group's own",
         {{"cgroup.controllers", "memory"}, {"a/b/memory.max", "5000"}, {"a/memory.max", "2000"}},
         "0::/a/b", 2000},
        {"v2: every group \"max\"",
         {{"cgroup.controllers", "memory"}, {"a/b/memory.max", "max"}, {"a/memory.max", "max"}}, "0::/a/b", 0},
        {"v2 under a cgroup namespace (a container): the path is / and the root's file is its own",
         {{"cgroup.controllers", "memory"}, {"memory.max", "3000"}}, "0::/", 3000},
        {"v2: a path that is not under this root (another mount namespace) falls back to the root",
         {{"cgroup.controllers", "memory"}, {"memory.max", "4000"}}, "0::/elsewhere/job", 4000},
        {"v2: a group path holding ':'",
         {{"cgroup.controllers", "memory"}, {"a:b/memory.max", "6000"}}, "0::/a:b", 6000},
        {"v1 beside an empty unified hierarchy: the memory controller's own group",
         {{"unified/cgroup.controllers", ""},
          {"memory/memory.limit_in_bytes", kV1None},
          {"memory/process_api/x1/memory.limit_in_bytes", "7000"},
          {"memory/process_api/memory.limit_in_bytes", kV1None}},
         "9:name=systemd:/\n4:memory:/process_api/x1\n1:cpu:/\n0::/\n", 7000},
        {"v1: the memory controller shares its hierarchy with others",
         {{"memory/memory.limit_in_bytes", kV1None}, {"memory/j/memory.limit_in_bytes", "8000"}},
         "3:cpuacct,memory:/j\n", 8000},
        {"v1: no limit anywhere", {{"memory/memory.limit_in_bytes", kV1None}, {"memory/j/memory.limit_in_bytes", kV1None}},
         "4:memory:/j\n", 0},
        {"no /proc/self/cgroup text: the roots' files", {{"memory.max", "9000"}}, "", 9000},
        {"an unreadable number is no limit",
         {{"cgroup.controllers", "memory"}, {"a/memory.max", "12x"}}, "0::/a", 0},
        {"a negative number is no limit (not 2^64 minus it)",
         {{"cgroup.controllers", "memory"}, {"a/memory.max", "-18446744073709550616"}, {"memory.max", "-1"}}, "0::/a", 0},
        {"a group outside the cgroup namespace (\"/..\"): the root's, nothing above it",
         {{"cg/cgroup.controllers", "memory"}, {"cg/memory.max", "5000"}, {"memory.max", "100"}}, "0::/..", 5000},
    };
    for (const auto& c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        Tree t;
        for (const auto& f : c.files) put(t.root, f.first, f.second);
        // The namespace case's root is a folder below the tree, whose own file must not be read.
        const bool nested = c.files.front().first.rfind("cg/", 0) == 0;
        CHECK(cgroup_memory_limit(c.proc_self_cgroup, nested ? t.root / "cg" : t.root) == c.want);
    }
}

TEST_CASE("cgroup memory limit: a root given with a trailing separator is not walked above") {
    Tree t;
    put(t.root, "memory.max", "100");  // above the root below: never read
    put(t.root, "cg/cgroup.controllers", "memory");
    put(t.root, "cg/a/memory.max", "7000");
    const std::string root = (t.root / "cg").string();
    CHECK(cgroup_memory_limit("0::/a", root + "/") == 7000);
    CHECK(cgroup_memory_limit("0::/a", root + "//") == 7000);
    CHECK(cgroup_memory_limit("0::/a", root) == 7000);
}

TEST_CASE("physical memory: positive here, and no more than /proc/meminfo's MemTotal") {
    std::ifstream in("/proc/meminfo");
    std::string key;
    unsigned long long kb = 0;
    in >> key >> kb;
    REQUIRE(key == "MemTotal:");
    CHECK(physical_memory_bytes() > 0);
    CHECK(physical_memory_bytes() <= kb * 1024);
}
