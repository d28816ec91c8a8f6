#pragma once
// JPEG and PNG decoding (stb_image from Debian's libstb-dev), for the "image_files" source.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace normlab {

/// An 8-bit image, interleaved: pixel (y, x) channel c is at (y * width + x) * channels + c.
struct Image8 {
    std::size_t width = 0, height = 0, channels = 0;
    std::vector<std::uint8_t> pixels;
};

/// Decodes JPEG or PNG bytes to `channels` channels (1: grey, by stb's luma weights; 3:
/// RGB). 16-bit PNGs are reduced to 8 bits. `what` names the data in messages. Throws
/// InputError "<what>: cannot decode image (<stb's reason>)", e.g. "unknown image type".
/// Decoding depends on stb's version: JPEG pixels may differ by one level from other
/// decoders (PIL, libjpeg); PNG is lossless and exact.
Image8 decode_image(const std::string& bytes, int channels, const std::string& what);

/// Width and height of JPEG or PNG bytes, read from the header without decoding the
/// pixels (stbi_info). False when stb does not recognise the bytes.
bool image_dimensions(const std::string& bytes, std::size_t& width, std::size_t& height);

/// read_file_bytes + decode_image.
Image8 read_image(const std::filesystem::path& path, int channels);

/// The regular files directly in `dir` whose extension is .jpg, .jpeg or .png in any case,
/// sorted by path: the order in which the "image_files" source reads a folder (and its
/// estimate counts max_patches). Empty when `dir` cannot be listed; entries that cannot be
/// examined are skipped.
std::vector<std::filesystem::path> image_files_in(const std::filesystem::path& dir);

}  // namespace normlab
