#pragma once
// Running the built normlab binary from tests, the way users run it.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <sys/wait.h>
#include <unistd.h>

namespace normlab_test {

/// The folders process_temp_dir made, removed with everything in them when the test program
/// exits normally, unless NORMLAB_KEEP_TEST_FILES is set (to look at a failed test's files).
struct ProcessTempDirs {
    std::map<std::string, std::filesystem::path> dirs;
    ~ProcessTempDirs() {
        if (std::getenv("NORMLAB_KEEP_TEST_FILES")) return;
        for (const auto& entry : dirs) {
            std::error_code ec;  // a folder a test left unremovable stays; the exit goes on
            std::filesystem::remove_all(entry.second, ec);
        }
    }
};

/// "<temp dir>/<prefix><pid>": this test program's own folder for `prefix`, made on first
/// use and removed at exit (ProcessTempDirs), so that test runs do not pile up in /tmp.
inline std::filesystem::path process_temp_dir(const std::string& prefix) {
    static ProcessTempDirs all;
    const auto it =
        all.dirs.try_emplace(prefix, std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))).first;
    std::filesystem::create_directories(it->second);
    return it->second;
}

/// Result of one normlab invocation.
struct CliResult {
    int exit_code = -1;
    std::string out, err;
};

inline std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Runs `normlab <args>` (args are passed to /bin/sh as written: quote paths with spaces)
/// and captures exit code, stdout and stderr.
inline CliResult run_normlab(const std::string& args) {
    static int counter = 0;
    const auto dir = process_temp_dir("normlab_cli_");
    auto out = dir / ("out" + std::to_string(counter));
    auto err = dir / ("err" + std::to_string(counter++));
    std::string cmd = std::string(NORMLAB_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
    int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_text(out);
    r.err = read_text(err);
    return r;
}

/// A fresh empty folder under this test program's temp folder (process_temp_dir), for one
/// test's outputs.
inline std::filesystem::path fresh_dir(const std::string& name) {
    auto d = process_temp_dir("normlab_test_") / name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

/// Writes text to a file (creating parents).
inline void write_text(const std::filesystem::path& p, const std::string& s) {
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << s;
}

}  // namespace normlab_test
