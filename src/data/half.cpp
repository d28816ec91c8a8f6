#include "data/half.hpp"

#include <cmath>

#include "tensor/tensor.hpp"

namespace normlab {

double half_to_double(std::uint16_t bits) {
    const bool neg = (bits & 0x8000u) != 0;
    const unsigned exp = (bits >> 10) & 0x1Fu;
    const unsigned frac = bits & 0x3FFu;
    double v;
    if (exp == 0) v = std::ldexp(static_cast<double>(frac), -24);  // zero or subnormal
    else if (exp == 31) v = frac ? std::nan("") : HUGE_VAL;
    else v = std::ldexp(static_cast<double>(frac | 0x400u), static_cast<int>(exp) - 25);
    return neg ? -v : v;
}

std::uint16_t double_to_half(double v) {
    const std::uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
    if (std::isnan(v)) return static_cast<std::uint16_t>(sign | 0x7E00u);
    double r = std::fabs(round_to(DType::float16, v));
    if (std::isinf(r)) return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (r < std::ldexp(1.0, -14))  // subnormal: an integer multiple of 2^-24
        return static_cast<std::uint16_t>(sign | static_cast<unsigned>(std::ldexp(r, 24)));
    int e = 0;
    double m = std::frexp(r, &e);  // r = m * 2^e, m in [0.5, 1); biased exponent is e - 1 + 15
    auto frac = static_cast<unsigned>(std::ldexp(m, 11)) & 0x3FFu;
    return static_cast<std::uint16_t>(sign | (static_cast<unsigned>(e + 14) << 10) | frac);
}

}  // namespace normlab
