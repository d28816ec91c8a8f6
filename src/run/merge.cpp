#include "run/merge.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "run/report_command.hpp"
#include "report/output.hpp"
#include "tensor/errors.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

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

}  // namespace

void merge_results(const std::string& out, const std::vector<std::string>& dirs, bool force) {
    if (dirs.empty()) throw InputError("merge: no shard folders given");
    std::vector<Json> reports;
    for (const auto& d : dirs) {
        fs::path rp = fs::path(d) / "report.json";
        if (!is_normlab_result(d)) throw InputError(rp.string() + ": not a normlab result folder");
        Json r = Json::parse(read_file(rp));
        if (!r.contains("sweep")) throw InputError(rp.string() + ": not a sweep result (nothing to merge)");
        if (!reports.empty() && r["config"] != reports.front()["config"])
            throw InputError(rp.string() + ": comes from a different config than " + dirs.front());
        reports.push_back(std::move(r));
    }
    const std::size_t total = reports.front()["sweep"]["total_points"].get<std::size_t>();
    std::map<std::size_t, std::size_t> owner;  // point -> shard
    for (std::size_t s = 0; s < reports.size(); ++s)
        for (const auto& p : reports[s]["sweep"]["points"]) {
            std::size_t pi = p.get<std::size_t>();
            if (owner.count(pi))
                throw InputError("merge: point " + std::to_string(pi) + " is in both " + dirs[owner[pi]] + " and " + dirs[s]);
            owner[pi] = s;
        }
    std::vector<std::size_t> missing;
    for (std::size_t p = 0; p < total; ++p)
        if (!owner.count(p)) missing.push_back(p);
    if (!missing.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missing.size() && i < 10; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
        throw InputError("merge: " + std::to_string(missing.size()) + " of " + std::to_string(total) +
                         " sweep points missing (" + list + (missing.size() > 10 ? ", ..." : "") + ")");
    }

    OutputFolder folder(out, force);
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
            for (std::size_t i = 1; i < recs.size(); ++i) rows.push_back({record_point(recs[i], p), recs[i]});
        }
        std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::string text = header + "\n";
        for (const auto& r : rows) text += r.second + "\n";
        folder.write(name, text);
    }
    // Saved arrays live under arrays/p<point>/ and do not collide between shards.
    for (std::size_t s = 0; s < dirs.size(); ++s)
        for (const auto& f : reports[s]["files"]) {
            std::string name = f.get<std::string>();
            if (name.rfind("arrays/", 0) == 0) {
                folder.write(name, read_file(fs::path(dirs[s]) / name));
                files.push_back(name);
            }
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
        for (const auto& a : r["analyses"]) entries.push_back({a["point"].get<std::size_t>(), a});
        for (const auto& t : r["timings_ms"]["analyses"]) times.push_back({t["point"].get<std::size_t>(), t});
    }
    auto by_point = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::stable_sort(entries.begin(), entries.end(), by_point);
    std::stable_sort(times.begin(), times.end(), by_point);
    for (auto& e : entries) analyses.push_back(std::move(e.second));
    for (auto& t : times) timings.push_back(std::move(t.second));
    for (std::size_t p = 0; p < total; ++p) data[std::to_string(p)] = reports[owner[p]]["data"][std::to_string(p)];
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
    folder.commit();
}

}  // namespace normlab
