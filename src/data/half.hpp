#pragma once
// IEEE 754 binary16 ("half", numpy float16) bit patterns, without a native C++17 type.
#include <cstdint>

namespace normlab {

/// The value of a binary16 bit pattern (subnormals, +-inf and NaN included), exactly.
double half_to_double(std::uint16_t bits);

/// The binary16 bit pattern of v, rounded to nearest even first (overflow gives +-inf,
/// NaN gives the quiet NaN 0x7E00 with v's sign).
std::uint16_t double_to_half(double v);

}  // namespace normlab
