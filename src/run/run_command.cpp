#include "run/run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>
#include <unistd.h>

#include "analysis/analysis.hpp"
#include "run/report_command.hpp"
#include "run/safety.hpp"
#include "config/config.hpp"
#include "config/sweep.hpp"
#include "data/random.hpp"
#include "data/estimate.hpp"
#include "data/npy.hpp"
#include "data/sources.hpp"
#include "report/output.hpp"
#include "report/table.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

constexpr const char* kVersion = "0.1.0";

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Splits a dotted path or JSON pointer into tokens.
std::vector<std::string> path_tokens(const std::string& path) {
    std::vector<std::string> out;
    if (!path.empty() && path[0] == '/') {
        Json::json_pointer p(path);
        std::string s = path.substr(1);
        std::stringstream ss(s);
        std::string tok;
        while (std::getline(ss, tok, '/')) {
            std::string t;
            for (std::size_t i = 0; i < tok.size(); ++i) {
                if (tok[i] == '~' && i + 1 < tok.size()) t += tok[++i] == '0' ? '~' : '/';
                else t += tok[i];
            }
            out.push_back(t);
        }
        return out;
    }
    std::stringstream ss(path);
    std::string tok;
    while (std::getline(ss, tok, '.')) out.push_back(tok);
    return out;
}

}  // namespace

void apply_override(Json& config, const std::string& assignment) {
    auto eq = assignment.find('=');
    std::string where = "--set " + assignment;
    if (eq == std::string::npos || eq == 0)
        throw InputError(where + ": expected PATH=VALUE (e.g. norms.ln.eps=1e-3)");
    std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    Json value;
    check_json_nesting(text, where);
    try {
        value = Json::parse(text);
    } catch (const Json::parse_error&) {
        value = text;  // not JSON: a plain string such as a path or a name
    } catch (const Json::out_of_range&) {
        throw InputError(where + ": the number is out of range (a double holds magnitudes up to 1.8e308)");
    }
    auto tokens = path_tokens(path);
    if (tokens.empty()) throw InputError(where + ": empty path");
    Json* node = &config;
    std::string walked;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const std::string& t = tokens[i];
        const bool last = i + 1 == tokens.size();
        walked += "/" + t;
        if (node->is_object()) {
            if (!last && !node->contains(t))
                throw InputError(where + ": " + walked + " does not exist in the config");
            node = &(*node)[t];
        } else if (node->is_array()) {
            std::size_t idx = 0;
            try {
                std::size_t used = 0;
                idx = std::stoul(t, &used);
                if (used != t.size()) throw std::invalid_argument(t);
            } catch (const std::exception&) {
                throw InputError(where + ": " + walked + ": expected an array index, but got \"" + t + "\"");
            }
            if (idx >= node->size())
                throw InputError(where + ": " + walked + ": index out of range (the array has " +
                                 std::to_string(node->size()) + " elements)");
            node = &(*node)[idx];
        } else {
            throw InputError(where + ": " + walked + ": cannot descend into a " + json_type_name(*node));
        }
    }
    *node = value;
}

Json load_config_document(const RunOptions& o) {
    Json j = load_json_file(o.config_path);
    for (const auto& s : o.sets) apply_override(j, s);
    if (o.seed) {
        if (!j.is_object()) throw InputError(o.config_path + ": /: expected an object");
        j["seed"] = *o.seed;
    }
    return j;
}

namespace {

struct Loaded {
    Config config;
    std::map<std::string, Batch> batches;
};

// Memory a point needs, estimated from its config before any data is built: every batch,
// plus the larger of what building one batch holds for a while (file bytes, doubles) and
// what an analysis works with (about three double copies of the largest batch, or what
// the analysis declares: a stack's weights, activations and gradients).
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
        bool stacks = false;
        for (const auto& a : c.analyses)  // stacks: weights, activations and gradients
            if (const auto& bytes = find_analysis(a.type)->work_bytes)
                if (!e.dims.empty() && std::find(a.data.begin(), a.data.end(), name) != a.data.end()) {
                    const std::size_t b = bytes(a, c.stacks, e.dims, c.dtype);
                    stacks = stacks || b > work;
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
            if (stacks) m.largest_what += " through its stacks";
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
    loc.fail("needs an estimated " + format_bytes(m.total) + " of memory (data \"" + m.largest + "\": " +
             m.largest_what + ", " + format_bytes(m.largest_bytes) + "), more than the limit of " +
             describe_memory_limit(max_memory) + "; make the data smaller or raise --max-memory");
}

// Loads one point's config and builds its batches. With `previous` (the point before, in a
// sweep), a batch whose data spec, seed and dtype are unchanged is taken over instead of
// being built again: a sweep over norm settings builds its data once and touches no fresh
// memory for it. Batches that cannot be reused are freed before anything new is built.
Loaded load_document(const Json& doc, const std::string& file, const std::string& max_memory,
                     Loaded* previous = nullptr) {
    Loaded l;
    fs::path base = fs::path(file).parent_path();
    l.config = parse_config(doc, file, base, analysis_catalog());
    check_memory(l.config, file, max_memory);
    if (previous) {
        const Config& pc = previous->config;
        for (auto it = previous->batches.begin(); it != previous->batches.end();) {
            auto spec = l.config.data.find(it->first);
            const bool same = spec != l.config.data.end() && spec->second == pc.data.at(it->first) &&
                              l.config.seed == pc.seed && l.config.dtype == pc.dtype;
            it = same ? std::next(it) : previous->batches.erase(it);
        }
    }
    DataContext ctx{base, l.config.seed, l.config.dtype};
    for (const auto& name : l.config.data_order) {
        if (previous && previous->batches.count(name)) {
            l.batches[name] = std::move(previous->batches.at(name));
            continue;
        }
        l.batches[name] = make_batch(name, l.config.data.at(name), JsonLocation{file, "/data"}.child(name), ctx);
    }
    if (previous) previous->batches.clear();
    return l;
}

// NaN and infinite values in a batch (they make every statistic they enter non-finite).
std::size_t nonfinite_values(const Tensor& t) {
    std::size_t n = 0;
    if (t.dtype == DType::float64) {
        for (double v : t.f64) n += !std::isfinite(v);
    } else {
        for (float v : t.f32) n += !std::isfinite(v);
    }
    return n;
}

Json data_summary(const Batch& b) {
    Json j = Json::object();
    j["source"] = b.source;
    j["shape"] = b.x.shape();
    j["channel_axis"] = b.channel_axis;
    j["has_mask"] = b.has_mask();
    j["nonfinite_values"] = nonfinite_values(b.x);
    if (b.has_mask()) j["pad_fraction"] = b.pad_fraction();
    if (!b.lengths.empty()) j["lengths"] = b.lengths;
    return j;
}

// The config of one sweep point: the base with the point's overrides; its seed derived
// from the base seed and the point unless the sweep keeps one seed for all points.
Json point_document(const Json& base, const Sweep& sweep, const SweepPoint& pt) {
    Json doc = base;
    for (const auto& [path, v] : pt.values) apply_override(doc, path + "=" + v.dump());
    if (!sweep.paths.empty() && sweep.seed_per_point) {
        std::uint64_t seed = doc.contains("seed") && doc["seed"].is_number_unsigned()
                                 ? doc["seed"].get<std::uint64_t>() : 0;
        doc["seed"] = derive_seed(seed, pt.label()) >> 1;  // a seed the config accepts (< 2^63)
    }
    return doc;
}

// Appends the config's notes that are not in `notes` yet (sweep points repeat them).
void add_notes(std::vector<std::string>& notes, const Config& c) {
    for (auto& n : config_notes(c))
        if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(std::move(n));
}

// Binds every norm of every analysis to its data (the shape errors a run would hit), then
// runs each analysis' own data checks.
void check_pairs(const Loaded& l) {
    AnalysisContext ctx;
    ctx.batches = &l.batches;
    ctx.norms = &l.config.norms;
    ctx.stacks = &l.config.stacks;
    ctx.file = l.config.file;
    ctx.dtype = l.config.dtype;
    ctx.seed = l.config.seed;
    for (const auto& a : l.config.analyses) {
        for (const auto& dn : a.data)
            for (const auto& nn : a.norms) {
                const Batch& b = l.batches.at(dn);
                locate_norm_errors(l.config.file, [&] {
                    return NormLayer(l.config.norms.at(nn), l.config.dtype).resolve(b.x.shape(), b.channel_axis, dn);
                });
            }
        if (const auto& check = find_analysis(a.type)->check)
            locate_norm_errors(l.config.file, [&] { locate_stack_errors(l.config.file, [&] { check(a, ctx); }); });
    }
}

}  // namespace

std::vector<std::string> validate_config(const RunOptions& o) {
    Json doc = load_config_document(o);
    Sweep sweep = extract_sweep(doc, o.config_path);
    Loaded previous;
    std::vector<std::string> notes;
    for (const auto& pt : sweep.points) {
        previous = load_document(point_document(doc, sweep, pt), o.config_path, o.max_memory, &previous);
        check_pairs(previous);
        add_notes(notes, previous.config);
    }
    return notes;
}

namespace {

// Prepends the sweep point's columns (point index, then one column per swept path).
Table with_point_columns(const Table& t, const Sweep& sweep, const SweepPoint& pt) {
    Table out;
    out.columns.push_back("point");
    for (const auto& p : sweep.paths) out.columns.push_back(sweep_column(p));
    out.columns.insert(out.columns.end(), t.columns.begin(), t.columns.end());
    std::vector<Cell> lead{static_cast<long long>(pt.index)};
    for (const auto& [path, v] : pt.values) {
        if (v.is_number_integer()) lead.push_back(v.get<long long>());
        else if (v.is_number()) lead.push_back(v.get<double>());
        else if (v.is_boolean()) lead.push_back(v.get<bool>());
        else if (v.is_string()) lead.push_back(v.get<std::string>());
        else lead.push_back(v.dump());
    }
    for (const auto& row : t.rows) {
        std::vector<Cell> r = lead;
        r.insert(r.end(), row.begin(), row.end());
        out.add_row(std::move(r));
    }
    return out;
}

}  // namespace

void run_config(const RunOptions& o) {
    auto t0 = std::chrono::steady_clock::now();
    Json base_doc = load_config_document(o);
    const Json resolved_doc = base_doc;  // as the user wrote it, overrides applied, sweep kept
    Sweep sweep = extract_sweep(base_doc, o.config_path);
    std::size_t shard_i = 0, shard_n = 1;
    if (o.shard) std::tie(shard_i, shard_n) = parse_shard(*o.shard);
    const bool swept = !sweep.paths.empty();
    fs::path base = fs::path(o.config_path).parent_path();

    // Parse every selected point before writing anything: a bad point fails the run early.
    std::vector<const SweepPoint*> selected;
    for (const auto& pt : sweep.points)
        if (pt.index % shard_n == shard_i) selected.push_back(&pt);
    auto point_doc = [&](const SweepPoint& pt) { return point_document(base_doc, sweep, pt); };
    Config first = parse_config(point_doc(*selected.front()), o.config_path, base, analysis_catalog());
    // Every selected point fits in memory, by estimate, before anything is built or written.
    for (const SweepPoint* pt : selected)
        check_memory(pt == selected.front() ? first : parse_config(point_doc(*pt), o.config_path, base, analysis_catalog()),
                     o.config_path, o.max_memory);

    if (o.dry_run) {
        std::cout << "config: " << o.config_path << " (name " << first.name << ", dtype "
                  << dtype_name(first.dtype) << ", seed " << first.seed << ")\n";
        std::cout << "sweep points: " << sweep.points.size();
        if (o.shard) std::cout << " (this shard runs " << selected.size() << ")";
        std::cout << "\n";
        std::size_t peak = 0;
        Loaded previous;
        for (const SweepPoint* pt : selected) {
            Loaded l = load_document(point_doc(*pt), o.config_path, o.max_memory, &previous);
            peak = std::max(peak, estimate_memory(l.config, parse_memory_size(o.max_memory)).total);
            check_pairs(l);
            if (pt != selected.front()) {
                previous = std::move(l);
                continue;
            }
            for (const auto& n : l.config.data_order) {
                const Batch& b = l.batches.at(n);
                std::cout << "data " << n << ": " << b.source << " " << format_shape(b.x.shape())
                          << ", channel axis " << b.channel_axis
                          << (b.has_mask() ? ", padding mask" : "") << "\n";
            }
            for (const auto& n : l.config.norm_order)
                std::cout << "norm " << n << ": " << norm_type_name(l.config.norms.at(n).type) << "\n";
            for (const auto& n : l.config.stack_order) {
                const StackDef& s = l.config.stacks.at(n);
                std::cout << "stack " << n << ": " << s.layers << " x " << placement_name(s.placement) << " "
                          << block_name(s.block) << (s.has_norm() ? " around " + s.norm.name : "") << "\n";
            }
            for (std::size_t i = 0; i < l.config.analyses.size(); ++i) {
                const auto& a = l.config.analyses[i];
                std::cout << "analysis " << i << ": " << a.type << " (" << a.data.size() << " data x "
                          << (a.stacks.empty() ? std::to_string(a.norms.size()) + " norms)\n"
                                               : std::to_string(a.stacks.size()) + " stacks)\n");
            }
            previous = std::move(l);
        }
        std::cout << "estimated peak memory: " << (peak + (1u << 20) - 1) / (1u << 20) << " MiB\n";
        return;
    }

    fs::path out_dir = o.out ? fs::path(*o.out) : first.output_dir ? fs::path(*first.output_dir) : fs::path("results") / first.name;
    OutputFolder folder(out_dir, o.force, {fs::path(o.config_path)});  // never deletes the config
    std::vector<std::string> files;
    std::vector<std::string> type_order;
    std::map<std::string, Table> tables;
    Json analyses = Json::array();
    Json timings = Json::array();
    Json data_summaries = Json::object();
    const bool progress = swept && !o.quiet && ::isatty(2);
    std::set<std::string> warned_nonfinite;
    std::vector<std::string> notes;

    Loaded previous;
    for (std::size_t k = 0; k < selected.size(); ++k) {
        const SweepPoint& pt = *selected[k];
        if (progress) std::cerr << "\rnormlab: point " << (k + 1) << "/" << selected.size() << std::flush;
        Loaded l = load_document(point_doc(pt), o.config_path, o.max_memory, &previous);
        const Config& c = l.config;
        add_notes(notes, c);
        AnalysisContext ctx;
        ctx.batches = &l.batches;
        ctx.norms = &c.norms;
        ctx.stacks = &c.stacks;
        ctx.file = c.file;
        ctx.dtype = c.dtype;
        ctx.seed = c.seed;
        fs::path arrays = swept ? fs::path("arrays") / ("p" + std::to_string(pt.index)) : fs::path("arrays");
        ctx.save = [&](const std::string& data, const std::string& norm, const std::string& what,
                       const xt::xarray<double>& values, DType dtype) {
            fs::path rel = arrays / data / norm / (what + ".npy");
            folder.write(rel, npy_bytes(values, dtype));
            if (std::find(files.begin(), files.end(), rel.string()) == files.end()) files.push_back(rel.string());
        };
        Json point_data = Json::object();
        for (const auto& n : c.data_order) {
            point_data[n] = data_summary(l.batches.at(n));
            const std::size_t bad = point_data[n]["nonfinite_values"].get<std::size_t>();
            if (bad && !o.quiet && warned_nonfinite.insert(n).second)
                std::cerr << "normlab: warning: "
                          << JsonLocation{o.config_path, "/data"}.child(n).message(
                                 std::to_string(bad) + " of " + std::to_string(l.batches.at(n).x.size()) +
                                 " values are NaN or infinite; every statistic they enter is non-finite "
                                 "(report.json: nonfinite_values; apply.csv: nonfinite_in, nonfinite_stats)")
                          << "\n";
        }
        if (swept) data_summaries[std::to_string(pt.index)] = point_data;
        else data_summaries = point_data;

        for (std::size_t i = 0; i < c.analyses.size(); ++i) {
            const AnalysisSpec& a = c.analyses[i];
            auto ta = std::chrono::steady_clock::now();
            Table t = locate_norm_errors(c.file, [&] {
                return locate_stack_errors(c.file, [&] { return find_analysis(a.type)->run(a, ctx); });
            });
            if (swept) t = with_point_columns(t, sweep, pt);
            Json timing = {{"analysis", i}, {"type", a.type}, {"ms", ms_since(ta)}};
            Json entry = Json::object();
            if (swept) {
                entry["point"] = pt.index;
                timing["point"] = pt.index;
            }
            entry["index"] = i;
            entry["type"] = a.type;
            entry["data"] = a.data;
            entry["norms"] = a.norms;
            entry["rows"] = table_to_json(t);
            analyses.push_back(std::move(entry));
            timings.push_back(std::move(timing));
            if (!tables.count(a.type)) {
                type_order.push_back(a.type);
                tables[a.type] = t;
            } else {
                tables[a.type].append(t);
            }
        }
        previous = std::move(l);
    }
    if (progress) std::cerr << "\n";
    for (const auto& type : type_order) {
        std::ostringstream csv;
        write_csv(csv, tables[type]);
        folder.write(type + ".csv", csv.str());
        files.push_back(type + ".csv");
    }

    Json report = Json::object();
    report["tool"] = "normlab";
    report["normlab_version"] = kVersion;
    report["schema_version"] = 1;
    report["name"] = first.name;
    report["seed"] = resolved_doc.value("seed", Json(0));
    report["dtype"] = dtype_name(first.dtype);
    if (swept) {
        Json sw = Json::object();
        sw["paths"] = sweep.paths;
        sw["columns"] = Json::array();
        for (const auto& p : sweep.paths) sw["columns"].push_back(sweep_column(p));
        sw["total_points"] = sweep.points.size();
        sw["seed_per_point"] = sweep.seed_per_point;
        sw["shard"] = {shard_i, shard_n};
        Json pts = Json::array();
        for (const SweepPoint* pt : selected) pts.push_back(pt->index);
        sw["points"] = pts;
        report["sweep"] = sw;
    }
    report["config"] = resolved_doc;
    report["data"] = data_summaries;
    report["analyses"] = analyses;
    report["files"] = files;
    report["notes"] = notes;
    report["timings_ms"] = {{"analyses", timings}, {"total", ms_since(t0)}};
    for (const auto& [rel, bytes] : add_report_files(report)) folder.write(rel, bytes);
    folder.write("report.json", report.dump(2) + "\n");
    folder.commit();
    if (!o.quiet)
        for (const auto& n : notes) std::cerr << "normlab: note: " << n << "\n";
    if (!o.quiet) {
        std::cout << "normlab: " << first.name << ": " << selected.size() << " point(s), "
                  << files.size() << " files written to " << out_dir.string() << "\n";
        if (files.size() <= 20)
            for (const auto& f : files) std::cout << "  " << (out_dir / f).string() << "\n";
    }
}

}  // namespace normlab
