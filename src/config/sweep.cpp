#include "config/sweep.hpp"

#include <algorithm>
#include <cctype>

#include "config/overrides.hpp"
#include "json/text.hpp"
#include "tensor/errors.hpp"

namespace normlab {

std::string SweepPoint::label() const {
    std::string s;
    for (std::size_t i = 0; i < values.size(); ++i)
        s += (i ? ";" : "") + values[i].first + "=" + values[i].second.dump();
    return s;
}

std::string sweep_column(const std::string& path) {
    std::string out;
    for (char c : path) {
        bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        if (word) out += c;
        else if (!out.empty() && out.back() != '_') out += '_';
    }
    while (!out.empty() && out.back() == '_') out.pop_back();
    return out;
}

std::string sweep_column_in(const std::string& column, const std::vector<std::string>& analysis_columns) {
    const bool taken = std::find(analysis_columns.begin(), analysis_columns.end(), column) != analysis_columns.end();
    return taken ? "sweep_" + column : column;
}

std::pair<std::size_t, std::size_t> parse_shard(const std::string& text) {
    const auto slash = text.find('/');
    auto bad = [&] {
        throw InputError("--shard " + plain_or_quoted(text) +
                         ": expected I/N with 0 <= I < N (e.g. 0/4 ... 3/4)");
    };
    if (slash == std::string::npos) bad();
    const std::string first = text.substr(0, slash), count = text.substr(slash + 1);
    // Digits alone on both sides: std::stoll would also take a sign and leading blanks.
    auto digits = [](const std::string& part) {
        return !part.empty() && std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    if (!digits(first) || !digits(count)) bad();
    try {
        const long long i = std::stoll(first), n = std::stoll(count);
        if (i >= n) bad();
        return {static_cast<std::size_t>(i), static_cast<std::size_t>(n)};
    } catch (const std::out_of_range&) {  // digits beyond 64 bits
        bad();
    }
    return {0, 1};
}

Sweep extract_sweep(Json& config, const std::string& file) {
    Sweep s;
    if (!config.is_object() || !config.contains("sweep")) {
        s.points.push_back({});
        return s;
    }
    Json block = config["sweep"];
    config.erase("sweep");
    JsonLocation loc{file, "/sweep"};
    if (!block.is_object()) loc.fail("expected an object {\"<config path>\": [values...]}, but got " + json_type_name(block));

    // Dimensions of the product: each grid key is one; the zip block is one more.
    std::vector<std::vector<std::pair<std::string, Json>>> dims;  // dim -> per-step values
    std::vector<std::vector<std::string>> dim_paths;
    std::vector<bool> is_zip;
    auto check_list = [&](const std::string& key, const Json& v, const JsonLocation& at) {
        if (!v.is_array()) at.fail("expected a list of values, but got " + json_got(v));
        if (v.empty()) at.fail("list of values is empty");
        // Two spellings of one value ("norms.ln.eps", "/norms/ln/eps") are one path: the
        // later would silently win and the CSV would get the column twice.
        const std::string pointer = config_pointer(key);
        for (const auto& p : s.paths) {
            if (p == key) at.fail("path " + quoted_text(key) + " is swept twice");
            if (config_pointer(p) == pointer)
                at.fail("path " + quoted_text(key) + " is swept twice: " + quoted_text(p) + " names the same value, " + plain_or_quoted(pointer));
            // Distinct paths whose names differ only in punctuation ("/data/a.b/std",
            // "data.a_b.std") would give one CSV column two meanings.
            if (sweep_column(p) == sweep_column(key))
                at.fail("sweep paths " + quoted_text(p) + " and " + quoted_text(key) + " would both be the CSV column \"" +
                        sweep_column(key) + "\" (punctuation becomes '_'): rename one of the entries they name");
        }
        s.paths.push_back(key);
    };
    for (auto it = block.begin(); it != block.end(); ++it) {
        const std::string& key = it.key();
        if (key == "seed_per_point") {
            if (!it.value().is_boolean()) loc.child(key).fail("expected true or false, but got " + json_got(it.value()));
            s.seed_per_point = it.value().get<bool>();
            continue;
        }
        if (key == "zip") {
            JsonLocation zl = loc.child("zip");
            if (!it.value().is_object() || it.value().empty())
                zl.fail("expected an object of equally long lists {\"<path>\": [...], ...}");
            std::size_t len = 0;
            std::vector<std::string> paths;
            for (auto z = it.value().begin(); z != it.value().end(); ++z) {
                check_list(z.key(), z.value(), zl.child(z.key()));
                if (len && z.value().size() != len)
                    zl.fail("zip lists must have equal lengths, but " + quoted_text(paths.front()) + " has " +
                            std::to_string(len) + " values and " + quoted_text(z.key()) + " has " +
                            std::to_string(z.value().size()));
                len = z.value().size();
                paths.push_back(z.key());
            }
            std::vector<std::pair<std::string, Json>> steps;
            for (std::size_t k = 0; k < len; ++k) steps.push_back({std::to_string(k), Json()});
            dims.push_back(steps);
            dim_paths.push_back(paths);
            is_zip.push_back(true);
            continue;
        }
        check_list(key, it.value(), loc.child(key));
        std::vector<std::pair<std::string, Json>> steps;
        for (const auto& v : it.value()) steps.push_back({key, v});
        dims.push_back(steps);
        dim_paths.push_back({key});
        is_zip.push_back(false);
    }
    if (dims.empty()) loc.fail("sweep has no parameters");

    // The points are listed up front: a product of lists that is too long would exhaust
    // memory (or wrap around) before the first point runs.
    constexpr std::size_t kMaxPoints = 1000000;
    std::size_t total = 1;
    for (const auto& d : dims) {
        if (total > kMaxPoints / d.size())
            loc.fail("sweep has more than " + std::to_string(kMaxPoints) +
                     " points (the product of its list lengths); split it into several configs or use \"zip\"");
        total *= d.size();
    }
    const Json& zip = block.contains("zip") ? block["zip"] : Json();
    for (std::size_t p = 0; p < total; ++p) {
        SweepPoint pt;
        pt.index = p;
        // Mixed-radix decomposition, last dimension fastest.
        std::vector<std::size_t> idx(dims.size());
        std::size_t rest = p;
        for (std::size_t d = dims.size(); d-- > 0;) {
            idx[d] = rest % dims[d].size();
            rest /= dims[d].size();
        }
        for (std::size_t d = 0; d < dims.size(); ++d) {
            if (!is_zip[d]) {
                pt.values.push_back(dims[d][idx[d]]);
                pt.origins.push_back(loc.child(dim_paths[d][0]).child(idx[d]).pointer);
            } else {
                for (const auto& path : dim_paths[d]) {
                    pt.values.push_back({path, zip[path][idx[d]]});
                    pt.origins.push_back(loc.child("zip").child(path).child(idx[d]).pointer);
                }
            }
        }
        s.points.push_back(std::move(pt));
    }
    return s;
}

}  // namespace normlab
