#pragma once
// Running the built normlab binary from tests, the way users run it.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace normlab_test {

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
    auto dir = std::filesystem::temp_directory_path() / ("normlab_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
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

/// A fresh empty folder under the system temp dir, for one test's outputs.
inline std::filesystem::path fresh_dir(const std::string& name) {
    auto d = std::filesystem::temp_directory_path() / ("normlab_test_" + std::to_string(::getpid())) / name;
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
