#include "data/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include <xtensor/xmanipulation.hpp>

#include "data/estimate.hpp"
#include "data/files.hpp"
#include "data/half.hpp"
#include "data/system_memory.hpp"
#include "tensor/errors.hpp"

namespace normlab {

namespace {

const char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& what, const std::string& problem) {
    throw InputError(what + ": " + problem);
}

// ---------------------------------------------------------------------------------------
// Header: a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }

struct Header {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
};

class HeaderParser {
public:
    HeaderParser(const std::string& text, const std::string& what) : m_s(text), m_what(what) {}

    Header parse() {
        Header h;
        bool seen_descr = false, seen_order = false, seen_shape = false;
        expect('{');
        for (;;) {
            skip_ws();
            if (peek() == '}') {
                ++m_i;
                break;
            }
            std::string key = string_literal();
            expect(':');
            skip_ws();
            if (key == "descr") {
                if (peek() == '[')
                    bad("structured dtype (a list of fields); normlab reads plain numeric arrays");
                h.descr = string_literal();
                seen_descr = true;
            } else if (key == "fortran_order") {
                h.fortran_order = boolean_literal();
                seen_order = true;
            } else if (key == "shape") {
                h.shape = tuple_literal();
                seen_shape = true;
            } else {
                bad("unexpected key '" + key + "' in header");
            }
            skip_ws();
            if (peek() == ',') ++m_i;
            else if (peek() != '}') bad("expected ',' or '}' after the value of '" + key + "'");
        }
        skip_ws();
        if (m_i != m_s.size()) bad("unexpected text after the header dict");
        if (!seen_descr || !seen_order || !seen_shape)
            bad("header must have the keys 'descr', 'fortran_order' and 'shape'");
        return h;
    }

private:
    [[noreturn]] void bad(const std::string& problem) const {
        fail(m_what, "bad npy header: " + problem + " (header: " + printable() + ")");
    }
    std::string printable() const {
        // numpy pads the header with spaces up to its newline: neither is worth showing.
        std::string h = m_s.substr(0, 120);
        while (!h.empty() && (h.back() == ' ' || h.back() == '\n')) h.pop_back();
        std::string out;
        for (char c : h) out += (c >= 32 && c < 127) ? c : '?';
        return out;
    }
    char peek() const { return m_i < m_s.size() ? m_s[m_i] : '\0'; }
    void skip_ws() {
        while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' ||
                                    m_s[m_i] == '\r'))
            ++m_i;
    }
    void expect(char c) {
        skip_ws();
        if (peek() != c) bad(std::string("expected '") + c + "'");
        ++m_i;
    }
    std::string string_literal() {
        skip_ws();
        char q = peek();
        if (q != '\'' && q != '"') bad("expected a quoted string");
        std::size_t end = m_s.find(q, m_i + 1);
        if (end == std::string::npos) bad("unterminated string");
        std::string out = m_s.substr(m_i + 1, end - m_i - 1);
        m_i = end + 1;
        return out;
    }
    bool boolean_literal() {
        if (m_s.compare(m_i, 4, "True") == 0) return m_i += 4, true;
        if (m_s.compare(m_i, 5, "False") == 0) return m_i += 5, false;
        bad("'fortran_order' must be True or False");
    }
    Shape tuple_literal() {
        if (peek() != '(') bad("'shape' must be a tuple of integers");
        ++m_i;
        Shape shape;
        for (;;) {
            skip_ws();
            if (peek() == ')') {
                ++m_i;
                return shape;
            }
            if (peek() < '0' || peek() > '9') bad("'shape' must be a tuple of non-negative integers");
            std::size_t v = 0;
            while (peek() >= '0' && peek() <= '9') {
                std::size_t digit = static_cast<std::size_t>(peek() - '0');
                if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10)
                    bad("dimension too large in 'shape'");
                v = v * 10 + digit;
                ++m_i;
            }
            shape.push_back(v);
            skip_ws();
            if (peek() == ',') ++m_i;
            else if (peek() != ')') bad("expected ',' or ')' in 'shape'");
        }
    }

    const std::string& m_s;
    const std::string& m_what;
    std::size_t m_i = 0;
};

// ---------------------------------------------------------------------------------------
// dtypes

enum class Kind { boolean, int_, uint_, float_ };

struct ElemType {
    Kind kind;
    std::size_t size;    // bytes
    bool big_endian;
    std::string name;    // numpy's name
};

bool host_is_big_endian() {
    const std::uint16_t probe = 1;
    unsigned char first;
    std::memcpy(&first, &probe, 1);
    return first == 0;
}

ElemType parse_descr(const std::string& descr, const std::string& what) {
    auto unsupported = [&](const std::string& why) -> ElemType {
        fail(what, "unsupported dtype '" + descr + "'" + (why.empty() ? "" : " (" + why + ")") +
                       "; normlab reads bool, int8..int64, uint8..uint64 and "
                       "float16/float32/float64 arrays");
    };
    if (descr.size() < 2) return unsupported("");
    char order = descr[0];
    std::string code = descr.substr(1);
    if (order != '<' && order != '>' && order != '|' && order != '=') {
        order = '=';
        code = descr;
    }
    bool big = order == '>' || (order == '=' && host_is_big_endian());
    if (code == "?" || code == "b1") return {Kind::boolean, 1, big, "bool"};
    if (code == "O") return unsupported("Python objects");
    if (code.size() < 2) return unsupported("");
    char k = code[0];
    std::string digits = code.substr(1);
    std::size_t size = digits == "1" ? 1 : digits == "2" ? 2 : digits == "4" ? 4 : digits == "8" ? 8 : 0;
    switch (k) {
        case 'i':
            if (size) return {Kind::int_, size, big, "int" + std::to_string(size * 8)};
            break;
        case 'u':
            if (size) return {Kind::uint_, size, big, "uint" + std::to_string(size * 8)};
            break;
        case 'f':
            if (size >= 2) return {Kind::float_, size, big, "float" + std::to_string(size * 8)};
            return unsupported("long double or unknown float size");
        case 'c': return unsupported("complex");
        case 'O': return unsupported("Python objects");
        case 'U': case 'S': case 'a': return unsupported("strings");
        case 'V':
            // numpy has no bfloat16: ml_dtypes' (JAX's) bfloat16 arrays are saved as 2 raw bytes.
            if (size == 2)
                return unsupported("raw bytes / structured; a bfloat16 array saved from ml_dtypes or JAX is stored so: "
                                   "save it as float32 (x.astype(np.float32)), which holds every bfloat16 exactly");
            return unsupported("raw bytes / structured");
        case 'M': case 'm': return unsupported("datetime");
        default: break;
    }
    return unsupported("");
}

std::uint64_t load_word(const unsigned char* p, std::size_t size, bool big) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < size; ++b) {
        std::size_t idx = big ? b : size - 1 - b;
        w = (w << 8) | p[idx];
    }
    return w;
}

double decode(const unsigned char* p, const ElemType& t) {
    std::uint64_t w = load_word(p, t.size, t.big_endian);
    switch (t.kind) {
        case Kind::boolean: return w ? 1.0 : 0.0;
        case Kind::uint_: return static_cast<double>(w);
        case Kind::int_: {
            // Sign-extend from t.size bytes.
            unsigned shift = static_cast<unsigned>(64 - 8 * t.size);
            auto s = static_cast<std::int64_t>(w << shift);
            return static_cast<double>(s >> shift);
        }
        case Kind::float_:
            if (t.size == 2) return half_to_double(static_cast<std::uint16_t>(w));
            if (t.size == 4) {
                auto b = static_cast<std::uint32_t>(w);
                float f;
                std::memcpy(&f, &b, 4);
                return static_cast<double>(f);
            } else {
                double d;
                std::memcpy(&d, &w, 8);
                return d;
            }
    }
    return 0.0;
}

std::uint64_t read_le(const std::string& s, std::size_t pos, std::size_t n) {
    return load_word(reinterpret_cast<const unsigned char*>(s.data()) + pos, n, false);
}

// ---------------------------------------------------------------------------------------
// writing

void append_le(std::string& out, std::uint64_t w, std::size_t n) {
    for (std::size_t b = 0; b < n; ++b) out += static_cast<char>((w >> (8 * b)) & 0xFFu);
}

std::string header_bytes(const std::string& descr, const Shape& shape) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
    for (std::size_t i = 0; i < shape.size(); ++i)
        dict += (i ? ", " : "") + std::to_string(shape[i]);
    dict += shape.size() == 1 ? ",), }" : "), }";
    // numpy pads with spaces so that the data starts at a multiple of 64 bytes, then '\n'.
    std::size_t total = kMagicLen + 4 + dict.size() + 1;
    std::size_t pad = (64 - total % 64) % 64;
    dict += std::string(pad, ' ') + "\n";
    if (dict.size() > 65535) throw InputError("npy header too long for rank " + std::to_string(shape.size()));
    std::string out(kMagic, kMagicLen);
    out += '\x01';
    out += '\x00';
    append_le(out, dict.size(), 2);
    return out + dict;
}

Shape shape_of(const xt::xarray<double>& a) { return Shape(a.shape().begin(), a.shape().end()); }

}  // namespace

std::size_t NpyHeader::count() const {
    std::size_t n = 1;
    for (auto d : shape) {
        if (d != 0 && n > std::numeric_limits<std::size_t>::max() / d) return std::numeric_limits<std::size_t>::max();
        n *= d;
    }
    return n;
}

NpyHeader parse_npy_header(const std::string& bytes, const std::string& what) {
    // A zip archive is the usual near miss: numpy.savez writes one (.npz), and so does
    // torch.save (.pt, .pth) since PyTorch 1.6.
    if (bytes.compare(0, 4, "PK\x03\x04") == 0)
        fail(what, "a zip archive, not an npy file (numpy.savez's .npz or torch.save's .pt?): save the one array "
                   "with numpy.save (for a tensor t: numpy.save(path, t.detach().numpy()))");
    if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
        fail(what, "not an npy file (bad magic: expected \\x93NUMPY at the start)");
    if (bytes.size() < kMagicLen + 2) fail(what, "truncated npy file (no version)");
    int major = static_cast<unsigned char>(bytes[6]);
    int minor = static_cast<unsigned char>(bytes[7]);
    if (major < 1 || major > 3 || minor != 0)
        fail(what, "unsupported npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + " (normlab reads 1.0, 2.0 and 3.0)");
    std::size_t len_size = major == 1 ? 2 : 4;
    std::size_t header_start = kMagicLen + 2 + len_size;
    if (bytes.size() < header_start) fail(what, "truncated npy file (no header length)");
    std::size_t header_len = read_le(bytes, kMagicLen + 2, len_size);
    if (bytes.size() - header_start < header_len)
        fail(what, "truncated npy file: header length " + std::to_string(header_len) +
                       " but only " + std::to_string(bytes.size() - header_start) +
                       " bytes follow");
    Header h = HeaderParser(bytes.substr(header_start, header_len), what).parse();
    ElemType t = parse_descr(h.descr, what);
    NpyHeader out;
    out.shape = h.shape;
    out.descr = h.descr;
    out.dtype = t.name;
    out.item_size = t.size;
    out.data_offset = header_start + header_len;
    out.fortran_order = h.fortran_order;
    out.major_version = major;
    return out;
}

NpyArray parse_npy(const std::string& bytes, const std::string& what) {
    const NpyHeader nh = parse_npy_header(bytes, what);
    const Header h{nh.descr, nh.fortran_order, nh.shape};
    const ElemType t = parse_descr(h.descr, what);
    const int major = nh.major_version;

    // As numpy does, the product of the nonzero dims (in bytes) must fit a signed size even
    // when a zero dim empties the array: the strides are formed from it (xtensor's are signed).
    std::size_t count = 1, span = t.size;
    const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
    for (auto d : h.shape) {
        if (d != 0 && span > limit / d) fail(what, "shape " + format_shape(h.shape) + " is too large");
        if (d != 0) span *= d;
        count *= d;
    }
    std::size_t data_start = nh.data_offset;
    std::size_t have = bytes.size() - data_start;
    std::size_t need = count * t.size;
    if (have < need)
        fail(what, "truncated npy file: shape " + format_shape(h.shape) + " of " + t.name +
                       " needs " + count_noun(need, "byte") + " of data, but the file has " +
                       std::to_string(have));
    if (have > need)
        fail(what, "data size does not match the header: shape " + format_shape(h.shape) +
                       " of " + t.name + " needs " + count_noun(need, "byte") +
                       " of data, but the file has " + std::to_string(have));

    // Values in file order; for Fortran order that is the row-major order of the reversed
    // shape, so a transpose of that view gives the array.
    Shape file_shape = h.shape;
    if (h.fortran_order) std::reverse(file_shape.begin(), file_shape.end());
    xt::xarray<double> flat = xt::xarray<double>::from_shape(file_shape);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + data_start;
    double* dst = flat.data();
    for (std::size_t i = 0; i < count; ++i) dst[i] = decode(p + i * t.size, t);

    NpyArray out;
    if (h.fortran_order && h.shape.size() > 1) out.values = xt::transpose(flat);
    else out.values = std::move(flat);
    out.descr = h.descr;
    out.dtype = t.name;
    out.fortran_order = h.fortran_order;
    out.major_version = major;
    return out;
}

NpyHeader read_npy_header(const std::filesystem::path& path, std::size_t file_bytes) {
    return parse_npy_header(read_prefix(path, std::min<std::size_t>(file_bytes, 1 << 20)), path.string());
}

std::size_t npy_values_held(const NpyHeader& h, std::size_t file_bytes) {
    const std::size_t held =
        file_bytes > h.data_offset && h.item_size ? (file_bytes - h.data_offset) / h.item_size : 0;
    return std::min(h.count(), held);
}

std::size_t npy_read_bytes(const NpyHeader& h, std::size_t file_bytes) {
    return saturating_add(file_bytes, saturating_mul(npy_values_held(h, file_bytes), h.fortran_order ? 16 : 8));
}

void check_npy_fits(const std::filesystem::path& path, std::size_t limit, const std::string& limit_what) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return;
    const std::size_t file_bytes = static_cast<std::size_t>(size);
    NpyHeader h;
    try {
        h = read_npy_header(path, file_bytes);
    } catch (const InputError&) {
        return;
    }
    const std::size_t need = npy_read_bytes(h, file_bytes);
    if (need <= limit) return;
    throw InputError(path.string() + ": reading it takes about " + format_bytes(need) + " of memory (the file's " +
                     format_bytes(file_bytes) + " and its values as doubles), more than " + limit_what);
}

NpyArray read_npy(const std::filesystem::path& path) {
    if (const std::size_t memory = physical_memory_bytes()) {  // 0: unknown
        const std::size_t swap = swap_bytes();
        check_npy_fits(path, saturating_add(memory, swap),
                       "the " + format_bytes(saturating_add(memory, swap)) + " of memory" +
                           (swap ? " and swap" : "") + " this process may use");
    }
    return parse_npy(read_file_bytes(path), path.string());
}

std::string npy_bytes(const xt::xarray<double>& values, DType dtype) {
    const Shape shape = shape_of(values);
    const double* src = values.data();
    const std::size_t n = values.size();
    std::string out;
    switch (dtype) {
        case DType::float16:
            out = header_bytes("<f2", shape);
            out.reserve(out.size() + 2 * n);
            for (std::size_t i = 0; i < n; ++i) append_le(out, double_to_half(src[i]), 2);
            break;
        case DType::bfloat16:
        case DType::float32:
            out = header_bytes("<f4", shape);
            out.reserve(out.size() + 4 * n);
            for (std::size_t i = 0; i < n; ++i) {
                auto f = static_cast<float>(round_to(dtype, src[i]));
                std::uint32_t b;
                std::memcpy(&b, &f, 4);
                append_le(out, b, 4);
            }
            break;
        case DType::float64:
            out = header_bytes("<f8", shape);
            out.reserve(out.size() + 8 * n);
            for (std::size_t i = 0; i < n; ++i) {
                std::uint64_t b;
                std::memcpy(&b, &src[i], 8);
                append_le(out, b, 8);
            }
            break;
    }
    return out;
}

std::string npy_bytes(const Tensor& t) {
    if (t.dtype == DType::float64) return npy_bytes(t.f64, t.dtype);
    // float storage: convert through double, exact for every value a float holds.
    xt::xarray<double> d = xt::cast<double>(t.f32);
    return npy_bytes(d, t.dtype);
}

namespace {
std::string u8_bytes(const xt::xarray<std::uint8_t>& values, const char* descr, bool as_bool) {
    std::string out = header_bytes(descr, Shape(values.shape().begin(), values.shape().end()));
    out.reserve(out.size() + values.size());
    const std::uint8_t* src = values.data();
    for (std::size_t i = 0; i < values.size(); ++i)
        out += static_cast<char>(as_bool ? (src[i] ? 1 : 0) : src[i]);
    return out;
}
}  // namespace

std::string npy_bytes_bool(const xt::xarray<std::uint8_t>& mask) { return u8_bytes(mask, "|b1", true); }

std::string npy_bytes_u8(const xt::xarray<std::uint8_t>& values) { return u8_bytes(values, "|u1", false); }

void write_file_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw EnvError(path.string() + ": cannot open for writing: " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw EnvError(path.string() + ": write failed: " + std::strerror(errno));
}

void write_npy(const std::filesystem::path& path, const Tensor& t) { write_file_bytes(path, npy_bytes(t)); }

}  // namespace normlab
