#pragma once
// The `run` and `validate` subcommands, callable without CLI11 (tests call them directly).
#include <optional>
#include <string>
#include <vector>

#include "config/overrides.hpp"
#include "json/reader.hpp"

namespace normlab {

/// Options of `normlab run`, which `normlab validate` takes too (all but `quiet` and `dry_run`).
struct RunOptions {
    std::string config_path;
    std::optional<std::string> out;          ///< --out: overrides output.dir
    std::optional<long long> seed;           ///< --seed: overrides "seed"
    std::vector<std::string> sets;           ///< --set PATH=VALUE, applied in order
    std::vector<std::string> unsets;         ///< --unset PATH: keys removed before the --set values
    bool force = false;                      ///< replace a non-normlab output folder
    bool quiet = false;                      ///< no summary on stderr
    bool dry_run = false;                    ///< validate, check the output folder, print the plan; leave nothing
    std::optional<std::string> shard;        ///< --shard I/N: run sweep points with index % N == I
    /// --max-memory as given ("8G", "75%", "none"); empty: half of the memory. A config whose
    /// estimated memory exceeds it is refused (InputError) before any data is built.
    std::string max_memory;
};

/// Loads a config document and applies --unset, --set and --seed (config/overrides.hpp), recording
/// in `origins` (when given) which values they set. Throws InputError.
Json load_config_document(const RunOptions& o, Provenance* origins = nullptr);

/// Runs a config end to end (every sweep point of this shard, in one process) and writes
/// the output folder, then prints a summary on stderr unless quiet. Every selected point is
/// checked first (check_points), before anything is computed, written or printed, and then
/// the output folder (OutputFolder: what it refuses, and prepare(): whether it can be
/// created here); with dry_run, the plan (data shapes, norms, analyses, the config's seed
/// and the first point's derived seed, points, estimated memory) then goes to stdout
/// instead, and the staging folder the check made is removed. A shard without points
/// writes CSV headers and a report with an empty point list. Throws InputError (exit 2) or
/// EnvError (exit 1); on any failure the output folder is left as it was and no parent
/// folder of it is left behind.
void run_config(const RunOptions& o);

/// What validate_config finds in a config that it does not refuse.
struct ConfigFindings {
    std::vector<std::string> notes;     ///< config_notes, each once (run writes them to report.json too)
    std::vector<std::string> warnings;  ///< data holding NaN or infinite values, as run warns of them
};

/// Writes each message to stderr as one line, "normlab: <kind>: <message>" (kind "note" or
/// "warning"), as validate, run and the dry run give them.
void print_messages(const char* kind, const std::vector<std::string>& messages);

/// Checks a config as run_config does before it computes anything (RunPlan: the overrides,
/// the sweep points of `o.shard`, or all, with check_points, and the output folder's
/// refusals, `o.force` applied), without writing; whether the folder can be written is
/// left to run. Throws InputError on the first problem, with the message run_config would
/// give. Returns its notes and warnings.
ConfigFindings validate_config(const RunOptions& o);

}  // namespace normlab
