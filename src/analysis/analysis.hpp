#pragma once
// The analyses a config lists under "analyses": each is a pure function from resolved
// batches and norm definitions to one tidy table (plus optional saved arrays).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "json/reader.hpp"
#include "data/batch.hpp"
#include "norm/presets.hpp"
#include "report/figure.hpp"
#include "report/table.hpp"

namespace normlab {

/// Receives the tensors an analysis saves: arrays/<data>/<norm>/<what>.npy, in `dtype`.
/// `norm` may go one folder deeper ("bn/step3": apply's sequential steps of one data entry).
using SaveFn = std::function<void(const std::string& data, const std::string& norm,
                                  const std::string& what, const xt::xarray<double>& values,
                                  DType dtype)>;
/// Receives a padding mask to save at the same place, as a numpy bool array (True = real
/// position) in the batch's mask shape (data/batch.hpp: x's rank, 1 where it broadcasts).
using SaveMaskFn = std::function<void(const std::string& data, const std::string& norm, const std::string& what,
                                      const xt::xarray<std::uint8_t>& mask)>;

/// Everything an analysis may use.
struct AnalysisContext {
    const std::map<std::string, Batch>* batches = nullptr;    ///< by data name
    const std::map<std::string, NormDef>* norms = nullptr;    ///< by norm name
    const std::map<std::string, StackDef>* stacks = nullptr;  ///< by stack name
    std::string file;               ///< the config as the user named it: messages point into it
    DType dtype = DType::float32;   ///< run dtype
    std::uint64_t seed = 0;         ///< run seed (derive per-analysis streams from it)
    SaveFn save;                    ///< never null during a run
    SaveMaskFn save_mask;           ///< never null during a run

    const Batch& batch(const std::string& name) const { return batches->at(name); }
    const NormDef& norm(const std::string& name) const { return norms->at(name); }
    const StackDef& stack(const std::string& name) const { return stacks->at(name); }
};

/// What an analysis' work_bytes and rows see of one data entry and the config before the
/// batch is built.
struct WorkInputs {
    const std::map<std::string, StackDef>& stacks;
    const std::map<std::string, NormDef>& norms;
    Shape shape;                              ///< the data's shape (empty when not known: rows only)
    std::optional<std::size_t> channel_axis;  ///< its canonical channel axis, when known
    DType dtype;                              ///< the run dtype
    std::size_t elements = 0;                 ///< the data's elements (at most, when the shape is not known)
};

/// What an analysis works with on one data entry beyond the batch (AnalysisType::work_bytes).
struct WorkBytes {
    std::size_t bytes = 0;
    /// The analysis' own key whose value makes the work this large ("sizes", "steps"), when
    /// the entry sets it: a refusal of the estimate points at it. Empty: the data (with the
    /// norms or stacks) decides.
    std::string key;
};

/// The rows an analysis adds to its table for one data entry (AnalysisType::rows).
struct TableRows {
    std::size_t rows = 0;
    /// The analysis' own key whose value multiplies them ("steps", "eps"), when the entry sets
    /// it; empty otherwise.
    std::string key;
};

/// Memory a run holds per table cell until it has written its report, by estimate: a row
/// is kept as cells (Table), as report.json's row object (ordered_json), in the merged
/// table and in the text of report.json, the CSV and report.html. Measured at 470 (epsilon,
/// 19 columns, 80400 rows), 560 (port_check, 22 columns, 16384 rows) and 650 (train_eval,
/// 9 columns, 80004 rows) bytes of peak resident memory per cell.
constexpr std::size_t kTableCellBytes = 800;

/// What an analysis type provides.
struct AnalysisType {
    std::string name;
    std::string summary;                  ///< one line for `normlab list`
    std::vector<std::string> columns;     ///< CSV header (a contract: plotting scripts use it)
    /// The figure report.html draws from the table (report/figure.hpp). Every analysis has
    /// one that reads only its own columns (tests/test_report.cpp checks each registered
    /// type) and draws two results at two places (tests/test_report_figures.cpp).
    Figure figure;
    /// Its own keys (besides type, data, norms) with their defaults: all an entry may hold.
    /// analysis_reader() declares them, so reading another key is a programming error.
    std::vector<KeyInfo> keys;
    /// Validates the analysis' own keys (no data touched); throws InputError at spec.loc.
    std::function<void(const AnalysisSpec&)> validate;
    /// Optional: whether an entry (its keys validated) takes a data entry listed twice as two
    /// successive steps (apply with "sequential": true). Null: never, and parse_config refuses
    /// a repeat, which would only repeat rows.
    std::function<bool(const AnalysisSpec&)> repeats_data;
    /// How to ask for repeated data, for the message that refuses one ("" without repeats_data).
    std::string repeats_data_how;
    /// Optional: bytes the analysis works with on one of its data entries beyond the batch
    /// itself (stacks: weights, activations, gradients; gradients: its float64 copies;
    /// jacobian: its n x n matrices; the batches an analysis draws or builds: batch sizes,
    /// training steps, re-padded batches), for the memory estimate made before anything is
    /// built, with the key whose value makes them large, if any. Called only when the data's
    /// shape is known. Analyses that leave it empty are covered by the estimate's default
    /// allowance (three doubles per element, and 256 bytes per statistics group of their
    /// norms); a work_bytes replaces it (three doubles per element stay the least), and a
    /// refusal names the analysis when its work_bytes is above the allowance.
    std::function<WorkBytes(const AnalysisSpec&, const WorkInputs&)> work_bytes;
    /// Optional: the rows its table gets for one of its data entries (the shape may be
    /// unknown: then at most what `elements` allows), for the estimate of the tables' memory
    /// (kTableCellBytes per cell). Null: one row per norm (or stack).
    std::function<TableRows(const AnalysisSpec&, const WorkInputs&)> rows;
    /// Runs it, after check() passed on the same data.
    std::function<Table(const AnalysisSpec&, const AnalysisContext&)> run;
    /// Checks it against the data and the norms before anything is computed: every (data,
    /// norm) pair as the analysis binds it, and every key whose validity depends on the data
    /// or the norms (a file's shape against the data, a group size against a limit). It
    /// reads the batches' shapes, channel axes and whether they have a mask, never their
    /// values: a check may get a batch built with another sweep point's seed (a shape never
    /// depends on the seed). `run`, `run --dry-run` and `validate` all call it, through
    /// check_analysis(), for every point before anything is computed, so they refuse the
    /// same configs with the same message; run() relies on it and does not check again.
    /// The context has no save function. Null: check_pairs().
    std::function<void(const AnalysisSpec&, const AnalysisContext&)> check;
    /// Optional: notes on keys that are valid but do less than they ask on this data (jacobian's
    /// "groups" above the groups there are), read off shapes as check() does and after it
    /// passed; run and validate print them and report.json lists them (ConfigNote).
    std::function<std::vector<ConfigNote>(const AnalysisSpec&, const AnalysisContext&)> notes;
};

/// All analysis types, in the order `normlab list` shows them.
const std::vector<AnalysisType>& analysis_types();
/// The type of that name, or nullptr.
const AnalysisType* find_analysis(const std::string& name);
/// All analysis types as parse_config() checks a config's "analyses" against them.
AnalysisCatalog analysis_catalog();

/// An ObjectReader over spec.params with the keys of spec.type declared (the common keys
/// type, data, norms, stacks for the analyses of stacks, and the type's own).
ObjectReader analysis_reader(const AnalysisSpec& spec);

/// A data entry's shape as a norm meets it: the batch's, or another (an analysis that
/// reshapes the data or draws batches of another size).
struct DataShape {
    Shape shape;
    std::size_t channel_axis = 1;  ///< canonical
    bool has_mask = false;         ///< a padding mask comes with it
};
/// The shape, channel axis and mask presence of a batch.
DataShape shape_of(const Batch& b);

/// Binds norm `def` to data of shape `d` (named `data_name` in messages) as one forward
/// step would: NormLayer::resolve's shape checks (PyTorch's), and a padding mask for a norm
/// with mask set. Throws NormError; returns the resolution.
Resolution check_pair(const NormDef& def, DType dtype, const DataShape& d, const std::string& data_name);
/// check_pair() for every data x norm of the analysis, as listed: the check of an analysis
/// that applies each norm to each data as given.
void check_pairs(const AnalysisSpec& spec, const AnalysisContext& ctx);
/// The check of spec's analysis type: AnalysisType::check, else check_pairs().
void check_analysis(const AnalysisSpec& spec, const AnalysisContext& ctx);
/// The notes of spec's analysis type on this data (AnalysisType::notes), after its check
/// passed; none for a type without them.
std::vector<ConfigNote> analysis_notes(const AnalysisSpec& spec, const AnalysisContext& ctx);

}  // namespace normlab
