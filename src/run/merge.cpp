#include "run/merge.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "json/reader.hpp"
#include "json/text.hpp"
#include "run/report_command.hpp"
#include "run/safety.hpp"
#include "report/output.hpp"
#include "report/result.hpp"
#include "tensor/errors.hpp"
#include "tensor/tensor.hpp"

namespace fs = std::filesystem;

namespace normlab {

std::vector<std::string> csv_records(const std::string& text) {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (char c : text) {
        if (c == '"') quoted = !quoted;  // an escaped "" toggles twice: no net change
        if (c == '\n' && !quoted) {
            out.push_back(cur);
            cur.clear();
            continue;
        }
        cur += c;
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
}

namespace {

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw InputError(p.string() + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The point index of a CSV record: its first field, which a sweep run writes unquoted.
std::size_t record_point(const std::string& rec, const fs::path& file) {
    try {
        std::size_t used = 0;
        std::size_t p = std::stoul(rec.substr(0, rec.find(',')), &used);
        return p;
    } catch (const std::exception&) {
        throw InputError(file.string() + ": row does not start with a point index: " + rec.substr(0, 40));
    }
}

// The point of a saved array, arrays/p<point>/... in a sweep (0 otherwise: one point).
std::size_t array_point(const std::string& name, bool swept) {
    if (!swept || name.rfind("arrays/p", 0) != 0) return 0;
    try {
        return std::stoul(name.substr(8));
    } catch (const std::exception&) {
        return 0;
    }
}

// The value at `pointer` of a shard's report, of the kind merge needs ("object", "array",
// "unsigned", "string"): a report merge cannot read is an input error naming the file and
// the pointer, never an internal error.
const Json& need(const Json& r, const fs::path& file, const std::string& pointer, const std::string& kind) {
    const Json::json_pointer ptr(pointer);
    const JsonLocation at{file.string(), pointer};
    if (!r.contains(ptr)) at.fail("missing (not a sweep result of this normlab version)");
    const Json& v = r.at(ptr);
    const bool ok = kind == "object" ? v.is_object() : kind == "array" ? v.is_array()
                    : kind == "unsigned" ? v.is_number_unsigned() : v.is_string();
    if (!ok) at.fail("expected " + (kind == "unsigned" ? std::string("a non-negative integer") : "a " + kind) +
                     ", but got " + json_type_name(v));
    return v;
}

// Checks the parts of a shard's report that merge reads; returns its point list.
std::vector<std::size_t> shard_points(const Json& r, const fs::path& file) {
    const std::size_t total = need(r, file, "/sweep/total_points", "unsigned").get<std::size_t>();
    const bool swept = !need(r, file, "/sweep/paths", "array").empty();
    const Json& pts = need(r, file, "/sweep/points", "array");
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < pts.size(); ++i) {
        const std::size_t p = need(r, file, "/sweep/points/" + std::to_string(i), "unsigned").get<std::size_t>();
        if (p >= total)
            JsonLocation{file.string(), "/sweep/points/" + std::to_string(i)}.fail(
                "point " + std::to_string(p) + " is not below the sweep's " + count_noun(total, "point"));
        out.push_back(p);
    }
    need(r, file, "/config", "object");
    need(r, file, "/data", "object");
    for (std::size_t i = 0; i < need(r, file, "/files", "array").size(); ++i)
        need(r, file, "/files/" + std::to_string(i), "string");
    const std::size_t entries = need(r, file, "/analyses", "array").size();
    const std::size_t timings = need(r, file, "/timings_ms/analyses", "array").size();
    if (swept) {  // rows of a sweep name their point
        for (std::size_t i = 0; i < entries; ++i) need(r, file, "/analyses/" + std::to_string(i) + "/point", "unsigned");
        for (std::size_t i = 0; i < timings; ++i)
            need(r, file, "/timings_ms/analyses/" + std::to_string(i) + "/point", "unsigned");
    }
    return out;
}

// " (first difference at /norms/ln/eps: 0.001 here, 1e-05 there)": where two shards'
// configs part (a --set given to one shard only), each side's value cut to 60 characters.
std::string first_difference(const Json& here, const Json& there) {
    const Json patch = Json::diff(there, here);
    if (patch.empty()) return "";
    std::string path = patch[0].value("path", "");
    // An element appended to a list is patched at ".../-", which neither document holds:
    // name its index in the longer list instead.
    if (path.size() >= 2 && path.compare(path.size() - 2, 2, "/-") == 0) {
        const std::string list = path.substr(0, path.size() - 2);
        path = list + "/" + std::to_string(there.at(Json::json_pointer(list)).size());
    }
    auto value = [&](const Json& j) -> std::string {
        const Json::json_pointer p(path);
        if (!j.contains(p)) return "absent";
        std::string d = j.at(p).dump();
        return d.size() > 60 ? d.substr(0, 57) + "..." : d;
    };
    return " (first difference at " + (path.empty() ? "/" : path) + ": " + value(here) + " here, " + value(there) +
           " there)";
}

// The shard I/N a report ran as (its /sweep/shard), or nullopt when it does not say.
std::optional<std::pair<std::size_t, std::size_t>> report_shard(const Json& r) {
    const auto sw = r.find("sweep");
    if (sw == r.end() || !sw->is_object() || !sw->contains("shard")) return std::nullopt;
    const Json& sh = (*sw)["shard"];
    if (!sh.is_array() || sh.size() != 2 || !sh[0].is_number_unsigned() || !sh[1].is_number_unsigned()) return std::nullopt;
    const auto i = sh[0].get<std::size_t>(), n = sh[1].get<std::size_t>();
    if (i >= n) return std::nullopt;
    return std::make_pair(i, n);
}

// "1/4": shard I of N, as --shard takes it.
std::string shard_name(const std::pair<std::size_t, std::size_t>& shard) {
    return std::to_string(shard.first) + "/" + std::to_string(shard.second);
}

// "; the folder of shard 1/4 is not among those given" (the folders of shards 1/4 and 3/4
// are ..., at most ten named) when every report ran as a shard of one N and each missing
// point is one of a shard not given; else "": the points alone say what is missing.
std::string missing_shards(const std::vector<Json>& reports, const std::vector<std::size_t>& missing) {
    std::size_t n = 0;
    std::set<std::size_t> given;
    for (const Json& r : reports) {
        const auto sh = report_shard(r);
        if (!sh || (n && sh->second != n)) return "";
        n = sh->second;
        given.insert(sh->first);
    }
    std::set<std::size_t> absent;
    for (std::size_t p : missing) {
        if (given.count(p % n)) return "";
        absent.insert(p % n);
    }
    std::vector<std::string> names;
    for (std::size_t i : absent) {
        if (names.size() == 10) {
            names.push_back("...");
            break;
        }
        names.push_back(shard_name({i, n}));
    }
    if (absent.size() == 1) return "; the folder of shard " + names.front() + " is not among those given";
    return "; the folders of shards " + join_words(names, names.back() == "..." ? ", " : " and ") +
           " are not among those given";
}

}  // namespace

void merge_results(const std::string& out, const std::vector<std::string>& dirs, bool force) {
    if (dirs.empty()) throw InputError("merge: no shard folders given");
    note_interrupt_keeps_output(true);
    std::vector<Json> reports;
    std::map<std::size_t, std::size_t> owner;  // point -> shard
    for (std::size_t s = 0; s < dirs.size(); ++s) {
        fs::path rp = fs::path(dirs[s]) / "report.json";
        check_result_folder(dirs[s]);
        for (std::size_t t = 0; t < s; ++t) {
            std::error_code ec;
            if (fs::equivalent(dirs[t], dirs[s], ec))
                throw InputError("merge: " + dirs[s] + " is given twice" +
                                 (dirs[t] == dirs[s] ? "" : " (also as " + dirs[t] + ")"));
        }
        Json r = Json::parse(read_file(rp));
        if (!r.contains("sweep"))
            throw InputError(rp.string() + ": not a sweep or shard result (nothing to merge)");
        const std::vector<std::size_t> points = shard_points(r, rp);
        if (!reports.empty() && r["config"] != reports.front()["config"])
            throw InputError(rp.string() + ": comes from a different config than " + dirs.front() +
                             first_difference(r["config"], reports.front()["config"]));
        // A merged result is one run's: its norms without "compute" all took one arithmetic.
        if (!reports.empty() && r.value("default_compute", "") != reports.front().value("default_compute", ""))
            throw InputError(rp.string() + ": its norms without \"compute\" took the " +
                             r.value("default_compute", "(unrecorded)") + " path, those of " + dirs.front() + " the " +
                             reports.front().value("default_compute", "(unrecorded)") +
                             " path (machines with and without FMA instructions): run the shards on one kind of "
                             "machine, or give each norm \"compute\"");
        for (std::size_t pi : points) {
            if (owner.count(pi)) {
                // Shards of different N may cover a sweep (0/2 beside 1/4 and 3/4), but not overlap.
                const auto here = report_shard(r), there = report_shard(reports[owner[pi]]);
                const bool mixed = here && there && here->second != there->second;
                throw InputError("merge: point " + std::to_string(pi) + " is in both " + dirs[owner[pi]] +
                                 (mixed ? " (shard " + shard_name(*there) + ")" : "") + " and " + dirs[s] +
                                 (mixed ? " (shard " + shard_name(*here) + "): shards of different N overlap" : ""));
            }
            owner[pi] = s;
        }
        reports.push_back(std::move(r));
    }
    const std::size_t total = reports.front()["sweep"]["total_points"].get<std::size_t>();
    // Without swept paths the result is one point (a config without a sweep, run in shards):
    // its CSVs carry no point column and its data and arrays are not keyed by point.
    const bool swept = !reports.front()["sweep"]["paths"].empty();
    std::vector<std::size_t> missing;
    for (std::size_t p = 0; p < total; ++p)
        if (!owner.count(p)) missing.push_back(p);
    if (!missing.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missing.size() && i < 10; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
        throw InputError("merge: " + std::to_string(missing.size()) + " of " + count_noun(total, "sweep point") +
                         " missing (" + list + (missing.size() > 10 ? ", ..." : "") + ")" + missing_shards(reports, missing));
    }

    // Replacing the output folder must not delete a shard being merged. Merge has no --out:
    // its refusals advise another output folder.
    OutputFolder folder(out, force, std::vector<std::filesystem::path>(dirs.begin(), dirs.end()), "output folder");
    folder.prepare();  // an output that cannot be written is found before the shards are merged
    std::vector<std::string> files;
    // CSVs: the union of tables, rows stably sorted by point = the unsharded order, since each
    // shard wrote its points in increasing order and a point's rows in analysis order.
    std::vector<std::string> csv_names;
    for (const auto& r : reports)
        for (const auto& f : r["files"]) {
            std::string name = f.get<std::string>();
            if (name.size() > 4 && name.substr(name.size() - 4) == ".csv" &&
                std::find(csv_names.begin(), csv_names.end(), name) == csv_names.end())
                csv_names.push_back(name);
        }
    for (const auto& name : csv_names) {
        std::string header;
        std::vector<std::pair<std::size_t, std::string>> rows;
        for (std::size_t s = 0; s < dirs.size(); ++s) {
            fs::path p = fs::path(dirs[s]) / name;
            if (!fs::exists(p)) continue;
            auto recs = csv_records(read_file(p));
            if (recs.empty()) throw InputError(p.string() + ": empty CSV");
            if (header.empty()) header = recs[0];
            else if (recs[0] != header) throw InputError(p.string() + ": header differs from the other shards'");
            for (std::size_t i = 1; i < recs.size(); ++i)
                rows.push_back({swept ? record_point(recs[i], p) : 0, recs[i]});
        }
        std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::string text = header + "\n";
        for (const auto& r : rows) text += r.second + "\n";
        folder.write(name, text);
    }
    // Saved arrays live under arrays/p<point>/ and do not collide between shards; listed in
    // point order, as the unsharded run lists them.
    std::vector<std::tuple<std::size_t, std::size_t, std::string>> arrays;  // point, shard, name
    for (std::size_t s = 0; s < dirs.size(); ++s)
        for (const auto& f : reports[s]["files"]) {
            std::string name = f.get<std::string>();
            if (name.rfind("arrays/", 0) == 0) arrays.emplace_back(array_point(name, swept), s, name);
        }
    std::stable_sort(arrays.begin(), arrays.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    for (const auto& [point, s, name] : arrays) {
        folder.write(name, read_file(fs::path(dirs[s]) / name));
        files.push_back(name);
    }
    files.insert(files.end(), csv_names.begin(), csv_names.end());

    Json merged = reports.front();
    Json analyses = Json::array(), timings = Json::array(), data = Json::object();
    std::vector<std::pair<std::size_t, Json>> entries, times;
    Json notes = Json::array();  // every shard's notes, each once (results of older versions have none)
    for (const auto& r : reports) {
        if (r.contains("notes"))
            for (const auto& n : r["notes"])
                if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
        for (const auto& a : r["analyses"]) entries.push_back({swept ? a["point"].get<std::size_t>() : 0, a});
        for (const auto& t : r["timings_ms"]["analyses"]) times.push_back({swept ? t["point"].get<std::size_t>() : 0, t});
    }
    auto by_point = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::stable_sort(entries.begin(), entries.end(), by_point);
    std::stable_sort(times.begin(), times.end(), by_point);
    for (auto& e : entries) analyses.push_back(std::move(e.second));
    for (auto& t : times) timings.push_back(std::move(t.second));
    if (swept) {
        for (std::size_t p = 0; p < total; ++p) {
            const Json& d = reports[owner[p]]["data"];
            const std::string key = std::to_string(p);
            if (d.contains(key)) data[key] = d[key];
        }
    } else {
        data = reports[owner[0]]["data"];
    }
    Json points = Json::array();
    for (std::size_t p = 0; p < total; ++p) points.push_back(p);
    merged["sweep"]["points"] = points;
    merged["sweep"]["shard"] = {0, 1};
    merged["sweep"]["merged_from"] = dirs;
    merged["data"] = data;
    merged["analyses"] = analyses;
    merged["files"] = files;
    if (reports.front().contains("notes")) merged["notes"] = notes;
    merged["timings_ms"] = {{"analyses", timings}};
    for (const auto& [rel, bytes] : add_report_files(merged)) folder.write(rel, bytes);
    folder.write("report.json", merged.dump(2) + "\n");
    note_interrupt_keeps_output(false);  // before the commit, as in run_config
    folder.commit();
    // + 1: report.json itself, which its "files" list does not name
    std::cerr << "normlab: merged " << count_noun(dirs.size(), "shard folder") << " (" << count_noun(total, "point")
              << "): " << count_noun(merged["files"].size() + 1, "file") << " written to " << plain_or_quoted(out) << "\n";
}

}  // namespace normlab
