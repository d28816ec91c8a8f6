// The one translation unit that compiles stb_image's implementation.
#include "data/image_decode.hpp"

#include <algorithm>
#include <climits>

#include "data/files.hpp"
#include "tensor/tensor.hpp"
#include "tensor/errors.hpp"

#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO  // bytes come from read_file_bytes, which reports missing files our way
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#include <stb/stb_image.h>

namespace normlab {

namespace {

// What the bytes that stb_image refused look like, by their signature: its own reasons
// ("no SOF", "outofdata", "bad huffman code") name the decoder's step, not the file's fault.
std::string undecodable(const std::string& bytes, const std::string& reason) {
    // stb_image refuses dimensions over 2^24 and pixel buffers over 2^31 bytes.
    if (reason == "too large") return "its header gives a size beyond what stb_image decodes (damaged, or too large)";
    if (reason == "outofmem") return "stb_image could not allocate its pixels";
    // Valid files stb_image does not decode: 12-bit or arithmetic-coded JPEGs, PNGs of other depths.
    if (bytes.rfind("\xFF\xD8\xFF", 0) == 0)
        return reason == "only 8-bit" ? "a 12-bit JPEG, which stb_image does not decode (8-bit only)"
                                      : "a damaged or truncated JPEG file, or a kind of JPEG stb_image does not decode";
    if (bytes.rfind("\x89PNG\r\n\x1A\n", 0) == 0)
        return "a damaged or truncated PNG file, or a kind of PNG stb_image does not decode";
    return "not a JPEG or PNG file, the two formats the image sources read";
}

}  // namespace

Image8 decode_image(const std::string& bytes, int channels, const std::string& what) {
    if (bytes.size() > static_cast<std::size_t>(INT_MAX)) throw InputError(what + ": image file too large");
    int w = 0, h = 0, n = 0;
    unsigned char* p = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                             static_cast<int>(bytes.size()), &w, &h, &n, channels);
    if (!p)
        throw InputError(what + ": cannot decode image: " + undecodable(bytes, stbi_failure_reason()) + " (stb_image: " +
                         stbi_failure_reason() + ")");
    Image8 img;
    img.width = static_cast<std::size_t>(w);
    img.height = static_cast<std::size_t>(h);
    img.channels = static_cast<std::size_t>(channels);
    img.pixels.assign(p, p + img.width * img.height * img.channels);
    stbi_image_free(p);
    return img;
}

bool image_dimensions(const std::string& bytes, std::size_t& width, std::size_t& height) {
    if (bytes.size() > static_cast<std::size_t>(INT_MAX)) return false;
    int w = 0, h = 0, n = 0;
    if (!stbi_info_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()),
                               &w, &h, &n) || w <= 0 || h <= 0)
        return false;
    width = static_cast<std::size_t>(w);
    height = static_cast<std::size_t>(h);
    return true;
}

Image8 read_image(const std::filesystem::path& path, int channels) {
    return decode_image(read_file_bytes(path), channels, path.string());
}

std::vector<std::filesystem::path> image_files_in(const std::filesystem::path& dir) {
    note_input_path(dir);
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code ec_file;
        const std::string ext = lower_case(it->path().extension().string());
        if (it->is_regular_file(ec_file) && (ext == ".jpg" || ext == ".jpeg" || ext == ".png"))
            found.push_back(it->path());
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace normlab
