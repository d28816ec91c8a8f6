#pragma once
// The output folder (DESIGN.md "The output folder"): everything is written into a staging
// folder beside the target and moved into place only when the run succeeded, so a failed
// or interrupted run never leaves a half-written report.
#include <filesystem>
#include <string>

namespace normlab {

/// A staged output folder. Files written through it appear under `target` only on commit().
/// The destructor removes the staging folder if commit() was not reached.
class OutputFolder {
public:
    /// Checks that `target` may be written: it may not exist yet, be empty, or hold an earlier
    /// normlab result (a report.json whose "tool" is "normlab"), which is replaced as a whole.
    /// Anything else is refused (InputError) unless `force`. Creates the staging folder
    /// (EnvError when that fails).
    OutputFolder(std::filesystem::path target, bool force);
    ~OutputFolder();
    OutputFolder(const OutputFolder&) = delete;
    OutputFolder& operator=(const OutputFolder&) = delete;

    /// Writes `bytes` to `relative` (parents created). Throws EnvError naming the path.
    void write(const std::filesystem::path& relative, const std::string& bytes);
    /// Moves the staged folder to the target, replacing an earlier result. EnvError on failure.
    void commit();
    const std::filesystem::path& target() const { return m_target; }

private:
    std::filesystem::path m_target, m_staging;
    bool m_committed = false;
};

/// True when `dir` holds a report.json written by normlab.
bool is_normlab_result(const std::filesystem::path& dir);

}  // namespace normlab
