#pragma once
// Which names and paths the output folder can be written under on any machine: what the
// config's checks (validate and run alike) and OutputFolder refuse before anything is
// computed, rather than the file system at the first write.
#include <cstddef>
#include <string>
#include <string_view>

namespace normlab {

/// The longest name of one file or folder, in bytes, on common file systems (ext4, XFS,
/// btrfs, tmpfs, ZFS; APFS and NTFS count 255 characters): a longer path component
/// cannot be created on any of them.
constexpr std::size_t kMaxNameBytes = 255;

/// A run writes into a staging folder beside its output folder `name`, called "." + name +
/// kStagingInfix + its process id (staging_name), then renames it; while it replaces an
/// earlier result, that result is set aside under the staging folder's name + kOldSuffix.
constexpr std::string_view kStagingInfix = ".normlab-staging-";
constexpr std::string_view kOldSuffix = "-old";
std::string staging_name(const std::string& name, long long pid);

/// The longest name of an output folder (its last component), in bytes: its staging folder
/// beside it, "." + name + ".normlab-staging-" + pid (+ "-old" while it replaces an earlier
/// result), must fit in kMaxNameBytes too.
std::size_t max_output_folder_name_bytes();

/// Why `name`, one path component of the output, cannot be written: "is N bytes long, more
/// than the M bytes ...", with M = `max_bytes`. Empty when it fits.
std::string name_length_problem(const std::string& name, std::size_t max_bytes = kMaxNameBytes);

/// Why `target` cannot be an output folder on any machine, whatever is on the disk: empty;
/// holding a NUL character; the root folder; a relative path of "." and ".." alone (the
/// current folder or one of its parents, which a run would replace as a whole); a component
/// longer than kMaxNameBytes, or a last one longer than max_output_folder_name_bytes(); a
/// leading "~", which only a shell expands (the message gives the path under $HOME). A
/// trailing '/' or "." is ignored, as OutputFolder ignores it. Empty when none applies.
std::string output_folder_problem(const std::string& target);

}  // namespace normlab
