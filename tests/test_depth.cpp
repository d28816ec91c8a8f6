// The depth analysis and the stacks section end to end: the shipped configs show the
// published effects, every placement, block, init and norm type runs from a config, and
// bad stacks fail with exit 2 and a JSON pointer, in run and in validate.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xnpy.hpp>

#include "analysis_util.hpp"
#include "data/npy.hpp"
#include "norm/engine.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = NORMLAB_SOURCE_DIR;

/// depth.csv as rows of column -> text (empty cells kept: values that do not apply).
std::vector<CsvRow> read_csv(const fs::path& p) { return parse_csv(read_text(p)); }

const std::map<std::string, std::string>& row(const std::vector<std::map<std::string, std::string>>& rows,
                                              const std::string& stack, long long layers, long long layer) {
    for (const auto& r : rows)
        if (r.at("stack") == stack && std::stoll(r.at("layers")) == layers && std::stoll(r.at("layer")) == layer) return r;
    FAIL("no row for stack " << stack << " layers " << layers << " layer " << layer);
    return rows.front();
}

const char* kHeader =
    "data,stack,placement,norm,eps,layers,alpha,beta,draws,layer,resid_rms,resid_growth,branch_rms,norm_in_rms,grad_x_rms,grad_w_norm,"
    "grad_w1_norm,grad_gamma_norm,grad_gamma2_norm,eval_train_ratio";

}  // namespace

TEST_CASE("configs/depth.json: pre vs post on (10, 512) with a 512 x 512 block, and the BatchNorm chain's drift") {
    const fs::path out = fresh_dir("depth_lab") / "out";
    auto r = run_normlab("run " + (kSource / "configs/depth.json").string() + " --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const std::string csv = read_text(out / "depth.csv");
    CHECK(csv.substr(0, csv.find('\n')) == kHeader);
    const auto rows = read_csv(out / "depth.csv");
    // x @ W with W ~ N(0, 1): the branch has rms sqrt(512) times the input's; pre-norm adds
    // it to the residual stream, post-norm normalises the sum back to rms 1.
    const double x0 = num(row(rows, "pre", 1, 0), "resid_rms");
    CHECK(num(row(rows, "pre", 1, 1), "resid_rms") / x0 == doctest::Approx(std::sqrt(513.0)).epsilon(0.05));
    CHECK(num(row(rows, "post", 1, 1), "resid_rms") == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(row(rows, "pre", 1, 0).at("grad_w_norm").empty());  // row 0 has no block
    // Eval mode divides by the unbiased running variance 64/63 where training divided by
    // the biased batch variance: (63/64)^(l/2) after l layers (the PyTorch golden's value).
    for (long long l = 0; l <= 20; ++l)
        CHECK(num(row(rows, "bn20", 20, l), "eval_train_ratio") ==
              doctest::Approx(std::pow(63.0 / 64.0, static_cast<double>(l) / 2.0)).epsilon(1e-9));
}

TEST_CASE("depth: block columns a row does not have are empty cells (\"\" in report.json), not nan") {
    // Row 0 has no block; norm_only has no branch and no weights; none has no norm; linear
    // has no W1; identity no weights; a norm without affine no weight gradient; only
    // sandwich has a second norm N2; without train_steps there is no eval/train ratio. Each
    // is not applicable, never a computed nan.
    const fs::path dir = fresh_dir("depth_na");
    write_text(dir / "na.json", R"({"name": "na", "dtype": "float64",
      "data": {"x": {"source": "gaussian", "shape": [4, 6]}},
      "norms": {"ln": {"type": "layernorm", "axes": [-1]}, "ln0": {"type": "layernorm", "axes": [-1], "affine": false}},
      "stacks": {"pre": {"layers": 2, "placement": "pre", "norm": "ln"},
                 "ffn": {"layers": 2, "placement": "post", "norm": "ln0", "block": "ffn", "hidden": 3},
                 "ident": {"layers": 2, "placement": "pre", "norm": "ln", "block": "identity"},
                 "only": {"layers": 2, "placement": "norm_only", "norm": "ln"},
                 "none": {"layers": 2, "placement": "none"},
                 "sand": {"layers": 2, "placement": "sandwich", "norm": "ln"}},
      "analyses": [{"type": "depth", "data": ["x"], "stacks": ["pre", "ffn", "ident", "only", "none", "sand"], "draws": 2}]})");
    auto r = run_normlab("run " + (dir / "na.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(dir / "out" / "depth.csv");
    const auto rep = report_rows(dir / "out", "depth");
    REQUIRE(rows.size() == 6 * 3);
    REQUIRE(rep.size() == rows.size());
    // The stack norm's eps (layernorm's default in float64); none has no norm.
    for (const auto& row : rows) CHECK(row.at("eps") == (row.at("stack") == "none" ? "" : "1e-05"));
    // stack -> the block columns it has (layer >= 1).
    const std::map<std::string, std::vector<std::string>> has = {
        {"pre", {"branch_rms", "norm_in_rms", "grad_w_norm", "grad_gamma_norm"}},
        {"ffn", {"branch_rms", "norm_in_rms", "grad_w_norm", "grad_w1_norm"}},
        {"ident", {"branch_rms", "norm_in_rms", "grad_gamma_norm"}},
        {"only", {"norm_in_rms", "grad_gamma_norm"}},
        {"none", {"branch_rms", "grad_w_norm"}},
        {"sand", {"branch_rms", "norm_in_rms", "grad_w_norm", "grad_gamma_norm", "grad_gamma2_norm"}}};
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& row = rows[i];
        INFO(row.at("stack") << " layer " << row.at("layer"));
        const auto& cols = has.at(row.at("stack"));
        for (const char* c :
             {"branch_rms", "norm_in_rms", "grad_w_norm", "grad_w1_norm", "grad_gamma_norm", "grad_gamma2_norm"}) {
            INFO(c);
            const bool applies = row.at("layer") != "0" && std::find(cols.begin(), cols.end(), c) != cols.end();
            CHECK(row.at(c).empty() == !applies);
            CHECK((rep[i][c] == "") == !applies);
            if (applies) CHECK(std::isfinite(num(row, c)));
        }
        CHECK(row.at("eval_train_ratio").empty());  // no train_steps
        CHECK(rep[i]["eval_train_ratio"] == "");
        for (const char* c : {"resid_rms", "resid_growth", "grad_x_rms"}) CHECK(std::isfinite(num(row, c)));
    }
    CHECK_FALSE(html_flags_nonfinite(dir / "out"));
}

// PyTorch autograd's means over 64 seeds of configs/depth_sweep.json's set-up
// (scripts/depth_sweep_torch.py): the last layer's ||d loss / d W2|| for each placement, and
// pre-LN's rms(x_L) / rms(x_0).
struct TorchMeans {
    long long layers;
    double pre, post, deepnorm, pre_growth;
};
const std::vector<TorchMeans> kTorch = {{6, 2.119, 3.106, 0.720, 1.71},
                                        {12, 1.633, 3.077, 0.509, 2.19},
                                        {24, 1.225, 3.067, 0.360, 2.94},
                                        {48, 0.893, 3.100, 0.255, 4.03}};

// The effects depth_sweep.json shows, on its means over 8 draws of the weights and the
// projection. One draw is not enough: a single draw of the last layer's weights moves
// post-LN's gradient by up to 11% (sd over seeds at L = 48), and in PyTorch one seed's four
// values span more than 1.2x for 13 of 64 seeds.
void check_sweep_effects(const std::vector<std::map<std::string, std::string>>& rows) {
    auto last = [&](const std::string& stack, long long L, const char* column) { return num(row(rows, stack, L, L), column); };
    double post_lo = 1e300, post_hi = 0;
    for (const auto& ref : kTorch) {
        const long long L = ref.layers;
        INFO("L = " << L);
        CHECK(row(rows, "post", L, L).at("draws") == "8");
        // DeepNet's constants for L layers (Wang et al. 2022, table 1), the others' 1
        CHECK(last("deepnorm", L, "alpha") == doctest::Approx(std::pow(2.0 * L, 0.25)).epsilon(1e-12));
        CHECK(last("deepnorm", L, "beta") == doctest::Approx(std::pow(8.0 * L, -0.25)).epsilon(1e-12));
        for (const char* s : {"pre", "post"}) {
            CHECK(last(s, L, "alpha") == 1.0);
            CHECK(last(s, L, "beta") == 1.0);
        }
        // post-LN (Xiong et al. 2020, Theorem 1): the last layer's gradient does not shrink with depth
        post_lo = std::min(post_lo, last("post", L, "grad_w_norm"));
        post_hi = std::max(post_hi, last("post", L, "grad_w_norm"));
        // every mean within 10% of PyTorch's (the sd of a mean of 8 draws is at most 4%)
        CHECK(last("post", L, "grad_w_norm") == doctest::Approx(ref.post).epsilon(0.1));
        CHECK(last("pre", L, "grad_w_norm") == doctest::Approx(ref.pre).epsilon(0.1));
        CHECK(last("deepnorm", L, "grad_w_norm") == doctest::Approx(ref.deepnorm).epsilon(0.1));
        CHECK(last("pre", L, "resid_growth") == doctest::Approx(ref.pre_growth).epsilon(0.1));
        // post-LN and DeepNorm normalise the stream: x_l has rms 1 at every layer
        for (long long l = 1; l <= L; ++l) {
            CHECK(num(row(rows, "post", L, l), "resid_rms") == doctest::Approx(1.0).epsilon(1e-3));
            CHECK(num(row(rows, "deepnorm", L, l), "resid_rms") == doctest::Approx(1.0).epsilon(1e-3));
            CHECK(num(row(rows, "post", L, l), "resid_growth") == doctest::Approx(1.0).epsilon(0.02));
        }
    }
    CHECK(post_hi / post_lo <= 1.2);
    // pre-LN: the residual stream grows with depth (each block adds a branch of about unit
    // rms to it), at the end of each stack and along the deepest one, and the last layer's
    // gradient falls, at least 2x from 6 to 48 layers
    for (std::size_t i = 1; i < kTorch.size(); ++i) {
        const long long L = kTorch[i].layers, prev = kTorch[i - 1].layers;
        CHECK(last("pre", L, "resid_growth") > last("pre", prev, "resid_growth"));
        CHECK(num(row(rows, "pre", 48, L), "resid_growth") > num(row(rows, "pre", 48, prev), "resid_growth"));
        CHECK(last("pre", L, "grad_w_norm") < last("pre", prev, "grad_w_norm"));
    }
    CHECK(last("pre", 6, "grad_w_norm") / last("pre", 48, "grad_w_norm") >= 2.0);
    // ... like L^-k with k close to 1/2: the least-squares slope of log grad against log L
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (const auto& ref : kTorch) mx += std::log(double(ref.layers)) / 4, my += std::log(last("pre", ref.layers, "grad_w_norm")) / 4;
    for (const auto& ref : kTorch) {
        const double dx = std::log(double(ref.layers)) - mx;
        sxy += dx * (std::log(last("pre", ref.layers, "grad_w_norm")) - my);
        sxx += dx * dx;
    }
    CHECK(-sxy / sxx == doctest::Approx(0.5).epsilon(0.3));  // PyTorch's means: 0.42
}

TEST_CASE("configs/depth_sweep.json shows Xiong et al.'s and DeepNet's effects as means over 8 draws, for any seed") {
    const fs::path dir = fresh_dir("depth_sweep");
    auto r = run_normlab("run " + (kSource / "configs/depth_sweep.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(dir / "out" / "depth.csv");
    check_sweep_effects(rows);
    // The dry run names DeepNet's constants of the first point (L = 6): (12)^(1/4), (48)^(-1/4).
    auto dry = run_normlab("run " + (kSource / "configs/depth_sweep.json").string() + " --dry-run");
    REQUIRE_MESSAGE(dry.exit_code == 0, dry.err);
    CHECK_MESSAGE(dry.out.find("stack deepnorm: 6 x deepnorm ffn around ln (alpha 1.861, beta 0.3799)\n") != std::string::npos,
                  dry.out);
    // Another run seed draws other data, weights and projections: the same effects.
    auto r3 = run_normlab("run " + (kSource / "configs/depth_sweep.json").string() + " --set seed=3 --out " +
                          (dir / "seed3").string() + " -q");
    REQUIRE_MESSAGE(r3.exit_code == 0, r3.err);
    check_sweep_effects(read_csv(dir / "seed3" / "depth.csv"));

    // results/README.md's table quotes the shipped run, next to PyTorch's means
    const std::string readme = read_text(kSource / "results/README.md");
    auto f2 = [](double v) {
        std::ostringstream o;
        o << std::fixed << std::setprecision(2) << v;
        return o.str();
    };
    for (const auto& ref : kTorch) {
        const long long L = ref.layers;
        auto last = [&](const std::string& stack, const char* column) { return num(row(rows, stack, L, L), column); };
        const std::string line = "| " + std::to_string(L) + " | " + f2(last("pre", "grad_w_norm")) + " | " + f2(ref.pre) +
                                 " | " + f2(last("post", "grad_w_norm")) + " | " + f2(ref.post) + " | " +
                                 f2(last("deepnorm", "grad_w_norm")) + " | " + f2(ref.deepnorm) + " | " +
                                 f2(last("pre", "resid_growth")) + " | " + f2(ref.pre_growth) + " |";
        CHECK_MESSAGE(readme.find(line) != std::string::npos, "results/README.md lacks the row " << line);
    }
}

TEST_CASE("every placement, block, init and norm type runs from a config; save writes per-layer arrays") {
    const fs::path dir = fresh_dir("depth_all");
    std::ostringstream stacks, names;
    const std::vector<std::string> placements = {"pre", "post", "deepnorm", "sandwich", "none"};
    const std::vector<std::string> blocks = {"linear", "ffn", "identity"};
    const std::vector<std::string> inits = {"\"xavier_normal\"", "\"xavier_uniform\"", "\"kaiming_normal\"",
                                            "{\"normal\": {\"std\": 0.2}}"};
    const std::vector<std::string> norms = {"ln", "bn", "rms", "gn", "inorm"};
    std::size_t k = 0, count = 0;
    for (const auto& p : placements)
        for (const auto& b : blocks) {
            const std::string name = p + "_" + b;
            stacks << (count ? ",\n" : "") << "\"" << name << "\": {\"layers\": 3, \"placement\": \"" << p << "\""
                   << (p == "none" ? "" : ", \"norm\": \"" + norms[k % norms.size()] + "\"") << ", \"block\": \"" << b
                   << "\"" << (b == "ffn" ? ", \"hidden\": 12, \"activation\": \"" + std::string(k % 2 ? "gelu" : "relu") + "\"" : "")
                   << ", \"init\": " << inits[k % inits.size()] << "}";
            names << (count++ ? ", " : "") << "\"" << name << "\"";
            ++k;
        }
    stacks << ",\n\"chain\": {\"layers\": 4, \"placement\": \"norm_only\", \"norm\": \"bn\"}";
    names << ", \"chain\"";
    write_text(dir / "all.json", R"({"name": "all", "dtype": "float32",
      "data": {"t": {"source": "gaussian", "shape": [4, 6, 8], "channel_axis": -1}},
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}, "bn": {"type": "batchnorm"},
                "rms": {"type": "rmsnorm", "axes": [-1]}, "gn": {"type": "groupnorm", "num_groups": 2},
                "inorm": {"type": "instancenorm", "affine": true}},
      "stacks": {)" + stacks.str() + R"(},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": [)" + names.str() + R"(], "train_steps": 3,
                    "save": ["activations", "gradients"]}]})");
    auto r = run_normlab("run " + (dir / "all.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(dir / "out" / "depth.csv");
    CHECK(rows.size() == 15 * 4 + 5);
    for (const auto& row : rows) {
        INFO(row.at("stack") << " layer " << row.at("layer"));
        for (const char* c : {"resid_rms", "resid_growth", "grad_x_rms", "eval_train_ratio"}) CHECK(std::isfinite(num(row, c)));
        if (row.at("layer") != "0" && row.at("placement") != "norm_only" && row.at("stack").find("identity") == std::string::npos)
            CHECK(num(row, "grad_w_norm") > 0);
    }
    auto acts = xt::load_npy<float>((dir / "out/arrays/t/pre_ffn/activations.npy").string());
    CHECK(acts.shape() == std::vector<std::size_t>{4, 4, 6, 8});
    auto grads = xt::load_npy<float>((dir / "out/arrays/t/pre_ffn/gradients.npy").string());
    CHECK(grads.shape() == std::vector<std::size_t>{4, 4, 6, 8});
    auto gw1 = xt::load_npy<float>((dir / "out/arrays/t/pre_ffn/grad_w1.npy").string());
    CHECK(gw1.shape() == std::vector<std::size_t>{3, 8, 12});
}

TEST_CASE("depth: the saved weights and projection redo the draw: given back, the same rows to the bit") {
    const fs::path dir = fresh_dir("depth_redo");
    // The data from a file, so that the second run's other seed changes nothing but what the
    // saved arrays must replace.
    xt::xarray<float> x = xt::xarray<float>::from_shape({3, 4, 8});
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 1.5 + 0.2);
    xt::dump_npy((dir / "x.npy").string(), x);
    const std::string data = R"("data": {"t": {"source": "npy", "path": ")" + (dir / "x.npy").string() +
                             R"(", "channel_axis": -1}}, "norms": {"ln": {"type": "layernorm", "normalized_shape": [8]}},)";
    const std::string head = R"({"name": "redo", "dtype": "float32", "seed": 5, )" + data;
    write_text(dir / "drawn.json", head + R"(
      "stacks": {"s": {"layers": 3, "placement": "pre", "norm": "ln", "block": "ffn", "hidden": 12}},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": ["s"], "save": ["weights", "projection"]}]})");
    auto r = run_normlab("run " + (dir / "drawn.json").string() + " --out " + (dir / "a").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const fs::path arr = dir / "a/arrays/t/s";
    CHECK(xt::load_npy<float>((arr / "w1.npy").string()).shape() == std::vector<std::size_t>{3, 8, 12});
    CHECK(xt::load_npy<float>((arr / "w2.npy").string()).shape() == std::vector<std::size_t>{3, 12, 8});
    CHECK(xt::load_npy<double>((arr / "projection.npy").string()).shape() == std::vector<std::size_t>{3, 4, 8});
    write_text(dir / "given.json", R"({"name": "redo", "dtype": "float32", "seed": 6, )" + data + R"(
      "stacks": {"s": {"layers": 3, "placement": "pre", "norm": "ln", "block": "ffn", "hidden": 12,
                       "weights": {"w1": {"npy": ")" + (arr / "w1.npy").string() + R"("},
                                   "w2": {"npy": ")" + (arr / "w2.npy").string() + R"("}}}},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": ["s"],
                    "loss": {"npy": ")" + (arr / "projection.npy").string() + R"("}}]})");
    r = run_normlab("run " + (dir / "given.json").string() + " --out " + (dir / "b").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(read_text(dir / "a/depth.csv") == read_text(dir / "b/depth.csv"));
    // r exists for the projection loss only.
    write_text(dir / "bad.json", head + R"(
      "stacks": {"s": {"layers": 3, "placement": "pre", "norm": "ln"}},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": ["s"], "loss": "mean_square", "save": ["projection"]}]})");
    r = run_normlab("validate " + (dir / "bad.json").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("save \"projection\" writes the loss's r, which only loss \"projection\" draws") != std::string::npos);
}

TEST_CASE("depth: save \"mask\" writes the data's padding mask as numpy bool; data without one is refused") {
    const fs::path dir = fresh_dir("depth_mask");
    const std::string head = R"({"name": "m", "dtype": "float32",
      "norms": {"ln": {"type": "layernorm", "normalized_shape": [4], "mask": true}},
      "stacks": {"s": {"layers": 2, "placement": "pre", "norm": "ln"}},)";
    write_text(dir / "ok.json", head + R"(
      "data": {"t": {"source": "tokens", "batch": 3, "max_len": 5, "dim": 4, "lengths": [5, 2, 4]}},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": ["s"], "save": ["mask"]}]})");
    auto r = run_normlab("run " + (dir / "ok.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const normlab::NpyArray m = normlab::read_npy(dir / "out/arrays/t/s/mask.npy");
    CHECK(m.dtype == "bool");
    REQUIRE(m.values.shape() == std::vector<std::size_t>{3, 5, 1});
    const std::vector<std::size_t> lengths = {5, 2, 4};
    for (std::size_t b = 0; b < 3; ++b)
        for (std::size_t t = 0; t < 5; ++t) CHECK(m.values(b, t, 0) == (t < lengths[b] ? 1.0 : 0.0));
    write_text(dir / "bad.json", head + R"(
      "data": {"t": {"source": "gaussian", "shape": [3, 5, 4], "channel_axis": -1}},
      "analyses": [{"type": "depth", "data": ["t"], "stacks": ["s"], "save": ["weights", "mask"]}]})");
    r = run_normlab("validate " + (dir / "bad.json").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("/analyses/0/save/1: depth on data \"t\": cannot save its padding mask, it has none") !=
          std::string::npos);
}

TEST_CASE("depth: the mean-square loss through x_l = 2 x_{l-1} has closed-form rows, for any number of draws") {
    // placement none with identity blocks doubles x per block: resid_growth = 2^l, the
    // branch is x_{l-1}, and d mean(y^2) / d x_l = 2 y / n * 2^(L-l). Nothing is drawn, so
    // the mean over 3 draws is the same rows.
    const fs::path dir = fresh_dir("depth_closed");
    for (const std::string draws : {"1", "3"}) {
        INFO("draws " << draws);
        write_text(dir / "c.json", R"({"name": "c", "dtype": "float64", "data": {"x": {"source": "gaussian", "shape": [5, 4]}},
          "stacks": {"dbl": {"layers": 3, "placement": "none", "block": "identity"}},
          "analyses": [{"type": "depth", "data": ["x"], "stacks": ["dbl"], "loss": "mean_square", "draws": )" + draws + "}]}");
        auto r = run_normlab("run " + (dir / "c.json").string() + " --out " + (dir / ("out" + draws)).string() + " -q");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const auto rows = read_csv(dir / ("out" + draws) / "depth.csv");
        const double x0 = num(rows[0], "resid_rms"), y = 8 * x0;
        for (long long l = 0; l <= 3; ++l) {
            CHECK(rows[l].at("draws") == draws);
            CHECK(num(rows[l], "resid_growth") == doctest::Approx(std::pow(2.0, l)).epsilon(1e-14));
            CHECK(num(rows[l], "grad_x_rms") == doctest::Approx(2 * y / 20 * std::pow(2.0, 3 - l)).epsilon(1e-14));
            if (l > 0) CHECK(num(rows[l], "branch_rms") == doctest::Approx(x0 * std::pow(2.0, l - 1)).epsilon(1e-14));
        }
        CHECK(r.out.empty());
    }
}

TEST_CASE("depth: draws averages independent draws, the first of them the single draw's") {
    // post-LN's last-layer gradient from draws 1 and draws 2 at the same seed: draws 2 is
    // the mean of the first draw and another one, so 2 * mean2 - single is the other draw's
    // value, which differs from the first and is a gradient of the same size.
    const fs::path dir = fresh_dir("depth_draws");
    std::map<std::string, double> grad;
    for (const std::string draws : {"1", "2"}) {
        write_text(dir / "d.json", R"({"name": "d", "seed": 5, "data": {"x": {"source": "gaussian", "shape": [32, 8]}},
          "norms": {"ln": {"type": "layernorm", "axes": [-1]}},
          "stacks": {"post": {"layers": 2, "placement": "post", "norm": "ln", "block": "ffn", "hidden": 16}},
          "analyses": [{"type": "depth", "data": ["x"], "stacks": ["post"], "draws": )" + draws + "}]}");
        auto r = run_normlab("run " + (dir / "d.json").string() + " --out " + (dir / ("out" + draws)).string() + " -q");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const auto rows = read_csv(dir / ("out" + draws) / "depth.csv");
        grad[draws] = num(row(rows, "post", 2, 2), "grad_w_norm");
        CHECK(num(row(rows, "post", 2, 2), "resid_rms") == doctest::Approx(1.0).epsilon(1e-3));
    }
    const double other = 2 * grad["2"] - grad["1"];
    CHECK(std::fabs(other - grad["1"]) > 1e-6 * grad["1"]);
    CHECK(other > grad["1"] / 3);
    CHECK(other < grad["1"] * 3);
}

TEST_CASE("bad stacks: a clear error with a JSON pointer and exit 2, from run and from validate, nothing written") {
    const fs::path dir = fresh_dir("depth_bad");
    {
        std::ofstream f(dir / "w_small.npy", std::ios::binary);
        xt::xarray<double> w = xt::zeros<double>({2, 3, 3});
        f << xt::dump_npy(w);
    }
    auto config = [&](const std::string& data_shape, const std::string& stack, const std::string& extra_data = "") {
        return R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": )" + data_shape + "}" + extra_data +
               R"(}, "norms": {"ln": {"type": "layernorm", "axes": [-1]}}, "stacks": {"s": )" + stack +
               R"(}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})";
    };
    struct Case {
        std::string name, json, message;
    };
    const std::vector<Case> cases = {
        {"unknown norm", config("[4, 8]", R"({"layers": 2, "placement": "post", "norm": "lnn"})"),
         "/stacks/s/norm: no norms entry named \"lnn\"; did you mean \"ln\"?"},
        {"rank 1", config("[8]", R"({"layers": 2, "placement": "post", "norm": "ln"})"),
         "/stacks/s: stack \"s\" on data \"x\": expected data of shape (N, D) or (B, T, D) with the features on the last axis, but got shape [8]"},
        {"features not last", config("[2, 3, 8]", R"({"layers": 2, "placement": "post", "norm": "ln"})"),
         "/stacks/s: stack \"s\" on data \"x\": the features must be the data's last axis, but the data's channel axis is 1"},
        {"npy D", config("[4, 8]", R"({"layers": 2, "placement": "post", "norm": "ln", "weights": {"w": {"npy": "w_small.npy"}}})"),
         "/stacks/s/weights/w: stack \"s\" on data \"x\": weight \"w\" must have shape [2, 8, 8] (layers, fan_in, fan_out) for data of shape [4, 8], but the given array has [2, 3, 3]"},
        {"npy layers", config("[4, 8]", R"({"layers": 3, "placement": "post", "norm": "ln", "weights": {"w": {"npy": "w_small.npy"}}})"),
         "/stacks/s/weights/w/npy: weight \"w\" must have shape (layers, D, D) with layers = 3 and the layer axis first"},
        {"npy name", config("[4, 8]", R"({"layers": 2, "placement": "post", "norm": "ln", "block": "ffn", "hidden": 3, "weights": {"w": {"npy": "w_small.npy"}}})"),
         "/stacks/s/weights/w: a ffn block takes weights \"w1\", \"w2\""},
        {"ffn without hidden", config("[4, 8]", R"({"layers": 2, "placement": "post", "norm": "ln", "block": "ffn"})"),
         "/stacks/s: missing required key \"hidden\""},
        {"unknown placement", config("[4, 8]", R"({"layers": 2, "placement": "postt", "norm": "ln"})"), "/stacks/s/placement"},
        {"unknown key", config("[4, 8]", R"({"layers": 2, "placement": "pre", "norm": "ln", "alpah": 2})"), "/stacks/s/alpah: unknown key \"alpah\""},
        {"alpha outside deepnorm", config("[4, 8]", R"({"layers": 2, "placement": "pre", "norm": "ln", "alpha": 2})"),
         "/stacks/s/alpha: alpha applies to placement deepnorm only"},
        {"bad init", config("[4, 8]", R"({"layers": 2, "placement": "pre", "norm": "ln", "init": "xavier"})"), "/stacks/s/init: unknown init \"xavier\""},
        {"zero layers", config("[4, 8]", R"({"layers": 0, "placement": "pre", "norm": "ln"})"), "/stacks/s/layers: layers must be in [1, 100000]"},
        {"norm does not fit", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "norms": {"ln": {"type": "layernorm", "normalized_shape": [5]}}, "stacks": {"s": {"layers": 1, "placement": "pre", "norm": "ln"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "/norms/ln/normalized_shape: stack \"s\": layernorm \"ln\" on data \"x\": given normalized_shape=[5]"},
        {"half precision", R"({"name": "bad", "dtype": "float16", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "stacks run in float32 or float64, but the run's dtype is float16 (a stack's products go through OpenBLAS, which has no half-precision matrix product)"},
        {"bfloat16", R"({"name": "bad", "dtype": "bfloat16", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "stacks run in float32 or float64, but the run's dtype is bfloat16"},
        {"norms instead of stacks", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "norms": {"ln": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "depth", "data": ["x"], "norms": ["ln"]}]})",
         "/analyses/0: missing required key \"stacks\""},
        {"stacks in a norm analysis", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "norms": {"ln": {"type": "layernorm", "axes": [-1]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"], "stacks": ["s"]}]})",
         "unknown key \"stacks\""},
        {"too big for memory", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [1000, 4096]}}, "stacks": {"s": {"layers": 500, "placement": "none", "block": "ffn", "hidden": 16384}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "/data/x: needs an estimated 288.8 GiB of memory (data \"x\": gaussian [1000, 4096] through its stacks, 288.7 GiB)"},
        {"draws 0", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"], "draws": 0}]})",
         "/analyses/0/draws: draws must be in [1, 10000], but got 0"},
        {"save with draws", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"], "draws": 2, "save": ["gradients"]}]})",
         "/analyses/0/save: save writes the arrays of one draw, but draws is 2"},
        {"stack listed twice", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s", "s"]}]})",
         "/analyses/0/stacks/1: stack \"s\" is listed twice (first at /analyses/0/stacks/0); a second listing would only repeat its rows"},
        {"loss npy shape", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"], "loss": {"npy": "w_small.npy"}}]})",
         "/analyses/0/loss/npy: r must have the stack output's shape [4, 8]"},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        write_text(dir / "bad.json", c.json);
        for (const std::string cmd : {"validate", "run"}) {
            INFO(cmd);
            const fs::path out = dir / ("out_" + cmd);
            auto r = run_normlab(cmd + " " + (dir / "bad.json").string() + (cmd == "run" ? " --out " + out.string() : ""));
            CHECK(r.exit_code == 2);
            CHECK_MESSAGE(r.err.find(c.message) != std::string::npos, r.err);
            CHECK(r.err.find("bad.json") != std::string::npos);
            CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
            CHECK(!fs::exists(out));
        }
    }
}

TEST_CASE("bench --stack: the passes asked for, every figure finite, and exit 2 for what it cannot run") {
    // Small sizes: this checks what the bench prints and refuses, not how fast it is.
    auto r = run_normlab("bench --stack --layers 2 --rows 16 --features 8 --hidden 16 --repeat 2 --dtype float64 --json");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("dtype") == "float64");
    CHECK(j.at("compute") == "double");  // float64 data always takes double arithmetic
    CHECK(j.at("layers") == 2);
    for (const char* k : {"median_s", "gflops", "dot_gflops", "fraction", "activations_mib", "peak_rss_mib"}) {
        INFO(k);
        CHECK(std::isfinite(j.at(k).get<double>()));
        CHECK(j.at(k).get<double>() > 0);
    }
    auto t = run_normlab("bench --stack --layers 2 --rows 16 --features 8 --hidden 16 --repeat 2 --dtype float32");
    REQUIRE_MESSAGE(t.exit_code == 0, t.err);
    CHECK(t.out.find("forward+backward, 2 timed passes") != std::string::npos);
    const std::string f32 = normlab::default_compute() == normlab::Compute::float32 ? "float" : "double";
    CHECK(t.out.find("the norms of float32 stacks compute " + f32 + ")") != std::string::npos);
    for (const std::string bad : {"--placement sideways", "--stack-norm groupnorm", "--dtype float16"}) {
        INFO(bad);
        auto b = run_normlab("bench --stack --layers 2 --rows 16 --features 8 --hidden 16 --repeat 1 " + bad);
        CHECK(b.exit_code == 2);
        CHECK(b.out.empty());
    }
}

TEST_CASE("an ffn with the identity activation is the linear block with W = W1 W2, row for row") {
    const fs::path dir = fresh_dir("depth_ffn_identity");
    const std::size_t L = 2, D = 4, H = 3;
    xt::xarray<double> w1 = xt::zeros<double>({L, D, H}), w2 = xt::zeros<double>({L, H, D}), w = xt::zeros<double>({L, D, D});
    for (std::size_t i = 0; i < w1.size(); ++i) w1.data()[i] = std::sin(1.3 * double(i) + 0.2);
    for (std::size_t i = 0; i < w2.size(); ++i) w2.data()[i] = std::cos(0.7 * double(i));
    for (std::size_t l = 0; l < L; ++l)
        for (std::size_t i = 0; i < D; ++i)
            for (std::size_t j = 0; j < D; ++j)
                for (std::size_t h = 0; h < H; ++h) w(l, i, j) += w1(l, i, h) * w2(l, h, j);
    for (const auto& [name, a] : {std::pair<const char*, const xt::xarray<double>*>{"w1", &w1}, {"w2", &w2}, {"w", &w}}) {
        std::ofstream f(dir / (std::string(name) + ".npy"), std::ios::binary);
        f << xt::dump_npy(*a);
    }
    write_text(dir / "f.json", R"({"name": "f", "dtype": "float64", "data": {"x": {"source": "gaussian", "shape": [6, 4]}},
      "norms": {"ln": {"type": "layernorm", "axes": [-1]}},
      "stacks": {"ffn": {"layers": 2, "placement": "post", "norm": "ln", "block": "ffn", "hidden": 3, "activation": "identity",
                         "weights": {"w1": {"npy": "w1.npy"}, "w2": {"npy": "w2.npy"}}},
                 "lin": {"layers": 2, "placement": "post", "norm": "ln", "block": "linear", "weights": {"w": {"npy": "w.npy"}}}},
      "analyses": [{"type": "depth", "data": ["x"], "stacks": ["ffn", "lin"]}]})");
    auto r = run_normlab("run " + (dir / "f.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(dir / "out" / "depth.csv");
    for (long long l = 0; l <= 2; ++l)
        for (const char* c : {"resid_rms", "grad_x_rms"}) {
            INFO("layer " << l << " " << c);
            CHECK(num(row(rows, "ffn", 2, l), c) == doctest::Approx(num(row(rows, "lin", 2, l), c)).epsilon(1e-12));
        }
    for (long long l = 1; l <= 2; ++l)
        for (const char* c : {"branch_rms", "norm_in_rms", "grad_gamma_norm"}) {
            INFO("layer " << l << " " << c);
            CHECK(num(row(rows, "ffn", 2, l), c) == doctest::Approx(num(row(rows, "lin", 2, l), c)).epsilon(1e-12));
        }
}
