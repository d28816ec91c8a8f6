#include "data/estimate.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include <zlib.h>

#include "data/files.hpp"
#include "data/image_decode.hpp"
#include "data/npy.hpp"
#include "data/source_impl.hpp"
#include "data/text.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// Reading a spec that make_batch has not validated yet: any problem gives "unknown".
std::optional<long long> int_at(const Json& spec, const char* key) {
    auto it = spec.find(key);
    if (it == spec.end()) return std::nullopt;
    if (it->is_number_unsigned()) {
        auto u = it->get<unsigned long long>();
        return u > static_cast<unsigned long long>(std::numeric_limits<long long>::max())
                   ? std::numeric_limits<long long>::max() : static_cast<long long>(u);
    }
    if (it->is_number_integer()) return it->get<long long>();
    if (it->is_number_float()) {
        const double d = it->get<double>();
        if (d >= 0 && d < 9e18) return static_cast<long long>(d);
    }
    return std::nullopt;
}

std::size_t positive_at(const Json& spec, const char* key, std::size_t fallback = 0) {
    auto v = int_at(spec, key);
    return v && *v > 0 ? static_cast<std::size_t>(*v) : fallback;
}

std::optional<std::string> string_at(const Json& spec, const char* key) {
    auto it = spec.find(key);
    if (it == spec.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
}

// The canonical channel axis make_batch will give data of `rank` axes from `spec`; nullopt
// where the spec's axis is not an integer in range or the source is unknown.
std::optional<std::size_t> channel_axis_of(const Json& spec, std::size_t rank) {
    std::optional<long long> ca;
    if (spec.contains("channel_axis")) ca = int_at(spec, "channel_axis");
    else if (const auto source = string_at(spec, "source")) ca = default_channel_axis(*source, rank);
    const long long n = static_cast<long long>(rank);
    if (!ca || *ca < -n || *ca >= n) return std::nullopt;
    return static_cast<std::size_t>(*ca < 0 ? *ca + n : *ca);
}

std::optional<Shape> shape_at(const Json& spec, const char* key) {
    auto it = spec.find(key);
    if (it == spec.end() || !it->is_array() || it->empty()) return std::nullopt;
    Shape s;
    for (const auto& d : *it) {
        if (!d.is_number_integer() && !d.is_number_unsigned()) return std::nullopt;
        if (d.is_number_unsigned()) s.push_back(d.get<unsigned long long>());
        else if (d.get<long long>() <= 0) return std::nullopt;
        else s.push_back(static_cast<std::size_t>(d.get<long long>()));
        if (s.back() == 0) return std::nullopt;
    }
    return s;
}

std::size_t product(const Shape& s) {
    std::size_t n = 1;
    for (auto d : s) n = saturating_mul(n, d);
    return n;
}

std::string describe(const Shape& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

bool regular_file(const fs::path& p, std::size_t& size) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return false;
    const auto sz = fs::file_size(p, ec);
    if (ec) return false;
    size = static_cast<std::size_t>(sz);
    return true;
}

// Feeds the bytes of a regular file to fn(data, n), decompressed when it is gzip (as
// read_maybe_gzip detects it), 64 KiB at a time, until fn returns false or the data ends.
// Returns the number of bytes read from the file (compressed size), or nullopt when the
// file is not a readable regular file.
template <class F>
std::optional<std::size_t> stream_text(const fs::path& p, F&& fn) {
    std::size_t size = 0;
    if (!regular_file(p, size)) return std::nullopt;
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::vector<char> buf(65536), out(65536);
    std::size_t read_total = 0;
    bool first = true, gzip = false, go_on = true;
    z_stream zs{};
    while (go_on && in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto got = static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0));
        if (got == 0) break;
        read_total += got;
        if (first) {
            first = false;
            gzip = got >= 2 && static_cast<unsigned char>(buf[0]) == 0x1f && static_cast<unsigned char>(buf[1]) == 0x8b;
            if (gzip && inflateInit2(&zs, 15 + 32) != Z_OK) return read_total;
        }
        if (!gzip) {
            go_on = fn(buf.data(), got);
            continue;
        }
        zs.next_in = reinterpret_cast<Bytef*>(buf.data());
        zs.avail_in = static_cast<uInt>(got);
        while (go_on && zs.avail_in > 0) {
            zs.next_out = reinterpret_cast<Bytef*>(out.data());
            zs.avail_out = static_cast<uInt>(out.size());
            const int rc = inflate(&zs, Z_NO_FLUSH);
            const std::size_t produced = out.size() - zs.avail_out;
            if (produced) go_on = fn(out.data(), produced);
            if (rc == Z_STREAM_END) {
                if (zs.avail_in == 0) break;
                inflateReset(&zs);  // another gzip member follows
            } else if (rc != Z_OK) {
                go_on = false;  // corrupt: make_batch reports it
            }
        }
    }
    if (gzip) inflateEnd(&zs);
    return read_total;
}

struct TextScan {
    std::size_t bytes = 0;      // decompressed
    std::size_t file_bytes = 0; // as stored
    std::size_t cells = 0;      // csv: delimiters outside quotes + 1 per non-blank line
    bool ok = false;
};

TextScan scan_text(const fs::path& p, char delim, std::size_t stop_above) {
    TextScan s;
    bool quoted = false, line_has_text = false;
    auto r = stream_text(p, [&](const char* d, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) {
            const char c = d[i];
            if (c == '\n') {
                if (line_has_text) ++s.cells;
                line_has_text = false;
                quoted = false;  // quoted cells never span lines in normlab's csv
            } else if (c == '"') {
                quoted = !quoted;
                line_has_text = true;
            } else if (c == delim && !quoted) {
                ++s.cells;
                line_has_text = true;
            } else if (c != ' ' && c != '\t' && c != '\r') {
                line_has_text = true;
            }
        }
        s.bytes += n;
        return s.bytes <= stop_above;
    });
    if (line_has_text) ++s.cells;
    s.ok = r.has_value();
    s.file_bytes = r.value_or(0);
    return s;
}

// The nesting shape of an inline "values" list (as source_values reads it).
Shape nesting(const Json& j) {
    Shape s;
    const Json* node = &j;
    while (node->is_array() && !node->empty()) {
        s.push_back(node->size());
        node = &(*node)[0];
    }
    return s;
}

// One row of an embedding table (embed_sequences: a std::map from token id to a vector of
// `dim` doubles): the values, and the map node and vector around them, about 112 bytes
// with the allocator's headers. Tokens (4096, 1024, 1) of a vocabulary of 10^8, all real,
// peaked at 516 MiB (estimate 597 MiB) where 8 bytes a row had been counted (116 MiB).
std::size_t embedding_row_bytes(std::size_t dim) { return saturating_add(saturating_mul(dim, 8), 112); }

struct Ctx {
    const Json& spec;
    const DataContext& dc;
    std::size_t dsize;
    std::size_t stop_above;
};

DataEstimate dense(std::size_t n, const Ctx& c, std::size_t extra_build = 0) {
    DataEstimate e;
    e.elements = n;
    e.batch_bytes = saturating_mul(n, c.dsize);
    e.build_bytes = saturating_add(saturating_mul(n, 8), extra_build);
    return e;
}

DataEstimate of_npy(const fs::path& p, const Ctx& c) {
    DataEstimate e;
    std::size_t size = 0;
    if (!regular_file(p, size)) return e;
    e.build_bytes = size;  // read_npy holds the whole file
    try {
        const NpyHeader h = read_npy_header(p, size);
        // A header may claim more than the file holds: only what the file holds counts.
        e = dense(npy_values_held(h, size), c);
        e.build_bytes = npy_read_bytes(h, size);
        e.shape = describe(h.shape);
        e.dims = h.shape;
    } catch (const std::exception&) {
        // make_batch reports the bad header
    }
    return e;
}

DataEstimate of_csv(const Ctx& c) {
    DataEstimate e;
    const auto path = string_at(c.spec, "path");
    if (!path) return e;
    const auto delim = string_at(c.spec, "delimiter").value_or(",");
    const TextScan s = scan_text(resolve_path(c.dc, *path), delim.size() == 1 ? delim[0] : ',', c.stop_above);
    if (!s.ok) return e;
    // The text and the file's bytes are held while parsing; each cell becomes a double
    // twice (parsed rows, then the array) before the batch is built.
    e = dense(s.cells, c, saturating_add(saturating_add(s.bytes, s.file_bytes), saturating_mul(s.cells, 8)));
    e.shape = "at most " + std::to_string(s.cells) + " cells";
    return e;
}

DataEstimate of_text(const Ctx& c) {
    DataEstimate e;
    const auto path = string_at(c.spec, "path");
    if (!path) return e;
    const fs::path p = resolve_path(c.dc, *path);
    const TextScan s = scan_text(p, '\0', c.stop_above);
    if (!s.ok) return e;
    // Reading and splitting holds the text, its words (~48 bytes each, at most one per 2
    // bytes of text) and the sentence lists: over the limit already, that is the estimate.
    const std::size_t reading = saturating_add(s.file_bytes, saturating_mul(s.bytes, 25));
    e.build_bytes = reading;
    if (reading > c.stop_above) return e;
    try {
        const std::string text = read_maybe_gzip(p);
        const bool by_line = string_at(c.spec, "split").value_or("sentences") == "lines";
        auto sentences = split_sentences(text, by_line);
        std::size_t b = sentences.size();
        if (const std::size_t m = positive_at(c.spec, "max_sentences")) b = std::min(b, m);
        std::size_t longest = 0;
        for (std::size_t i = 0; i < b; ++i) longest = std::max(longest, sentences[i].size());
        const std::size_t t = std::min(longest, positive_at(c.spec, "max_len", longest));  // a cap
        const std::size_t dim = positive_at(c.spec, "dim");
        const Shape shape{b, t, dim};
        const std::size_t n = product(shape);
        // The embedding table: one row per distinct word, at most one per token.
        e = dense(n, c, saturating_add(reading, saturating_mul(std::min(saturating_mul(b, t), s.bytes / 2 + 1),
                                                               embedding_row_bytes(dim))));
        e.batch_bytes = saturating_add(e.batch_bytes, saturating_mul(b, t));  // mask
        e.shape = describe(shape);
        e.dims = shape;
    } catch (const std::exception&) {
    }
    return e;
}

DataEstimate of_image_files(const Ctx& c) {
    DataEstimate e;
    std::vector<fs::path> files;
    if (auto it = c.spec.find("paths"); it != c.spec.end() && it->is_array()) {
        for (const auto& p : *it)
            if (p.is_string()) files.push_back(resolve_path(c.dc, p.get<std::string>()));
    } else if (auto folder = string_at(c.spec, "folder")) {
        files = image_files_in(resolve_path(c.dc, *folder));
    }
    const std::size_t ch = positive_at(c.spec, "channels", 3);
    const std::size_t max_patches = positive_at(c.spec, "max_patches");
    const auto patch = shape_at(c.spec, "patch");
    const bool tile = string_at(c.spec, "mode").value_or("center") == "tile";
    std::size_t patches = 0, elements = 0, decode_peak = 0, pixels_first = 0;
    for (const auto& f : files) {
        if (max_patches && patches >= max_patches) break;
        std::size_t size = 0;
        if (!regular_file(f, size)) continue;
        decode_peak = std::max(decode_peak, size);
        if (size > c.stop_above) continue;
        std::size_t w = 0, h = 0;
        if (!image_dimensions(read_prefix(f, size <= (16u << 20) ? size : (1u << 20)), w, h)) continue;
        // stb's pixels and normlab's copy of them.
        decode_peak = std::max(decode_peak, saturating_add(size, saturating_mul(saturating_mul(w, h), 2 * ch)));
        std::size_t count = 1, per = saturating_mul(w, h);
        if (patch && patch->size() == 2) {
            per = saturating_mul((*patch)[0], (*patch)[1]);
            if (tile) count = (h / (*patch)[0]) * (w / (*patch)[1]);
        } else if (pixels_first == 0) {
            pixels_first = per;
        }
        if (max_patches) count = std::min(count, max_patches - patches);
        patches += count;
        elements = saturating_add(elements, saturating_mul(saturating_mul(count, per), ch));
    }
    // Pixels are gathered into a growing vector (up to twice its size while it grows),
    // then copied into the array.
    e = dense(elements, c, saturating_add(decode_peak, saturating_mul(elements, 16)));
    e.shape = std::to_string(patches) + " patches";
    return e;
}

}  // namespace

std::size_t saturating_mul(std::size_t a, std::size_t b) {
    if (a != 0 && b > kMax / a) return kMax;
    return a * b;
}

std::size_t saturating_add(std::size_t a, std::size_t b) { return b > kMax - a ? kMax : a + b; }

std::string format_bytes(std::size_t bytes) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes == kMax) return "more than 16 EiB";
    double v = static_cast<double>(bytes);
    std::size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof units / sizeof *units) v /= 1024, ++u;
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%zu B", bytes);
    else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

DataEstimate estimate_batch(const std::string&, const Json& spec, const DataContext& ctx,
                            std::size_t stop_above) {
    DataEstimate e;
    if (!spec.is_object()) return e;
    const Ctx c{spec, ctx, ctx.dtype == DType::float64 ? std::size_t{8} : std::size_t{4}, stop_above};
    try {
        const std::string source = string_at(spec, "source").value_or("");
        if (source == "gaussian" || source == "images") {
            if (auto s = shape_at(spec, "shape")) {
                e = dense(product(*s), c);
                // gaussian draws straight into the run dtype (no doubles while building)
                if (source == "gaussian") e.build_bytes = 0;
                e.shape = describe(*s);
                e.dims = *s;
            }
        } else if (source == "values") {
            if (auto it = spec.find("values"); it != spec.end()) {
                const Shape s = nesting(*it);
                e = dense(product(s), c);
                e.shape = describe(s);
                e.dims = s;
            }
        } else if (source == "tokens") {
            const Shape s{positive_at(spec, "batch"), positive_at(spec, "max_len"), positive_at(spec, "dim")};
            const std::size_t tokens = saturating_mul(s[0], s[1]);
            const std::size_t vocab = positive_at(spec, "vocab", 1000);
            // values, the token ids drawn (grown one at a time: up to 16 bytes each), the
            // embedding rows of the distinct ones, and the mask
            e = dense(product(s), c, saturating_add(saturating_mul(tokens, 16),
                                                    saturating_mul(std::min(saturating_add(vocab, 1), saturating_add(tokens, 1)),
                                                                   embedding_row_bytes(s[2]))));
            e.batch_bytes = saturating_add(e.batch_bytes, tokens);
            e.shape = describe(s);
            e.dims = s;
        } else if (source == "text") {
            e = of_text(c);
        } else if (source == "npy") {
            if (auto p = string_at(spec, "path")) e = of_npy(resolve_path(ctx, *p), c);
        } else if (source == "csv") {
            e = of_csv(c);
        } else if (source == "image_files") {
            e = of_image_files(c);
        }
        // A padding mask given as a file or as lengths (sources that do not build their own).
        if (auto m = string_at(spec, "mask")) {
            const DataEstimate me = of_npy(resolve_path(ctx, *m), c);
            // A broadcastable mask is kept expanded: at most one byte per data element.
            e.batch_bytes = saturating_add(e.batch_bytes, std::max(me.elements, e.elements));
            e.build_bytes = saturating_add(e.build_bytes, me.build_bytes);
        } else if (spec.contains("lengths") && source != "tokens" && source != "text") {
            e.batch_bytes = saturating_add(e.batch_bytes, e.elements);
        }
    } catch (const std::exception&) {
        // Whatever was estimated so far stands; make_batch reports the problem.
    }
    if (!e.dims.empty()) e.channel_axis = channel_axis_of(spec, e.dims.size());
    return e;
}

}  // namespace normlab
