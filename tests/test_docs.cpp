// The user docs against the program: the README's command synopsis lists every option
// `--help` shows; every key `normlab list` prints is one its reader reads; and the figures
// README.md, configs/README.md and results/README.md quote are the ones the shipped
// configs give (the expected text is built from a run, so docs and program cannot drift).
#include <doctest/doctest.h>

#include <cstdio>
#include <iomanip>
#include <regex>
#include <set>
#include <sstream>

#include "analysis_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    std::string line;
    while (std::getline(ss, line)) out.push_back(line);
    return out;
}

// The names listed in a CLI11 help section ("Subcommands:", "Options:"): the first word of
// each indented line, split at commas ("-q,--quiet" -> -q, --quiet).
std::vector<std::string> help_section(const std::string& help, const std::string& section) {
    std::vector<std::string> names;
    bool in = false;
    for (const auto& line : lines_of(help)) {
        if (line == section) {
            in = true;
            continue;
        }
        if (!in) continue;
        if (line.empty() || line[0] != ' ') break;
        std::string first = line.substr(line.find_first_not_of(' '));
        first = first.substr(0, first.find(' '));
        std::stringstream ss(first);
        std::string name;
        while (std::getline(ss, name, ',')) names.push_back(name);
    }
    return names;
}

// README.md's synopsis of `normlab <sub>`: its line in the "## Command line" code block
// and the indented lines that continue it.
std::string synopsis(const std::string& readme, const std::string& sub) {
    const auto start = readme.find("## Command line");
    REQUIRE(start != std::string::npos);
    const auto open = readme.find("```", start), close = readme.find("```", open + 3);
    std::string text;
    bool in = false;
    for (const auto& line : lines_of(readme.substr(open, close - open))) {
        if (line.rfind("normlab ", 0) == 0) in = line.rfind("normlab " + sub + " ", 0) == 0 || line == "normlab " + sub;
        else if (line.empty() || line[0] != ' ') in = false;
        if (in) text += line + "\n";
    }
    return text;
}

// A key list of `normlab list` ("a (required), b=1, c (x, y)") -> names, splitting at ", "
// outside brackets.
std::vector<std::string> listed_keys(const std::string& text) {
    std::vector<std::string> items;
    std::string cur;
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        depth += c == '(' ? 1 : c == ')' ? -1 : 0;
        if (depth == 0 && c == ',' && i + 1 < text.size() && text[i + 1] == ' ') {
            items.push_back(cur), cur.clear(), ++i;
            continue;
        }
        cur += c;
    }
    if (!cur.empty()) items.push_back(cur);
    std::vector<std::string> names;
    for (const auto& it : items) names.push_back(it.substr(0, it.find_first_of("= ")));
    return names;
}

// Two significant digits, as the docs write small figures: 5.7e-5, 0.0056, 0.41, 3.3.
std::string two_digits(double v) {
    char buf[32];
    if (std::fabs(v) < 1e-3) {
        std::snprintf(buf, sizeof buf, "%.1e", v);  // "5.7e-05"
        std::string s = buf;
        const auto e = s.find("e-0");
        if (e != std::string::npos) s.erase(e + 2, 1);  // "5.7e-5"
        return s;
    }
    std::snprintf(buf, sizeof buf, "%.2g", v);
    return buf;
}

// "x.xx": a figure as the docs round it.
std::string fixed(double v, int digits) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(digits) << v;
    return o.str();
}

// 2.99e-7 -> "3.0e-7": one decimal, the exponent without leading zeros (as the docs write it).
std::string sci1(double v) {
    std::ostringstream o;
    o << std::scientific << std::setprecision(1) << v;
    std::string s = o.str();
    const std::size_t e = s.find('e');
    std::string exp = s.substr(e + 1);
    const char sign = exp[0];
    exp = exp.substr(1);
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    return s.substr(0, e) + "e" + (sign == '-' ? "-" : "") + exp;
}

fs::path run_shipped(const std::string& name) {
    const fs::path out = fresh_dir("docs_" + name) / "out";
    CliResult r = run_normlab("run " + kSrc + "/configs/" + name + ".json --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

std::vector<CsvRow> table(const fs::path& out, const std::string& type) { return parse_csv(read_text(out / (type + ".csv"))); }

// Runs of white space as one space: a quote may wrap across lines of the markdown.
std::string squeeze(const std::string& s) {
    std::string out;
    for (char c : s) {
        const bool space = c == ' ' || c == '\n';
        if (space && !out.empty() && out.back() == ' ') continue;
        out += space ? ' ' : c;
    }
    return out;
}

// Checks that `doc` quotes `text` (built from a run), line breaks aside.
#define CHECK_QUOTES(doc, text)                                                                   \
    do {                                                                                          \
        const std::string t_ = squeeze(text);                                                     \
        CHECK_MESSAGE(squeeze(doc).find(t_) != std::string::npos, "the docs should quote: " << t_); \
    } while (0)

}  // namespace

TEST_CASE("README's command synopsis lists every subcommand and every option --help shows") {
    const std::string readme = read_text(kSrc + "/README.md");
    CliResult top = run_normlab("--help");
    REQUIRE(top.exit_code == 0);
    const auto subs = help_section(top.out, "Subcommands:");
    REQUIRE(subs.size() >= 7);
    CHECK(readme.find("normlab --version") != std::string::npos);
    for (const auto& sub : subs) {
        CAPTURE(sub);
        const std::string syn = synopsis(readme, sub);
        CHECK_MESSAGE(!syn.empty(), "README.md's synopsis has no line for normlab " << sub);
        CliResult help = run_normlab(sub + " --help");
        REQUIRE(help.exit_code == 0);
        const auto options = help_section(help.out, "Options:");
        CHECK(!options.empty());
        for (const auto& opt : options) {
            if (opt == "-h" || opt == "--help") continue;
            CAPTURE(opt);
            // The option as a word of the synopsis: "[--out DIR]", "-q|--quiet", "--set PATH=VALUE".
            const std::regex word("(^|[\\s\\[|])" + opt + "([\\s\\]|=]|$)");
            CHECK_MESSAGE(std::regex_search(syn, word), "README.md's synopsis of normlab " << sub << " lacks " << opt);
        }
    }
}

TEST_CASE("normlab list prints every data source's keys, and every key it lists is read by its reader") {
    CliResult list = run_normlab("list");
    REQUIRE(list.exit_code == 0);
    // Section -> (entry -> keys).
    std::map<std::string, std::map<std::string, std::vector<std::string>>> listed;
    std::string section, analysis;
    for (const auto& line : lines_of(list.out)) {
        if (line.rfind("norm types", 0) == 0) section = "norms";
        else if (line.rfind("data sources", 0) == 0) section = "data";
        else if (line.rfind("analyses", 0) == 0) section = "analyses";
        else if (line.rfind("conventions", 0) == 0) section = "";
        else if (line.rfind("stacks (", 0) == 0) listed["stacks"]["stack"] = listed_keys(line.substr(line.find("): ") + 3));
        else if (section == "analyses" && line.rfind("    keys: ", 0) == 0) listed[section][analysis] = listed_keys(line.substr(10));
        else if (section == "analyses" && line.rfind("  ", 0) == 0 && line[2] != ' ') analysis = line.substr(2, line.find(':') - 2);
        else if (!section.empty() && line.rfind("  ", 0) == 0 && line[2] != ' ') {
            const auto colon = line.find(": ");
            listed[section][line.substr(2, colon - 2)] = listed_keys(line.substr(colon + 2));
        }
    }
    // Every source with its keys (the list used to name the sources only).
    const std::map<std::string, json> sources = {
        {"gaussian", {{"shape", {2, 3, 4}}}},
        {"values", {{"values", {{1, 2}, {3, 4}}}}},
        {"images", {{"shape", {2, 3, 4, 4}}}},
        {"tokens", {{"batch", 2}, {"max_len", 3}, {"dim", 4}}},
        {"text", {{"path", kSrc + "/configs/data/prose.txt"}, {"dim", 4}}},
        {"npy", {{"path", std::string(NORMLAB_TEST_DATA) + "/npy/hidden.npy"}}},
        {"csv", {{"path", kSrc + "/configs/data/wine_data.csv"}, {"skip_rows", 1}}},
        {"image_files", {{"paths", {kSrc + "/configs/data/china.jpg"}}, {"patch", {8, 8}}}},
    };
    REQUIRE(listed["data"].size() == sources.size());
    CHECK(listed["data"]["gaussian"] == std::vector<std::string>{"shape", "mean", "std", "pad_value", "channel_axis",
                                                                 "mask", "lengths", "padding_side"});
    const std::map<std::string, json> norms = {
        {"batchnorm", {{"type", "batchnorm"}}},
        {"layernorm", {{"type", "layernorm"}, {"normalized_shape", {4}}}},
        {"instancenorm", {{"type", "instancenorm"}}},
        {"groupnorm", {{"type", "groupnorm"}, {"num_groups", 1}}},
        {"rmsnorm", {{"type", "rmsnorm"}, {"normalized_shape", {4}}}},
    };
    // A value no key accepts: each listed key set to it must be refused at that key's
    // pointer, which shows the reader reads the key (a listed key nobody read would be
    // silently ignored).
    const json wrong = {{"?", json::object()}};
    auto refused_at = [&](const std::string& name, const json& cfg, const std::string& pointer) {
        CAPTURE(pointer);
        const fs::path dir = fresh_dir("listed_" + name);
        write_text(dir / "cfg.json", cfg.dump());
        CliResult r = run_normlab("validate " + (dir / "cfg.json").string());
        CHECK(r.exit_code == 2);
        CHECK_MESSAGE(r.err.find("cfg.json: " + pointer) != std::string::npos, r.err);
        CHECK(r.err.find("unknown key \"" + pointer.substr(pointer.rfind('/') + 1) + "\"") == std::string::npos);
    };
    const json plain_norm = {{"type", "layernorm"}, {"normalized_shape", {4}}};
    for (const auto& [source, base] : sources) {
        CAPTURE(source);
        REQUIRE(listed["data"].count(source));
        CHECK(!listed["data"][source].empty());
        for (const auto& key : listed["data"][source]) {
            json spec = base;
            spec["source"] = source;
            spec[key] = wrong;
            refused_at(source + "_" + key, {{"data", {{"x", spec}}}, {"norms", {{"n", plain_norm}}},
                                            {"analyses", {{{"type", "stats_shapes"}, {"data", {"x"}}, {"norms", {"n"}}}}}},
                       "/data/x/" + key);
        }
    }
    const json values = {{"source", "values"}, {"values", {{1, 2, 3, 4}}}};
    const std::vector<std::string> common = listed["norms"]["all"];
    CHECK(!common.empty());
    for (const auto& [type, base] : norms) {
        CAPTURE(type);
        REQUIRE(listed["norms"].count(type));
        std::vector<std::string> keys = listed["norms"][type];
        keys.insert(keys.end(), common.begin(), common.end());
        for (const auto& key : keys) {
            json norm = base;
            norm[key] = wrong;
            refused_at(type + "_" + key, {{"data", {{"x", values}}}, {"norms", {{"n", norm}}},
                                          {"analyses", {{{"type", "stats_shapes"}, {"data", {"x"}}, {"norms", {"n"}}}}}},
                       "/norms/n/" + key);
        }
    }
    // Stacks (the depth analysis' residual stacks).
    REQUIRE(!listed["stacks"]["stack"].empty());
    const json rows = {{"source", "values"}, {"values", {{1, 2, 3, 4}, {4, 3, 2, 1}}}, {"channel_axis", -1}};
    for (const auto& key : listed["stacks"]["stack"]) {
        json stack = {{"layers", 2}, {"placement", "pre"}, {"norm", "n"}, {"block", "ffn"}, {"hidden", 4}};
        stack[key] = wrong;
        refused_at("stack_" + key, {{"data", {{"x", rows}}}, {"norms", {{"n", plain_norm}}}, {"stacks", {{"s", stack}}},
                                    {"analyses", {{{"type", "depth"}, {"data", {"x"}}, {"stacks", {"s"}}}}}},
                   "/stacks/s/" + key);
    }
    CHECK(listed["analyses"].size() >= 9);
    for (const auto& [type, keys] : listed["analyses"]) {
        CAPTURE(type);
        for (const auto& key : keys) {
            // depth takes stacks instead of norms.
            json a = {{"type", type}, {"data", {"x"}}};
            if (type == "depth") a["stacks"] = {"s"};
            else a["norms"] = {"n", "m"};
            a[key] = wrong;
            refused_at(type + "_" + key, {{"data", {{"x", rows}}}, {"norms", {{"n", plain_norm}, {"m", plain_norm}}},
                                          {"stacks", {{"s", {{"layers", 2}, {"placement", "pre"}, {"norm", "n"}}}}},
                                          {"analyses", {a}}},
                       "/analyses/0/" + key);
        }
    }
}

TEST_CASE("normlab list names the arrays each analysis' save key takes, and its reader takes each of them") {
    CliResult list = run_normlab("list");
    REQUIRE(list.exit_code == 0);
    const std::string head = "save (a list of arrays to write: ";
    const json rows = {{"source", "values"}, {"values", {{1, 2, 3, 4}, {4, 3, 2, 1}}}, {"channel_axis", -1}};
    const json plain_norm = {{"type", "layernorm"}, {"normalized_shape", {4}}};
    std::string analysis;
    std::size_t described = 0;
    for (const auto& line : lines_of(list.out)) {
        if (line.rfind("  ", 0) == 0 && line[2] != ' ') analysis = line.substr(2, line.find(':') - 2);
        const auto at = line.find(head);
        if (line.rfind("    keys: ", 0) != 0 || at == std::string::npos) continue;
        ++described;
        // "a, b or c)" -> a, b, c; then one name no reader takes.
        std::string text = line.substr(at + head.size(), line.find(')', at) - at - head.size());
        for (auto p = text.find(" or "); p != std::string::npos; p = text.find(" or ")) text.replace(p, 4, ", ");
        std::vector<std::string> arrays;
        for (std::size_t b = 0, e; b <= text.size(); b = e + 2) {
            e = std::min(text.find(", ", b), text.size());
            arrays.push_back(text.substr(b, e - b));
        }
        arrays.push_back("no_such_array");
        for (const auto& name : arrays) {
            CAPTURE(analysis);
            CAPTURE(name);
            json a = {{"type", analysis}, {"data", {"x"}}, {"save", {name}}};
            if (analysis == "depth") a["stacks"] = {"s"};
            else a["norms"] = {"n"};
            const json cfg = {{"data", {{"x", rows}}}, {"norms", {{"n", plain_norm}}},
                              {"stacks", {{"s", {{"layers", 2}, {"placement", "pre"}, {"norm", "n"}}}}}, {"analyses", {a}}};
            const fs::path dir = fresh_dir("save_" + analysis + "_" + name);
            write_text(dir / "cfg.json", cfg.dump());
            CliResult r = run_normlab("validate " + (dir / "cfg.json").string());
            // Some arrays have conditions (a mask to save needs masked data): those refusals
            // name the condition, not an array the reader does not know.
            const bool unknown = r.err.find("cannot save \"" + name + "\" (expected") != std::string::npos ||
                                 r.err.find("unknown array \"" + name + "\" (expected") != std::string::npos;
            CHECK_MESSAGE(unknown == (name == "no_such_array"), r.err);
        }
    }
    CHECK(described == 3);  // apply, jacobian, depth
}

TEST_CASE("configs/sweep.json: a small sweep in one process, as the docs describe it") {
    const fs::path out = run_shipped("sweep");
    const std::string csv = read_text(out / "apply.csv");
    CHECK(csv.rfind("point,norms_ln_eps,data_tokens_std,data,norm,", 0) == 0);
    const auto rows = parse_csv(csv);
    REQUIRE(rows.size() == 9);
    const std::string configs_readme = read_text(kSrc + "/configs/README.md");
    const std::string readme = read_text(kSrc + "/README.md");
    // The std ranges the docs quote, per eps / var ratio, with the points they name.
    auto range = [&](std::initializer_list<int> points, int digits) {
        double lo = 1e300, hi = -1e300;
        for (int p : points) {
            lo = std::min(lo, num(rows[static_cast<std::size_t>(p)], "out_std_min"));
            hi = std::max(hi, num(rows[static_cast<std::size_t>(p)], "out_std_max"));
        }
        return fixed(lo, digits) + "-" + fixed(hi, digits);
    };
    CHECK_QUOTES(configs_readme, range({1, 8}, 4) + " at eps = var / 1000 (points 1 and 8)");
    CHECK_QUOTES(configs_readme, range({0, 4}, 2) + " at var / 10");
    CHECK_QUOTES(configs_readme, range({3, 7}, 2) + " at 10 var (points 3 and 7)");
    CHECK_QUOTES(configs_readme, range({6}, 3) + " at 1000 var");
    CHECK_QUOTES(readme, "falls to " + range({3, 7}, 2) + " where eps is 10x the variance, to " + range({6}, 3) + " at 1000x");
    CHECK(num(rows[1], "norms_ln_eps") == 1e-7);
    CHECK(num(rows[1], "data_tokens_std") == 0.01);
}

TEST_CASE("the figures the docs quote come from the shipped configs") {
    const std::string readme = read_text(kSrc + "/README.md");
    const std::string configs_readme = read_text(kSrc + "/configs/README.md");
    const std::string results_readme = read_text(kSrc + "/results/README.md");

    SUBCASE("quickstart") {
        const fs::path out = run_shipped("quickstart");
        for (const auto& r : table(out, "stats_shapes")) {
            if (r.at("norm") == "rms" || r.at("norm") == "gn") continue;  // not in the README's table
            CHECK_QUOTES(readme, "| " + r.at("stats_shape") + " | " + r.at("num_stats") + " | " + r.at("elems_per_stat") + " |");
        }
        const auto y = normlab::read_npy(out / "arrays/row/ln_row/output.npy").values;
        CHECK_QUOTES(readme, fixed(y(0, 0), 4) + ", " + fixed(y(0, 1), 4) + ", " + fixed(y(0, 2), 4) + ", " + fixed(y(0, 3), 4));
    }
    SUBCASE("epsilon and equivalence: case B03") {
        const fs::path out = run_shipped("epsilon");
        const auto apply = table(out, "apply");
        const std::string torch = fixed(num(one(apply, {{"norm", "bn_eval"}}), "out_max"), 2);
        const std::string keras = fixed(num(one(apply, {{"norm", "bn_eval_keras"}}), "out_max"), 2);
        CHECK_QUOTES(readme, "output " + torch + " against " + keras + " at running_var 1e-4");
        CHECK_QUOTES(results_readme, "`out_max`: " + torch + " (PyTorch) and " + keras + " (Keras)");
        const auto eps = table(out, "epsilon");
        CHECK_QUOTES(results_readme, "`max_abs_diff_vs_eps0` " +
                                         fixed(num(one(eps, {{"data", "b03"}, {"eps", "1e-05"}, {"eps_source", "list"}}), "max_abs_diff_vs_eps0"), 2) +
                                         " (eps 1e-5) and " +
                                         fixed(num(one(eps, {{"data", "b03"}, {"eps", "0.001"}, {"eps_source", "list"}}), "max_abs_diff_vs_eps0"), 2) +
                                         " (eps 1e-3)");
        const fs::path eq = run_shipped("equivalence");
        const auto b03 = one(table(eq, "equivalence"), {{"data", "b03"}});
        CHECK_QUOTES(results_readme, "`max_rel_diff` " + fixed(num(b03, "max_rel_diff"), 3));
        CHECK_QUOTES(results_readme, "(" + torch + " − " + keras + ") / " + torch + " of their outputs");
        CHECK(b03.at("equivalent") == "false");
    }
    SUBCASE("real data") {
        const auto text = json::parse(read_text(run_shipped("real_text") / "report.json"))["data"]["prose"];
        const std::string pct = std::to_string(static_cast<int>(std::lround(100 * text["pad_fraction"].get<double>()))) + "% padding";
        CHECK_QUOTES(readme, "32 padded sentences (" + pct + ")");
        CHECK_QUOTES(configs_readme, "32 padded sentences, T = " + text["shape"][1].dump() + " (the longest; " + pct + ")");
        CHECK(text["shape"][0] == 32);

        const auto photos = table(run_shipped("real_photos"), "stats_shapes");
        const std::string tiles = one(photos, {{"norm", "ln"}}).at("num_stats");
        CHECK_QUOTES(readme, tiles + " tiles of 32x32 from two photos: BatchNorm has " + one(photos, {{"norm", "bn"}}).at("num_stats") +
                                 " statistics, LayerNorm [3,32,32] " + tiles + ", InstanceNorm " +
                                 one(photos, {{"norm", "in"}}).at("num_stats"));

        const fs::path tab = run_shipped("real_tabular");
        const auto wine = json::parse(read_text(tab / "report.json"))["data"]["wine"]["shape"];
        const auto means = normlab::read_npy(tab / "arrays/wine/bn/mean.npy").values;
        double lo = 1e300, hi = 0;
        for (std::size_t j = 0; j < 12; ++j) lo = std::min(lo, means.data()[j]), hi = std::max(hi, means.data()[j]);
        const std::string wine_text = "the wine table (" + wine[0].dump() + " x " + wine[1].dump() + "; proline averages " +
                                      fixed(means.data()[12], 0) + ", the other 12 columns " + fixed(lo, 2) + " to " + fixed(hi, 1) + ")";
        CHECK_QUOTES(readme, wine_text);
        CHECK_QUOTES(configs_readme, wine_text);
        const auto y = normlab::read_npy(tab / "arrays/wine/ln/output.npy").values;
        double proline_min = 1e300, others = 0;
        for (std::size_t i = 0; i < y.shape()[0]; ++i) {
            proline_min = std::min(proline_min, y(i, 12));
            for (std::size_t j = 0; j < 12; ++j) others = std::max(others, std::fabs(y(i, j)));
        }
        CHECK(proline_min > 3.3);
        CHECK(others < 0.75);
        CHECK_QUOTES(configs_readme, "proline -> above 3.3 in every row, the 12 others squashed inside +-0.75");

        const auto digits = table(run_shipped("real_digits"), "apply");
        CHECK(num(one(digits, {{"norm", "bn_pixels"}}), "out_std_min") == 0);
        CHECK(num(one(digits, {{"norm", "bn_pixels_eps0"}}), "out_std_min") == 0);
        CHECK(std::isnan(num(one(digits, {{"norm", "bn_pixels_eps0_keras"}}), "out_std_min")));
        CHECK_QUOTES(readme, "output std 0 with eps; with eps 0, 0 under PyTorch, NaN under Keras");
    }
    SUBCASE("precision, port_check and padding: the tables of results/README.md") {
        const auto p = table(run_shipped("precision"), "precision");
        // normlab's own rows appear in both the float32 and the native analyses, alike.
        auto row = [&](const std::string& data, const std::string& dtype, const std::string& alg, const std::string& work) {
            const auto rows = select(p, {{"data", data}, {"dtype", dtype}, {"algorithm", alg}, {"work_dtype", work}});
            REQUIRE(!rows.empty());
            return rows.front();
        };
        const auto naive = row("mean1e4_std1", "float32", "naive", "float32");
        CHECK_QUOTES(results_readme, "NaN in " + naive.at("nonfinite_count") + " of 65536 outputs; var from −" +
                                         fixed(-num(naive, "var_min"), 0) + " to " + fixed(num(naive, "var_max"), 0));
        CHECK_QUOTES(results_readme, "| " + fixed(num(row("mean1e4_std1", "float32", "two_pass", "float32"), "max_abs_err"), 3) +
                                         " | " + fixed(num(row("mean1e4_std1", "float32", "welford", "float32"), "max_abs_err"), 3) +
                                         " | " + sci1(num(row("mean1e4_std1", "float32", "normlab", "float64"), "max_abs_err")) +
                                         " (" + fixed(num(row("mean1e4_std1", "float32", "normlab", "float64"), "max_ulp_err"), 2) +
                                         " ulp) |");
        const auto naive3 = row("mean1e3_std0.01", "float32", "naive", "float32");
        CHECK_QUOTES(results_readme, "NaN in " + naive3.at("nonfinite_count") + " outputs; var from −" +
                                         fixed(-num(naive3, "var_min"), 2) + " to " + fixed(num(naive3, "var_max"), 2));
        CHECK_QUOTES(results_readme, "| " + fixed(num(row("mean1e3_std0.01", "float32", "two_pass", "float32"), "max_abs_err"), 3) +
                                         " | " + fixed(num(row("mean1e3_std0.01", "float32", "welford", "float32"), "max_abs_err"), 3) +
                                         " | " + sci1(num(row("mean1e3_std0.01", "float32", "normlab", "float64"), "max_abs_err")) +
                                         " (");
        const auto h = row("mean1e4_std1", "float16", "naive", "float32");
        CHECK_QUOTES(results_readme, "all NaN; var −" + fixed(-num(h, "var_min"), 0) + " to −" + fixed(-num(h, "var_max"), 0) + " | " +
                                         fixed(num(row("mean1e4_std1", "float16", "two_pass", "float32"), "max_abs_err"), 4) + " | " +
                                         fixed(num(row("mean1e4_std1", "float16", "welford", "float32"), "max_abs_err"), 2));
        CHECK_QUOTES(results_readme, "| " + fixed(num(row("mean1e4_std1", "float16", "welford", "float16"), "max_abs_err"), 3) + " | " +
                                         fixed(num(row("mean1e4_std1", "float16", "normlab", "float64"), "max_abs_err"), 4) + " |");
        CHECK(row("mean1e4_std1", "float16", "two_pass", "float16").at("overflow_groups") == "64");
        CHECK(row("std500", "float16", "naive", "float16").at("overflow_groups") == "64");
        const auto zero = row("zero_row", "float16", "naive", "float16");
        CHECK_QUOTES(results_readme, "all 64 std-500 rows overflow, and the zero row gives " + zero.at("nonfinite_count") + " NaN");
        const auto bf = row("mean1e4_std1", "bfloat16", "naive", "bfloat16");
        CHECK_QUOTES(results_readme, "variance of " + fixed(num(bf, "var_min"), 0) + " (2^24)");
        CHECK_QUOTES(results_readme, "off by up to " + fixed(num(bf, "max_abs_err"), 2));

        const auto pc = table(run_shipped("port_check"), "port_check");
        const auto keras = one(pc, {{"data", "short_row"}, {"port", "ln_keras"}});
        const auto ref_first = fixed(std::stod(keras.at("ref_values").substr(1)), 4);
        const auto port_first = fixed(std::stod(keras.at("port_values").substr(1)), 4);
        CHECK_QUOTES(results_readme, "first output changes from " + ref_first + " to " + port_first + " (difference " +
                                         fixed(num(keras, "max_abs_diff"), 4) + ")");
        const auto ann = one(pc, {{"data", "short_row"}, {"port", "ln_annotated"}});
        CHECK_QUOTES(results_readme, "the first output becomes " + fixed(std::stod(ann.at("port_values").substr(1)), 4) + ", a " +
                                         std::to_string(static_cast<int>(num(ann, "max_rel_diff") * 100)) + "% relative gap");
        const auto bn = one(pc, {{"port", "bn_keras"}, {"rank", "1"}});
        CHECK_QUOTES(results_readme, "running means differ by up to " + fixed(num(bn, "running_mean_max_abs_diff"), 2) +
                                         ", running variances by up to " + fixed(num(bn, "running_var_max_abs_diff"), 1));
        CHECK_QUOTES(results_readme, "differ by up to " + fixed(num(bn, "max_abs_diff"), 1) + ", because");

        // "[0.183, −0.365, 0, 1.461]": a group's values as the docs print them (U+2212 minus).
        auto values = [](std::string list) {
            std::string out = "[";
            std::stringstream ss(list.substr(1, list.size() - 2));
            std::string v;
            for (int k = 0; std::getline(ss, v, ','); ++k) {
                const double d = std::stod(v);
                std::string f = d == 0 ? "0" : fixed(std::fabs(d), 3);
                out += (k ? ", " : "") + std::string(d < 0 ? "−" : "") + f;
            }
            return out + "]";
        };
        const auto gemma = one(pc, {{"port", "rms_gemma"}});
        CHECK_QUOTES(results_readme, values(gemma.at("ref_values")) + " against " + values(gemma.at("port_values")));
        const auto pad = table(run_shipped("padding"), "padding");
        const auto b04 = one(pad, {{"norm", "bn_keras"}});
        CHECK_QUOTES(results_readme, "moves the mean from " + fixed(num(b04, "mean_excluded_avg"), 0) + " to " +
                                         fixed(num(b04, "mean_included_avg"), 1) + " and the variance from " +
                                         fixed(num(b04, "var_excluded_avg"), 0) + " to " + fixed(num(b04, "var_included_avg"), 2) +
                                         " (`var_contamination_rel_max` " + fixed(num(b04, "var_contamination_rel_max"), 3) + ")");
    }
    SUBCASE("gradients and jacobian") {
        const fs::path out = run_shipped("gradients");
        const auto g = table(out, "gradients");
        const auto normal = select(g, {{"point", "0"}, {"upstream", "normal"}});
        CHECK_QUOTES(results_readme, "`cross_sample_fraction` " + fixed(num(one(normal, {{"norm", "bn"}}), "cross_sample_fraction"), 2) +
                                         " on the tokens and " +
                                         fixed(num(one(normal, {{"norm", "bn_img"}}), "cross_sample_fraction"), 2) + " on the images");
        const std::vector<std::string> eps = {"1e-06", "1e-05", "1e-04", "0.001", "0.01", "0.1"};
        const std::vector<std::string> eps_doc = {"eps 1e-6", "1e-5", "1e-4", "1e-3", "1e-2", "0.1"};
        std::string cos, rstd, ln_gain, rms_gain;
        const auto j = table(out, "jacobian");
        for (std::size_t k = 0; k < eps.size(); ++k) {
            const auto ln = one(g, {{"norms_n_type", "layernorm"}, {"norms_n_eps", eps[k]}, {"norm", "n"}, {"upstream", "normal"}});
            cos += (k ? ", " : "") + two_digits(num(ln, "grad_xhat_cos_max")) + " at " + eps_doc[k];
            const auto jl = one(j, {{"norms_n_type", "layernorm"}, {"norms_n_eps", eps[k]}, {"group", "0"}});
            const auto jr = one(j, {{"norms_n_type", "rmsnorm"}, {"norms_n_eps", eps[k]}, {"group", "0"}});
            rstd += (k ? ", " : "") + fixed(num(jl, "rstd"), 2);
            ln_gain += (k ? ", " : "") + two_digits(num(jl, "gain_xhat"));
            rms_gain += (k ? ", " : "") + two_digits(num(jr, "gain_xhat"));
        }
        CHECK_QUOTES(results_readme, "grows with eps: " + cos);
        CHECK_QUOTES(results_readme, "LayerNorm's first row: rstd " + rstd + " and `gain_xhat` " + ln_gain + ", equal to");
        CHECK_QUOTES(results_readme, "`gain_xhat` " + rms_gain + ", which is also its smallest singular value");
    }
    SUBCASE("the tour's settings") {
        const auto bd = json::parse(read_text(kSrc + "/configs/batch_dependence.json"));
        CHECK(bd["analyses"][0]["sizes"].front() == 1);
        CHECK(bd["analyses"][0]["sizes"].back() == 64);
        CHECK_QUOTES(readme, "one sample normalised in batches of 1 to 64");
        const auto te = json::parse(read_text(kSrc + "/configs/train_eval.json"));
        CHECK_QUOTES(readme, te["analyses"][0]["steps"].dump() + " training steps");
    }
}

namespace {

// The analyses `normlab list` names, in its order, each with the columns it lists.
std::vector<std::pair<std::string, std::vector<std::string>>> listed_analyses() {
    CliResult list = run_normlab("list");
    REQUIRE(list.exit_code == 0);
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    bool in = false;
    const std::string columns = "    columns: ";
    for (const auto& line : lines_of(list.out)) {
        if (line.rfind("analyses", 0) == 0) in = true;
        else if (line.rfind("conventions", 0) == 0 || (line.rfind("  ", 0) != 0 && !line.empty())) in = false;
        else if (in && line.rfind("  ", 0) == 0 && line[2] != ' ') out.push_back({line.substr(2, line.find(':') - 2), {}});
        else if (in && !out.empty() && line.rfind(columns, 0) == 0) {
            std::istringstream words(line.substr(columns.size()));
            for (std::string w; words >> w;) out.back().second.push_back(w);
        }
    }
    return out;
}

}  // namespace

TEST_CASE("results/README.md's section on each analysis names every column normlab list gives it") {
    const std::string text = read_text(kSrc + "/results/README.md");
    const auto analyses = listed_analyses();
    REQUIRE(analyses.size() >= 13);
    for (const auto& [name, cols] : analyses) {
        CAPTURE(name);
        REQUIRE(!cols.empty());
        // The section: from its heading to the next heading of its level.
        const auto start = text.find("### `" + name + "`");
        REQUIRE(start != std::string::npos);
        const std::string section = text.substr(start, text.find("\n### ", start + 1) - start);
        for (const auto& c : cols) {
            CAPTURE(c);
            CHECK(section.find("`" + c + "`") != std::string::npos);
        }
    }
}

TEST_CASE("results/README.md's figure table has a row for every analysis normlab list names") {
    std::vector<std::string> analyses;
    for (const auto& a : listed_analyses()) analyses.push_back(a.first);
    REQUIRE(analyses.size() >= 13);
    // The table of the section "report.html and normlab show": from its header to the first
    // line that is not a table row.
    const std::string text = read_text(kSrc + "/results/README.md");
    const auto start = text.find("| analysis | figure |");
    REQUIRE(start != std::string::npos);
    std::set<std::string> rows;
    for (const auto& line : lines_of(text.substr(start))) {
        if (line.rfind("|", 0) != 0) break;
        const auto a = line.find('`'), b = line.find('`', a + 1);
        if (a != std::string::npos && b != std::string::npos) rows.insert(line.substr(a + 1, b - a - 1));
    }
    for (const auto& a : analyses) {
        CAPTURE(a);
        CHECK(rows.count(a) == 1);
    }
}
