#include "tensor/numbers.hpp"

#include <cstdio>
#include <charconv>
#include <cmath>
#include <limits>

namespace normlab {

std::string format_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    return std::string(buf, res.ptr);
}

std::string format_significant(double v, int digits) {
    if (!std::isfinite(v)) return format_number(v);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

std::optional<double> parse_nonfinite(const std::string& s) {
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    return std::nullopt;
}

}  // namespace normlab
