#include "report/output.hpp"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "json/text.hpp"
#include "report/output_paths.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

// Every OutputFolder operation on the disk holds this lock, so that abandon_output_folders
// (called from the signal thread) never races a write or a commit.
std::mutex& disk_mutex() {
    static std::mutex m;
    return m;
}
// A staging folder of an OutputFolder that has not committed: the parent folders its
// OutputFolder created (outermost first), which go with it when the run fails, and whether
// a file was written into it yet (prepare() stages before anything is computed).
struct Staged {
    std::vector<fs::path> created;
    bool written = false;
};
std::map<fs::path, Staged>& live_staging() {
    static std::map<fs::path, Staged> s;
    return s;
}

// Removes a staging folder and then the parents created for it, innermost first, as far
// as they are empty (another run may have put its own staging folder beside it).
void remove_staging(const fs::path& staging, const std::vector<fs::path>& created) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    for (auto it = created.rbegin(); it != created.rend(); ++it) fs::remove(*it, ec);
}

// Removes the staging folders that runs killed beyond cleaning up (kill -9, a crash, a
// power cut) left beside the output folder `name` in `parent`. A folder goes only when all
// of these hold: its name is exactly a staging folder's of this output, with a process id;
// it is a folder, not a link; no process of that id is alive here; and nobody holds the
// lock every run takes on its staging folder while it lives. The lock answers what the
// process id cannot: a run in another PID namespace, or on another machine sharing the
// folder, has an id that may look dead here. A lock that cannot be tested (some network
// file systems) keeps the folder. Leftovers "-old" (an earlier result set aside while it
// was replaced) are never touched: they may be the only copy of that result.
void remove_stale_staging(const fs::path& parent, const std::string& name) {
    const std::string prefix = "." + name + std::string(kStagingInfix);
    std::error_code ec;
    std::vector<fs::path> stale;
    for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        const std::string fn = it->path().filename().string();
        if (fn.size() <= prefix.size() || fn.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string digits = fn.substr(prefix.size());
        if (digits.size() > 10 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        const long long pid = std::stoll(digits);
        std::error_code ec_entry;
        if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || pid == ::getpid() || !it->is_directory(ec_entry) || it->is_symlink(ec_entry)) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
        stale.push_back(it->path());
    }
    for (const auto& dir : stale) {
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) fs::remove_all(dir, ec);
        ::close(fd);
    }
}

std::optional<nlohmann::json> read_report(const fs::path& dir) {
    std::ifstream in(dir / "report.json");
    if (!in) return std::nullopt;
    try {
        auto j = nlohmann::json::parse(in);
        if (j.is_object() && j.value("tool", "") == "normlab") return j;
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

// The reason the last system call gave (errno), for a write that failed: "No space left
// on device", "Permission denied". Call right after the failure, before anything else
// may set errno.
std::string os_reason() {
    const int err = errno;
    return err ? std::error_code(err, std::generic_category()).message() : "the system gave no reason";
}

}  // namespace

fs::path resolved(const fs::path& p) {
    std::error_code ec;
    fs::path a = fs::weakly_canonical(fs::absolute(p), ec);
    if (ec) a = fs::absolute(p).lexically_normal();
    while (a.filename().empty() && a != a.root_path()) a = a.parent_path();
    return a;
}

bool is_normlab_result(const fs::path& dir) { return read_report(dir).has_value(); }

std::string foreign_entry(const fs::path& dir) {
    auto report = read_report(dir);
    if (!report) return "report.json";
    std::set<std::string> allowed{"report.json"};
    if (report->contains("files") && (*report)["files"].is_array())
        for (const auto& f : (*report)["files"]) {
            if (!f.is_string()) continue;
            for (fs::path p = fs::path(f.get<std::string>()).lexically_normal(); !p.empty(); p = p.parent_path())
                allowed.insert(p.generic_string());
        }
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        const std::string rel = it->path().lexically_relative(dir).generic_string();
        if (!allowed.count(rel)) return rel;
    }
    return ec ? "(unreadable entries)" : std::string();
}

bool path_within(const fs::path& path, const fs::path& dir) {
    const fs::path p = resolved(path), d = resolved(dir);
    auto pi = p.begin();
    for (auto di = d.begin(); di != d.end(); ++di, ++pi)
        if (pi == p.end() || *pi != *di) return false;
    return true;
}

OutputFolder::OutputFolder(fs::path target, bool force, const std::vector<fs::path>& keep, const std::string& setting)
    : m_target(std::move(target)) {
    const std::string shown = m_target.empty() ? "\"\"" : m_target.string();
    // Checked before fs::absolute, which cannot make an empty path absolute.
    const std::string problem = output_folder_problem(m_target.string());
    if (!problem.empty()) throw InputError(shown + ": " + problem);
    m_path = fs::absolute(m_target).lexically_normal();
    while (m_path.filename().empty() && m_path != m_path.root_path()) m_path = m_path.parent_path();
    if (m_path == m_path.root_path())
        throw InputError(shown + ": refusing to use the root folder as the output folder; name a folder for the results");
    std::error_code ec;
    // A folder cannot be made under a file (--out notes.txt/run1, /dev/null/x): refused here,
    // so that validate finds it as run does, where prepare() would fail on it (exit 1).
    for (fs::path up = m_path.parent_path(); !up.empty(); up = up.parent_path()) {
        if (fs::exists(up, ec)) {
            if (!fs::is_directory(up, ec)) {
                // Named as the user spelled the target: relative to the current folder when it was.
                std::error_code cec;
                const fs::path rel = m_target.is_absolute() ? fs::path() : up.lexically_relative(fs::current_path(cec));
                throw InputError(shown + ": " + plain_or_quoted((rel.empty() ? up : rel).string()) +
                                 " is a file, not a folder, so the output folder cannot be made in it; choose another " +
                                 setting);
            }
            break;
        }
        if (up == up.root_path()) break;
    }
    const fs::path cwd = fs::current_path(ec);
    if (!ec && path_within(cwd, m_path))
        throw InputError(shown + ": is the current folder or one of its parents; normlab replaces its output folder "
                                 "as a whole, so name a new folder (e.g. " +
                                 (setting == "--out"        ? "--out results/run1"
                                  : setting == "output.dir" ? "output.dir \"results/run1\""
                                                            : "results/run1") +
                                 ")");
    for (const auto& k : keep) {
        if (resolved(k) == resolved(m_path))
            throw InputError(shown + ": is an input of this run" + (k.string() == shown ? "" : " (" + k.string() + ")") +
                             ", not a folder for its results; choose another " + setting);
        if (path_within(k, m_path))
            throw InputError(shown + ": the output folder holds " + k.string() +
                             ", an input of this run; normlab replaces the output folder as a whole, so choose "
                             "another " + setting);
    }
    if (fs::exists(m_path, ec)) {
        if (!fs::is_directory(m_path, ec))
            throw InputError(shown + ": output path exists and is not a folder");
        if (!force && !fs::is_empty(m_path, ec)) {
            if (!is_normlab_result(m_path)) {
                // One of its entries (the first by name), so the user can see what it holds.
                std::string first;
                for (auto it = fs::directory_iterator(m_path, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
                    const std::string name = it->path().filename().string();
                    if (first.empty() || name < first) first = name;
                }
                throw InputError(shown + ": output folder is not empty" +
                                 (first.empty() ? std::string() : " (it holds " + quoted_text(first) + ")") +
                                 " and does not hold an earlier normlab result; choose another " + setting +
                                 " or pass --force to replace it");
            }
            const std::string foreign = foreign_entry(m_path);
            if (!foreign.empty())
                throw InputError(shown + ": output folder holds an earlier normlab result and also " + quoted_text(foreign) +
                                 ", which normlab did not write; move it away, choose another " + setting + " or pass "
                                 "--force to replace the whole folder");
        }
    }
    m_staging = m_path.parent_path() / staging_name(m_path.filename().string(), ::getpid());
}

void OutputFolder::stage() {
    if (m_staged) return;
    // Missing parents are created now, when there is something to write, and recorded so
    // that a run failing later leaves no empty folder behind.
    std::error_code ec;
    std::vector<fs::path> missing;
    for (fs::path p = m_path.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
        missing.insert(missing.begin(), p);
        if (p == p.root_path()) break;
    }
    for (const auto& p : missing) {
        fs::create_directory(p, ec);
        if (ec) {
            remove_staging({}, m_created);
            m_created.clear();
            throw EnvError(m_target.string() + ": cannot write the output folder here: cannot create " + p.string() +
                           ": " + ec.message());
        }
        m_created.push_back(p);
    }
    remove_stale_staging(m_path.parent_path(), m_path.filename().string());
    fs::remove_all(m_staging, ec);
    fs::create_directories(m_staging, ec);
    if (!ec) {
        // Held while this run lives (the kernel drops it when the process dies): a later
        // run tells a live staging folder from a stale one by it (remove_stale_staging).
        m_lock_fd = ::open(m_staging.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (m_lock_fd >= 0) ::flock(m_lock_fd, LOCK_SH | LOCK_NB);
    }
    if (ec) {
        remove_staging(m_staging, m_created);
        m_created.clear();
        // The staging folder is normlab's own; the user named the target and its parent.
        throw EnvError(m_target.string() + ": cannot write the output folder here: cannot create a folder in " +
                       m_path.parent_path().string() + ": " + ec.message());
    }
    live_staging()[m_staging] = Staged{m_created, false};
    m_staged = true;
}

void OutputFolder::prepare() {
    std::lock_guard<std::mutex> lock(disk_mutex());
    // An immutable folder (chattr +i) or one on a read-only file system cannot be renamed
    // away at commit; access() says so (EPERM, EROFS) without touching it. A plain lack of
    // write permission (EACCES) does not stop a rename within the same parent.
    std::error_code ec;
    if (fs::exists(m_path, ec) && ::access(m_path.c_str(), W_OK) != 0) {
        const int err = errno;  // before anything else may set it
        if (err == EPERM || err == EROFS)
            throw EnvError(m_target.string() + ": cannot replace the existing folder: " +
                           std::error_code(err, std::generic_category()).message());
    }
    stage();
}

OutputFolder::~OutputFolder() {
    std::lock_guard<std::mutex> lock(disk_mutex());
    if (m_lock_fd >= 0) ::close(m_lock_fd);
    if (!m_staged) return;
    if (!m_committed) remove_staging(m_staging, m_created);
    live_staging().erase(m_staging);
}

void OutputFolder::write(const fs::path& relative, const std::string& bytes) {
    bool escapes = relative.empty() || relative.has_root_path();
    for (const auto& part : relative) escapes = escapes || part == "..";
    if (escapes)
        throw InputError(relative.string() + ": refusing to write outside the output folder " + m_target.string());
    std::lock_guard<std::mutex> lock(disk_mutex());
    stage();
    live_staging()[m_staging].written = true;
    fs::path p = m_staging / relative;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) throw EnvError((m_target / relative).string() + ": cannot write: cannot create its folder: " + ec.message());
    errno = 0;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    if (!out) throw EnvError((m_target / relative).string() + ": cannot write: " + os_reason());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw EnvError((m_target / relative).string() + ": write failed: " + os_reason());
}

void OutputFolder::commit() {
    std::lock_guard<std::mutex> lock(disk_mutex());
    stage();  // nothing written: the result is an empty folder
    std::error_code ec;
    fs::path old;
    if (fs::exists(m_path, ec)) {
        old = m_staging;
        old += kOldSuffix;
        fs::rename(m_path, old, ec);
        if (ec) throw EnvError(m_target.string() + ": cannot replace the existing folder: " + ec.message());
    }
    fs::rename(m_staging, m_path, ec);
    if (ec) {
        if (!old.empty()) fs::rename(old, m_path, ec);
        throw EnvError(m_target.string() + ": cannot move results into place: " + ec.message());
    }
    m_committed = true;
    live_staging().erase(m_staging);
    if (!old.empty()) fs::remove_all(old, ec);
}

void write_file_atomic(const fs::path& path, const std::string& bytes) {
    std::error_code ec;
    if (!path.parent_path().empty()) fs::create_directories(path.parent_path(), ec);
    fs::path tmp = path;
    tmp += ".normlab-tmp-" + std::to_string(::getpid());
    {
        errno = 0;
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw EnvError(path.string() + ": cannot write: " + os_reason());
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        out.close();
        if (!out) {
            const std::string why = os_reason();
            fs::remove(tmp, ec);
            throw EnvError(path.string() + ": write failed: " + why);
        }
    }
    fs::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        throw EnvError(path.string() + ": cannot move into place: " + ec.message());
    }
}

std::size_t abandon_output_folders() {
    disk_mutex().lock();  // never unlocked: the caller exits right after
    std::size_t n = 0;
    for (const auto& [staging, staged] : live_staging()) {
        remove_staging(staging, staged.created);
        n += staged.written;
    }
    live_staging().clear();
    return n;
}

}  // namespace normlab
