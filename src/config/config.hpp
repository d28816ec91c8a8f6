#pragma once
// A whole experiment config (DESIGN.md "The config file"): parsed, typed and validated as
// far as is possible without the data; shape checks happen when norms meet data.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/analysis.hpp"
#include "json/reader.hpp"
#include "json/text.hpp"
#include "norm/presets.hpp"

namespace normlab {

/// A parsed config. Maps are keyed by name; *_order keep the config's order for reports.
struct Config {
    std::string file;                    ///< as the user named it (messages)
    std::filesystem::path base_dir;      ///< the config's folder: data paths resolve here
    Json json;                           ///< the config as resolved (after --set overrides)
    std::string name;
    std::uint64_t seed = 0;
    DType dtype = DType::float32;
    std::vector<std::string> data_order;
    std::map<std::string, Json> data;    ///< raw data specs, built by make_batch
    std::vector<std::string> norm_order;
    std::map<std::string, NormDef> norms;
    std::vector<AnalysisSpec> analyses;
    std::optional<std::string> output_dir;  ///< "output": {"dir": ...}, relative to the cwd
};

/// Parses a config document. `file` names it in messages; relative paths inside it resolve
/// against `base_dir`. Throws InputError with file and JSON pointer: unknown keys (with
/// did-you-mean), wrong types, eps < 0, unknown norm types/conventions/analyses, references
/// to undefined data or norms, empty data/norms/analyses.
Config parse_config(const Json& j, const std::string& file, const std::filesystem::path& base_dir);

/// Parses one norm object (/norms/<name>). `seed` seeds random parameter inits.
NormDef parse_norm(const std::string& name, const Json& j, const JsonLocation& loc,
                   const std::filesystem::path& base_dir, std::uint64_t seed);

}  // namespace normlab
