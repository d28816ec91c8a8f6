#include "report/output_paths.hpp"

#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace fs = std::filesystem;

namespace normlab {

namespace {

constexpr std::size_t kPidDigits = 10;  // a pid_t (int) has at most 10 decimal digits

}  // namespace

std::string staging_name(const std::string& name, long long pid) {
    return "." + name + std::string(kStagingInfix) + std::to_string(pid);
}

std::size_t max_output_folder_name_bytes() {
    return kMaxNameBytes - 1 - kStagingInfix.size() - kPidDigits - kOldSuffix.size();
}

std::string name_length_problem(const std::string& name, std::size_t max_bytes) {
    if (name.size() <= max_bytes) return {};
    std::string why = "is " + std::to_string(name.size()) + " bytes long, more than the " + std::to_string(max_bytes) +
                      " bytes ";
    if (max_bytes == kMaxNameBytes) return why + "a file name can have on common file systems";
    return why + "an output folder's name can have (" + std::to_string(kMaxNameBytes) +
           ", what a file name can have on common file systems, less what its staging folder's name adds)";
}

std::string output_folder_problem(const std::string& target) {
    if (target.empty()) return "is empty; name a folder for the results (e.g. results/run1)";
    if (target.find('\0') != std::string::npos) return "contains a NUL character, which no file name can hold";
    // A shell expands ~ in --out unless it is quoted; nothing expands it in a config: "~/runs"
    // would be a folder named ~ in the current folder (and `rm -rf ~` its undoing).
    if (target.front() == '~') {
        const char* home = std::getenv("HOME");
        const bool home_dir = target.rfind("~/", 0) == 0 && home && *home;
        return std::string("starts with ~, which only a shell expands; write the full path") +
               (home_dir ? " (" + (fs::path(home) / target.substr(2)).string() + ")" : "");
    }
    fs::path p = fs::path(target).lexically_normal();
    while (p.filename().empty() && p != p.root_path()) p = p.parent_path();
    if (p.has_root_directory() && p == p.root_path())
        return "is the root folder, which normlab would replace as a whole; name a folder for the results";
    bool only_dots = !p.has_root_path();
    for (const auto& part : p) only_dots = only_dots && (part == "." || part == "..");
    if (only_dots)
        return "is the current folder or one of its parents; normlab replaces its output folder as a whole, so name "
               "a new folder (e.g. results/run1)";
    for (const auto& part : fs::path(target)) {
        const std::string why = name_length_problem(part.string());
        if (!why.empty()) return "has a component that " + why;
    }
    const std::string why = name_length_problem(p.filename().string(), max_output_folder_name_bytes());
    return why.empty() ? why : "names a folder that " + why;
}

}  // namespace normlab
