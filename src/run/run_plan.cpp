#include "run/run_plan.hpp"

#include <tuple>

#include "data/files.hpp"
#include "json/text.hpp"
#include "report/output_paths.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;

namespace normlab {

namespace {

// Refuses (InputError) a --set, --unset or --seed of a value that the sweep sets at every
// point (the swept path itself or a value under it): the sweep would overwrite it, so it
// would be silently unused, while report.json's config would show it.
void refuse_swept_overrides(const RunOptions& o, const Sweep& sweep) {
    auto check = [&](const std::string& path, const std::string& who) {
        const std::string pointer = config_pointer(path);
        for (const std::string& sp : sweep.paths) {
            const std::string swept = config_pointer(sp);
            if (pointer == swept || pointer.rfind(swept + "/", 0) == 0)
                throw InputError(who + ": " + pointer + " is swept (sweep key " + quoted_text(sp) +
                                 "): every point sets it, so this value would not be used; change the sweep's "
                                 "values instead, or take the key out of the sweep");
        }
    };
    for (const auto& u : o.unsets) check(u, "--unset " + plain_or_quoted(u));
    for (const auto& s : o.sets) check(s.substr(0, s.find('=')), "--set " + plain_or_quoted(s));
    if (o.seed) check("/seed", "--seed " + std::to_string(*o.seed));
}

}  // namespace

RunPlan::RunPlan(const RunOptions& o, Provenance& origins) : config_path(o.config_path) {
    if (o.out) {  // before the data is loaded: a wrong --out is found at once
        const std::string why = output_folder_problem(*o.out);
        if (!why.empty()) throw InputError("--out " + plain_or_quoted(*o.out) + ": " + why);
    }
    InputLog inputs;  // check_points reads every input file: the output folder may replace none
    base_doc = load_config_document(o, &origins);
    base_origins = origins;
    resolved_doc = base_doc;
    sweep = extract_sweep(base_doc, o.config_path);
    refuse_swept_overrides(o, sweep);
    if (o.shard) std::tie(shard_i, shard_n) = parse_shard(*o.shard);
    // A shard may get no points (more shards than points): it still writes a result folder
    // (CSV headers, no rows, its empty point list) that merge accepts.
    for (const auto& pt : sweep.points)
        if (pt.index % shard_n == shard_i) selected.push_back(&pt);
    checked = check_points(base_doc, sweep, selected, o.config_path, o.max_memory, &origins);
    head = selected.empty() ? &sweep.points.front() : selected.front();
    first = parse_point(point_doc(*head, origins), o.config_path);

    if (o.config_path != "-") keep.push_back(fs::path(o.config_path));  // "-": standard input, no file
    for (const auto& p : inputs.paths()) keep.push_back(p);
    out_dir = o.out ? fs::path(*o.out) : first.output_dir ? fs::path(*first.output_dir) : fs::path("results") / first.name;
    if (o.out || !first.output_dir) {
        folder.emplace(out_dir, o.force, keep);
        return;
    }
    // The config chose the folder: its refusals are errors at /output/dir, advising another
    // output.dir, and blame the --set or sweep point that set it (blame_origins).
    try {
        folder.emplace(out_dir, o.force, keep, "output.dir");
    } catch (const InputError& e) {
        JsonLocation{o.config_path, "/output/dir"}.fail(e.what());
    }
}

Json RunPlan::point_doc(const SweepPoint& pt, Provenance& origins) const {
    origins = base_origins;
    return point_document(base_doc, sweep, pt, config_path, &origins);
}

}  // namespace normlab
