#include "run/points.hpp"

#include <algorithm>
#include <set>
#include <tuple>
#include <sstream>

#include "analysis/common.hpp"
#include "data/estimate.hpp"
#include "data/random.hpp"
#include "data/sources.hpp"
#include "run/run_command.hpp"
#include "run/safety.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

struct MemoryEstimate {
    std::size_t total = 0;
    std::string largest;             ///< data name with the largest own need
    std::size_t largest_bytes = 0;   ///< its batch + the larger of its build and work memory
    std::string largest_what;        ///< "gaussian [2, 3]"
};

MemoryEstimate estimate_memory(const Config& c, std::size_t stop_above) {
    DataContext ctx{c.base_dir, c.seed, c.dtype};
    MemoryEstimate m;
    std::size_t kept = 0, transient = 0;
    for (const auto& name : c.data_order) {
        const Json& spec = c.data.at(name);
        const DataEstimate e = estimate_batch(name, spec, ctx, stop_above);
        std::size_t work = saturating_mul(e.elements, 3 * 8);
        std::string by;  // the analysis whose work memory is the largest, if above the default
        for (const auto& a : c.analyses)  // stacks: weights, activations and gradients
            if (const auto& bytes = find_analysis(a.type)->work_bytes)
                if (!e.dims.empty() && std::find(a.data.begin(), a.data.end(), name) != a.data.end()) {
                    const std::size_t b = bytes(a, WorkInputs{c.stacks, c.norms, e.dims, e.channel_axis, c.dtype});
                    if (b > work) by = a.stacks.empty() ? "in its " + a.type + " analysis" : "through its stacks";
                    work = std::max(work, b);
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
        }
    }
    m.total = saturating_add(kept, transient);
    return m;
}

// Refuses (InputError, exit 2) a point whose estimate exceeds --max-memory.
void check_memory(const Config& c, const std::string& file, const std::string& max_memory) {
    const std::size_t limit = parse_memory_size(max_memory);
    const MemoryEstimate m = estimate_memory(c, limit);
    if (m.total <= limit) return;
    JsonLocation loc{file, "/data"};
    if (m.largest_bytes > limit) loc = loc.child(m.largest);
    // Related to the largest entry's shape keys: a swept or overridden shape is named.
    loc.fail("needs an estimated " + format_bytes(m.total) + " of memory (data \"" + m.largest + "\": " +
                 m.largest_what + ", " + format_bytes(m.largest_bytes) + "), more than the limit of " +
                 describe_memory_limit(max_memory) + "; make the data smaller or raise --max-memory",
             data_related(m.largest));
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

std::size_t point_memory(const Config& c, std::size_t stop_above) { return estimate_memory(c, stop_above).total; }

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
    for (const auto& n : c.norm_order) out << "norm " << n << ": " << norm_type_name(c.norms.at(n).type) << "\n";
    for (const auto& n : c.stack_order) {
        const StackDef& s = c.stacks.at(n);
        out << "stack " << n << ": " << s.layers << " x " << placement_name(s.placement) << " "
            << block_name(s.block) << (s.has_norm() ? " around " + s.norm.name : "") << "\n";
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
    for (const SweepPoint* pt : points) {
        const Config c = parse_point(point_doc(*pt), file);
        check_memory(c, file, max_memory);
        out.peak_bytes = std::max(out.peak_bytes, point_memory(c, limit));
        // Sweep points repeat a note: it is given once, naming who set what it is about at
        // the first point that has it.
        for (const auto& n : config_notes(c))
            if (std::find(noted.begin(), noted.end(), n.message()) == noted.end()) {
                noted.push_back(n.message());
                out.notes.push_back(origins ? origins->message(n.at, n.reason, n.related) : n.message());
            }
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
