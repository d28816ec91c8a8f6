#include "cli/run_command.hpp"

#include <chrono>
#include <iostream>
#include <sstream>

#include "analysis/analysis.hpp"
#include "config/config.hpp"
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
    try {
        value = Json::parse(text);
    } catch (const Json::parse_error&) {
        value = text;  // not JSON: a plain string such as a path or a name
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

Loaded load(const RunOptions& o) {
    Loaded l;
    fs::path base = fs::path(o.config_path).parent_path();
    l.config = parse_config(load_config_document(o), o.config_path, base);
    DataContext ctx{base, l.config.seed, l.config.dtype};
    for (const auto& name : l.config.data_order)
        l.batches[name] = make_batch(name, l.config.data.at(name),
                                     JsonLocation{o.config_path, "/data"}.child(name), ctx);
    return l;
}

Json data_summary(const Batch& b) {
    Json j = Json::object();
    j["source"] = b.source;
    j["shape"] = b.x.shape();
    j["channel_axis"] = b.channel_axis;
    j["has_mask"] = b.has_mask();
    if (b.has_mask()) j["pad_fraction"] = b.pad_fraction();
    if (!b.lengths.empty()) j["lengths"] = b.lengths;
    return j;
}

}  // namespace

void validate_config(const RunOptions& o) {
    Loaded l = load(o);
    for (const auto& a : l.config.analyses)
        for (const auto& dn : a.data)
            for (const auto& nn : a.norms) {
                const Batch& b = l.batches.at(dn);
                NormLayer(l.config.norms.at(nn), l.config.dtype).resolve(b.x.shape(), b.channel_axis, dn);
            }
}

void run_config(const RunOptions& o) {
    auto t0 = std::chrono::steady_clock::now();
    Loaded l = load(o);
    const Config& c = l.config;
    double load_ms = ms_since(t0);

    fs::path out_dir = o.out ? fs::path(*o.out) : c.output_dir ? fs::path(*c.output_dir) : fs::path("results") / c.name;
    OutputFolder folder(out_dir, o.force);

    AnalysisContext ctx;
    ctx.batches = &l.batches;
    ctx.norms = &c.norms;
    ctx.dtype = c.dtype;
    ctx.seed = c.seed;
    std::vector<std::string> files;
    ctx.save = [&](const std::string& data, const std::string& norm, const std::string& what,
                   const xt::xarray<double>& values, DType dtype) {
        fs::path rel = fs::path("arrays") / data / norm / (what + ".npy");
        folder.write(rel, npy_bytes(values, dtype));
        if (std::find(files.begin(), files.end(), rel.string()) == files.end()) files.push_back(rel.string());
    };

    std::vector<std::string> type_order;
    std::map<std::string, Table> tables;
    Json analyses = Json::array();
    Json timings = Json::array();
    for (std::size_t i = 0; i < c.analyses.size(); ++i) {
        const AnalysisSpec& a = c.analyses[i];
        auto ta = std::chrono::steady_clock::now();
        Table t = find_analysis(a.type)->run(a, ctx);
        timings.push_back({{"analysis", i}, {"type", a.type}, {"ms", ms_since(ta)}});
        Json entry = Json::object();
        entry["index"] = i;
        entry["type"] = a.type;
        entry["data"] = a.data;
        entry["norms"] = a.norms;
        entry["rows"] = table_to_json(t);
        analyses.push_back(std::move(entry));
        if (!tables.count(a.type)) {
            type_order.push_back(a.type);
            tables[a.type] = t;
        } else {
            tables[a.type].append(t);
        }
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
    report["name"] = c.name;
    report["seed"] = c.seed;
    report["dtype"] = dtype_name(c.dtype);
    report["config"] = c.json;
    Json data = Json::object();
    for (const auto& n : c.data_order) data[n] = data_summary(l.batches.at(n));
    report["data"] = data;
    report["analyses"] = analyses;
    report["files"] = files;
    report["timings_ms"] = {{"load", load_ms}, {"analyses", timings}, {"total", ms_since(t0)}};
    folder.write("report.json", report.dump(2) + "\n");
    folder.commit();
    if (!o.quiet) {
        std::cout << "normlab: " << c.name << ": " << c.analyses.size() << " analyses, "
                  << files.size() << " files written to " << out_dir.string() << "\n";
        for (const auto& f : files) std::cout << "  " << (out_dir / f).string() << "\n";
    }
}

}  // namespace normlab
