#include "run/points.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <sstream>

#include "analysis/common.hpp"
#include "data/estimate.hpp"
#include "data/random.hpp"
#include "data/sources.hpp"
#include "json/text.hpp"
#include "run/run_command.hpp"
#include "run/safety.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

struct MemoryEstimate {
    std::size_t total = 0;           ///< the batches + the larger of building one and working on one + the tables
    std::string largest;             ///< data name with the largest own need
    std::size_t largest_bytes = 0;   ///< its batch + the larger of its build and work memory
    std::string largest_what;        ///< "gaussian [2, 3]", "gaussian [2, 3] in its padding analysis (batch_mates)"
    /// The analysis entry whose key makes the largest entry's work large (WorkBytes::key), when
    /// one does, and that key.
    const AnalysisSpec* largest_by = nullptr;
    std::string largest_key;
    std::size_t table_bytes = 0;     ///< the tables' cells, kTableCellBytes each
    std::size_t rows = 0;            ///< the tables' rows
    // The analysis entry whose rows hold the most of table_bytes.
    const AnalysisSpec* rows_by = nullptr;
    std::size_t rows_by_rows = 0, rows_by_bytes = 0;
    std::string rows_key;            ///< its TableRows::key
};

// Memory a point needs by estimate, in bytes, before any data is built: every batch, plus
// the larger of what building one batch holds for a while (file bytes, doubles) and what
// an analysis works with (about three double copies of the largest batch, or its
// AnalysisType::work_bytes), plus its tables' rows (kTableCellBytes per cell). Saturates.
// `extra_columns`: columns a sweep adds to every table (the point and the swept values).
MemoryEstimate estimate_memory(const Config& c, std::size_t stop_above, std::size_t extra_columns = 0) {
    DataContext ctx{c.base_dir, c.seed, c.dtype};
    MemoryEstimate m;
    std::size_t kept = 0, transient = 0;
    std::vector<std::size_t> rows(c.analyses.size(), 0), table(c.analyses.size(), 0);
    std::vector<std::string> rows_keys(c.analyses.size());
    for (const auto& name : c.data_order) {
        const Json& spec = c.data.at(name);
        DataEstimate e = estimate_batch(name, spec, ctx, stop_above);
        // An npy header that claims more than its file holds (make_batch refuses the file):
        // the analyses' work is counted on what the file holds, not on the shape claimed.
        std::size_t claimed = e.dims.empty() ? 0 : 1;
        for (auto d : e.dims) claimed = saturating_mul(claimed, d);
        if (claimed != e.elements) e.dims.clear();
        const WorkInputs in{c.stacks, c.norms, e.dims, e.channel_axis, c.dtype, e.elements};
        std::size_t work = saturating_mul(e.elements, 3 * 8);
        std::string by;  // the analysis whose work memory is the largest, if above the default
        const AnalysisSpec* by_entry = nullptr;
        std::string by_key;
        for (std::size_t i = 0; i < c.analyses.size(); ++i) {
            const AnalysisSpec& a = c.analyses[i];
            const AnalysisType& type = *find_analysis(a.type);
            const auto listed = static_cast<std::size_t>(std::count(a.data.begin(), a.data.end(), name));
            if (listed == 0) continue;
            // The default allowance: three doubles per element, and per statistics group what a
            // step and its summary keep (apply: 206 bytes measured with groups of one element).
            const std::size_t allowance =
                e.dims.empty() ? work
                               : saturating_add(saturating_mul(e.elements, 3 * 8),
                                                saturating_mul(most_groups(a.norms, in), 4 * kStepGroupBytes));
            if (!type.work_bytes) work = std::max(work, allowance);
            if (type.work_bytes && !e.dims.empty()) {  // stacks: weights, activations and gradients
                const WorkBytes b = type.work_bytes(a, in);
                // Named in a refusal when it is the analysis' own need, beyond the allowance.
                if (b.bytes > work && b.bytes > allowance) {
                    by = a.stacks.empty() ? "in its " + a.type + " analysis" : "through its stacks";
                    if (!b.key.empty()) by += " (" + b.key + ")";
                    by_entry = &a;
                    by_key = b.key;
                }
                work = std::max(work, b.bytes);
            }
            // Its rows for this data entry, once per listing (apply's sequential steps).
            TableRows r{a.stacks.empty() ? a.norms.size() : a.stacks.size(), ""};
            if (type.rows) r = type.rows(a, in);
            rows[i] = saturating_add(rows[i], saturating_mul(r.rows, listed));
            if (!r.key.empty()) rows_keys[i] = r.key;
            table[i] = saturating_add(table[i], saturating_mul(saturating_mul(r.rows, listed),
                                                               saturating_mul(type.columns.size() + extra_columns,
                                                                              kTableCellBytes)));
        }
        kept = saturating_add(kept, e.batch_bytes);
        transient = std::max({transient, e.build_bytes, work});
        const std::size_t own = saturating_add(e.batch_bytes, std::max(e.build_bytes, work));
        if (m.largest.empty() || own > m.largest_bytes) {
            m.largest = name;
            m.largest_bytes = own;
            m.largest_what = spec.value("source", Json("?")).is_string() ? spec.value("source", "?") : "?";
            if (!e.shape.empty()) m.largest_what += " " + e.shape;
            if (!by.empty()) m.largest_what += " " + by;
            const bool keyed = e.build_bytes < work && !by_key.empty();
            m.largest_by = keyed ? by_entry : nullptr;
            m.largest_key = keyed ? by_key : std::string();
        }
    }
    for (std::size_t i = 0; i < c.analyses.size(); ++i) {
        m.rows = saturating_add(m.rows, rows[i]);
        m.table_bytes = saturating_add(m.table_bytes, table[i]);
        if (!m.rows_by || table[i] > m.rows_by_bytes) {
            m.rows_by = &c.analyses[i];
            m.rows_by_rows = rows[i];
            m.rows_by_bytes = table[i];
            m.rows_key = rows_keys[i];
        }
    }
    m.total = saturating_add(saturating_add(kept, transient), m.table_bytes);
    return m;
}

// How to lower what key `key` of analysis entry `a` asks for: "lower sizes" (a count, or
// a list of sizes), "shorten eps" (a list whose length multiplies the rows).
std::string lower_key(const AnalysisSpec& a, const std::string& key, bool rows) {
    const bool list = a.params.is_object() && a.params.contains(key) && a.params.at(key).is_array();
    return (rows && list ? "shorten " : "lower ") + key;
}

// Refuses (InputError, exit 2) a point whose estimate exceeds --max-memory: at the analysis
// key that makes a data entry's work large when one does, else at the data entry (or
// /data) when the data are the larger part, else at the analysis whose table rows weigh
// most. Returns the estimate.
MemoryEstimate check_memory(const Config& c, const std::string& file, const std::string& max_memory,
                            std::size_t extra_columns) {
    const std::size_t limit = parse_memory_size(max_memory);
    const MemoryEstimate m = estimate_memory(c, limit, extra_columns);
    if (m.total <= limit) return m;
    const std::string over = " more than the limit of " + describe_memory_limit(max_memory) + "; ";
    if (m.table_bytes > m.largest_bytes && m.rows_by) {
        // The tables: rows kept until the report is written.
        const AnalysisSpec& a = *m.rows_by;
        JsonLocation at{file, a.loc.pointer};
        if (!m.rows_key.empty()) at = at.child(m.rows_key);
        at.fail("needs an estimated " + format_bytes(m.total) + " of memory (its tables: " +
                count_noun(m.rows, "row") + ", " + format_bytes(m.table_bytes) + ", of which its " + a.type +
                " analysis" + (m.rows_key.empty() ? "" : " (" + m.rows_key + ")") + " gives " +
                std::to_string(m.rows_by_rows) + ")," + over +
                (m.rows_key.empty() ? std::string("make its analyses smaller") : lower_key(a, m.rows_key, true)) +
                " or raise --max-memory");
    }
    JsonLocation loc{file, "/data"};
    std::string advice = "make the data smaller";
    std::vector<std::string> related = data_related(m.largest);
    if (m.largest_bytes > limit && m.largest_by) {
        // An analysis asks for more than the data hold: at its key (a swept or overridden
        // value of it, or of the data's shape keys, is named).
        loc = JsonLocation{file, m.largest_by->loc.child(m.largest_key).pointer};
        advice = lower_key(*m.largest_by, m.largest_key, false) + ", " + advice;
    } else if (m.largest_bytes > limit) {
        loc = loc.child(m.largest);
    }
    // Related to the largest entry's shape keys: a swept or overridden shape is named.
    loc.fail("needs an estimated " + format_bytes(m.total) + " of memory (data " + quoted_text(m.largest) + ": " +
                 m.largest_what + ", " + format_bytes(m.largest_bytes) + ")," + over + advice + " or raise --max-memory",
             related);
}

// Every analysis of a point against its batches (check_analysis); returns their notes
// (analysis_notes), in the analyses' order.
std::vector<ConfigNote> check_analyses(const Loaded& l) {
    std::vector<ConfigNote> notes;
    AnalysisContext ctx;
    ctx.batches = &l.batches;
    ctx.norms = &l.config.norms;
    ctx.stacks = &l.config.stacks;
    ctx.file = l.config.file;
    ctx.dtype = l.config.dtype;
    ctx.seed = l.config.seed;
    for (const auto& a : l.config.analyses) {
        try {
            locate_norm_errors(l.config.file,
                               [&] { locate_stack_errors(l.config.file, [&] { check_analysis(a, ctx); }); });
        } catch (JsonError& e) {
            // An analysis' own check of its data (a batch axis, a mask) depends on the data's
            // shape keys as a norm's does: an override of them is the one to name.
            if (e.related.empty())
                for (const auto& d : a.data) {
                    const auto keys = data_related(d);
                    e.related.insert(e.related.end(), keys.begin(), keys.end());
                }
            // So does the analysis' type, which decides what is checked.
            e.related.push_back(a.loc.child("type").pointer);
            throw;
        }
        const auto own = locate_norm_errors(l.config.file, [&] { return analysis_notes(a, ctx); });
        notes.insert(notes.end(), own.begin(), own.end());
    }
    const auto axes = channel_axis_notes(l.config, l.batches);
    notes.insert(notes.end(), axes.begin(), axes.end());
    return notes;
}

}  // namespace

Json point_document(const Json& base, const Sweep& sweep, const SweepPoint& pt, const std::string& file,
                    Provenance* origins) {
    Json doc = base;
    for (std::size_t i = 0; i < pt.values.size(); ++i) {
        // The sweep entry holding the value: in the file, or set there by --set.
        const Provenance::Origin* set_by = origins ? origins->origin_of(pt.origins[i]) : nullptr;
        const std::string who = (set_by ? set_by->label : file) + ": " + pt.origins[i] + " (sweep point " +
                                std::to_string(pt.index) + ")";
        const std::string pointer = set_config_value(doc, pt.values[i].first, pt.values[i].second, who);
        if (origins) origins->record(pointer, who);
    }
    // From the run's seed as given (the file's, --set's or --seed's, which stores a signed
    // integer); a seed the config refuses (negative, not an integer) stays for parse_config
    // to report, as it does without a sweep.
    const bool absent = !doc.contains("seed");
    if (!sweep.paths.empty() && sweep.seed_per_point &&
        (absent || (doc["seed"].is_number_integer() && (doc["seed"].is_number_unsigned() || doc["seed"].get<long long>() >= 0)))) {
        const std::uint64_t seed = absent ? 0 : doc["seed"].get<std::uint64_t>();
        doc["seed"] = derive_seed(seed, pt.label()) >> 1;  // a seed the config accepts (< 2^63)
    }
    return doc;
}

Config parse_point(const Json& doc, const std::string& file) {
    return parse_config(doc, file, fs::path(file).parent_path(), analysis_catalog());
}

Loaded load_point(Config c, Loaded* previous, bool any_seed) {
    Loaded l;
    l.config = std::move(c);
    const Config& cfg = l.config;
    if (previous) {
        for (auto it = previous->batches.begin(); it != previous->batches.end();) {
            const auto spec = cfg.data.find(it->first);
            const Loaded::Origin& o = previous->origins.at(it->first);
            const bool same = spec != cfg.data.end() && spec->second == o.spec && cfg.dtype == o.dtype &&
                              (any_seed || cfg.seed == o.seed);
            it = same ? std::next(it) : previous->batches.erase(it);
        }
    }
    DataContext ctx{cfg.base_dir, cfg.seed, cfg.dtype};
    for (const auto& name : cfg.data_order) {
        if (previous && previous->batches.count(name)) {
            l.batches[name] = std::move(previous->batches.at(name));
            l.origins[name] = previous->origins.at(name);
            continue;
        }
        l.batches[name] = make_batch(name, cfg.data.at(name), JsonLocation{cfg.file, "/data"}.child(name), ctx);
        l.origins[name] = {cfg.data.at(name), cfg.seed, cfg.dtype};
    }
    if (previous) previous->batches.clear();
    return l;
}

std::string point_plan(const Loaded& l) {
    const Config& c = l.config;
    std::ostringstream out;
    for (const auto& n : c.data_order) {
        const Batch& b = l.batches.at(n);
        out << "data " << n << ": " << b.source << " " << format_shape(b.x.shape()) << ", channel axis "
            << b.channel_axis << (b.has_mask() ? ", padding mask" : "") << "\n";
    }
    // A norm's eps and momentum as they resolve (its convention's defaults, for this dtype):
    // what a port is checked against.
    for (const auto& n : c.norm_order) {
        const NormDef& d = c.norms.at(n);
        out << "norm " << n << ": " << norm_type_name(d.type) << " (" << convention_name(d.convention) << ": eps "
            << format_number(d.eps.value_or(default_eps(d.type, d.convention, c.dtype)));
        if (keeps_running_stats(d)) out << ", momentum " << momentum_text(d);
        out << ")\n";
    }
    for (const auto& n : c.stack_order) {
        const StackDef& s = c.stacks.at(n);
        out << "stack " << n << ": " << s.layers << " x " << placement_name(s.placement) << " "
            << block_name(s.block) << (s.has_norm() ? " around " + s.norm.name : "")
            << (s.placement == Placement::deepnorm
                    ? " (alpha " + format_significant(s.residual_scale(), 4) + ", beta " + format_significant(s.init_scale(), 4) + ")"
                    : "")
            << "\n";
    }
    for (std::size_t i = 0; i < c.analyses.size(); ++i) {
        const auto& a = c.analyses[i];
        out << "analysis " << i << ": " << a.type << " (" << a.data.size() << " data x "
            << (a.stacks.empty() ? count_noun(a.norms.size(), "norm") : count_noun(a.stacks.size(), "stack"))
            << ")\n";
    }
    return out.str();
}

namespace {

// The warning for a data entry holding `bad` NaN or infinite values of `total`, without its
// location (the caller names /data/<name>).
// In a half-precision run the values may have been finite in the source and overflowed
// when rounded to the dtype: said, so that the data are not blamed for it.
std::string nonfinite_warning(std::size_t bad, std::size_t total, DType dtype) {
    std::string overflow;
    if (dtype == DType::float16) overflow = " (or beyond float16's largest finite value, 65504, and rounded to infinity)";
    if (dtype == DType::bfloat16)
        overflow = " (or beyond bfloat16's largest finite value, about 3.39e38, and rounded to infinity)";
    return std::to_string(bad) + " of " + count_noun(total, "value") + (bad == 1 ? " is" : " are") +
           " NaN or infinite" + overflow +
           "; every statistic they enter is non-finite (report.json: nonfinite_values; apply.csv: "
           "nonfinite_in, nonfinite_stats)";
}

}  // namespace

CheckedPoints check_points(const Json& doc, const Sweep& sweep, const std::vector<const SweepPoint*>& points,
                           const std::string& file, const std::string& max_memory, Provenance* origins) {
    CheckedPoints out;
    const std::size_t limit = parse_memory_size(max_memory);
    const Provenance base = origins ? *origins : Provenance();
    // The point's document, with its sweep values recorded over the document's own origins.
    auto point_doc = [&](const SweepPoint& pt) {
        if (origins) *origins = base;
        return point_document(doc, sweep, pt, file, origins);
    };
    std::vector<std::string> noted;  // the notes given, as the file's (config_notes)
    // A sweep's tables grow from point to point and are kept until the report is written;
    // the rest of a point's memory is freed before the next one.
    const std::size_t extra_columns = sweep.paths.empty() ? 0 : 1 + sweep.paths.size();
    std::size_t tables = 0, rows = 0, rest = 0;
    for (const SweepPoint* pt : points) {
        const Config c = parse_point(point_doc(*pt), file);
        const MemoryEstimate m = check_memory(c, file, max_memory, extra_columns);
        tables = saturating_add(tables, m.table_bytes);
        rows = saturating_add(rows, m.rows);
        rest = std::max(rest, m.total - m.table_bytes);
        // Sweep points repeat a note: it is given once, naming who set what it is about at
        // the first point that has it.
        for (const auto& n : config_notes(c))
            if (std::find(noted.begin(), noted.end(), n.message()) == noted.end()) {
                noted.push_back(n.message());
                out.notes.push_back(origins ? origins->message(n.at, n.reason, n.related) : n.message());
            }
    }
    out.peak_bytes = saturating_add(rest, tables);
    if (out.peak_bytes > limit) {
        // Every point fits on its own: their tables together do not.
        if (origins) *origins = base;
        JsonLocation{file, "/sweep"}.fail(
            "its " + count_noun(points.size(), "point") + " need an estimated " + format_bytes(out.peak_bytes) +
                " of memory together (their tables: " + count_noun(rows, "row") + ", " + format_bytes(tables) +
                ", kept until the report is written; the largest point besides: " + format_bytes(rest) +
                "), more than the limit of " + describe_memory_limit(max_memory) +
                "; run the sweep in shards (--shard I/N, then normlab merge) or raise --max-memory");
    }
    // Data holding NaN or infinite values: warned of once per data entry, at the first point
    // whose batch holds them, naming who set what, as the notes do (origins holds this
    // point's provenance now). The values are counted once per entry, spec and dtype: a
    // batch taken over from the point before is not counted again. A batch built with
    // another seed (any_seed) has the run's shape, not its values; NaN and inf come from
    // given values, files and overflow, which a seed changes only where a random source
    // overflows a narrow dtype.
    std::set<std::string> warned, mask_warned;
    std::set<std::tuple<std::string, std::size_t, int>> counted;
    for (std::size_t k = 0; k < points.size(); ++k) {
        out.last = load_point(parse_point(point_doc(*points[k]), file), &out.last, true);
        // The analyses' notes depend on the data's shapes: given once, at the first point
        // that has each, naming who set what it is about (origins holds this point's now).
        for (const auto& n : check_analyses(out.last))
            if (std::find(noted.begin(), noted.end(), n.message()) == noted.end()) {
                noted.push_back(n.message());
                out.notes.push_back(origins ? origins->message(n.at, n.reason, n.related) : n.message());
            }
        if (k == 0) out.first_plan = point_plan(out.last);
        for (const auto& [name, b] : out.last.batches) {
            const Loaded::Origin& origin = out.last.origins.at(name);
            if (!counted.emplace(name, std::hash<Json>{}(origin.spec), static_cast<int>(origin.dtype)).second) continue;
            if (const std::size_t bad = warned.count(name) ? 0 : count_nonfinite(b.x)) {
                warned.insert(name);
                const JsonLocation at = JsonLocation{file, "/data"}.child(name);
                const std::string reason = nonfinite_warning(bad, b.x.size(), b.x.dtype);
                out.warnings.push_back(origins ? origins->message(at, reason, {at.pointer}) : at.message(reason));
            }
            // A mask of padding only: likely one written the other way round (PyTorch's
            // key_padding_mask is true at padding).
            if (!mask_warned.count(name) && b.mask.size() > 0 &&
                std::all_of(b.mask.begin(), b.mask.end(), [](std::uint8_t m) { return m == 0; })) {
                mask_warned.insert(name);
                const JsonLocation at = JsonLocation{file, "/data"}.child(name);
                const std::string reason =
                    "the padding mask marks no position as real (1 = real, 0 = padding; PyTorch's key_padding_mask is "
                    "the opposite): every masked statistic is empty (apply.csv: empty_groups)";
                out.warnings.push_back(origins ? origins->message(at, reason, {at.pointer}) : at.message(reason));
            }
        }
    }
    return out;
}

}  // namespace normlab
