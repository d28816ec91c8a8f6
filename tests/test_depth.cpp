// The depth analysis and the stacks section end to end: the shipped configs show the
// published effects, every placement, block, init and norm type runs from a config, and
// bad stacks fail with exit 2 and a JSON pointer, in run and in validate.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include <xtensor/xnpy.hpp>

#include "cli_util.hpp"

using namespace normlab_test;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = NORMLAB_SOURCE_DIR;

/// depth.csv as rows of column -> text.
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& p) {
    std::istringstream in(read_text(p));
    std::string line;
    std::vector<std::string> header;
    std::vector<std::map<std::string, std::string>> rows;
    auto split = [](const std::string& s) {
        std::vector<std::string> v;
        std::stringstream ss(s);
        std::string c;
        while (std::getline(ss, c, ',')) v.push_back(c);
        return v;
    };
    std::getline(in, line);
    header = split(line);
    while (std::getline(in, line)) {
        auto cells = split(line);
        REQUIRE(cells.size() == header.size());
        std::map<std::string, std::string> row;
        for (std::size_t i = 0; i < cells.size(); ++i) row[header[i]] = cells[i];
        rows.push_back(row);
    }
    return rows;
}

double num(const std::map<std::string, std::string>& r, const std::string& c) { return std::stod(r.at(c)); }

const std::map<std::string, std::string>& row(const std::vector<std::map<std::string, std::string>>& rows,
                                              const std::string& stack, long long layers, long long layer) {
    for (const auto& r : rows)
        if (r.at("stack") == stack && std::stoll(r.at("layers")) == layers && std::stoll(r.at("layer")) == layer) return r;
    FAIL("no row for stack " << stack << " layers " << layers << " layer " << layer);
    return rows.front();
}

const char* kHeader =
    "data,stack,placement,norm,layers,layer,resid_rms,resid_growth,branch_rms,norm_in_rms,grad_x_rms,grad_w_norm,"
    "grad_w1_norm,grad_gamma_norm,eval_train_ratio";

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
    CHECK(std::isnan(num(row(rows, "pre", 1, 0), "grad_w_norm")));
    // Eval mode divides by the unbiased running variance 64/63 where training divided by
    // the biased batch variance: (63/64)^(l/2) after l layers (the PyTorch golden's value).
    for (long long l = 0; l <= 20; ++l)
        CHECK(num(row(rows, "bn20", 20, l), "eval_train_ratio") ==
              doctest::Approx(std::pow(63.0 / 64.0, static_cast<double>(l) / 2.0)).epsilon(1e-9));
}

TEST_CASE("configs/depth_sweep.json shows Xiong et al.'s and DeepNet's effects") {
    const fs::path out = fresh_dir("depth_sweep") / "out";
    auto r = run_normlab("run " + (kSource / "configs/depth_sweep.json").string() + " --out " + out.string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(out / "depth.csv");
    const std::vector<long long> Ls = {6, 12, 24, 48};
    double mean = 0;
    for (long long L : Ls) mean += num(row(rows, "post", L, L), "grad_w_norm") / 4;
    for (long long L : Ls) {
        INFO("L = " << L);
        // post-LN: the last layer's weight gradient does not shrink with depth
        CHECK(std::fabs(num(row(rows, "post", L, L), "grad_w_norm") / mean - 1) < 0.2);
        for (long long l = 1; l <= L; ++l) {
            CHECK(num(row(rows, "post", L, l), "resid_growth") == doctest::Approx(1.0).epsilon(0.01));
            CHECK(num(row(rows, "deepnorm", L, l), "resid_growth") == doctest::Approx(1.0).epsilon(0.01));
        }
    }
    // pre-LN: the residual stream grows with depth (each block adds a branch of about
    // unit rms to it), at the end of each stack and along the deepest one
    for (std::size_t i = 1; i < Ls.size(); ++i) {
        CHECK(num(row(rows, "pre", Ls[i], Ls[i]), "resid_growth") > num(row(rows, "pre", Ls[i - 1], Ls[i - 1]), "resid_growth"));
        CHECK(num(row(rows, "pre", 48, Ls[i]), "resid_growth") > num(row(rows, "pre", 48, Ls[i - 1]), "resid_growth"));
    }
    // pre-LN: the last layer's gradient falls like 1/sqrt(L): at least 2x from 6 to 48 layers
    CHECK(num(row(rows, "pre", 6, 6), "grad_w_norm") / num(row(rows, "pre", 48, 48), "grad_w_norm") >= 2.0);
    CHECK(num(row(rows, "pre", 48, 48), "resid_growth") > 2 * num(row(rows, "pre", 6, 6), "resid_growth"));
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

TEST_CASE("depth: the mean-square loss through x_l = 2 x_{l-1} has closed-form rows") {
    // placement none with identity blocks doubles x per block: resid_growth = 2^l, the
    // branch is x_{l-1}, and d mean(y^2) / d x_l = 2 y / n * 2^(L-l).
    const fs::path dir = fresh_dir("depth_closed");
    write_text(dir / "c.json", R"({"name": "c", "dtype": "float64", "data": {"x": {"source": "gaussian", "shape": [5, 4]}},
      "stacks": {"dbl": {"layers": 3, "placement": "none", "block": "identity"}},
      "analyses": [{"type": "depth", "data": ["x"], "stacks": ["dbl"], "loss": "mean_square"}]})");
    auto r = run_normlab("run " + (dir / "c.json").string() + " --out " + (dir / "out").string() + " -q");
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto rows = read_csv(dir / "out" / "depth.csv");
    const double x0 = num(rows[0], "resid_rms"), y = 8 * x0;
    for (long long l = 0; l <= 3; ++l) {
        CHECK(num(rows[l], "resid_growth") == doctest::Approx(std::pow(2.0, l)).epsilon(1e-14));
        CHECK(num(rows[l], "grad_x_rms") == doctest::Approx(2 * y / 20 * std::pow(2.0, 3 - l)).epsilon(1e-14));
        if (l > 0) CHECK(num(rows[l], "branch_rms") == doctest::Approx(x0 * std::pow(2.0, l - 1)).epsilon(1e-14));
    }
    CHECK(r.out.empty());
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
         "/norms/ln/normalized_shape: layernorm \"ln\" on data \"x\": given normalized_shape=[5]"},
        {"half precision", R"({"name": "bad", "dtype": "float16", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "stacks run in float32 or float64"},
        {"norms instead of stacks", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "norms": {"ln": {"type": "layernorm", "axes": [-1]}}, "analyses": [{"type": "depth", "data": ["x"], "norms": ["ln"]}]})",
         "/analyses/0: missing required key \"stacks\""},
        {"stacks in a norm analysis", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [4, 8]}}, "norms": {"ln": {"type": "layernorm", "axes": [-1]}}, "stacks": {"s": {"layers": 1, "placement": "none"}}, "analyses": [{"type": "apply", "data": ["x"], "norms": ["ln"], "stacks": ["s"]}]})",
         "unknown key \"stacks\""},
        {"too big for memory", R"({"name": "bad", "data": {"x": {"source": "gaussian", "shape": [1000, 4096]}}, "stacks": {"s": {"layers": 500, "placement": "none", "block": "ffn", "hidden": 16384}}, "analyses": [{"type": "depth", "data": ["x"], "stacks": ["s"]}]})",
         "/data/x: needs an estimated 288.7 GiB of memory (data \"x\": gaussian [1000, 4096] through its stacks"},
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
