#include "run/run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <set>
#include <sstream>
#include <unistd.h>

#include "analysis/analysis.hpp"
#include "analysis/common.hpp"
#include "analysis/output_pool.hpp"
#include "run/report_command.hpp"
#include "config/config.hpp"
#include "config/overrides.hpp"
#include "config/sweep.hpp"
#include "data/npy.hpp"
#include "json/text.hpp"
#include "report/output.hpp"
#include "report/table.hpp"
#include "run/points.hpp"
#include "run/run_plan.hpp"
#include "run/safety.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

constexpr const char* kVersion = "0.1.0";

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Json load_config_document(const RunOptions& o, Provenance* origins) {
    Json j = load_json_file(o.config_path);
    // Named as typed in messages, escaped only where a control character would break the line
    // (as apply_override names its own).
    for (const auto& u : o.unsets) {
        const std::string who = "--unset " + plain_or_quoted(u);
        const std::string pointer = remove_config_value(j, u, who);
        if (origins) origins->record(pointer, who);
    }
    for (const auto& s : o.sets) {
        const std::string pointer = apply_override(j, s);
        if (origins) origins->record(pointer, "--set " + plain_or_quoted(s));
    }
    if (o.seed) {
        if (!j.is_object()) throw InputError(o.config_path + ": /: expected an object");
        j["seed"] = *o.seed;
        if (origins) origins->record("/seed", "--seed " + std::to_string(*o.seed));
    }
    return j;
}

namespace {

Json data_summary(const Batch& b) {
    Json j = Json::object();
    j["source"] = b.source;
    j["shape"] = b.x.shape();
    j["dtype"] = dtype_name(b.x.dtype);  // the point's own when dtype is swept
    j["channel_axis"] = b.channel_axis;
    j["has_mask"] = b.has_mask();
    j["nonfinite_values"] = count_nonfinite(b.x);  // each makes every statistic it enters non-finite
    if (b.has_mask()) j["pad_fraction"] = b.pad_fraction();
    if (!b.lengths.empty()) j["lengths"] = b.lengths;
    return j;
}

}  // namespace

void print_messages(const char* kind, const std::vector<std::string>& messages) {
    for (const auto& m : messages) std::cerr << "normlab: " << kind << ": " << one_line(m) << "\n";
}

ConfigFindings validate_config(const RunOptions& o) {
    Provenance origins;  // an error at a value set by --set or a sweep point blames that
    return blame_origins(origins, [&] {
        RunPlan plan(o, origins);
        return ConfigFindings{std::move(plan.checked.notes), std::move(plan.checked.warnings)};
    });
}

namespace {

// Prepends the sweep point's columns (point index, then one column per swept path).
Table with_point_columns(const Table& t, const Sweep& sweep, const SweepPoint& pt) {
    Table out;
    out.columns.push_back("point");
    for (const auto& p : sweep.paths) out.columns.push_back(sweep_column_in(sweep_column(p), t.columns));
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

namespace {

// An empty table of an analysis type, with the sweep's leading columns: the CSV a shard
// without points writes, so that its header matches the other shards'.
Table empty_table(const std::string& type, const Sweep& sweep, bool swept) {
    Table t;
    t.columns = find_analysis(type)->columns;
    if (!swept) return t;
    std::vector<std::string> lead{"point"};
    for (const auto& p : sweep.paths) lead.push_back(sweep_column_in(sweep_column(p), t.columns));
    t.columns.insert(t.columns.begin(), lead.begin(), lead.end());
    return t;
}

}  // namespace

namespace {

// The dry run's line under "sweep points": which paths vary, with how many distinct values
// each, and that the plan printed below (eps, shapes, seed) is point `*index`'s, not every
// point's (null: a shard without points, which prints no plan).
std::string swept_line(const Sweep& sweep, const std::size_t* index) {
    std::vector<std::string> parts;
    for (std::size_t j = 0; j < sweep.paths.size(); ++j) {
        std::set<std::string> values;
        for (const auto& pt : sweep.points) values.insert(pt.values.at(j).second.dump());
        parts.push_back(sweep.paths[j] + " (" + count_noun(values.size(), "value") + ")");
    }
    return "swept: " + join_words(parts) +
           (index ? "; the plan below is point " + std::to_string(*index) + "'s\n" : "; this shard runs no point\n");
}

// The dry run's "output" line: the folder the run writes (`path`, OutputFolder::path) and
// what the run replaces there: an earlier result (replaced as a whole, with or without
// --force), other files (with --force; OutputFolder has refused them without), or a symbolic
// link, which the run replaces with a folder of its own while the folder it points to stays.
std::string output_line(const fs::path& path, const std::string& origin) {
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(path, ec)))
        return "output: " + plain_or_quoted(path.string()) + " (" + origin + "; a symbolic link to " +
               plain_or_quoted(resolved(path).string()) +
               ", which the run replaces with a folder of its own; the dry run writes nothing)\n";
    std::string replaced;
    if (fs::is_directory(path, ec) && !fs::is_empty(path, ec) && !ec) {
        const bool earlier = is_normlab_result(path);
        const std::string foreign = earlier ? foreign_entry(path) : "";
        replaced = !earlier ? "; holds other files, which the run replaces (--force)"
                   : foreign.empty()        ? "; holds an earlier result, which the run replaces"
                                            : "; holds an earlier result and other files (" + quoted_text(foreign) +
                                           "), which the run replaces (--force)";
    }
    return "output: " + plain_or_quoted(resolved(path).string()) + " (" + origin + replaced + "; the dry run writes nothing)\n";
}

void run_points(const RunOptions& o, Provenance& origins) {
    auto t0 = std::chrono::steady_clock::now();
    note_interrupt_keeps_output(!o.dry_run);
    RunPlan plan(o, origins);  // every selected point checked before anything is computed, written or printed
    const Sweep& sweep = plan.sweep;
    const std::vector<const SweepPoint*>& selected = plan.selected;
    const SweepPoint& head = *plan.head;
    const Config& first = plan.first;
    CheckedPoints& checked = plan.checked;
    const fs::path& out_dir = plan.out_dir;
    const bool swept = !sweep.paths.empty();
    const Json config_seed = plan.resolved_doc.value("seed", Json(0));
    auto point_doc = [&](const SweepPoint& pt) { return plan.point_doc(pt, origins); };
    if (o.dry_run) {
        // Whether the output folder can be written here: its staging folder made and removed again.
        plan.folder->prepare();
        const fs::path out_path = plan.folder->path();
        plan.folder.reset();
        std::cout << "config: " << o.config_path << " (name " << first.name << ", dtype " << dtype_name(first.dtype)
                  << ")\n";
        std::cout << "seed: " << config_seed.dump() << " (the config's seed; report.json \"seed\")\n";
        if (swept && sweep.seed_per_point && !selected.empty())
            std::cout << "point " << head.index << " seed: " << first.seed
                      << " (derived from the config's seed and the point's values; every point has its own)\n";
        std::cout << "sweep points: " << sweep.points.size();
        if (o.shard) std::cout << " (this shard runs " << selected.size() << ")";
        std::cout << "\n";
        if (swept) std::cout << swept_line(sweep, selected.empty() ? nullptr : &head.index);
        std::cout << checked.first_plan;
        std::cout << output_line(out_path, o.out ? "--out" : first.output_dir ? "the config's output.dir" : "results/<name>");
        const std::size_t mib = std::size_t{1} << 20;  // rounded up, without overflow near SIZE_MAX
        std::cout << "estimated peak memory: " << checked.peak_bytes / mib + (checked.peak_bytes % mib != 0) << " MiB\n";
        // The notes and warnings validate and run give, which the plan does not repeat.
        if (!o.quiet) {
            print_messages("note", checked.notes);
            print_messages("warning", checked.warnings);
        }
        return;
    }

    OutputFolder& folder = *plan.folder;  // never deletes an input
    folder.prepare();  // an output that cannot be written is found before the computing
    // The checks' warnings (data holding NaN or inf), as validate gives them, before the computing.
    if (!o.quiet) print_messages("warning", checked.warnings);
    std::vector<std::string> files;
    std::vector<std::string> type_order;
    std::map<std::string, Table> tables;
    Json analyses = Json::array();
    Json timings = Json::array();
    Json data_summaries = Json::object();
    const bool progress = swept && !o.quiet && ::isatty(2);
    const std::vector<std::string>& notes = checked.notes;

    // Output buffers pass from point to point like the batches (analysis/output_pool.hpp).
    OutputPool outputs;
    OutputPoolScope use_outputs(outputs);
    Loaded previous = std::move(checked.last);
    for (std::size_t k = 0; k < selected.size(); ++k) {
        const SweepPoint& pt = *selected[k];
        outputs.next_point();
        if (progress) std::cerr << "\rnormlab: point " << (k + 1) << "/" << selected.size() << std::flush;
        Loaded l = load_point(parse_point(point_doc(pt), o.config_path), &previous);
        const Config& c = l.config;
        AnalysisContext ctx;
        ctx.batches = &l.batches;
        ctx.norms = &c.norms;
        ctx.stacks = &c.stacks;
        ctx.file = c.file;
        ctx.dtype = c.dtype;
        ctx.seed = c.seed;
        fs::path arrays = swept ? fs::path("arrays") / ("p" + std::to_string(pt.index)) : fs::path("arrays");
        auto save_bytes = [&](const std::string& data, const std::string& norm, const std::string& what,
                              const std::string& bytes) {
            fs::path rel = arrays / data / norm / (what + ".npy");
            folder.write(rel, bytes);
            if (std::find(files.begin(), files.end(), rel.string()) == files.end()) files.push_back(rel.string());
        };
        ctx.save = [&](const std::string& data, const std::string& norm, const std::string& what,
                       const xt::xarray<double>& values, DType dtype) {
            save_bytes(data, norm, what, npy_bytes(values, dtype));
        };
        ctx.save_mask = [&](const std::string& data, const std::string& norm, const std::string& what,
                            const xt::xarray<std::uint8_t>& mask) { save_bytes(data, norm, what, npy_bytes_bool(mask)); };
        Json point_data = Json::object();
        for (const auto& n : c.data_order) point_data[n] = data_summary(l.batches.at(n));
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
    for (const auto& a : first.analyses)  // a shard without points: headers only
        if (!tables.count(a.type)) {
            type_order.push_back(a.type);
            tables[a.type] = empty_table(a.type, sweep, swept);
        }
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
    report["seed"] = config_seed;
    report["dtype"] = dtype_name(first.dtype);
    // Norms without "compute" follow the CPU (default_compute), so the report says which
    // arithmetic they took: outputs of float32 runs differ in the last bits between the two.
    report["default_compute"] = compute_name(default_compute());
    if (swept || o.shard) {  // merge reads the shard and its points from here
        Json sw = Json::object();
        sw["paths"] = sweep.paths;
        sw["columns"] = Json::array();
        for (const auto& p : sweep.paths) sw["columns"].push_back(sweep_column(p));
        sw["total_points"] = sweep.points.size();
        sw["seed_per_point"] = sweep.seed_per_point;
        sw["shard"] = {plan.shard_i, plan.shard_n};
        Json pts = Json::array();
        for (const SweepPoint* pt : selected) pts.push_back(pt->index);
        sw["points"] = pts;
        report["sweep"] = sw;
    }
    report["config"] = plan.resolved_doc;
    report["data"] = data_summaries;
    report["analyses"] = analyses;
    report["files"] = files;
    report["notes"] = notes;
    report["timings_ms"] = {{"analyses", timings}, {"total", ms_since(t0)}};
    for (const auto& [rel, bytes] : add_report_files(report)) folder.write(rel, bytes);
    folder.write("report.json", report.dump(2) + "\n");
    // Before the commit: an interrupt during it must not say that nothing was written.
    note_interrupt_keeps_output(false);
    folder.commit();
    if (!o.quiet) print_messages("note", notes);
    if (!o.quiet) {  // a message, not data: stderr
        // report.json's "files" lists what report.json describes, not report.json itself;
        // the summary counts every file the run wrote.
        std::vector<std::string> written;
        for (const auto& f : report["files"]) written.push_back(f.get<std::string>());
        written.push_back("report.json");
        std::cerr << "normlab: " << first.name << ": " << count_noun(selected.size(), "point") << ", "
                  << count_noun(written.size(), "file") << " written to " << plain_or_quoted(out_dir.string()) << "\n";
        if (written.size() <= 20)
            for (const auto& f : written) std::cerr << "  " << plain_or_quoted((out_dir / f).string()) << "\n";
    }
}

}  // namespace

void run_config(const RunOptions& o) {
    Provenance origins;  // an error at a value set by --set or a sweep point blames that
    blame_origins(origins, [&] { run_points(o, origins); });
}

}  // namespace normlab
