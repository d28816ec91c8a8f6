#include "tensor/tensor.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "tensor/errors.hpp"

namespace normlab {

std::string dtype_name(DType d) {
    switch (d) {
        case DType::float16: return "float16";
        case DType::bfloat16: return "bfloat16";
        case DType::float32: return "float32";
        case DType::float64: return "float64";
    }
    return "?";
}

const char* const kDtypeNames = "float16, bfloat16, float32 or float64";

std::optional<DType> dtype_from_name(const std::string& name) {
    for (DType d : {DType::float16, DType::bfloat16, DType::float32, DType::float64})
        if (dtype_name(d) == name) return d;
    return std::nullopt;
}

double machine_eps(DType d) {
    switch (d) {
        case DType::float16: return 0.0009765625;   // 2^-10
        case DType::bfloat16: return 0.0078125;     // 2^-7
        case DType::float32: return std::numeric_limits<float>::epsilon();
        case DType::float64: return std::numeric_limits<double>::epsilon();
    }
    return 0;
}

DType compute_dtype(DType d) {
    return d == DType::float16 || d == DType::bfloat16 ? DType::float32 : d;
}

namespace {

// Round a double to a binary format with `mant` explicit mantissa bits and exponent range
// [emin, emax], round to nearest even, subnormals included. Used for float16/bfloat16, which
// have no native C++17 type; float32 goes through the hardware conversion instead.
double round_binary(double v, int mant, int emin, int emax) {
    if (!std::isfinite(v) || v == 0) return v;
    int e;
    std::frexp(v, &e);  // v = m * 2^e, 0.5 <= |m| < 1, so the leading bit has exponent e-1
    int lead = std::max(e - 1, emin);
    double quantum = std::ldexp(1.0, lead - mant);
    double r = std::nearbyint(v / quantum) * quantum;  // default rounding mode: to even
    double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mant), emax);
    if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), v);
    return r;
}

}  // namespace

double round_to(DType d, double v) {
    switch (d) {
        case DType::float16: return round_binary(v, 10, -14, 15);
        case DType::bfloat16: return round_binary(v, 7, -126, 127);
        case DType::float32: return static_cast<double>(static_cast<float>(v));
        case DType::float64: return v;
    }
    return v;
}

Shape Tensor::shape() const {
    const auto& xs = dtype == DType::float64 ? f64.shape() : f32.shape();
    return Shape(xs.begin(), xs.end());
}

std::size_t Tensor::size() const { return dtype == DType::float64 ? f64.size() : f32.size(); }

xt::xarray<double> Tensor::to_double() const {
    if (dtype == DType::float64) return f64;
    xt::xarray<double> out = xt::cast<double>(f32);
    return out;
}

Tensor Tensor::from_double(const xt::xarray<double>& values, DType d) {
    Tensor t;
    t.dtype = d;
    if (d == DType::float64) {
        t.f64 = values;
        return t;
    }
    t.f32 = xt::xarray<float>::from_shape(values.shape());
    const double* src = values.data();
    float* dst = t.f32.data();
    for (std::size_t i = 0; i < values.size(); ++i) dst[i] = static_cast<float>(round_to(d, src[i]));
    return t;
}

std::string format_shape(const Shape& s) {
    std::ostringstream o;
    o << '[';
    for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    o << ']';
    return o.str();
}

std::string compact_shape(const Shape& s) {
    std::ostringstream o;
    o << '[';
    for (std::size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
    o << ']';
    return o.str();
}

std::string count_noun(std::size_t n, const std::string& noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string join_words(const std::vector<std::string>& items, const std::string& last) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? last : ", ") + items[i];
    return s;
}

std::string lower_case(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::size_t num_elements(const Shape& s) {
    std::size_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

std::optional<std::size_t> checked_num_elements(const Shape& s) {
    std::size_t n = 1;
    for (auto d : s) {
        if (d != 0 && n > std::numeric_limits<std::size_t>::max() / d) return std::nullopt;
        n *= d;
    }
    return n;
}

std::size_t canonicalize_axis(long long axis, std::size_t rank, const std::string& what) {
    long long r = static_cast<long long>(rank);
    if (axis < -r || axis >= r)
        throw InputError(what + ": axis " + std::to_string(axis) +
                         " out of range for input of rank " + std::to_string(rank));
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::size_t canonicalize_index(long long index, std::size_t count, const std::string& what, const std::string& of) {
    const long long n = static_cast<long long>(count);
    if (index < -n || index >= n)
        throw InputError(what + " " + std::to_string(index) + " out of range for " + of +
                         (n ? " (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) + ")" : " (there is none)"));
    return static_cast<std::size_t>(index < 0 ? index + n : index);
}

Axes canonicalize_axes(const std::vector<long long>& axes, std::size_t rank,
                       const std::string& what) {
    Axes out;
    for (long long a : axes) {
        std::size_t c = canonicalize_axis(a, rank, what);
        if (std::find(out.begin(), out.end(), c) != out.end())
            throw InputError(what + ": axis " + std::to_string(a) + " repeated (it is axis " +
                             std::to_string(c) + " of an input of rank " +
                             std::to_string(rank) + ")");
        out.push_back(c);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Axes complement_axes(const Axes& axes, std::size_t rank) {
    Axes out;
    for (std::size_t a = 0; a < rank; ++a)
        if (std::find(axes.begin(), axes.end(), a) == axes.end()) out.push_back(a);
    return out;
}

Shape keepdims_shape(const Shape& s, const Axes& reduced) {
    Shape out = s;
    for (auto a : reduced) out[a] = 1;
    return out;
}

Shape select_dims(const Shape& s, const Axes& axes) {
    Shape out;
    for (auto a : axes) out.push_back(s[a]);
    return out;
}

}  // namespace normlab
