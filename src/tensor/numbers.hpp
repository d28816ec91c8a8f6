#pragma once
// Numbers as text, the one way normlab writes them: in CSV cells, in report.json and in
// every message ("std must be >= 0, but got -1", never "-1.000000").
#include <optional>
#include <string>

namespace normlab {

/// Shortest text that reads back to the same double (std::to_chars, C++17 [charconv]):
/// 0.1 -> "0.1", 1e-05 -> "1e-05", -1 -> "-1"; non-finite values as "nan", "inf", "-inf"
/// (the spellings numpy, pandas and R read back).
std::string format_number(double v);

/// v to `digits` significant digits, trailing zeros dropped (printf's %g): for text read by
/// people where the shortest round-trip form would show a rounding of the arithmetic, such
/// as 1 - 0.99 = 0.010000000000000009 ("0.01" at 12 digits). Non-finite as format_number.
std::string format_significant(double v, int digits);

/// The inverse for the three non-finite spellings: "nan" -> NaN, "inf" -> +inf,
/// "-inf" -> -inf; std::nullopt for any other text. JSON has no such numbers, so configs
/// and reports spell them as these strings.
std::optional<double> parse_nonfinite(const std::string& s);

}  // namespace normlab
