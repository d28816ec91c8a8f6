// The "image_files" source: real photographs (JPEG/PNG) as an (N, C, H, W) batch in [0, 1],
// one centre crop per image or all H x W tiles.
#include <algorithm>
#include <cctype>

#include "data/image_decode.hpp"
#include "data/source_impl.hpp"

namespace normlab {

namespace {

// Patch origins (top-left corners) in an image: the centre crop, or the grid of whole
// tiles, centred so that the leftover margin is split between both sides.
std::vector<std::pair<std::size_t, std::size_t>> patch_origins(const Image8& img, std::size_t ph, std::size_t pw,
                                                               bool tile) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    if (!tile) {
        out.emplace_back((img.height - ph) / 2, (img.width - pw) / 2);
        return out;
    }
    const std::size_t ny = img.height / ph, nx = img.width / pw;
    const std::size_t y0 = (img.height - ny * ph) / 2, x0 = (img.width - nx * pw) / 2;
    for (std::size_t i = 0; i < ny; ++i)
        for (std::size_t j = 0; j < nx; ++j) out.emplace_back(y0 + i * ph, x0 + j * pw);
    return out;
}

}  // namespace

SourceData build_image_files(const std::string&, ObjectReader& r, const DataContext& ctx) {
    const auto paths = r.strings("paths");
    const auto folder = r.string("folder");
    if (paths.has_value() == folder.has_value())
        r.location().fail("give either \"paths\" (a list of image files) or \"folder\", not both or neither",
                          {r.at("paths").pointer, r.at("folder").pointer});
    const bool tile = r.choice("mode", {"center", "tile"}, "center") == "tile";
    const long long channels = r.integer("channels", 3);
    if (channels != 1 && channels != 3)
        r.at("channels").fail("channels must be 1 (grey) or 3 (RGB), but got " + std::to_string(channels));
    std::optional<Shape> patch;
    if (r.has("patch")) {
        patch = read_positive_shape(r, "patch");
        if (patch->size() != 2) r.at("patch").fail("expected [H, W], but got " + format_shape(*patch));
    } else if (tile) {
        r.at("mode").fail("mode \"tile\" needs \"patch\": [H, W]");
    }
    std::size_t max_patches = 0;
    if (r.has("max_patches")) {
        const long long m = *r.integer("max_patches");
        if (m <= 0) r.at("max_patches").fail("max_patches must be a positive integer, but got " + std::to_string(m));
        max_patches = static_cast<std::size_t>(m);
    }

    // The files, each with the pointer that named it.
    std::vector<std::pair<std::filesystem::path, JsonLocation>> files;
    if (paths) {
        if (paths->empty()) r.at("paths").fail("expected at least one image path");
        for (std::size_t i = 0; i < paths->size(); ++i)
            files.emplace_back(resolve_path(ctx, (*paths)[i]), r.at("paths").child(i));
    } else {
        const auto dir = resolve_path(ctx, *folder);
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) r.at("folder").fail(dir.string() + ": not a folder");
        const std::vector<std::filesystem::path> found = image_files_in(dir);
        if (found.empty()) r.at("folder").fail(dir.string() + ": no .jpg, .jpeg or .png files");
        for (const auto& f : found) files.emplace_back(f, r.at("folder"));
    }

    const auto nch = static_cast<std::size_t>(channels);
    std::size_t ph = 0, pw = 0;
    std::vector<double> values;
    std::size_t count = 0;
    for (const auto& file : files) {
        // Not a structured binding: C++17 does not let the lambda below capture one (clang refuses).
        const std::filesystem::path& path = file.first;
        const JsonLocation& loc = file.second;
        if (max_patches && count == max_patches) break;
        const Image8 img = at_location(loc, [&] { return read_image(path, static_cast<int>(channels)); });
        if (!patch && count == 0) ph = img.height, pw = img.width;
        if (patch) ph = (*patch)[0], pw = (*patch)[1];
        if (!patch && (img.height != ph || img.width != pw))
            loc.fail(path.string() + ": image is " + std::to_string(img.height) + " x " + std::to_string(img.width) +
                     " (H x W) but the first is " + std::to_string(ph) + " x " + std::to_string(pw) +
                     "; give \"patch\": [H, W] to crop or tile them to one size");
        if (img.height < ph || img.width < pw)
            loc.fail(path.string() + ": image of " + std::to_string(img.height) + " x " + std::to_string(img.width) +
                     " (H x W) is smaller than the patch " + std::to_string(ph) + " x " + std::to_string(pw));
        for (const auto& [y0, x0] : patch_origins(img, ph, pw, tile)) {
            if (max_patches && count == max_patches) break;
            // (H, W, C) interleaved -> (C, H, W) planes, 8-bit levels scaled to [0, 1].
            for (std::size_t c = 0; c < nch; ++c)
                for (std::size_t y = 0; y < ph; ++y)
                    for (std::size_t x = 0; x < pw; ++x)
                        values.push_back(img.pixels[((y0 + y) * img.width + x0 + x) * nch + c] / 255.0);
            ++count;
        }
    }
    SourceData d;
    d.values = xt::xarray<double>::from_shape({count, nch, ph, pw});
    std::copy(values.begin(), values.end(), d.values.begin());
    return d;
}

}  // namespace normlab
