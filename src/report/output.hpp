#pragma once
// The output folder (DESIGN.md "The output folder"): everything is written into a staging
// folder beside the target and moved into place only when the run succeeded, so a failed
// or interrupted run never leaves a half-written report.
#include <filesystem>
#include <string>
#include <vector>

namespace normlab {

/// A staged output folder. Files written through it appear under `target` only on commit().
/// The destructor removes the staging folder if commit() was not reached, and so does
/// abandon_output_folders() (called on SIGINT/SIGTERM), so an interrupted run leaves
/// neither a partial report nor a staging folder. A run killed beyond that (kill -9) leaves
/// its staging folder; the next run that stages this output removes it, once its process is
/// gone and its lock free.
class OutputFolder {
public:
    /// Checks that `target` may be written: it may not exist yet, be empty, or hold an earlier
    /// normlab result and nothing else (a report.json whose "tool" is "normlab", and only the
    /// files that report lists), which is replaced as a whole. Anything else is refused
    /// (InputError) unless `force`. Never accepted, even with `force` (InputError): a target
    /// that is a file or lies under one, the root folder, or the current folder or one of its parents, nor
    /// one output_folder_problem() refuses (an empty path, a name too long to create).
    /// A trailing '/' or '.' in `target` is ignored. Nor a target that is or contains one of the
    /// `keep` paths (the run's inputs: its config file, data files and folders, weights;
    /// replacing the folder, with --force or over an earlier result, would delete them). Creates nothing: the
    /// staging folder beside the target, and the target's missing parent folders, are
    /// created by prepare() or the first write() (EnvError when that fails), and the parents it created
    /// are removed again, when empty, if the folder is never committed. `setting` names what
    /// chose the target, for the messages' advice ("choose another --out", or "output.dir"
    /// when a config's output.dir did).
    OutputFolder(std::filesystem::path target, bool force, const std::vector<std::filesystem::path>& keep = {},
                 const std::string& setting = "--out");
    ~OutputFolder();
    OutputFolder(const OutputFolder&) = delete;
    OutputFolder& operator=(const OutputFolder&) = delete;

    /// Creates the missing parents and the staging folder now, so that an output that cannot
    /// be written here is found before a run computes anything: EnvError "<target>: cannot
    /// write the output folder here: ..." (the reason, and the folder that refused), or
    /// "<target>: cannot replace the existing folder: ..." for a target that refuses to be
    /// moved (immutable, read-only file system). What it created goes again, when empty, if
    /// the folder is never committed.
    void prepare();
    /// Writes `bytes` to `relative` (parents created). Throws EnvError naming the path, and
    /// InputError when `relative` is absolute or has a ".." component (it would land outside
    /// the output folder).
    void write(const std::filesystem::path& relative, const std::string& bytes);
    /// Moves the staged folder to the target, replacing an earlier result. EnvError on failure.
    void commit();
    const std::filesystem::path& target() const { return m_target; }
    /// The folder the run writes: `target` absolute and normalised, without a trailing '/',
    /// symbolic links not resolved (a link there is replaced, not followed).
    const std::filesystem::path& path() const { return m_path; }

private:
    /// Creates the missing parents and the staging folder, once; caller holds the disk lock.
    void stage();

    std::filesystem::path m_target;  ///< as given (messages)
    std::filesystem::path m_path;    ///< absolute and normalised (renames)
    std::filesystem::path m_staging;
    std::vector<std::filesystem::path> m_created;  ///< parents stage() created, outermost first
    bool m_staged = false;
    bool m_committed = false;
    int m_lock_fd = -1;  ///< the staging folder, opened and locked (shared) while this run lives
};

/// `p` absolute and normalised, symbolic links resolved as far as the path exists, without
/// a trailing '/'.
std::filesystem::path resolved(const std::filesystem::path& p);

/// True when `dir` holds a report.json written by normlab.
bool is_normlab_result(const std::filesystem::path& dir);

/// The first entry of `dir` (relative path) that the normlab result in it did not write: not
/// report.json, not a file its "files" list names, nor a folder on the way to one. Empty
/// when there is none (or `dir` holds no normlab result: then everything is foreign, and
/// the caller asks is_normlab_result first).
std::string foreign_entry(const std::filesystem::path& dir);

/// True when `path` is `dir` or lies inside it, comparing absolute paths with symbolic
/// links resolved as far as they exist.
bool path_within(const std::filesystem::path& path, const std::filesystem::path& dir);

/// Writes `bytes` to `path` through a temporary file beside it and a rename, so that `path`
/// holds either its old or its new content, never a part (parents are created). EnvError
/// naming the path when it cannot be written.
void write_file_atomic(const std::filesystem::path& path, const std::string& bytes);

/// Removes the staging folder of every OutputFolder that has not committed (and the parent
/// folders created for it, when empty), and keeps any
/// OutputFolder from writing afterwards (it blocks). For the SIGINT/SIGTERM handler, which
/// exits right after; safe to call from another thread while the main thread writes.
/// Returns the number of staging folders removed that held a written file (a folder
/// prepare() staged before anything was computed holds none: nothing was written).
std::size_t abandon_output_folders();

}  // namespace normlab
