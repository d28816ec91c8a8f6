// End to end: the precision and port_check analyses, half-precision runs, and the shared
// cases B02, B08, B09, B10, B12 (tests/cases/, copied from ../shared/cases) through the
// route users take: a config, the built binary, the CSV tables and saved arrays.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/common.hpp"
#include "analysis_util.hpp"
#include "data/npy.hpp"
#include "json/text.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

using Row = CsvRow;

std::vector<Row> read_csv(const fs::path& p) {
    auto rows = parse_csv(read_text(p));
    REQUIRE_MESSAGE(!rows.empty(), "empty CSV " << p);
    return rows;
}


// "[1.5,-0.5,...]" -> numbers (a trailing "..." is dropped).
std::vector<double> list_cell(const std::string& s) {
    std::vector<double> out;
    std::string tok;
    for (char c : s.substr(1, s.size() - 2) + ",") {
        if (c != ',') {
            tok += c;
            continue;
        }
        if (!tok.empty() && tok != "...") out.push_back(std::stod(tok));
        tok.clear();
    }
    return out;
}

struct Run {
    CliResult cli;
    fs::path out;
};

// Writes `cfg` into a fresh folder and runs it; `extra` are more command-line arguments.
Run run_json(const std::string& name, const json& cfg, const std::string& extra = "") {
    fs::path dir = fresh_dir(name);
    write_text(dir / "cfg.json", cfg.dump(1));
    Run r;
    r.out = dir / "out";
    r.cli = run_normlab("run " + (dir / "cfg.json").string() + " --out " + r.out.string() + " -q " + extra);
    return r;
}

json load_case(const std::string& id) {
    return json::parse(read_text(fs::path(kSrc) / "tests" / "cases" / (id + ".json")));
}

std::vector<double> npy_values(const fs::path& p) {
    auto a = normlab::read_npy(p);
    return std::vector<double>(a.values.begin(), a.values.end());
}

const std::vector<std::string> kEmulated = {"naive", "two_pass", "welford"};

}  // namespace

TEST_CASE("ulp, max_finite and narrow_stats know the formats' limits") {
    using normlab::DType;
    CHECK(normlab::ulp(DType::float32, 1.0) == std::ldexp(1.0, -23));
    CHECK(normlab::ulp(DType::float32, 1.5) == std::ldexp(1.0, -23));
    CHECK(normlab::ulp(DType::float32, 2.0) == std::ldexp(1.0, -22));
    CHECK(normlab::ulp(DType::float32, -1e4) == std::ldexp(1.0, 13 - 23));
    CHECK(normlab::ulp(DType::float16, 1e4) == 8.0);
    CHECK(normlab::ulp(DType::bfloat16, 1.0) == std::ldexp(1.0, -7));
    CHECK(normlab::ulp(DType::float64, 1.0) == std::ldexp(1.0, -52));
    CHECK(std::isnan(normlab::ulp(DType::float32, INFINITY)));
    // B09: the smallest float16 subnormal, 1e-12 below it, 1e-5 above it.
    const json b09 = load_case("B09");
    CHECK(normlab::ulp(DType::float16, 0.0) == doctest::Approx(b09["expected"]["fp16_smallest_subnormal"].get<double>()).epsilon(1e-7));
    CHECK(normlab::round_to(DType::float16, 1e-12) == b09["expected"]["fp16_arithmetic_emulated"]["eps_as_fp16"].get<double>());
    CHECK((normlab::round_to(DType::float16, 1e-5) != 0) == b09["expected"]["fp16(1e-5)_nonzero"].get<bool>());
    const json b10 = load_case("B10");
    CHECK(normlab::max_finite(DType::float16) == b10["expected"]["fp16_max"].get<double>());
    CHECK(normlab::round_to(DType::bfloat16, normlab::max_finite(DType::bfloat16)) == normlab::max_finite(DType::bfloat16));
    CHECK(std::isinf(normlab::round_to(DType::bfloat16, normlab::max_finite(DType::bfloat16) * (1 + 1e-2))));

    // B10 a: variance 250000 overflows float16; b: variance 10000 fits, the sum of squares
    // 160000 does not.
    normlab::Moments m;
    m.mean = {0.0, 0.0};
    m.var = {b10["expected"]["a"]["var"].get<double>(), b10["expected"]["b"]["var"].get<double>()};
    m.count = {8.0, 16.0};
    auto s = normlab::narrow_stats(DType::float16, 1e-12, m);
    CHECK(s.eps_in_dtype == 0);
    CHECK(s.var_overflow_groups == 1);
    CHECK(s.sumsq_overflow_groups == 2);
    auto s32 = normlab::narrow_stats(DType::float32, 1e-12, m);
    CHECK(s32.eps_in_dtype > 0);
    CHECK(s32.var_overflow_groups == 0);
    CHECK(s32.sumsq_overflow_groups == 0);
}

TEST_CASE("deviation: NaN never hides, relative error against 0, ulps in the output dtype") {
    using normlab::DType;
    xt::xarray<double> ref = {1.0, 0.0, 2.0, NAN};
    xt::xarray<double> same = ref;
    auto d0 = normlab::deviation(same, ref, DType::float32);
    CHECK(d0.max_abs == 0);
    CHECK(d0.max_rel == 0);
    CHECK(d0.nonfinite == 1);
    xt::xarray<double> y = {1.0 + std::ldexp(1.0, -22), 0.0, NAN, NAN};
    auto d = normlab::deviation(y, ref, DType::float32);
    CHECK(std::isinf(d.max_abs));
    CHECK(d.worst == 2);
    std::vector<std::uint8_t> first_two = {1, 1, 0, 0};
    auto d2 = normlab::deviation(y, ref, DType::float32, &first_two);
    CHECK(d2.max_abs == std::ldexp(1.0, -22));
    CHECK(d2.max_ulp == 2);
    CHECK(d2.compared == 2);
    xt::xarray<double> z = {1.0, 1e-9, 2.0, NAN};
    CHECK(std::isinf(normlab::deviation(z, ref, DType::float32).max_rel));  // nonzero vs 0
}

TEST_CASE("precision on large-mean data: naive fails, normlab's float32 output is within 3 ulps") {
    // The example config is the test: configs/precision.json.
    fs::path out = fresh_dir("precision_example") / "out";
    CliResult r = run_normlab("run " + kSrc + "/configs/precision.json --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(read_text(out / "precision.csv")
              .rfind("data,norm,type,dtype,algorithm,work_dtype,eps,eps_work,max_abs_err,max_rel_err,"
                     "max_ulp_err,nonfinite_count,overflow_groups,var_min,var_max,empty_groups\n", 0) == 0);
    auto rows = read_csv(out / "precision.csv");
    for (const std::string data : {"mean1e4_std1", "mean1e3_std0.01"}) {
        CAPTURE(data);
        Row base = {{"data", data}, {"norm", "ln"}, {"dtype", "float32"}};
        auto at = [&](const std::string& alg) {
            Row w = base;
            w["algorithm"] = alg;
            return one(rows, w);
        };
        Row naive = at("naive"), normlab = at("normlab");
        // E[x^2] - E[x]^2 in float32 goes negative: sqrt gives NaN.
        CHECK(num(naive, "var_min") < 0);
        CHECK(num(naive, "nonfinite_count") > 0);
        CHECK(std::isinf(num(naive, "max_abs_err")));
        // normlab: within 3 float32 ulps of the float64 result from the same float32 inputs,
        // the ulp of the largest of |x̂·w|, |b| and |y| (the precision contract).
        CHECK(normlab.at("work_dtype") == "float64");
        CHECK(num(normlab, "max_ulp_err") <= 3);
        CHECK(num(normlab, "max_abs_err") < 1e-6);
        CHECK(num(normlab, "nonfinite_count") == 0);
        CHECK(num(normlab, "var_min") > 0);
        // Two-pass and Welford in float32 stay finite but are far from float32 accuracy.
        for (const std::string alg : {"two_pass", "welford"}) {
            CAPTURE(alg);
            Row a = at(alg);
            CHECK(num(a, "nonfinite_count") == 0);
            CHECK(num(a, "max_abs_err") < 1);
            CHECK(num(a, "max_abs_err") > 100 * num(normlab, "max_abs_err"));
        }
        // In float64 the naive formula still loses digits the others keep.
        Row n64 = one(rows, {{"data", data}, {"dtype", "float64"}, {"algorithm", "naive"}});
        Row t64 = one(rows, {{"data", data}, {"dtype", "float64"}, {"algorithm", "two_pass"}});
        CHECK(num(n64, "max_abs_err") > 1000 * num(t64, "max_abs_err"));
    }
    // The standard-normal control: every algorithm is fine in float32.
    for (const std::string alg : {"naive", "two_pass", "welford", "normlab"})
        CHECK(num(one(rows, {{"data", "standard"}, {"dtype", "float32"}, {"algorithm", alg}}), "max_abs_err") < 1e-5);
    // Native float16: the variance of std-500 data (2.5e5) overflows, flagged per group.
    for (const auto& alg : kEmulated) {
        Row h = one(rows, {{"data", "std500"}, {"dtype", "float16"}, {"algorithm", alg}, {"work_dtype", "float16"}});
        CHECK(num(h, "overflow_groups") == 64);
        CHECK(std::isinf(num(h, "var_max")));
    }
    for (const auto& row : rows)
        if (row.at("data") == "std500" && row.at("algorithm") == "normlab" && row.at("dtype") != "float64") {
            CHECK(num(row, "overflow_groups") == 0);
            // float32: the float path's contract; half formats: one rounding of a double result
            CHECK(num(row, "max_ulp_err") <= (row.at("dtype") == "float32" ? 3.0 : 0.5 + 1e-6));
        }
}

TEST_CASE("precision: normlab's engine matches the reference for every norm shape and variant") {
    // Cross-checks the reference's grouping (GroupNorm groups, BatchNorm channels, masks,
    // weight offset, unbiased variance, eps outside the sqrt) against the engine: both must
    // agree to the final rounding.
    json cfg = {
        {"name", "variants"},
        {"data",
         {{"img", {{"source", "gaussian"}, {"shape", {4, 6, 5, 5}}, {"mean", 3}, {"std", 2}}},
          {"tok", {{"source", "tokens"}, {"batch", 4}, {"max_len", 7}, {"dim", 8}, {"lengths", {7, 5, 2, 1}}}}}},
        {"norms",
         {{"gn", {{"type", "groupnorm"}, {"num_groups", 3}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.5}}}}}, {"bias", {{"normal", {{"mean", 0}, {"std", 1}}}}}}},
          {"bn", {{"type", "batchnorm"}}},
          {"in", {{"type", "instancenorm"}, {"affine", true}}},
          {"ln_port", {{"type", "layernorm"}, {"axes", {1, 3}}, {"variance", "unbiased"}, {"eps_placement", "add_to_std"}}},
          {"rms_gemma", {{"type", "rmsnorm"}, {"axes", {-1}}, {"weight_offset", 1}, {"weight", {{"normal", {{"mean", 0}, {"std", 0.3}}}}}}},
          {"bn_masked", {{"type", "batchnorm"}, {"channel_axis", -1}, {"mask", true}}},
          {"ln_tok", {{"type", "layernorm"}, {"axes", {-1}}}},
          // the double arithmetic, selected per norm
          {"gn_double", {{"type", "groupnorm"}, {"num_groups", 3}, {"compute", "double"}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.5}}}}}, {"bias", {{"normal", {{"mean", 0}, {"std", 1}}}}}}},
          {"ln_port_double", {{"type", "layernorm"}, {"axes", {1, 3}}, {"variance", "unbiased"}, {"eps_placement", "add_to_std"}, {"compute", "double"}}}}},
        {"analyses",
         {{{"type", "precision"}, {"data", {"img"}}, {"norms", {"gn", "bn", "in", "ln_port", "rms_gemma", "gn_double", "ln_port_double"}}, {"dtypes", {"float32", "float64"}}},
          {{"type", "precision"}, {"data", {"tok"}}, {"norms", {"bn_masked", "ln_tok"}}, {"dtypes", {"float32", "float16", "bfloat16"}}}}}};
    Run r = run_json("precision_variants", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "precision.csv");
    CHECK(rows.size() == (7 * 2 + 2 * 3) * 4);
    for (const auto& row : rows) {
        CAPTURE(row.at("norm"));
        CAPTURE(row.at("dtype"));
        CAPTURE(row.at("algorithm"));
        CHECK(num(row, "nonfinite_count") == 0);
        CHECK(num(row, "overflow_groups") == 0);
        const bool double_path = row.at("norm").find("_double") != std::string::npos;
        if (row.at("algorithm") == "normlab" && row.at("dtype") == "float32" && !double_path) {
            CHECK(num(row, "max_ulp_err") <= 3.0);  // the float path
        } else if (row.at("algorithm") == "normlab" && row.at("dtype") != "float64") {
            // One rounding of a double result: at most half an ulp (plus double's own error).
            CHECK(num(row, "max_ulp_err") <= 0.5 + 1e-6);
        } else if (row.at("dtype") == "float64") {
            CHECK(num(row, "max_abs_err") < 1e-12);
        } else {
            CHECK(num(row, "max_abs_err") < 0.05);
        }
    }
    // The masked BatchNorm's statistics come from real tokens only: var_min of the engine
    // and of the emulated two-pass agree.
    Row e = one(rows, {{"norm", "bn_masked"}, {"dtype", "float32"}, {"algorithm", "normlab"}});
    Row t = one(rows, {{"norm", "bn_masked"}, {"dtype", "float32"}, {"algorithm", "two_pass"}});
    CHECK(num(t, "var_min") == doctest::Approx(num(e, "var_min")).epsilon(1e-5));
}

TEST_CASE("precision: default dtypes, options and errors") {
    json cfg = {{"name", "p"},
                {"dtype", "bfloat16"},
                {"data", {{"x", {{"source", "gaussian"}, {"shape", {3, 16}}}}}},
                {"norms", {{"ln", {{"type", "layernorm"}, {"axes", {-1}}}}, {"bn_eval", {{"type", "batchnorm"}, {"training", false}}}}},
                {"analyses", {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}}}}};
    Run r = run_json("precision_defaults", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "precision.csv");
    REQUIRE(rows.size() == 8);  // the run dtype and float64, four algorithms each
    CHECK(rows[0].at("dtype") == "bfloat16");
    CHECK(rows[0].at("work_dtype") == "float32");  // half formats accumulate in float32 by default
    CHECK(rows[4].at("dtype") == "float64");

    struct Bad {
        json analysis;
        std::string expect;
    };
    std::vector<Bad> bad = {
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"dtypes", {"float8"}}}, "/analyses/0/dtypes/0: unknown dtype \"float8\""},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"dtypes", {"float32", "float32"}}}, "/analyses/0/dtypes/1"},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"accumulate", "float16"}}, "/analyses/0/accumulate"},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"algorithms", {"navie"}}}, "did you mean \"naive\"?"},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"dtype", "float32"}}, "/analyses/0/dtype: unknown key"},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"bn_eval"}}}, "batchnorm \"bn_eval\" on data \"x\": normalises with running statistics"},
        {{{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln_bad_compute"}}}, "/norms/ln_bad_compute/compute"},
    };
    for (std::size_t i = 0; i < bad.size(); ++i) {
        CAPTURE(bad[i].expect);
        json c = cfg;
        c["analyses"] = json::array({bad[i].analysis});
        if (bad[i].expect.find("ln_bad_compute") != std::string::npos)  // a norm key, not an analysis key
            c["norms"]["ln_bad_compute"] = {{"type", "layernorm"}, {"axes", {-1}}, {"compute", "fast"}};
        Run b = run_json("precision_bad" + std::to_string(i), c);
        CHECK(b.cli.exit_code == 2);
        CHECK(b.cli.err.find(bad[i].expect) != std::string::npos);
        CHECK(std::count(b.cli.err.begin(), b.cli.err.end(), '\n') == 1);
    }
}

TEST_CASE("half precision through the engine: rounded once, saved in their format") {
    for (const std::string dt : {"float16", "bfloat16"}) {
        CAPTURE(dt);
        json cfg = {{"name", "half"},
                    {"dtype", dt},
                    {"data", {{"x", {{"source", "gaussian"}, {"shape", {8, 64}}, {"mean", 5}, {"std", 3}}}}},
                    {"norms", {{"ln", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.2}}}}}}}}},
                    {"analyses",
                     {{{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"save", {"output"}}},
                      {{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"algorithms", {"normlab"}}}}}};
        Run r = run_json("half_" + dt, cfg);
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        auto y = normlab::read_npy(r.out / "arrays/x/ln/output.npy");
        CHECK(y.dtype == (dt == "float16" ? "float16" : "float32"));  // numpy has no bfloat16
        const auto d = normlab::parse_dtype(dt);
        std::size_t not_representable = 0;
        for (double v : y.values) not_representable += normlab::round_to(d, v) == v ? 0 : 1;
        CHECK(not_representable == 0);
        auto rows = read_csv(r.out / "precision.csv");
        Row e = one(rows, {{"dtype", dt}, {"algorithm", "normlab"}});
        CHECK(num(e, "max_ulp_err") <= 0.5 + 1e-6);
        CHECK(num(e, "max_abs_err") > 0);  // the rounding to a half format is visible
    }
}

TEST_CASE("B08: a constant row gives zeros, the naive float32 variance is -3.25") {
    const json c = load_case("B08");
    const double tol = c["tolerance"]["abs"];
    const double value = 1234.0;  // "all 1234.0 (float32)"
    const std::size_t n = c["input"]["shape"][1];
    json cfg = {{"name", "b08"},
                {"dtype", "float32"},
                {"data", {{"row", {{"source", "values"}, {"values", json::array({std::vector<double>(n, value)})}}}}},
                {"norms", {{"ln", {{"type", "layernorm"}, {"axes", c["params"]["axes"]}, {"eps", c["params"]["eps"]},
                                   {"weight", c["params"]["gamma"]}, {"bias", c["params"]["beta"]}}}}},
                {"analyses",
                 {{{"type", "apply"}, {"data", {"row"}}, {"norms", {"ln"}}, {"save", {"output", "mean", "var"}}},
                  {{"type", "precision"}, {"data", {"row"}}, {"norms", {"ln"}}, {"dtypes", {"float32"}}}}}};
    Run r = run_json("b08", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(std::fabs(npy_values(r.out / "arrays/row/ln/mean.npy")[0] - c["expected"]["mean"].get<double>()) <= tol);
    CHECK(std::fabs(npy_values(r.out / "arrays/row/ln/var.npy")[0] - c["expected"]["var"].get<double>()) <= tol);
    auto y = npy_values(r.out / "arrays/row/ln/output.npy");
    REQUIRE(y.size() == n);
    for (double v : y) CHECK(std::fabs(v) <= tol);
    CHECK(num(read_csv(r.out / "apply.csv")[0], "nonfinite_count") == c["expected"]["nan_count"].get<double>());

    auto rows = read_csv(r.out / "precision.csv");
    Row naive = one(rows, {{"algorithm", "naive"}});
    CHECK(std::fabs(num(naive, "var_min") - c["expected"]["naive_sequential_float32_one_pass_var"].get<double>()) <= tol);
    CHECK(num(naive, "nonfinite_count") == n);  // sqrt(-3.25 + 1e-5) is NaN on every element
    for (const std::string alg : {"two_pass", "welford", "normlab"}) {
        CAPTURE(alg);
        Row a = one(rows, {{"algorithm", alg}});
        CHECK(num(a, "nonfinite_count") == 0);
        CHECK(num(a, "max_abs_err") <= tol);
        CHECK(std::fabs(num(a, "var_min")) <= tol);
    }

    SUBCASE("eps 0: 0/0, reported the same way by every method") {
        Run z = run_json("b08_eps0", cfg, "--set norms.ln.eps=" + c["params"]["extra_variant"]["eps"].dump());
        REQUIRE_MESSAGE(z.cli.exit_code == 0, z.cli.err);
        CHECK(num(read_csv(z.out / "apply.csv")[0], "nonfinite_count") == n);
        auto zr = read_csv(z.out / "precision.csv");
        REQUIRE(zr.size() == 4);
        for (const auto& row : zr) CHECK(num(row, "nonfinite_count") == n);
    }
}

TEST_CASE("B09: float16 zeros with eps 1e-12: zeros with float32 statistics, NaN when eps underflows") {
    const json c = load_case("B09");
    const std::size_t n = c["input"]["shape"][1];
    const json e16 = c["expected"]["fp16_arithmetic_emulated"];
    json cfg = {{"name", "b09"},
                {"dtype", c["input"]["dtype"]},
                {"data", {{"zeros", {{"source", "values"}, {"values", json::array({std::vector<double>(n, 0.0)})}}}}},
                {"norms", {{"ln", {{"type", "layernorm"}, {"axes", c["params"]["axes"]}, {"eps", c["params"]["eps"]}}}}},
                {"analyses",
                 {{{"type", "apply"}, {"data", {"zeros"}}, {"norms", {"ln"}}, {"save", {"output"}}},
                  {{"type", "precision"}, {"data", {"zeros"}}, {"norms", {"ln"}}, {"dtypes", {"float16"}}},
                  {{"type", "precision"}, {"data", {"zeros"}}, {"norms", {"ln"}}, {"dtypes", {"float16"}}, {"accumulate", "native"}}}}};
    Run r = run_json("b09", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    // fp32_stats (and normlab's double statistics): all 0.0, no NaN.
    auto y = normlab::read_npy(r.out / "arrays/zeros/ln/output.npy");
    CHECK(y.dtype == "float16");
    for (double v : y.values) CHECK(v == 0.0);
    CHECK(num(read_csv(r.out / "apply.csv")[0], "nonfinite_count") == c["expected"]["fp32_stats"]["nan_count"].get<double>());
    auto rows = read_csv(r.out / "precision.csv");
    REQUIRE(rows.size() == 8);
    for (const auto& row : rows) {
        CAPTURE(row.at("algorithm"));
        CAPTURE(row.at("work_dtype"));
        if (row.at("work_dtype") == "float16") {  // fp16 arithmetic: eps is 0, 0 * inf = NaN
            CHECK(num(row, "eps_work") == e16["eps_as_fp16"].get<double>());
            CHECK(num(row, "nonfinite_count") == e16["nan_count_if_not_guarded"].get<double>());
        } else {
            CHECK(num(row, "eps_work") > 0);
            CHECK(num(row, "nonfinite_count") == 0);
            CHECK(num(row, "max_abs_err") == 0);
        }
    }

    SUBCASE("eps 1e-5 is representable in float16: no NaN even in native arithmetic") {
        Run z = run_json("b09_eps1e-5", cfg, "--set norms.ln.eps=1e-5");
        REQUIRE_MESSAGE(z.cli.exit_code == 0, z.cli.err);
        for (const auto& row : read_csv(z.out / "precision.csv")) {
            CHECK(num(row, "eps_work") > 0);
            CHECK(num(row, "nonfinite_count") == 0);
        }
    }
}

TEST_CASE("B10: float16 data whose variance or sum of squares overflows float16") {
    const json c = load_case("B10");
    const double tol = c["tolerance"]["abs"];
    json data = json::object();
    for (const std::string k : {"a", "b"}) data[k] = {{"source", "values"}, {"values", json::array({c["input"][k]["values"]})}};
    json cfg = {{"name", "b10"},
                {"dtype", c["input"]["a"]["dtype"]},
                {"data", data},
                {"norms", {{"ln", {{"type", "layernorm"}, {"axes", c["params"]["axes"]}, {"eps", c["params"]["eps"]}}}}},
                {"analyses",
                 {{{"type", "apply"}, {"data", {"a", "b"}}, {"norms", {"ln"}}, {"save", {"output", "var"}}},
                  {{"type", "precision"}, {"data", {"a", "b"}}, {"norms", {"ln"}}, {"dtypes", {"float16"}}},
                  {{"type", "precision"}, {"data", {"a", "b"}}, {"norms", {"ln"}}, {"dtypes", {"float16"}}, {"accumulate", "native"}}}}};
    Run r = run_json("b10", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    for (const std::string k : {"a", "b"}) {
        CAPTURE(k);
        const json ex = c["expected"][k];
        auto y = npy_values(r.out / "arrays" / k / "ln/output.npy");
        const auto pattern = ex["fp32_stats_output"].get<std::vector<double>>();  // b lists the first two
        REQUIRE(y.size() == c["input"][k]["values"].size());
        for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::fabs(y[i] - pattern[i % pattern.size()]) <= tol);
        // Statistics of half-precision runs are saved in float32: 250000 is not inf.
        auto var = normlab::read_npy(r.out / "arrays" / k / "ln/var.npy");
        CHECK(var.dtype == "float32");
        CHECK(var.values(0) == ex["var"].get<double>());
        auto rows = read_csv(r.out / "precision.csv");
        for (const auto& alg : kEmulated) {
            CAPTURE(alg);
            Row f32 = one(rows, {{"data", k}, {"algorithm", alg}, {"work_dtype", "float32"}});
            CHECK(num(f32, "max_abs_err") <= tol);
            CHECK(num(f32, "overflow_groups") == 0);
            CHECK(num(f32, "var_min") == doctest::Approx(ex["var"].get<double>()).epsilon(1e-6));
        }
        // Native float16: x*x (a) or the running sum (b) overflows; reported, not silent.
        for (const auto& alg : kEmulated) {
            CAPTURE(alg);
            Row h = one(rows, {{"data", k}, {"algorithm", alg}, {"work_dtype", "float16"}});
            CHECK(num(h, "overflow_groups") == 1);
            CHECK(num(h, "max_abs_err") >= 0.5);
        }
        auto normlab_rows = 0;
        for (const auto& row : rows)
            if (row.at("data") == k && row.at("algorithm") == "normlab") {
                ++normlab_rows;
                CHECK(num(row, "max_abs_err") <= tol);
                CHECK(num(row, "overflow_groups") == 0);
                CHECK(num(row, "var_min") == ex["var"].get<double>());  // double statistics
            }
        CHECK(normlab_rows == 2);  // one per precision analysis
    }
}

TEST_CASE("precision: a reference without any finite value leaves no error to measure (nan, not 0)") {
    // 7e4 is beyond float16's largest finite value: every row of "over" holds an inf, so the
    // reference is NaN throughout and every algorithm's NaN agrees with it. "one" keeps a
    // finite row: the error is measured there.
    json cfg = {{"name", "no_reference"},
                {"dtype", "float16"},
                {"data", {{"over", {{"source", "values"}, {"values", {{7e4, 1, 2, 3}, {8e4, 2, 3, 4}}}}},
                          {"one", {{"source", "values"}, {"values", {{7e4, 1, 2, 3}, {1, 2, 3, 5}}}}}}},
                {"norms", {{"ln", {{"type", "layernorm"}, {"axes", {-1}}}}}},
                {"analyses", {{{"type", "precision"}, {"data", {"over", "one"}}, {"norms", {"ln"}}, {"dtypes", {"float16"}}}}}};
    Run r = run_json("no_reference", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = read_csv(r.out / "precision.csv");
    for (const std::string alg : {"naive", "two_pass", "welford", "normlab"}) {
        CAPTURE(alg);
        const Row over = one(rows, {{"data", "over"}, {"algorithm", alg}});
        for (const char* c : {"max_abs_err", "max_rel_err", "max_ulp_err"}) CHECK(std::isnan(num(over, c)));
        CHECK(num(over, "nonfinite_count") == 8);
        const Row fine = one(rows, {{"data", "one"}, {"algorithm", alg}});
        CHECK(std::isfinite(num(fine, "max_abs_err")));
        CHECK(num(fine, "nonfinite_count") == 4);
    }
}

TEST_CASE("B02: LayerNorm ports (unbiased std, eps added to the std) through port_check") {
    const json c = load_case("B02");
    const double tol = c["tolerance"]["abs"];
    json norms = json::object();
    for (auto it = c["params"].begin(); it != c["params"].end(); ++it) {
        const json& p = it.value();
        std::string placement = p["eps_placement"];
        if (placement == "added_to_std") placement = "add_to_std";  // the case's word for it
        norms[it.key()] = {{"type", p["method"]}, {"axes", p["axes"]}, {"eps", p["eps"]},
                           {"variance", p["variance"]}, {"eps_placement", placement}};
    }
    json cfg = {{"name", "b02"},
                {"data", {{"row", {{"source", "values"}, {"values", c["input"]["values"]}}}}},
                {"norms", norms},
                {"analyses",
                 {{{"type", "port_check"}, {"data", {"row"}}, {"norms", {"standard", "annotated", "biased_eps_outside"}},
                   {"reference", "standard"}},
                  {{"type", "apply"}, {"data", {"row"}}, {"norms", {"standard", "annotated", "biased_eps_outside"}}, {"save", {"output"}}}}}};
    Run r = run_json("b02", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "port_check.csv");
    REQUIRE(rows.size() == 2);
    for (const std::string port : {"annotated", "biased_eps_outside"}) {
        CAPTURE(port);
        Row row = one(rows, {{"reference", "standard"}, {"port", port}});
        auto ref = list_cell(row.at("ref_values")), got = list_cell(row.at("port_values"));
        auto want_ref = c["expected"]["standard"].get<std::vector<double>>();
        auto want = c["expected"][port].get<std::vector<double>>();
        REQUIRE(ref.size() == want_ref.size());
        REQUIRE(got.size() == want.size());
        double max_diff = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            CHECK(std::fabs(ref[i] - want_ref[i]) <= tol);
            CHECK(std::fabs(got[i] - want[i]) <= tol);
            max_diff = std::max(max_diff, std::fabs(want[i] - want_ref[i]));
        }
        CHECK(num(row, "max_abs_diff") == doctest::Approx(max_diff).epsilon(1e-5));
        CHECK(row.at("group") == "[0,0]");
        CHECK(row.at("steps") == "0");
        auto saved = npy_values(r.out / "arrays/row" / port / "output.npy");
        for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::fabs(saved[i] - want[i]) <= tol);
    }
    // The variance estimator alone (eps 0): a factor sqrt(n/(n-1)) = 1.1547 for n = 4.
    Run z = run_json("b02_eps0", cfg, "--set norms.standard.eps=0 --set norms.annotated.eps=0");
    REQUIRE_MESSAGE(z.cli.exit_code == 0, z.cli.err);
    Row zr = one(read_csv(z.out / "port_check.csv"), {{"port", "annotated"}});
    auto zref = list_cell(zr.at("ref_values")), zport = list_cell(zr.at("port_values"));
    CHECK(std::fabs(zref[0] / zport[0] - c["expected"]["ratio_standard_over_annotated_eps0"].get<double>()) <= tol);

    // ... and 1.00065 for n = 768: every element differs by the same relative amount.
    json wide = cfg;
    wide["data"] = {{"row", {{"source", "gaussian"}, {"shape", {2, 768}}}}};
    wide["norms"]["standard"]["eps"] = 0;
    wide["norms"]["annotated"]["eps"] = 0;
    wide["analyses"] = json::array({cfg["analyses"][0]});
    Run w = run_json("b02_768", wide);
    REQUIRE_MESSAGE(w.cli.exit_code == 0, w.cli.err);
    Row wr = one(read_csv(w.out / "port_check.csv"), {{"port", "annotated"}});
    CHECK(1 / (1 - num(wr, "max_rel_diff")) == doctest::Approx(c["expected"]["ratio_for_n_768"].get<double>()).epsilon(1e-6));
}

TEST_CASE("B12: RMSNorm with a plain weight vs Gemma's 1 + weight") {
    const json c = load_case("B12");
    const double tol = c["tolerance"]["abs"];
    const json p = c["params"];
    auto rms = [&](const json& weight, double offset) {
        json n = {{"type", "rmsnorm"}, {"axes", p["axes"]}, {"eps", p["eps"]}, {"weight", weight}};
        if (offset != 0) n["weight_offset"] = offset;
        return n;
    };
    json cfg = {{"name", "b12"},
                {"data", {{"x", {{"source", "values"}, {"values", c["input"]["values"]}}}}},
                {"norms",
                 {{"plain", rms(p["stored_weight"], 0)},
                  {"gemma", rms(p["stored_weight"], 1)},
                  {"plain_zero", rms("zeros", 0)},
                  {"gemma_zero", rms("zeros", 1)},
                  {"x_hat", {{"type", "rmsnorm"}, {"axes", p["axes"]}, {"eps", p["eps"]}, {"affine", false}}}}},
                {"analyses",
                 {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"plain", "gemma", "plain_zero", "gemma_zero", "x_hat"}},
                   {"pairs", json::array({json::array({"plain", "gemma"}), json::array({"plain_zero", "gemma_zero"}),
                                          json::array({"x_hat", "gemma_zero"})})}}}}};
    Run r = run_json("b12", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "port_check.csv");
    auto near = [&](const std::vector<double>& got, const json& want) {
        auto w = want.get<std::vector<double>>();
        REQUIRE(got.size() == w.size());
        for (std::size_t i = 0; i < w.size(); ++i) CHECK(std::fabs(got[i] - w[i]) <= tol);
    };
    Row a = one(rows, {{"reference", "plain"}, {"port", "gemma"}});
    near(list_cell(a.at("ref_values")), c["expected"]["plain (LLaMA)"]);
    near(list_cell(a.at("port_values")), c["expected"]["unit_offset (Gemma)"]);
    Row z = one(rows, {{"reference", "plain_zero"}, {"port", "gemma_zero"}});
    near(list_cell(z.at("ref_values")), c["expected"]["zero_weight"]["plain"]);
    near(list_cell(z.at("port_values")), c["expected"]["zero_weight"]["unit_offset"]);
    Row x = one(rows, {{"reference", "x_hat"}, {"port", "gemma_zero"}});
    near(list_cell(x.at("ref_values")), c["expected"]["x_hat"]);
    CHECK(num(x, "max_abs_diff") == 0);  // 1 + 0 is the identity scale
}

TEST_CASE("port_check: settings_differ names what a port changes, and what is left once eps and momentum match") {
    // A Keras BatchNorm (eps 1e-3, momentum 0.99 on the old value) ported to PyTorch: naively
    // (defaults), and with eps 1e-3 and momentum 0.01. The second still differs in one rule:
    // PyTorch updates running_var from the unbiased batch variance, Keras from the biased.
    const std::vector<std::vector<double>> x = {{1, 2}, {3, 5}, {4, 9}};
    json cfg = {{"name", "settings_differ"},
                {"data", {{"b", {{"source", "values"}, {"values", x}}}}},
                {"norms", {{"keras", {{"type", "batchnorm"}, {"convention", "keras"}}},
                           {"naive", {{"type", "batchnorm"}}},
                           {"fixed", {{"type", "batchnorm"}, {"eps", 1e-3}, {"momentum", 0.01}}},
                           {"same", {{"type", "batchnorm"}, {"convention", "keras"}, {"eps", 1e-3}}},
                           {"ln", {{"type", "layernorm"}, {"axes", {-1}}}},
                           {"annotated", {{"type", "layernorm"}, {"axes", {-1}}, {"eps", 1e-6},
                                          {"eps_placement", "add_to_std"}, {"variance", "unbiased"}}}}},
                {"analyses", {{{"type", "port_check"}, {"data", {"b"}}, {"norms", {"keras", "naive", "fixed", "same"}},
                               {"steps", 4}},
                              {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"ln", "annotated"}}}}}};
    Run r = run_json("settings_differ", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "port_check.csv");
    CHECK(one(rows, {{"port", "naive"}}).at("settings_differ") ==
          "eps 0.001 vs 1e-05; running statistics' new-batch weight 0.01 vs 0.1 (momentum 0.99 keras vs 0.1 torch); "
          "running_var from the biased vs the unbiased batch variance");
    const Row fixed = one(rows, {{"port", "fixed"}});
    CHECK(fixed.at("settings_differ") == "running_var from the biased vs the unbiased batch variance");
    CHECK(num(fixed, "running_var_max_abs_diff") > 0);
    const Row same = one(rows, {{"port", "same"}});
    CHECK(same.at("settings_differ") == "none");
    CHECK(num(same, "max_abs_diff") == 0);
    CHECK(one(rows, {{"port", "annotated"}}).at("settings_differ") ==
          "eps 1e-05 vs 1e-06; eps inside the sqrt vs added to the std; normalised with the biased vs the unbiased variance");

    // Two norms in eval mode and no training steps: their running statistics take no update,
    // so the update rules are not a difference; one step in training mode updates them.
    json ce = cfg;
    for (const char* n : {"keras", "fixed"}) ce["norms"][n]["training"] = false;
    ce["analyses"] = {{{"type", "port_check"}, {"data", {"b"}}, {"norms", {"keras", "fixed"}}},
                      {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"same", "naive"}}}};
    Run re = run_json("settings_differ_eval", ce);
    REQUIRE_MESSAGE(re.cli.exit_code == 0, re.cli.err);
    const auto erows = read_csv(re.out / "port_check.csv");
    CHECK(one(erows, {{"port", "fixed"}}).at("settings_differ") == "none");
    CHECK(one(erows, {{"port", "naive"}}).at("settings_differ") ==
          "eps 0.001 vs 1e-05; running statistics' new-batch weight 0.01 vs 0.1 (momentum 0.99 keras vs 0.1 torch); "
          "running_var from the biased vs the unbiased batch variance");

    // eps 0 on a constant group: PyTorch's InstanceNorm outputs the bias (rstd 0), ONNX's
    // divides by 0. The rule is named, and it is the only difference.
    json c0 = {{"name", "zero_var"},
               {"data", {{"x", {{"source", "values"}, {"values", {{{1, 2}, {3, 3}}, {{2, 5}, {3, 3}}}}}}}},
               {"norms", {{"t", {{"type", "instancenorm"}, {"eps", 0}}},
                          {"o", {{"type", "instancenorm"}, {"eps", 0}, {"convention", "onnx"}}}}},
               {"analyses", {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"t", "o"}}}}}};
    Run r0 = run_json("settings_differ_zero_var", c0);
    REQUIRE_MESSAGE(r0.cli.exit_code == 0, r0.cli.err);
    const Row z = one(read_csv(r0.out / "port_check.csv"), {{"port", "o"}});
    CHECK(z.at("settings_differ") == "rstd where var = eps = 0: 0 vs 1/0");
    CHECK(num(z, "port_nonfinite") == 4);
    CHECK(num(z, "ref_nonfinite") == 0);
}

TEST_CASE("port_check: settings_differ names parameters and given running statistics that differ by value") {
    // The most common porting bug is a weight loaded wrong: the same settings, other values.
    const std::vector<std::vector<double>> x = {{1, 2}, {3, 5}, {4, 9}};
    json cfg = {{"name", "values_differ"},
                {"data", {{"b", {{"source", "values"}, {"values", x}}}}},
                {"norms", {{"a", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {1.5, 0.5}}, {"bias", {0.1, 0.2}}}},
                           {"w", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {1.5, 1.0}}, {"bias", {0.1, 0.2}}}},
                           {"wb", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {1.5, 0.5}}, {"bias", {0.1, -0.3}}}},
                           {"same", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {1.5, 0.5}}, {"bias", {0.1, 0.2}}}},
                           {"d1", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.1}}}}}}},
                           {"d2", {{"type", "layernorm"}, {"axes", {-1}}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.1}}}}}}},
                           // Gemma's 1 + w, stored as w - 1: the same scale, named by its form alone.
                           {"r", {{"type", "rmsnorm"}, {"axes", {-1}}, {"weight", {1.5, 0.5}}}},
                           {"gemma", {{"type", "rmsnorm"}, {"axes", {-1}}, {"weight", {0.5, -0.5}}, {"weight_offset", 1}}},
                           {"e1", {{"type", "batchnorm"}, {"training", false}, {"running_mean", {0, 1}}, {"running_var", 2}}},
                           {"e2", {{"type", "batchnorm"}, {"training", false}, {"running_mean", {0, 3}}, {"running_var", 2}}}}},
                {"analyses", {{{"type", "port_check"}, {"data", {"b"}}, {"norms", {"a", "w", "wb", "same"}}},
                              {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"d1", "d2"}}},
                              {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"r", "gemma"}}},
                              {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"e1", "e2"}}},
                              {{"type", "port_check"}, {"data", {"b"}}, {"norms", {"e1", "e2"}}, {"steps", 2}}}}};
    Run r = run_json("values_differ", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = read_csv(r.out / "port_check.csv");
    CHECK(one(rows, {{"port", "w"}}).at("settings_differ") == "weight values differ by up to 0.5");
    CHECK(one(rows, {{"port", "wb"}}).at("settings_differ") == "bias values differ by up to 0.5");
    CHECK(one(rows, {{"port", "same"}}).at("settings_differ") == "none");
    CHECK(one(rows, {{"port", "d2"}}).at("settings_differ").find(
              "weight values differ by up to 0.") == 0);
    CHECK(one(rows, {{"port", "d2"}}).at("settings_differ").find("each norm draws its own") != std::string::npos);
    const Row gemma = one(rows, {{"port", "gemma"}});
    CHECK(gemma.at("settings_differ") == "scale w vs 1 + w");
    CHECK(num(gemma, "max_abs_diff") == 0);
    // Given running statistics in inference count; after training steps they are the
    // trained ones, which the running_* columns compare.
    const auto e2 = [&](const std::string& steps) { return one(rows, {{"port", "e2"}, {"steps", steps}}).at("settings_differ"); };
    CHECK(e2("0") == "running_mean values differ by up to 2");
    CHECK(e2("2") == "none");
}

TEST_CASE("port_check: a PyTorch LayerNorm ported from Flax's with feature_axes names the parameter axes") {
    // Flax's nn.LayerNorm(reduction_axes=(1, 2, 3), feature_axes=-1) scales by a (C) weight;
    // a PyTorch nn.LayerNorm((H, W, C)) by an (H, W, C) one, which holds the same values when
    // it repeats the (C) weight: then the outputs agree and only the layout is named.
    const std::vector<double> w = {1.5, -0.5, 2.0};
    xt::xarray<double> tiled = xt::xarray<double>::from_shape({2, 2, 3});
    for (std::size_t i = 0; i < tiled.size(); ++i) tiled.data()[i] = w[i % 3];
    const fs::path npy = fresh_dir("param_axes_port_weight") / "w.npy";
    normlab::write_npy(npy, normlab::Tensor::from_double(tiled, normlab::DType::float64));
    json cfg = {{"name", "param_axes_port"},
                {"data", {{"img", {{"source", "gaussian"}, {"shape", {2, 2, 2, 3}}, {"channel_axis", -1}}}}},
                {"norms", {{"flax", {{"type", "layernorm"}, {"axes", {1, 2, 3}}, {"param_axes", {-1}}, {"weight", w}}},
                           {"torch", {{"type", "layernorm"}, {"normalized_shape", {2, 2, 3}},
                                      {"weight", {{"npy", npy.string()}}}}},
                           {"ones", {{"type", "layernorm"}, {"normalized_shape", {2, 2, 3}}}}}},
                {"analyses", {{{"type", "port_check"}, {"data", {"img"}}, {"norms", {"flax", "torch", "ones"}}}}}};
    Run r = run_json("param_axes_port", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = read_csv(r.out / "port_check.csv");
    const Row t = one(rows, {{"port", "torch"}});
    CHECK(t.at("settings_differ") == "affine parameters over axes [3] of shape [3] vs over axes [1,2,3] of shape [2,2,3]");
    CHECK(num(t, "max_abs_diff") == 0);
    CHECK(num(one(rows, {{"port", "ones"}}), "max_abs_diff") > 0);
}

TEST_CASE("port_check: BatchNorm momentum 0.1 (torch) vs 0.99 (keras) after K training steps") {
    // One batch fed three times: running_mean = (1 - keep^3) * batch mean, with keep 0.9
    // (torch: momentum 0.1 weights the new batch) or 0.99 (keras: 0.99 weights the old
    // value); running_var starts at 1 and moves to the unbiased (torch) or biased (keras)
    // batch variance.
    const std::vector<std::vector<std::vector<double>>> x = {{{1, 2}, {10, 20}}, {{3, 4}, {30, 40}}};
    json cfg = {{"name", "bn_steps"},
                {"data", {{"b", {{"source", "values"}, {"values", x}}}}},
                {"norms", {{"torch", {{"type", "batchnorm"}}}, {"keras", {{"type", "batchnorm"}, {"convention", "keras"}}}}},
                {"analyses", {{{"type", "port_check"}, {"data", {"b"}}, {"norms", {"torch", "keras"}}, {"train_data", {"b", "b", "b"}},
                               {"worst_groups", 2}}}}};
    Run r = run_json("bn_steps", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "port_check.csv");
    REQUIRE(rows.size() == 2);
    double rm_diff = 0, rv_diff = 0, y_diff = 0;
    std::vector<double> group_diff(2, 0);
    for (std::size_t ch = 0; ch < 2; ++ch) {
        std::vector<double> v = {x[0][ch][0], x[0][ch][1], x[1][ch][0], x[1][ch][1]};
        double mean = 0, ss = 0;
        for (double a : v) mean += a / 4;
        for (double a : v) ss += (a - mean) * (a - mean);
        const double kt = std::pow(0.9, 3), kk = std::pow(0.99, 3);
        const double rm_t = (1 - kt) * mean, rm_k = (1 - kk) * mean;
        const double rv_t = kt + (1 - kt) * ss / 3, rv_k = kk + (1 - kk) * ss / 4;
        rm_diff = std::max(rm_diff, std::fabs(rm_t - rm_k));
        rv_diff = std::max(rv_diff, std::fabs(rv_t - rv_k));
        for (double a : v) {
            const double d = std::fabs((a - rm_t) / std::sqrt(rv_t + 1e-5) - (a - rm_k) / std::sqrt(rv_k + 1e-3));
            y_diff = std::max(y_diff, d);
            group_diff[ch] = std::max(group_diff[ch], d);
        }
    }
    Row first = one(rows, {{"rank", "1"}});
    CHECK(first.at("steps") == "3");
    CHECK(num(first, "port_eps") == 1e-3);
    CHECK(num(first, "running_mean_max_abs_diff") == doctest::Approx(rm_diff).epsilon(1e-9));
    CHECK(num(first, "running_var_max_abs_diff") == doctest::Approx(rv_diff).epsilon(1e-9));
    CHECK(num(first, "max_abs_diff") == doctest::Approx(y_diff).epsilon(1e-5));
    const std::size_t worst = group_diff[1] > group_diff[0] ? 1 : 0;
    CHECK(first.at("group") == "[0," + std::to_string(worst) + ",0]");
    CHECK(num(first, "group_max_abs_diff") == doctest::Approx(group_diff[worst]).epsilon(1e-5));
    Row second = one(rows, {{"rank", "2"}});
    CHECK(second.at("group") == "[0," + std::to_string(1 - worst) + ",0]");
    CHECK(num(second, "group_max_abs_diff") == doctest::Approx(group_diff[1 - worst]).epsilon(1e-5));

    SUBCASE("steps: K resampled batches; one row per batch gives the same batch K times") {
        json one_row = cfg;
        one_row["data"]["b"]["values"] = json::array({x[0]});
        json explicit_steps = one_row;
        explicit_steps["analyses"][0]["train_data"] = {"b", "b", "b", "b"};
        json resampled = one_row;
        resampled["analyses"][0].erase("train_data");
        resampled["analyses"][0]["steps"] = 4;
        Run e = run_json("bn_steps_explicit", explicit_steps);
        Run s = run_json("bn_steps_resampled", resampled);
        REQUIRE_MESSAGE(e.cli.exit_code == 0, e.cli.err);
        REQUIRE_MESSAGE(s.cli.exit_code == 0, s.cli.err);
        CHECK(read_text(e.out / "port_check.csv") == read_text(s.out / "port_check.csv"));
        // Resampling is seeded: the same config gives the same table.
        json big = resampled;
        big["data"]["b"] = {{"source", "gaussian"}, {"shape", {16, 3, 4}}, {"mean", 2}, {"std", 3}};
        Run b1 = run_json("bn_steps_big1", big), b2 = run_json("bn_steps_big2", big);
        REQUIRE(b1.cli.exit_code == 0);
        CHECK(read_text(b1.out / "port_check.csv") == read_text(b2.out / "port_check.csv"));
        // ... and differs from training on the batch itself K times (the batches vary).
        json same = big;
        same["analyses"][0].erase("steps");
        same["analyses"][0]["train_data"] = {"b", "b", "b", "b"};
        Run b3 = run_json("bn_steps_big3", same);
        REQUIRE(b3.cli.exit_code == 0);
        CHECK(num(read_csv(b1.out / "port_check.csv")[0], "running_mean_max_abs_diff") !=
              num(read_csv(b3.out / "port_check.csv")[0], "running_mean_max_abs_diff"));
    }
}

TEST_CASE("port_check: identical definitions agree exactly; bad keys are input errors") {
    json cfg = {{"name", "pc"},
                {"data", {{"x", {{"source", "gaussian"}, {"shape", {4, 3, 5}}}}}},
                {"norms", {{"a", {{"type", "layernorm"}, {"axes", {-1}}}}, {"b", {{"type", "layernorm"}, {"normalized_shape", {5}}}},
                           {"c", {{"type", "layernorm"}, {"axes", {-1}}, {"eps", 0.5}}}}},
                {"analyses", {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b", "c"}}}}}};
    Run r = run_json("pc_same", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = read_csv(r.out / "port_check.csv");
    REQUIRE(rows.size() == 2);  // reference a (the first), ports b and c
    Row same = one(rows, {{"port", "b"}});
    CHECK(num(same, "max_abs_diff") == 0);
    CHECK(same.at("ref_values") == same.at("port_values"));
    // layernorm keeps no running statistics: not applicable (empty, "" in report.json), not nan
    CHECK(same.at("running_mean_max_abs_diff").empty());
    CHECK(same.at("running_var_max_abs_diff").empty());
    for (const auto& row : report_rows(r.out, "port_check")) {
        CHECK(row["running_mean_max_abs_diff"] == "");
        CHECK(row["running_var_max_abs_diff"] == "");
    }
    CHECK_FALSE(html_flags_nonfinite(r.out));
    Row diff = one(rows, {{"port", "c"}});
    CHECK(num(diff, "max_abs_diff") > 0.01);
    CHECK(list_cell(diff.at("ref_values")).size() == 5);

    struct Bad {
        json analysis;
        std::string expect;
    };
    std::vector<Bad> bad = {
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"reference", "bb"}}, "/analyses/0/reference: \"bb\" is not among this analysis' norms"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a"}}}, "/analyses/0/norms: port_check needs a reference and at least one port"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"ports", {"a"}}}, "/analyses/0/ports/0: \"a\" is the reference itself"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"steps", 0}}, "/analyses/0/steps: steps must be in [1, 1000000], but got 0"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"steps", 2}, {"train_data", {"x"}}}, "give either steps or train_data"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"train_data", {"y"}}}, "/analyses/0/train_data/0: no data entry named \"y\""},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"pairs", json::array({json::array({"a"})})}}, "/analyses/0/pairs/0: expected a pair"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"worst_groups", 0}}, "/analyses/0/worst_groups"},
        {{{"type", "port_check"}, {"data", {"x"}}, {"norms", {"a", "b"}}, {"step", 3}}, "did you mean \"steps\"?"},
    };
    for (std::size_t i = 0; i < bad.size(); ++i) {
        CAPTURE(bad[i].expect);
        json c = cfg;
        c["analyses"] = json::array({bad[i].analysis});
        Run b = run_json("pc_bad" + std::to_string(i), c);
        CHECK(b.cli.exit_code == 2);
        CHECK(b.cli.err.find(bad[i].expect) != std::string::npos);
    }
}

TEST_CASE("configs/port_check.json runs and shows each porting mismatch") {
    fs::path out = fresh_dir("port_check_example") / "out";
    CliResult r = run_normlab("run " + kSrc + "/configs/port_check.json --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto rows = read_csv(out / "port_check.csv");
    Row keras = one(rows, {{"data", "short_row"}, {"port", "ln_keras"}});
    CHECK(num(keras, "port_eps") == 1e-3);
    CHECK(num(keras, "max_abs_diff") > 1e-3);  // eps 1e-3 vs 1e-5 on a row of variance 0.1875
    Row ann = one(rows, {{"data", "short_row"}, {"port", "ln_annotated"}});
    CHECK(num(ann, "max_abs_diff") > 0.2);
    Row bn = one(rows, {{"port", "bn_keras"}, {"rank", "1"}});
    CHECK(bn.at("steps") == "10");
    CHECK(num(bn, "running_mean_max_abs_diff") > 1);
    Row rms = one(rows, {{"port", "rms_gemma"}});
    CHECK(num(rms, "max_abs_diff") > 1);
}

TEST_CASE("epsilon analysis: eps underflow and statistics overflow of half formats are reported") {
    const json b09 = load_case("B09"), b10 = load_case("B10");
    json cfg = {{"name", "eps_half"},
                {"dtype", "float16"},
                {"data",
                 {{"zeros", {{"source", "values"}, {"values", json::array({std::vector<double>(10, 0.0)})}}},
                  {"a", {{"source", "values"}, {"values", json::array({b10["input"]["a"]["values"]})}}},
                  {"b", {{"source", "values"}, {"values", json::array({b10["input"]["b"]["values"]})}}},
                  {"img", {{"source", "values"}, {"values", json::array({json::array({{300.0, -300.0}, {1.0, 2.0}})})}}}}},
                {"norms",
                 {{"ln", {{"type", "layernorm"}, {"axes", {-1}}, {"eps", b09["params"]["eps"]}}},
                  {"bn_eval", {{"type", "batchnorm"}, {"training", false}, {"running_var", {1e5, 1.0}}}}}},
                {"analyses",
                 {{{"type", "epsilon"}, {"data", {"zeros", "a", "b"}}, {"norms", {"ln"}}, {"dtypes", {"float16", "float32"}}},
                  {{"type", "epsilon"}, {"data", {"img"}}, {"norms", {"bn_eval"}}, {"dtypes", {"float16"}}}}}};
    Run r = run_json("epsilon_half", cfg);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    // The rows of each norm's own eps (each dtype also gets a row with the default eps).
    auto rows = select(read_csv(r.out / "epsilon.csv"), {{"eps_source", "norm"}});
    // B09: eps 1e-12 is 0 in float16; normlab itself (double statistics) still gives no NaN.
    Row z16 = one(rows, {{"data", "zeros"}, {"dtype", "float16"}});
    CHECK(num(z16, "eps_in_dtype") == b09["expected"]["fp16_arithmetic_emulated"]["eps_as_fp16"].get<double>());
    CHECK(num(z16, "nonfinite_count") == 0);
    CHECK(num(one(rows, {{"data", "zeros"}, {"dtype", "float32"}}), "eps_in_dtype") > 0);
    // B10: a's variance and b's sum of squares overflow float16, not float32.
    for (const std::string k : {"a", "b"}) {
        CAPTURE(k);
        CHECK(num(one(rows, {{"data", k}, {"dtype", "float16"}}), "stats_overflow_groups") == 1);
        CHECK(num(one(rows, {{"data", k}, {"dtype", "float32"}}), "stats_overflow_groups") == 0);
    }
    // Inference with running statistics computes no batch statistics: nothing to overflow.
    CHECK(num(one(read_csv(r.out / "epsilon.csv"), {{"data", "img"}}), "stats_overflow_groups") == 0);
}
