#pragma once
// Reading the shared public bug-report cases (tests/cases/Bxx.json, copies of the shared
// cases folder) and checking normlab's numbers against their `expected` values within their
// `tolerance`. Needs doctest and NORMLAB_SOURCE_DIR (end-to-end test binaries).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>

#include "cli_util.hpp"

namespace normlab_test {

/// A case file, parsed into the JSON type the test uses (key order kept with ordered_json).
template <class J = nlohmann::ordered_json>
J load_case(const std::string& id) {
    const auto p = std::filesystem::path(NORMLAB_SOURCE_DIR) / "tests" / "cases" / (id + ".json");
    REQUIRE_MESSAGE(std::filesystem::exists(p), "missing case file " << p.string());
    return J::parse(read_text(p));
}

/// A case's tolerance: |got - want| <= abs + rel * |want| (absent fields are 0).
struct Tol {
    double abs = 0, rel = 0;
};
template <class J>
Tol tolerance(const J& c) {
    Tol t;
    const auto& j = c.at("tolerance");
    if (j.contains("abs")) t.abs = j["abs"].template get<double>();
    if (j.contains("rel")) t.rel = j["rel"].template get<double>();
    return t;
}

/// All numbers of a nested JSON list in row-major order.
template <class J>
std::vector<double> flatten(const J& j) {
    std::vector<double> out;
    if (j.is_array()) {
        for (const auto& e : j) {
            auto v = flatten(e);
            out.insert(out.end(), v.begin(), v.end());
        }
    } else {
        out.push_back(j.template get<double>());
    }
    return out;
}

/// Checks every element of `got` against `want` (same count) within `tol`; names `what`
/// and the worst element on failure.
inline void check_close(const xt::xarray<double>& got, const std::vector<double>& want, Tol tol,
                        const std::string& what) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    double worst = -1;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        double g = got.data()[i];
        double excess = std::isnan(g) ? INFINITY : std::abs(g - want[i]) - (tol.abs + tol.rel * std::abs(want[i]));
        if (excess > worst) worst = excess, at = i;
    }
    CHECK_MESSAGE(worst <= 0, what << ": element " << at << ": normlab " << got.data()[at] << ", expected "
                                   << want[at] << " (abs " << tol.abs << ", rel " << tol.rel << ")");
}

}  // namespace normlab_test
