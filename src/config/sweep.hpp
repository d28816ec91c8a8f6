#pragma once
// Parameter sweeps: the "sweep" block of a config expands into points, each a list of
// config overrides. A grid is the cartesian product of its keys (the first key varies
// slowest, like nested loops written in that order); "zip" lists vary together.
#include <cstdint>
#include <string>
#include <vector>

#include "json/reader.hpp"

namespace normlab {

/// One point of a sweep: its index in the full (unsharded) sweep and its overrides.
struct SweepPoint {
    std::size_t index = 0;
    std::vector<std::pair<std::string, Json>> values;  ///< (config path, value), in column order
    std::vector<std::string> origins;  ///< per value, its JSON pointer in the file ("/sweep/norms.ln.eps/2")
    /// "path=value;path=value": a stable label, used to derive the point's seed.
    std::string label() const;
};

/// A parsed sweep: its parameter paths (the CSV's leading columns) and all points.
struct Sweep {
    std::vector<std::string> paths;
    std::vector<SweepPoint> points;
    bool seed_per_point = true;  ///< each point's seed = derive_seed(seed, label)
};

/// Removes "sweep" from `config` and expands it. Without a sweep block: one point with no
/// values. Grammar: {"<path>": [values...], ..., "zip": {"<path>": [...], ...},
/// "seed_per_point": bool}. Throws InputError (at /sweep/...) for a non-list, an empty list,
/// zip lists of unequal length, a path given twice, or more than 1,000,000 points.
Sweep extract_sweep(Json& config, const std::string& file);

/// The CSV column name of a sweep path: dots, slashes and other punctuation become '_'
/// ("norms.ln.eps" -> "norms_ln_eps", "/data/x/shape/0" -> "data_x_shape_0").
std::string sweep_column(const std::string& path);

/// The name of the sweep column `column` (sweep_column) in the CSV of an analysis whose own
/// columns are `analysis_columns`: "sweep_<column>" where the analysis has a column of that
/// name itself (a swept "dtype" beside precision's own per-row "dtype"), else `column`, so
/// that no table holds one name twice.
std::string sweep_column_in(const std::string& column, const std::vector<std::string>& analysis_columns);

/// Parses "I/N" (0 <= I < N) for --shard. Throws InputError.
std::pair<std::size_t, std::size_t> parse_shard(const std::string& text);

}  // namespace normlab
