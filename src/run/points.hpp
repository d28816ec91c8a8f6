#pragma once
// The points of a run (one, or one per sweep point): each point's config, its memory
// estimate, its batches, and the check of every analysis against its data shapes, which
// `run`, `run --dry-run` and `validate` all make before anything is computed.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
#include "config/overrides.hpp"
#include "config/sweep.hpp"
#include "data/batch.hpp"

namespace normlab {

/// One point's config and its built batches, by data name, with what each batch was built
/// from (a batch may have been taken over from an earlier point).
struct Loaded {
    /// What a batch was built from: equal specs and dtypes give equal shapes, and with an
    /// equal seed equal values.
    struct Origin {
        Json spec;
        std::uint64_t seed = 0;
        DType dtype = DType::float32;
    };
    Config config;
    std::map<std::string, Batch> batches;
    std::map<std::string, Origin> origins;
};

/// The config document of one sweep point: `base` with the point's overrides; its seed
/// derived from the base seed and the point's values (derive_seed) unless the sweep keeps
/// one seed for all points. Each value set is recorded in `origins` (when given) as the
/// sweep entry of config `file` that holds it ("cfg.json: /sweep/norms.ln.eps/2 (sweep
/// point 5)", or the --set that set that entry), so that an error at it blames the sweep.
/// Throws InputError naming that entry when a swept path does not exist.
Json point_document(const Json& base, const Sweep& sweep, const SweepPoint& pt, const std::string& file = "",
                    Provenance* origins = nullptr);

/// Parses a point's config document (`file` names it in messages; paths inside resolve
/// against its folder). No data is built. Throws InputError.
Config parse_point(const Json& doc, const std::string& file);

/// Builds a point's batches. With `previous` (the point before), a batch whose data spec,
/// seed and dtype are unchanged is taken over instead of being built again; with
/// `any_seed`, one built with another seed is taken over too (same shape, other values:
/// enough for the checks, never for a run). The others are freed before anything new is
/// built. Throws InputError (data files, shapes, masks).
Loaded load_point(Config c, Loaded* previous = nullptr, bool any_seed = false);

/// The dry-run plan of a point: one line per data (source, shape, channel axis, padding
/// mask), per norm (type, convention, eps and, where running statistics are kept, momentum,
/// as they resolve for the point's dtype), per stack (DeepNorm's alpha and beta) and per
/// analysis (type, how many data and norms).
std::string point_plan(const Loaded& l);

/// What checking the points leaves for the run and the dry-run.
struct CheckedPoints {
    /// The batches built last, for the run to take over (load_point's `previous`: only
    /// those built with the seed a point runs with are taken).
    Loaded last;
    std::string first_plan;    ///< point_plan() of the first point
    /// The largest point's memory estimate without its tables, plus the tables of all points: a
    /// sweep's tables are kept until the report is written.
    std::size_t peak_bytes = 0;
    /// The points' notes (config_notes, then the analyses' own on their data: analysis_notes),
    /// each once, naming the --set or sweep entry that set what a note is about, as an error
    /// would (Provenance::message).
    std::vector<std::string> notes;
    /// A warning for each data entry whose checked batch holds NaN or infinite values, once,
    /// at the first point where it does, naming who set what as the notes do: what `run`
    /// and `validate` warn of before anything is computed.
    std::vector<std::string> warnings;
};


/// Checks the points of a run, in two passes, before anything is computed, written or
/// printed: first every point's config parses and its memory estimate fits `max_memory`,
/// and so do their tables together (nothing built yet), then every point's data is built and every analysis checked
/// against it (check_analysis). A data entry's shape, channel axis and padding mask depend
/// on its spec alone (the seed only draws values), so a batch is rebuilt only when its spec
/// changes. Throws InputError naming the file and JSON pointer of the first problem; `run`
/// and `validate` both call this, so they refuse the same configs with the same message.
/// `origins` (when given) holds who set the values of `doc` (--set, --seed); each point's
/// sweep values are added to it while that point is checked (point_document), so that a
/// caller's blame_origins() names the override or sweep entry at fault.
CheckedPoints check_points(const Json& doc, const Sweep& sweep, const std::vector<const SweepPoint*>& points,
                           const std::string& file, const std::string& max_memory, Provenance* origins = nullptr);

}  // namespace normlab
