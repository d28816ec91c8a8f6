#pragma once
// Reading whole input files with the error messages every loader shares.
#include <filesystem>
#include <string>
#include <vector>

namespace normlab {

/// The bytes of a regular file. Throws InputError "<path>: no such file", "<path>: is a
/// directory, not a file", "<path>: not a regular file (a device, pipe or socket)...",
/// "<path>: cannot open: <reason>" or "<path>: read error".
std::string read_file_bytes(const std::filesystem::path& path);

/// Up to the first n bytes of the file at `path` (fewer when it is shorter; none when it
/// cannot be opened): enough for a header, without reading a large file whole. Records no
/// input (the reader that follows does).
std::string read_prefix(const std::filesystem::path& path, std::size_t n);

/// Records the input files and folders read while it lives (every read_file_bytes, and the
/// folders image_files lists), so that a run can refuse an output folder whose replacement
/// would delete one of its inputs. One log at a time: a second one, while the first lives,
/// records nothing.
class InputLog {
public:
    InputLog();
    ~InputLog();
    InputLog(const InputLog&) = delete;
    InputLog& operator=(const InputLog&) = delete;
    /// The paths read so far, each once, in the order of their first read, as the reader was given them.
    std::vector<std::filesystem::path> paths() const;

private:
    bool m_active = false;
};

/// Adds `path` to the live InputLog, if any: for readers that do not go through read_file_bytes.
void note_input_path(const std::filesystem::path& path);

/// The bytes of a file, decompressed when they are gzip (or zlib) data, detected by the
/// magic bytes rather than the name. Throws InputError as read_file_bytes, and
/// "<path>: corrupt or truncated gzip data (<zlib message>)".
std::string read_maybe_gzip(const std::filesystem::path& path);

/// Decompresses gzip or zlib data held in memory (concatenated gzip members are joined, as
/// gzip -d does). `what` names the data in messages; throws InputError on corrupt data.
std::string gunzip(const std::string& bytes, const std::string& what);

}  // namespace normlab
