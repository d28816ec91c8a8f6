#pragma once
// Helpers for the tests that read the Vega-Lite specs the report module builds.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/figure.hpp"

namespace figure_test {

using Json = nlohmann::ordered_json;

/// Whether `v` holds `s`.
inline bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

/// The data values of a spec, faceted or not.
inline const Json& values(const Json& spec) { return spec.at("data").at("values"); }

/// The first layer list of a spec, faceted (under "spec") or not.
inline const Json& layers(const Json& spec) { return spec.contains("spec") ? spec["spec"]["layer"] : spec["layer"]; }

/// A lines figure: `metric` (titled `metric_title`) against `x` on a log axis, a series per norm.
inline normlab::Figure norm_lines(const std::string& title, const std::string& x, const std::string& metric,
                                  const std::string& metric_title) {
    normlab::Figure f;
    f.title = title;
    f.kind = normlab::FigureKind::lines;
    f.x = x;
    f.x_log = true;
    f.series = {"norm"};
    f.metrics = {normlab::FigureMetric(metric, metric_title)};
    return f;
}

}  // namespace figure_test
