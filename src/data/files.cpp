#include "data/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <system_error>

#include <zlib.h>

#include "tensor/errors.hpp"

namespace normlab {

namespace {

// The live InputLog's paths; a mutex because loaders may one day read on several threads.
struct LogState {
    std::mutex mutex;
    bool active = false;
    std::vector<std::filesystem::path> paths;
    std::set<std::filesystem::path> seen;  // an image folder may list thousands of files
};
LogState& log_state() {
    static LogState s;
    return s;
}

}  // namespace

InputLog::InputLog() {
    LogState& s = log_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.active) return;
    s.active = m_active = true;
    s.paths.clear();
    s.seen.clear();
}

InputLog::~InputLog() {
    if (!m_active) return;
    LogState& s = log_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.active = false;
    s.paths.clear();
    s.seen.clear();
}

std::vector<std::filesystem::path> InputLog::paths() const {
    LogState& s = log_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    return m_active ? s.paths : std::vector<std::filesystem::path>{};
}

void note_input_path(const std::filesystem::path& path) {
    LogState& s = log_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.active && s.seen.insert(path).second) s.paths.push_back(path);
}

std::string read_file_bytes(const std::filesystem::path& path) {
    note_input_path(path);  // also when reading fails: a refused input is still an input
    const std::string what = path.string();
    std::error_code ec;
    auto st = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(st)) {
        // A relative path here was resolved against the current folder (a config read from
        // stdin, or named by a relative path): which folder that was is part of the answer.
        std::string where;
        std::error_code cwd_ec;
        const auto cwd = std::filesystem::current_path(cwd_ec);
        if (path.is_relative() && !cwd_ec) where = " (relative to the current folder, " + cwd.string() + ")";
        throw InputError(what + ": no such file" + where);
    }
    if (std::filesystem::is_directory(st)) throw InputError(what + ": is a directory, not a file");
    // A device, pipe or socket may never end (/dev/zero) or block forever (a FIFO).
    if (!std::filesystem::is_regular_file(st))
        throw InputError(what + ": not a regular file (a device, pipe or socket); give a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(what + ": cannot open: " + std::strerror(errno));
    // Reserved at the file's size and appended to in pieces, so the file is held once, as
    // the memory estimates count it: filled through istreambuf_iterator, libstdc++ builds
    // a temporary string by doubling and copies it over (a 100 MB file: 195 MB of peak
    // resident memory, against 99 MB read in pieces).
    std::string bytes;
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec) bytes.reserve(static_cast<std::size_t>(size));
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) bytes.append(buf, static_cast<std::size_t>(in.gcount()));
    if (in.bad()) throw InputError(what + ": read error");
    return bytes;
}

std::string read_prefix(const std::filesystem::path& path, std::size_t n) {
    std::ifstream in(path, std::ios::binary);
    std::string out(n, '\0');
    in.read(out.data(), static_cast<std::streamsize>(n));
    out.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return out;
}

std::string gunzip(const std::string& bytes, const std::string& what) {
    std::string out;
    z_stream zs{};
    // 15 + 32: a 32 KiB window with automatic gzip/zlib header detection.
    if (inflateInit2(&zs, 15 + 32) != Z_OK) throw InputError(what + ": cannot initialise zlib");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs.avail_in = static_cast<uInt>(bytes.size());
    char buf[65536];
    for (;;) {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        int rc = inflate(&zs, Z_NO_FLUSH);
        out.append(buf, sizeof buf - zs.avail_out);
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0) break;
            inflateReset(&zs);  // another gzip member follows
            continue;
        }
        if (rc == Z_OK) continue;
        if (rc == Z_BUF_ERROR && zs.avail_out != 0) rc = Z_DATA_ERROR;  // input ended early
        if (rc == Z_BUF_ERROR) continue;
        std::string msg = zs.msg ? zs.msg : (rc == Z_DATA_ERROR ? "unexpected end of data" : "zlib error");
        inflateEnd(&zs);
        throw InputError(what + ": corrupt or truncated gzip data (" + msg + ")");
    }
    inflateEnd(&zs);
    return out;
}

std::string read_maybe_gzip(const std::filesystem::path& path) {
    std::string bytes = read_file_bytes(path);
    const bool gz = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                    static_cast<unsigned char>(bytes[1]) == 0x8b;
    return gz ? gunzip(bytes, path.string()) : bytes;
}

}  // namespace normlab
