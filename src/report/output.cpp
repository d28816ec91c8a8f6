#include "report/output.hpp"

#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

bool is_normlab_result(const fs::path& dir) {
    std::ifstream in(dir / "report.json");
    if (!in) return false;
    try {
        auto j = nlohmann::json::parse(in);
        return j.is_object() && j.value("tool", "") == "normlab";
    } catch (const std::exception&) {
        return false;
    }
}

OutputFolder::OutputFolder(fs::path target, bool force) : m_target(std::move(target)) {
    std::error_code ec;
    if (fs::exists(m_target, ec)) {
        if (!fs::is_directory(m_target, ec))
            throw InputError(m_target.string() + ": output path exists and is not a folder");
        if (!force && !fs::is_empty(m_target, ec) && !is_normlab_result(m_target))
            throw InputError(m_target.string() +
                             ": output folder is not empty and does not hold an earlier normlab "
                             "result; choose another --out or pass --force to replace it");
    }
    fs::path parent = m_target.parent_path().empty() ? fs::path(".") : m_target.parent_path();
    fs::create_directories(parent, ec);
    if (ec) throw EnvError(parent.string() + ": cannot create output folder: " + ec.message());
    m_staging = parent / ("." + m_target.filename().string() + ".normlab-staging-" + std::to_string(::getpid()));
    fs::remove_all(m_staging, ec);
    fs::create_directories(m_staging, ec);
    if (ec) throw EnvError(m_staging.string() + ": cannot create staging folder: " + ec.message());
}

OutputFolder::~OutputFolder() {
    if (!m_committed) {
        std::error_code ec;
        fs::remove_all(m_staging, ec);
    }
}

void OutputFolder::write(const fs::path& relative, const std::string& bytes) {
    fs::path p = m_staging / relative;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    if (!out) throw EnvError((m_target / relative).string() + ": cannot write");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw EnvError((m_target / relative).string() + ": write failed (disk full?)");
}

void OutputFolder::commit() {
    std::error_code ec;
    fs::path old;
    if (fs::exists(m_target, ec)) {
        old = m_staging;
        old += "-old";
        fs::rename(m_target, old, ec);
        if (ec) throw EnvError(m_target.string() + ": cannot replace earlier result: " + ec.message());
    }
    fs::rename(m_staging, m_target, ec);
    if (ec) {
        if (!old.empty()) fs::rename(old, m_target, ec);
        throw EnvError(m_target.string() + ": cannot move results into place: " + ec.message());
    }
    m_committed = true;
    if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace normlab
