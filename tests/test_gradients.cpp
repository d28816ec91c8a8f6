// The backward pass through the user route: the `gradients` and `jacobian` analyses and
// `apply` with an upstream gradient and saved grad_* arrays, run through the built binary.
// The numbers are checked against what follows from the norms' definitions: a constant
// upstream gradient gives dx = 0 through a centring norm, only BatchNorm in training mixes
// the samples' gradients, and the Jacobian's singular values have closed forms.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "analysis_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
using nlohmann::json;

namespace {

// The norms every test here uses: the four centring norms with their default (ones)
// weights or none, RMSNorm, and BatchNorm in inference.
json norms() {
    return {{"ln", {{"type", "layernorm"}, {"normalized_shape", {12}}}},
            {"ln_plain", {{"type", "layernorm"}, {"normalized_shape", {12}}, {"affine", false}, {"eps", 0}}},
            {"rms", {{"type", "rmsnorm"}, {"normalized_shape", {12}}}},
            {"bn", {{"type", "batchnorm"}}},
            {"bn_eval", {{"type", "batchnorm"}, {"training", false}, {"running_var", {0.5, 1, 2}}}},
            {"in", {{"type", "instancenorm"}}},
            {"gn", {{"type", "groupnorm"}, {"num_groups", 3}}}};
}

json base_config(const std::string& dtype) {
    return {{"name", "grad"},
            {"dtype", dtype},
            {"data", {{"x", {{"source", "gaussian"}, {"shape", {6, 3, 12}}, {"mean", 0.3}, {"std", 1.7}}},
                      {"g", {{"source", "gaussian"}, {"shape", {4, 6, 5}}, {"mean", -1}, {"std", 0.5}}}}},
            {"norms", norms()}};
}

const std::vector<std::string> kOnX = {"ln", "ln_plain", "rms", "bn", "bn_eval", "in"};

}  // namespace

TEST_CASE("gradients: upstream ones gives dx = 0 for the centring norms, not for RMSNorm; only BatchNorm in training mixes samples") {
    for (const std::string dtype : {"float64", "float32"}) {
        CAPTURE(dtype);
        json c = base_config(dtype);
        c["analyses"] = {{{"type", "gradients"}, {"data", {"x"}}, {"norms", kOnX}, {"upstream", "ones"}},
                         {{"type", "gradients"}, {"data", {"g"}}, {"norms", {"gn"}}, {"upstream", "ones"}},
                         {{"type", "gradients"}, {"data", {"x"}}, {"norms", kOnX}},
                         {{"type", "gradients"}, {"data", {"g"}}, {"norms", {"gn"}}, {"upstream", 0.5}}};
        RunResult r = run_config("gradients_" + dtype, c);
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        CHECK(csv_header(read_text(r.out / "gradients.csv")) ==
              "data,norm,type,upstream,grad_input_rms,grad_upstream_rms,grad_ratio,grad_sum_abs_max,"
              "grad_xhat_cos_max,cross_sample_fraction,grad_weight_rms,grad_bias_rms,fd_max_rel_err,empty_groups");
        auto rows = r.csv("gradients");
        REQUIRE(rows.size() == 2 * kOnX.size() + 2);
        // Upstream ones: a constant shift of every group, which a centring norm (in
        // training: batch statistics) removes. dx is then rounding noise.
        for (const std::string n : {"ln", "ln_plain", "bn", "in"}) {
            CAPTURE(n);
            auto row = one(rows, {{"norm", n}, {"upstream", "ones"}});
            CHECK(num(row, "grad_input_rms") < 1e-13);
            CHECK(num(row, "grad_upstream_rms") == 1);
            CHECK(std::isnan(num(row, "grad_sum_abs_max")));  // no direction left in a dx of 0
        }
        CHECK(num(one(rows, {{"norm", "gn"}, {"upstream", "ones"}}), "grad_input_rms") < 1e-13);
        CHECK(num(one(rows, {{"norm", "gn"}, {"upstream", "0.5"}}), "grad_input_rms") < 1e-13);
        // RMSNorm does not centre: the shift reaches dx. BatchNorm in inference has constant
        // statistics: dx = rstd * dy.
        CHECK(num(one(rows, {{"norm", "rms"}, {"upstream", "ones"}}), "grad_input_rms") > 0.05);
        CHECK(num(one(rows, {{"norm", "bn_eval"}, {"upstream", "ones"}}), "grad_input_rms") > 0.5);

        for (const auto& row : rows) {
            CAPTURE(row.at("norm"));
            CAPTURE(row.at("upstream"));
            // Only statistics across samples (BatchNorm in training) mix their gradients.
            if (row.at("norm") == "bn") CHECK(num(row, "cross_sample_fraction") > 0.01);
            else CHECK(num(row, "cross_sample_fraction") == 0);
            CHECK(num(row, "fd_max_rel_err") < 1e-6);
            // Parameter gradients exist with the parameters; a parameter the norm does not
            // have is an empty cell (not applicable), never nan (a computed value).
            const bool affine = row.at("norm") != "ln_plain" && row.at("norm") != "in";
            const bool bias = affine && row.at("norm") != "rms";
            CHECK(row.at("grad_weight_rms").empty() == !affine);
            CHECK(row.at("grad_bias_rms").empty() == !bias);
            if (affine) CHECK(std::isfinite(num(row, "grad_weight_rms")));
            if (bias) CHECK(std::isfinite(num(row, "grad_bias_rms")));
        }
        // Normal upstream: a centring norm's dx sums to 0 over each group; with eps = 0 it is
        // orthogonal to x_hat, as RMSNorm's (eps 0 is not its default: machine eps).
        for (const std::string n : {"ln", "ln_plain", "bn", "in"}) {
            auto row = one(rows, {{"norm", n}, {"upstream", "normal"}});
            CHECK(num(row, "grad_sum_abs_max") < (dtype == "float64" ? 1e-12 : 1e-5));
        }
        auto plain = one(rows, {{"norm", "ln_plain"}, {"upstream", "normal"}});
        CHECK(num(plain, "grad_xhat_cos_max") < (dtype == "float64" ? 1e-12 : 1e-5));
        CHECK(num(one(rows, {{"norm", "rms"}, {"upstream", "normal"}}), "grad_sum_abs_max") > 0.01);
        CHECK(num(one(rows, {{"norm", "bn_eval"}, {"upstream", "normal"}}), "grad_xhat_cos_max") > 0.01);
    }
}

TEST_CASE("gradients: eps leaves a component along x_hat, rstd eps/(var+eps) of the scale direction") {
    json c = base_config("float64");
    c["norms"] = {{"ln0", {{"type", "layernorm"}, {"normalized_shape", {12}}, {"affine", false}, {"eps", 0}}},
                  {"ln1", {{"type", "layernorm"}, {"normalized_shape", {12}}, {"affine", false}, {"eps", 1}}}};
    c["analyses"] = {{{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln0", "ln1"}}, {"fd_check", false}}};
    RunResult r = run_config("gradients_eps", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = r.csv("gradients");
    CHECK(num(one(rows, {{"norm", "ln0"}}), "grad_xhat_cos_max") < 1e-12);
    CHECK(num(one(rows, {{"norm", "ln1"}}), "grad_xhat_cos_max") > 0.01);
    CHECK(one(rows, {{"norm", "ln1"}}).at("fd_max_rel_err").empty());  // not checked: not applicable
    // report.json says the same ("", not "nan"), and report.html flags no cell as non-finite:
    // nothing here is a computed value that is not finite.
    const json report = json::parse(read_text(r.out / "report.json"));
    REQUIRE(report["analyses"][0]["rows"].size() == 2);
    for (const auto& row : report["analyses"][0]["rows"]) {
        CHECK(row["fd_max_rel_err"] == "");
        CHECK(row["grad_weight_rms"] == "");  // affine false
        CHECK(row["grad_bias_rms"] == "");
    }
    CHECK(read_text(r.out / "report.html").find("non-finite cell") == std::string::npos);
}

TEST_CASE("gradients: with eps = 0 a constant group is left out of the finite-difference check, not judged") {
    // Channel 0 and every (sample, channel 0) group are constant: PyTorch's batch_norm and
    // instance_norm make their rstd 0, layer_norm's rows [1, 1, 1] get an infinite rstd.
    // Any step gives such a group a spread and its output jumps, so no difference quotient
    // approaches dx there; the other groups are still checked.
    json c = base_config("float64");
    c["data"] = {{"c", {{"source", "values"}, {"values", {{{1, 1, 1}, {1, 2, 3}}, {{1, 1, 1}, {4, 5, 6}}}}}},
                 {"flat", {{"source", "values"}, {"values", {{{2, 2, 2}, {3, 3, 3}}}}}}};
    c["norms"] = {{"bn", {{"type", "batchnorm"}, {"eps", 0}}},
                  {"in", {{"type", "instancenorm"}, {"eps", 0}}},
                  {"ln", {{"type", "layernorm"}, {"normalized_shape", {3}}, {"eps", 0}}}};
    c["analyses"] = {{{"type", "gradients"}, {"data", {"c", "flat"}}, {"norms", {"bn", "in", "ln"}}}};
    RunResult r = run_config("gradients_eps0", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = r.csv("gradients");
    for (const char* n : {"bn", "in", "ln"}) {
        CAPTURE(n);
        CHECK(num(one(rows, {{"data", "c"}, {"norm", n}}), "fd_max_rel_err") < 1e-6);
        // Every group constant: nothing to check, an empty cell rather than a 0 that would pass.
        CHECK(one(rows, {{"data", "flat"}, {"norm", n}}).at("fd_max_rel_err").empty());
    }
}

TEST_CASE("jacobian: singular values match the closed forms to 1e-9 in float64 (n = 8 and 512)") {
    // Rows of 8 (x: (2, 8)) and of 512 (t: (2, 512)); LayerNorm and RMSNorm without
    // affine, BatchNorm in training over a channel of 8 (b: (4, 3, 2)); LayerNorm with a
    // weight and BatchNorm in inference (the expected x_hat gain includes the scale).
    json c = {{"name", "jac"},
              {"dtype", "float64"},
              {"data", {{"x", {{"source", "gaussian"}, {"shape", {2, 8}}, {"mean", 2}, {"std", 0.7}}},
                        {"t", {{"source", "gaussian"}, {"shape", {2, 512}}, {"std", 1.3}, {"channel_axis", -1}}},
                        {"b", {{"source", "gaussian"}, {"shape", {4, 3, 2}}, {"mean", 1}}}}},
              {"norms",
               {{"ln", {{"type", "layernorm"}, {"axes", {-1}}, {"affine", false}, {"eps", 0.3}}},
                {"rms", {{"type", "rmsnorm"}, {"axes", {-1}}, {"affine", false}, {"eps", 0.3}}},
                {"ln_w", {{"type", "layernorm"}, {"axes", {-1}}, {"eps", 0.1}, {"weight", {{"normal", {{"mean", 1}, {"std", 0.5}}}}}}},
                {"bn", {{"type", "batchnorm"}, {"affine", false}, {"eps", 0.2}}},
                {"bn_eval", {{"type", "batchnorm"}, {"training", false}, {"running_var", {0.5, 1, 2}}}}}},
              {"analyses",
               {{{"type", "jacobian"}, {"data", {"x", "t"}}, {"norms", {"ln", "rms", "ln_w"}}, {"save", {"jacobian_sv"}}},
                {{"type", "jacobian"}, {"data", {"b"}}, {"norms", {"bn", "bn_eval"}}, {"groups", 3}}}}};
    RunResult r = run_config("jacobian_closed_forms", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "jacobian.csv")) ==
          "data,norm,type,group,eps,n,rstd,sv_max,sv_min,rank,gain_ones,gain_xhat,gain_xhat_expected,gain_other");
    auto rows = r.csv("jacobian");
    CHECK(rows.size() == 2 * 3 * 2 + 3 * 2);
    auto rel = [](double a, double b) { return std::fabs(a - b) / std::fabs(b); };
    for (const auto& row : rows) {
        CAPTURE(row.at("data"));
        CAPTURE(row.at("norm"));
        CAPTURE(row.at("group"));
        const double rstd = num(row, "rstd"), n = num(row, "n");
        CHECK(rel(num(row, "gain_xhat"), num(row, "gain_xhat_expected")) < 1e-9);
        if (row.at("norm") == "ln_w") continue;  // the scale mixes the directions
        CHECK(rel(num(row, "sv_max"), rstd) < 1e-9);
        CHECK(rel(num(row, "gain_other"), rstd) < 1e-9);
        if (row.at("norm") == "bn_eval") {  // running statistics: J = rstd I
            CHECK(rel(num(row, "sv_min"), rstd) < 1e-9);
            CHECK(num(row, "rank") == n);
            continue;
        }
        if (row.at("norm") == "rms") {
            CHECK(num(row, "rank") == n);
            CHECK(rel(num(row, "sv_min"), num(row, "gain_xhat")) < 1e-9);
        } else {  // centring: the 1 direction is flattened
            CHECK(num(row, "rank") == n - 1);
            CHECK(num(row, "sv_min") < 1e-9 * rstd);
            CHECK(num(row, "gain_ones") < 1e-9 * rstd);
        }
    }
    // The saved singular values: one row per group, descending; for LayerNorm rstd (n - 2
    // times), rstd eps / (var + eps), 0.
    auto sv = normlab::read_npy(r.out / "arrays" / "t" / "ln" / "jacobian_sv.npy");
    REQUIRE(sv.values.shape(0) == 2);
    REQUIRE(sv.values.shape(1) == 512);
    CHECK(sv.dtype == "float64");
    auto row0 = one(rows, {{"data", "t"}, {"norm", "ln"}, {"group", "0"}});
    const double rstd = num(row0, "rstd");
    for (std::size_t i = 0; i < 510; ++i) CHECK(rel(sv.values(0, i), rstd) < 1e-9);
    CHECK(rel(sv.values(0, 510), num(row0, "gain_xhat_expected")) < 1e-9);
    CHECK(sv.values(0, 511) < 1e-9 * rstd);
}

TEST_CASE("jacobian: a masked norm with batch statistics has no closed form: gain_xhat_expected is empty, not nan") {
    json c = {{"name", "jac_mask"},
              {"dtype", "float64"},
              {"data", {{"s", {{"source", "gaussian"}, {"shape", {2, 3, 2}}, {"channel_axis", -1}, {"lengths", {3, 2}}}}}},
              {"norms", {{"ln_m", {{"type", "layernorm"}, {"axes", {1, 2}}, {"mask", true}}},
                         {"ln", {{"type", "layernorm"}, {"axes", {1, 2}}}}}},
              {"analyses", {{{"type", "jacobian"}, {"data", {"s"}}, {"norms", {"ln_m", "ln"}}}}}};
    RunResult r = run_config("jacobian_masked", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = r.csv("jacobian");
    REQUIRE(rows.size() == 4);
    for (const auto& row : rows) {
        CAPTURE(row.at("norm"));
        CHECK(row.at("gain_xhat_expected").empty() == (row.at("norm") == "ln_m"));
        CHECK(std::isfinite(num(row, "gain_xhat")));
    }
    for (const auto& row : report_rows(r.out, "jacobian"))
        CHECK((row["gain_xhat_expected"] == "") == (row["norm"] == "ln_m"));
    CHECK_FALSE(html_flags_nonfinite(r.out));
}

TEST_CASE("jacobian: groups above the groups a norm has gives a row per group and a note from run and validate") {
    // LayerNorm over the last axis of (2, 3, 12) data has 6 rows; BatchNorm 3 channels.
    json c = base_config("float64");
    c["analyses"] = {{{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"ln", "bn"}}, {"groups", 5}}};
    c["data"]["x"]["shape"] = {2, 3, 12};
    const auto dir = fresh_dir("jacobian_groups_note");
    write_text(dir / "cfg.json", c.dump(2));
    const std::string note = "normlab: note: " + (dir / "cfg.json").string() +
                             ": /analyses/0/groups: jacobian of batchnorm \"bn\" on data \"x\": groups 5, but it has 3 "
                             "statistics groups here (statistics shape [1, 3, 1]); the table has a row for each of them\n";
    CliResult r = run_normlab("run " + (dir / "cfg.json").string() + " --out " + (dir / "out").string());
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK_MESSAGE(r.err.find(note) != std::string::npos, r.err);
    CHECK_MESSAGE(r.err.find("\"ln\"") == std::string::npos, r.err);  // 6 rows: 5 of them are taken
    const auto rows = parse_csv(read_text(dir / "out" / "jacobian.csv"));
    CHECK(std::count_if(rows.begin(), rows.end(), [](const CsvRow& w) { return w.at("norm") == "bn"; }) == 3);
    CHECK(std::count_if(rows.begin(), rows.end(), [](const CsvRow& w) { return w.at("norm") == "ln"; }) == 5);
    const json report = json::parse(read_text(dir / "out" / "report.json"));
    CHECK(std::count(report["notes"].begin(), report["notes"].end(),
                     json(note.substr(15, note.size() - 16))) == 1);  // without "normlab: note: " and "\n"
    CliResult v = run_normlab("validate " + (dir / "cfg.json").string());
    CHECK(v.exit_code == 0);
    CHECK_MESSAGE(v.err == note, v.err);
    // Within the groups there are: no note.
    c["analyses"][0]["groups"] = 3;
    write_text(dir / "cfg.json", c.dump(2));
    CliResult quiet = run_normlab("validate " + (dir / "cfg.json").string());
    CHECK(quiet.exit_code == 0);
    CHECK_MESSAGE(quiet.err.empty(), quiet.err);
    // Nor for the default of 4, which the config did not ask for, on 3 channels.
    c["analyses"][0].erase("groups");
    write_text(dir / "cfg.json", c.dump(2));
    CliResult dflt = run_normlab("validate " + (dir / "cfg.json").string());
    CHECK(dflt.exit_code == 0);
    CHECK_MESSAGE(dflt.err.empty(), dflt.err);
}

TEST_CASE("apply: upstream and saved gradients in the data's and the parameters' shapes and dtypes") {
    // The same seeded normal upstream in apply and gradients; a number upstream scales dx;
    // float16 saves grad_input in float16 and the parameter gradients in float32.
    json c = base_config("float16");
    c["analyses"] = {{{"type", "apply"}, {"data", {"g"}}, {"norms", {"gn"}}, {"save", {"grad_input", "grad_weight", "grad_bias"}}},
                     {{"type", "gradients"}, {"data", {"g"}}, {"norms", {"gn"}}, {"fd_check", false}}};
    RunResult r = run_config("apply_grads_f16", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto dx = normlab::read_npy(r.out / "arrays" / "g" / "gn" / "grad_input.npy");
    auto dw = normlab::read_npy(r.out / "arrays" / "g" / "gn" / "grad_weight.npy");
    auto db = normlab::read_npy(r.out / "arrays" / "g" / "gn" / "grad_bias.npy");
    CHECK(dx.dtype == "float16");
    CHECK(dw.dtype == "float32");
    CHECK(std::vector<std::size_t>(dx.values.shape().begin(), dx.values.shape().end()) == std::vector<std::size_t>{4, 6, 5});
    CHECK(std::vector<std::size_t>(dw.values.shape().begin(), dw.values.shape().end()) == std::vector<std::size_t>{6});
    CHECK(db.values.size() == 6);
    double sq = 0;
    for (double v : dx.values) sq += v * v;
    const double rms_saved = std::sqrt(sq / static_cast<double>(dx.values.size()));
    const double rms_table = num(one(r.csv("gradients"), {{"norm", "gn"}}), "grad_input_rms");
    CHECK(std::fabs(rms_saved - rms_table) <= 1e-12 * rms_table);

    json c2 = base_config("float64");
    c2["analyses"] = {{{"type", "apply"}, {"data", {"x"}}, {"norms", {"rms"}}, {"upstream", "ones"}, {"save", {"grad_input"}}},
                      {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstream", -2.5}, {"save", {"grad_input"}}}};
    RunResult r2 = run_config("apply_grads_const", c2);
    REQUIRE_MESSAGE(r2.cli.exit_code == 0, r2.cli.err);
    auto ones = normlab::read_npy(r2.out / "arrays" / "x" / "rms" / "grad_input.npy").values;
    auto shift = normlab::read_npy(r2.out / "arrays" / "x" / "ln" / "grad_input.npy").values;
    double mx = 0, mo = 0;
    for (double v : shift) mx = std::max(mx, std::fabs(v));
    for (double v : ones) mo = std::max(mo, std::fabs(v));
    CHECK(mx < 1e-13);
    CHECK(mo > 0.05);
}

TEST_CASE("apply: the saved input, weight, bias and upstream redo the step bit for bit from npy files") {
    // Drawn data, a drawn weight and bias and the seeded upstream, saved; a second run from
    // those files alone must give the same output and gradients, bit for bit.
    for (const std::string dtype : {"float32", "bfloat16"}) {
        CAPTURE(dtype);
        json c = {{"name", "redo"}, {"dtype", dtype}, {"seed", 11},
                  {"data", {{"x", {{"source", "gaussian"}, {"shape", {4, 6, 5}}, {"mean", 0.7}, {"std", 1.3}}}}},
                  {"norms", {{"gn", {{"type", "groupnorm"}, {"num_groups", 3},
                                     {"weight", {{"normal", {{"mean", 1}, {"std", 0.3}}}}},
                                     {"bias", {{"normal", {{"mean", 0}, {"std", 0.2}}}}}}}}}};
        const std::vector<std::string> results = {"output", "grad_input", "grad_weight", "grad_bias"};
        json save = results;
        for (const char* w : {"input", "weight", "bias", "upstream"}) save.push_back(w);
        c["analyses"] = {{{"type", "apply"}, {"data", {"x"}}, {"norms", {"gn"}}, {"save", save}}};
        RunResult r = run_config("apply_redo_" + dtype, c);
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        const std::filesystem::path a = r.out / "arrays" / "x" / "gn";
        CHECK(normlab::read_npy(a / "input.npy").dtype == "float32");  // bfloat16 values, in float32 (numpy has no bfloat16)
        CHECK(normlab::read_npy(a / "weight.npy").dtype == "float64");
        CHECK(normlab::read_npy(a / "weight.npy").values.size() == 6);
        json c2 = c;
        c2["seed"] = 12;  // nothing may come from the seed: every input is a file now
        c2["data"] = {{"x", {{"source", "npy"}, {"path", (a / "input.npy").string()}}}};
        c2["norms"]["gn"]["weight"] = {{"npy", (a / "weight.npy").string()}};
        c2["norms"]["gn"]["bias"] = {{"npy", (a / "bias.npy").string()}};
        c2["analyses"][0]["upstream"] = {{"npy", (a / "upstream.npy").string()}};
        c2["analyses"][0]["save"] = results;
        RunResult r2 = run_config("apply_redo2_" + dtype, c2);
        REQUIRE_MESSAGE(r2.cli.exit_code == 0, r2.cli.err);
        for (const auto& what : results) {
            CAPTURE(what);
            const auto one = normlab::read_npy(a / (what + ".npy")).values;
            const auto two = normlab::read_npy(r2.out / "arrays" / "x" / "gn" / (what + ".npy")).values;
            REQUIRE(one.shape() == two.shape());
            CHECK(std::equal(one.begin(), one.end(), two.begin()));
        }
    }
    // A parameter the norm does not have cannot be saved.
    json c = base_config("float32");
    c["analyses"] = {{{"type", "apply"}, {"data", {"x"}}, {"norms", {"rms"}}, {"save", {"bias"}}}};
    RunResult r = run_config("apply_save_no_bias", c);
    CHECK(r.cli.exit_code == 2);
    CHECK(r.cli.err.find("has no bias (rmsnorm: weight only)") != std::string::npos);
}

TEST_CASE("masked_loss: dy is 0 at padding, and a masked norm's gradient on the real rows is that of the real rows alone") {
    // Tokens (3, 4, 5) of lengths 4, 2, 3 under BatchNorm over the features with mask: true.
    // With a loss over real positions only, neither the statistics nor dy see the padding,
    // so the real rows' dx, dweight and dbias are BatchNorm1d's on the (9, 5) batch of real
    // rows with the same dy. So with LayerNorm over the features, whose padded tokens' rows
    // have no real position (no statistics, NaN outputs) and add nothing to its dweight.
    json c = {{"name", "ml"}, {"dtype", "float64"}, {"seed", 3},
              {"data", {{"t", {{"source", "tokens"}, {"batch", 3}, {"max_len", 4}, {"dim", 5}, {"lengths", {4, 2, 3}}}}}},
              {"norms", {{"bn", {{"type", "batchnorm"}, {"channel_axis", -1}, {"mask", true},
                                 {"weight", {1.5, 0.5, 2, 1, 0.7}}, {"bias", {0.1, 0.2, 0.3, 0.4, 0.5}}}},
                         {"ln", {{"type", "layernorm"}, {"normalized_shape", {5}}, {"mask", true},
                                 {"weight", {1.5, 0.5, 2, 1, 0.7}}, {"bias", {0.1, 0.2, 0.3, 0.4, 0.5}}}}}},
              {"analyses", {{{"type", "apply"}, {"data", {"t"}}, {"norms", {"bn", "ln"}}, {"masked_loss", true},
                             {"save", {"input", "upstream", "grad_input", "grad_weight", "grad_bias", "mask"}}},
                            {{"type", "gradients"}, {"data", {"t"}}, {"norms", {"ln"}}, {"masked_loss", true}}}}};
    RunResult r = run_config("masked_loss", c);
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const std::filesystem::path a = r.out / "arrays" / "t" / "bn";
    // The saved mask is the lengths', as numpy bool in (N, T, 1).
    const normlab::NpyArray m = normlab::read_npy(a / "mask.npy");
    CHECK(m.dtype == "bool");
    REQUIRE(m.values.shape() == std::vector<std::size_t>{3, 4, 1});
    for (std::size_t b = 0; b < 3; ++b)
        for (std::size_t t = 0; t < 4; ++t) CHECK(m.values(b, t, 0) == (t < std::vector<std::size_t>{4, 2, 3}[b] ? 1.0 : 0.0));
    const auto x = normlab::read_npy(a / "input.npy").values, dy = normlab::read_npy(a / "upstream.npy").values;
    const std::vector<std::size_t> lengths = {4, 2, 3};
    xt::xarray<double> xr = xt::zeros<double>({std::size_t{9}, std::size_t{5}}), dyr = xr;
    std::vector<std::size_t> real;
    for (std::size_t b = 0, k = 0; b < 3; ++b)
        for (std::size_t t = 0; t < 4; ++t) {
            for (std::size_t j = 0; j < 5; ++j)
                if (t >= lengths[b]) CHECK(dy(b, t, j) == 0);
            if (t >= lengths[b]) continue;
            real.push_back(b * 4 + t);
            for (std::size_t j = 0; j < 5; ++j) xr(k, j) = x(b, t, j), dyr(k, j) = dy(b, t, j);
            ++k;
        }
    const std::filesystem::path dir = fresh_dir("masked_loss_real");
    normlab::write_npy(dir / "x.npy", normlab::Tensor::from_double(xr, normlab::DType::float64));
    normlab::write_npy(dir / "dy.npy", normlab::Tensor::from_double(dyr, normlab::DType::float64));
    json c2 = c;
    c2["data"] = {{"t", {{"source", "npy"}, {"path", (dir / "x.npy").string()}, {"channel_axis", -1}}}};
    c2["norms"]["bn"].erase("mask");
    c2["norms"]["ln"].erase("mask");
    c2["analyses"].erase(1);
    c2["analyses"][0].erase("masked_loss");
    c2["analyses"][0]["save"] = {"grad_input", "grad_weight", "grad_bias"};
    c2["analyses"][0]["upstream"] = {{"npy", (dir / "dy.npy").string()}};
    RunResult r2 = run_config("masked_loss_alone", c2);
    REQUIRE_MESSAGE(r2.cli.exit_code == 0, r2.cli.err);
    for (const char* norm : {"bn", "ln"}) {
        INFO(norm);
        const std::filesystem::path a1 = r.out / "arrays" / "t" / norm, a2 = r2.out / "arrays" / "t" / norm;
        const auto dx = normlab::read_npy(a1 / "grad_input.npy").values, dx2 = normlab::read_npy(a2 / "grad_input.npy").values;
        double worst = 0;
        for (std::size_t k = 0; k < real.size(); ++k)
            for (std::size_t j = 0; j < 5; ++j) worst = std::max(worst, std::fabs(dx.data()[real[k] * 5 + j] - dx2(k, j)));
        CHECK(worst < 1e-14);
        // The padded tokens' dx: 0 (dy is 0 there)
        for (std::size_t b = 0; b < 3; ++b)
            for (std::size_t t = lengths[b]; t < 4; ++t)
                for (std::size_t j = 0; j < 5; ++j) CHECK(dx(b, t, j) == 0);
        for (const char* p : {"grad_weight.npy", "grad_bias.npy"}) {
            const auto g1 = normlab::read_npy(a1 / p).values, g2 = normlab::read_npy(a2 / p).values;
            CHECK(xt::allclose(g1, g2, 1e-13, 1e-14));
        }
    }
    // The gradients table: three padded tokens, three groups without a real position, and a
    // finite weight gradient.
    const auto rows = r.csv("gradients");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].at("empty_groups") == "3");
    CHECK(std::isfinite(std::stod(rows[0].at("grad_weight_rms"))));
    // Without a padding mask there is nothing to leave out: refused by validate.
    json c3 = base_config("float32");
    c3["analyses"] = {{{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln"}}, {"masked_loss", true}}};
    RunResult r3 = run_config("masked_loss_no_mask", c3);
    CHECK(r3.cli.exit_code == 2);
    CHECK(r3.cli.err.find("/analyses/0/masked_loss: gradients on data \"x\": masked_loss zeroes dy at padded "
                          "positions, but the data has no padding mask") != std::string::npos);
}

TEST_CASE("gradients, jacobian and apply's gradient keys: bad input is refused by validate, exit 2, one line") {
    const std::string dy_bytes = normlab::npy_bytes(xt::zeros<double>({2, 3}), normlab::DType::float64);
    struct Bad {
        const char* name;
        json analysis;
        std::vector<std::string> expect;
    };
    std::vector<Bad> cases = {
        {"upstream_word", {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstream", "zeros"}},
         {"/analyses/0/upstream", "unknown upstream \"zeros\""}},
        {"upstream_type", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstream", {1, 2}}},
         {"/analyses/0/upstream", "expected \"normal\", \"ones\", a number or {\"npy\": path}, but got array"}},
        {"upstream_missing_file", {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstream", {{"npy", "none.npy"}}}},
         {"/analyses/0/upstream/npy", "none.npy"}},
        {"upstream_shape", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstream", {{"npy", "dy.npy"}}}, {"save", {"grad_input"}}},
         {"/analyses/0/upstream/npy", "apply on data \"x\": upstream gradient of shape [2, 3], but the data has shape [6, 3, 12]"}},
        {"grad_weight_without_affine", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln_plain"}}, {"save", {"grad_weight"}}},
         {"/analyses/0/save/0", "layernorm \"ln_plain\" has no weight (affine is false)"}},
        {"grad_bias_rmsnorm", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"rms"}}, {"save", {"grad_input", "grad_bias"}}},
         {"/analyses/0/save/1", "rmsnorm \"rms\" has no bias (rmsnorm: weight only)"}},
        {"save_unknown", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"save", {"grad_x"}}},
         {"/analyses/0/save/0", "cannot save \"grad_x\""}},
        {"save_mask_without_one", {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln"}}, {"save", {"output", "mask"}}},
         {"/analyses/0/save/1", "apply on data \"x\": cannot save its padding mask, it has none"}},
        {"fd_check_type", {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln"}}, {"fd_check", "yes"}},
         {"/analyses/0/fd_check"}},
        {"gradients_unknown_key", {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln"}}, {"upstrem", "ones"}},
         {"/analyses/0", "upstrem", "upstream"}},
        {"jacobian_groups", {{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"ln"}}, {"groups", 0}},
         {"/analyses/0/groups", "groups must be >= 1, but got 0"}},
        {"jacobian_max_elements", {{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"bn"}}, {"max_elements", 10}},
         {"/analyses/0/max_elements", "batchnorm \"bn\" on data \"x\": its groups have 72 elements, more than max_elements (10)"}},
        {"jacobian_save", {{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"ln"}}, {"save", {"output"}}},
         {"/analyses/0/save/0", "cannot save \"output\" (expected jacobian_sv)"}},
    };
    for (const auto& b : cases) {
        CAPTURE(b.name);
        json c = base_config("float64");
        c["analyses"] = {b.analysis};
        const auto dir = fresh_dir(std::string("grad_bad_") + b.name);
        write_text(dir / "cfg.json", c.dump(2));
        write_text(dir / "dy.npy", dy_bytes);
        for (const char* cmd : {"validate ", "run "}) {
            CliResult r = run_normlab(cmd + (dir / "cfg.json").string() + (std::string(cmd) == "run " ? " --out " + (dir / "out").string() : ""));
            CHECK(r.exit_code == 2);
            for (const auto& e : b.expect) CHECK_MESSAGE(r.err.find(e) != std::string::npos, "missing \"" << e << "\" in: " << r.err);
            CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
            CHECK_FALSE(std::filesystem::exists(dir / "out"));
        }
    }
}
