#pragma once
// What `run` settles before it computes anything. `validate` builds the same plan and stops
// there, so the two refuse the same configs, options and output folders with the same messages.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/overrides.hpp"
#include "config/sweep.hpp"
#include "report/output.hpp"
#include "run/points.hpp"
#include "run/run_command.hpp"

namespace normlab {

/// A run's checked plan: its config document, the sweep points of its shard (each checked
/// by check_points: parsed, within the memory limit, data built and analyses checked), the
/// first selected point's config, and its output folder with OutputFolder's checks passed.
/// Nothing is computed or written and no folder is created (the run calls folder->prepare()).
/// Not copyable: `selected` and `head` point into `sweep`.
struct RunPlan {
    /// Checks, in this order: --out (output_folder_problem, before any data is read), the
    /// config with --unset, --set and --seed applied (load_config_document), overrides of a
    /// swept value, --shard, the shard's points (check_points, with the --max-memory limit),
    /// then the output folder: --out, else the config's output.dir (its refusals are errors
    /// at the config's /output/dir), else results/<name>; none may be or hold the config or
    /// an input file the points read (OutputFolder's `keep`), and --force is `o.force`. Throws
    /// InputError (exit 2) or EnvError (exit 1). `origins` records who set what (--set,
    /// sweep points), for blame_origins; it holds the first selected point's on return.
    RunPlan(const RunOptions& o, Provenance& origins);
    RunPlan(const RunPlan&) = delete;
    RunPlan& operator=(const RunPlan&) = delete;

    /// The JSON document of `sweep`'s point `pt` (point_document), with `origins` reset to
    /// the overrides' and then the point's own.
    Json point_doc(const SweepPoint& pt, Provenance& origins) const;

    std::string config_path;                   ///< as given (- for standard input)
    Json resolved_doc;                         ///< the config, overrides applied, sweep kept (report.json's)
    Json base_doc;                             ///< resolved_doc without its sweep
    Provenance base_origins;                   ///< who set what in base_doc (the overrides)
    Sweep sweep;                               ///< every point of the config
    std::size_t shard_i = 0, shard_n = 1;      ///< --shard I/N (0/1 without one)
    std::vector<const SweepPoint*> selected;   ///< this shard's points (index % N == I), in order
    CheckedPoints checked;                     ///< check_points over `selected`
    /// The first selected point, or the first point for a shard without points (a sweep
    /// always has one): its config names the run, its dtype and its output folder.
    const SweepPoint* head = nullptr;
    Config first;                              ///< head's config
    std::vector<std::filesystem::path> keep;   ///< the config and every input file it read
    std::filesystem::path out_dir;             ///< --out, else output.dir, else results/<name>
    std::optional<OutputFolder> folder;        ///< out_dir, checked; nothing created yet
};

}  // namespace normlab
