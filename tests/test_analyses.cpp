// The epsilon, padding and equivalence analyses end to end, through configs run by the
// built binary, against closed forms and the public bug-report cases B03, B04 and B13
// (tests/cases, copies of the shared cases with their independently computed answers).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "analysis_util.hpp"
#include "case_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
using nlohmann::json;

namespace {

json config(const json& data, const json& norms, const json& analyses, const std::string& dtype = "float32") {
    return json{{"name", "t"}, {"seed", 0}, {"dtype", dtype}, {"data", data}, {"norms", norms}, {"analyses", analyses}};
}

std::vector<double> saved(const RunResult& r, const std::string& data, const std::string& norm) {
    auto a = normlab::read_npy(r.out / "arrays" / data / norm / "output.npy");
    return std::vector<double>(a.values.begin(), a.values.end());
}

}  // namespace

TEST_CASE("epsilon: LayerNorm on [1,2,3,4] matches the closed forms in float64") {
    // var = 1.25 s^2 for the row scaled by s; x_hat = (x - mean)/sqrt(var + eps) has std
    // sqrt(var/(var+eps)), mean |x_hat| = s/sqrt(var+eps) (mean |x - 2.5| = s), and the
    // output differs from eps = 0 by at most 1.5 s (1/sqrt(var) - 1/sqrt(var + eps)).
    auto r = run_config("eps_closed",
                        config({{"row", {{"source", "values"}, {"values", {{1, 2, 3, 4}}}}}},
                               {{"ln", {{"type", "layernorm"}, {"normalized_shape", {4}}}}},
                               {{{"type", "epsilon"}, {"data", {"row"}}, {"norms", {"ln"}},
                                 {"eps", {0.25, 0.1, 0}}, {"scales", {1, 0.5}}, {"dtypes", {"float64", "float32"}}}}));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "epsilon.csv"))
              .rfind("data,norm,type,dtype,eps,scale,mean_abs_xhat,std_err_mean,std_err_max,max_abs_diff_vs_eps0,"
                     "frac_var_below_10eps", 0) == 0);
    auto rows = r.csv("epsilon");
    CHECK(rows.size() == 12 + 4);  // and per dtype and scale, the default eps (1e-5) row
    CHECK(select(rows, {{"eps_source", "default"}, {"eps", "1e-05"}}).size() == 4);
    CHECK(select(rows, {{"eps_source", "list"}}).size() == 12);
    for (const std::string dt : {"float64", "float32"})
        for (double eps : {0.25, 0.1, 0.0})
            for (double s : {1.0, 0.5}) {
                CAPTURE(dt);
                CAPTURE(eps);
                CAPTURE(s);
                const double tol = std::string(dt) == "float64" ? 1e-12 : 1e-6;
                std::ostringstream es, ss;
                es << (eps == 0 ? "0" : eps == 0.25 ? "0.25" : "0.1");
                ss << (s == 1 ? "1" : "0.5");
                auto row = one(rows, {{"dtype", dt}, {"eps", es.str()}, {"scale", ss.str()}});
                const double var = 1.25 * s * s;
                CHECK(row.at("type") == "layernorm");
                CHECK_NEAR(num(row, "std_err_mean"), 1 - std::sqrt(var / (var + eps)), tol);
                CHECK_NEAR(num(row, "std_err_max"), 1 - std::sqrt(var / (var + eps)), tol);
                CHECK_NEAR(num(row, "mean_abs_xhat"), s / std::sqrt(var + eps), tol);
                CHECK_NEAR(num(row, "max_abs_diff_vs_eps0"), 1.5 * s * (1 / std::sqrt(var) - 1 / std::sqrt(var + eps)), tol);
                CHECK(num(row, "frac_var_below_10eps") == (var < 10 * eps ? 1.0 : 0.0));
                CHECK(num(row, "num_groups") == 1);
                CHECK(num(row, "zero_var_groups") == 0);
            }
}

TEST_CASE("epsilon: RMSNorm uses the root mean square; zero-variance groups are excluded and counted") {
    // RMSNorm on [3, 4]: mean square 12.5, so rms(x_hat) = sqrt(12.5/(12.5+eps)).
    // LayerNorm on a constant row: variance 0, excluded from the eps = 0 comparison.
    auto r = run_config("eps_rms_zero",
                        config({{"x", {{"source", "values"}, {"values", {{3, 4}, {5, 5}}}}}},
                               {{"rms", {{"type", "rmsnorm"}, {"normalized_shape", {2}}}},
                                {"ln", {{"type", "layernorm"}, {"normalized_shape", {2}}}}},
                               {{{"type", "epsilon"}, {"data", {"x"}}, {"norms", {"rms", "ln"}}, {"eps", {2.5, 0}}}},
                               "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = r.csv("epsilon");
    auto rms = one(rows, {{"norm", "rms"}, {"eps", "2.5"}});
    // Row [3,4] errs by 1 - sqrt(12.5/15); row [5,5] (mean square 25) by 1 - sqrt(25/27.5).
    const double e1 = 1 - std::sqrt(12.5 / 15), e2 = 1 - std::sqrt(25 / 27.5);
    CHECK_NEAR(num(rms, "std_err_max"), std::max(e1, e2), 1e-12);
    CHECK_NEAR(num(rms, "std_err_mean"), (e1 + e2) / 2, 1e-12);
    CHECK(num(rms, "zero_var_groups") == 0);

    auto ln = one(rows, {{"norm", "ln"}, {"eps", "2.5"}});
    CHECK(num(ln, "zero_var_groups") == 1);
    CHECK(num(ln, "num_groups") == 2);
    // Only row [3,4] is compared: var 0.25, |x - mean| = 0.5.
    CHECK_NEAR(num(ln, "max_abs_diff_vs_eps0"), 0.5 * (1 / std::sqrt(0.25) - 1 / std::sqrt(2.75)), 1e-12);
    CHECK(num(ln, "frac_var_below_10eps") == 1);
    CHECK(num(ln, "nonfinite_count") == 0);
    auto ln0 = one(rows, {{"norm", "ln"}, {"eps", "0"}});
    CHECK(num(ln0, "nonfinite_count") == 2);   // 0/0 on the constant row, reported
    CHECK(num(ln0, "max_abs_diff_vs_eps0") == 0);
    CHECK(num(ln0, "std_err_max") == doctest::Approx(0).epsilon(1e-12).scale(1));
}

TEST_CASE("B03: Keras eps 1e-3 vs PyTorch 1e-5 in BatchNorm eval (epsilon, equivalence, apply)") {
    const json c = load_case<json>("B03");
    const auto& rv = c["params"]["running_var"];
    const std::vector<double> out5 = c["expected"]["output_eps_1e-5"], out3 = c["expected"]["output_eps_1e-3"];
    const std::vector<double> gap = c["expected"]["relative_gap"];
    // One feature per running_var entry: x = 1 in every channel of a (1, 5) batch.
    json data = {{"b03", {{"source", "values"}, {"values", {{1, 1, 1, 1, 1}}}}}};
    json norms = {{"torch", {{"type", "batchnorm"}, {"training", false}, {"running_var", rv}}},
                  {"keras", {{"type", "batchnorm"}, {"training", false}, {"running_var", rv}, {"convention", "keras"}}}};
    json analyses = {{{"type", "epsilon"}, {"data", {"b03"}}, {"norms", {"torch"}}, {"eps", c["params"]["eps_sweep"]}},
                     {{"type", "equivalence"}, {"data", {"b03"}}, {"norms", {"torch", "keras"}}},
                     {{"type", "apply"}, {"data", {"b03"}}, {"norms", {"torch", "keras"}}, {"save", {"output"}}}};
    auto r = run_config("b03", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);

    const double rel = c["tolerance"]["rel"];
    auto y5 = saved(r, "b03", "torch"), y3 = saved(r, "b03", "keras");
    REQUIRE(y5.size() == 5);
    for (std::size_t k = 0; k < 5; ++k) {
        CHECK(y5[k] == doctest::Approx(out5[k]).epsilon(rel));
        CHECK(y3[k] == doctest::Approx(out3[k]).epsilon(rel));
    }
    // The relative gap of the case is the equivalence analysis' max_rel_diff (relative to norm_a).
    auto eq = one(r.csv("equivalence"), {{"norm_a", "torch"}, {"norm_b", "keras"}});
    CHECK(num(eq, "max_rel_diff") == doctest::Approx(*std::max_element(gap.begin(), gap.end())).epsilon(rel));
    CHECK(num(eq, "max_abs_diff") == doctest::Approx(out5[4] - out3[4]).epsilon(rel));
    CHECK(eq.at("equivalent") == "false");

    // eps = 0 gives 1/sqrt(running_var): 100 for the smallest; the mean of x_hat is the mean output.
    auto rows = r.csv("epsilon");
    auto e5 = one(rows, {{"eps", "1e-05"}, {"eps_source", "list"}}), e3 = one(rows, {{"eps", "0.001"}});
    // The default row repeats the listed 1e-5 (torch BatchNorm's default) with the same numbers.
    CHECK(num(one(rows, {{"eps_source", "default"}}), "max_abs_diff_vs_eps0") == num(e5, "max_abs_diff_vs_eps0"));
    CHECK(num(e5, "max_abs_diff_vs_eps0") == doctest::Approx(100 - out5[4]).epsilon(rel));
    CHECK(num(e3, "max_abs_diff_vs_eps0") == doctest::Approx(100 - out3[4]).epsilon(rel));
    double m5 = 0, m3 = 0;
    for (std::size_t k = 0; k < 5; ++k) m5 += out5[k] / 5, m3 += out3[k] / 5;
    CHECK(num(e5, "mean_abs_xhat") == doctest::Approx(m5).epsilon(rel));
    CHECK(num(e3, "mean_abs_xhat") == doctest::Approx(m3).epsilon(rel));
    // running_var below 10 eps: none of five at 1e-5, two of five (1e-3, 1e-4) at 1e-3.
    CHECK(num(e5, "frac_var_below_10eps") == 0);
    CHECK(num(e3, "frac_var_below_10eps") == doctest::Approx(0.4));
}

TEST_CASE("B04: BatchNorm statistics contaminated by zero padding (padding and apply)") {
    const json c = load_case<json>("B04");
    const json& in = c["input"];
    const double tol = c["tolerance"]["abs"];
    json data = {{"b04", {{"source", "values"}, {"values", in["values"]}, {"channel_axis", -1}, {"lengths", in["lengths"]}}}};
    json norms = {{"unmasked", {{"type", "batchnorm"}, {"eps", c["params"]["eps"]}, {"affine", false}}},
                  {"masked", {{"type", "batchnorm"}, {"eps", c["params"]["eps"]}, {"affine", false}, {"mask", true}}}};
    auto r = run_config("b04", config(data, norms,
                                      {{{"type", "padding"}, {"data", {"b04"}}, {"norms", {"unmasked", "masked"}}},
                                       {{"type", "apply"}, {"data", {"b04"}}, {"norms", {"unmasked", "masked"}}, {"save", {"output"}}}}));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "padding.csv"))
              .rfind("data,norm,type,masked,pad_fraction,mean_contamination_max,var_contamination_rel_max,"
                     "real_output_max_abs_diff,repad_max_abs_diff,padding_invariant", 0) == 0);

    // Outputs at real positions, in order (1,2,3 then 4,5), and at a padded one.
    const std::vector<std::size_t> real = {0, 1, 2, 5, 6};
    auto ym = saved(r, "b04", "masked"), yu = saved(r, "b04", "unmasked");
    const auto& em = c["expected"]["masked"], & eu = c["expected"]["unmasked"];
    double max_diff = 0;
    for (std::size_t k = 0; k < real.size(); ++k) {
        CHECK_NEAR(ym[real[k]], em["output_valid_in_order"][k].get<double>(), tol);
        CHECK_NEAR(yu[real[k]], eu["output_valid_in_order"][k].get<double>(), tol);
        max_diff = std::max(max_diff, std::fabs(em["output_valid_in_order"][k].get<double>() -
                                                eu["output_valid_in_order"][k].get<double>()));
    }
    CHECK_NEAR(yu[3], eu["output_pad"].get<double>(), tol);

    auto rows = r.csv("padding");
    for (const std::string n : {"unmasked", "masked"}) {
        CAPTURE(n);
        auto row = one(rows, {{"norm", n}});
        CHECK(row.at("masked") == (std::string(n) == "masked" ? "true" : "false"));
        CHECK_NEAR(num(row, "pad_fraction"), c["expected"]["padding_effect"]["pad_fraction"].get<double>(), 1e-12);
        CHECK_NEAR(num(row, "mean_excluded_avg"), em["mean"].get<double>(), tol);
        CHECK_NEAR(num(row, "var_excluded_avg"), em["var_biased"].get<double>(), tol);
        CHECK_NEAR(num(row, "mean_included_avg"), eu["mean"].get<double>(), tol);
        CHECK_NEAR(num(row, "var_included_avg"), eu["var_biased"].get<double>(), tol);
        CHECK_NEAR(num(row, "mean_contamination_max"), std::fabs(c["expected"]["padding_effect"]["mean_shift"].get<double>()), tol);
        CHECK_NEAR(num(row, "var_contamination_rel_max"), c["expected"]["padding_effect"]["var_ratio"].get<double>() - 1, tol);
        CHECK_NEAR(num(row, "real_output_max_abs_diff"), max_diff, 1e-5);
        // Other batch-mates change BatchNorm's statistics, masked or not.
        CHECK(row.at("padding_invariant") == "false");
        CHECK(num(row, "repad_max_abs_diff") > 1e-3);
    }
}

TEST_CASE("B13: padding changes InstanceNorm and GroupNorm outputs of real frames unless masked") {
    const json c = load_case<json>("B13");
    const double tol = c["tolerance"]["abs"];
    const json& ii = c["input"]["instancenorm"], & gi = c["input"]["groupnorm"];
    json data = {{"seq", {{"source", "values"}, {"values", ii["values"]}, {"lengths", ii["lengths"]}}},
                 {"grp", {{"source", "values"}, {"values", gi["values"]}, {"lengths", gi["lengths"]}}}};
    json norms = {{"in", {{"type", "instancenorm"}}},
                  {"in_masked", {{"type", "instancenorm"}, {"mask", true}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 1}, {"affine", false}}},
                  {"gn_masked", {{"type", "groupnorm"}, {"num_groups", 1}, {"affine", false}, {"mask", true}}}};
    json analyses = {{{"type", "padding"}, {"data", {"seq"}}, {"norms", {"in", "in_masked"}}},
                     {{"type", "padding"}, {"data", {"grp"}}, {"norms", {"gn", "gn_masked"}}},
                     {{"type", "apply"}, {"data", {"seq"}}, {"norms", {"in", "in_masked"}}, {"save", {"output"}}},
                     {{"type", "apply"}, {"data", {"grp"}}, {"norms", {"gn", "gn_masked"}}, {"save", {"output"}}}};
    auto r = run_config("b13", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const json& ie = c["expected"]["instancenorm"], & ge = c["expected"]["groupnorm"];

    // InstanceNorm (2,1,5): sequence 0 has 3 real frames, sequence 1 has 5.
    auto yu = saved(r, "seq", "in"), ym = saved(r, "seq", "in_masked");
    double in_diff = 0;
    for (std::size_t t = 0; t < 3; ++t) {
        CHECK_NEAR(ym[t], ie["seq0_masked_valid"][t].get<double>(), tol);
        CHECK_NEAR(yu[t], ie["seq0_unmasked_valid"][t].get<double>(), tol);
        in_diff = std::max(in_diff, std::fabs(ie["seq0_masked_valid"][t].get<double>() - ie["seq0_unmasked_valid"][t].get<double>()));
    }
    for (std::size_t t = 0; t < 5; ++t) {
        CHECK_NEAR(ym[5 + t], ie["seq1_any_variant"][t].get<double>(), tol);
        CHECK_NEAR(yu[5 + t], ie["seq1_any_variant"][t].get<double>(), tol);
    }
    auto rows = r.csv("padding");
    for (const std::string n : {"in", "in_masked"}) {
        CAPTURE(n);
        auto row = one(rows, {{"data", "seq"}, {"norm", n}});
        // Sequence 0: mean 1.2 with padding vs 2.0 without; variance 1.36 vs 2/3.
        const double m_in = ie["seq0_unmasked_stats"]["mean"], m_ex = ie["seq0_masked_stats"]["mean"];
        const double v_in = ie["seq0_unmasked_stats"]["var"], v_ex = ie["seq0_masked_stats"]["var"];
        CHECK_NEAR(num(row, "mean_contamination_max"), std::fabs(m_in - m_ex), tol);
        CHECK_NEAR(num(row, "mean_contamination_rel_max"), std::fabs(m_in - m_ex) / m_ex, tol);
        CHECK_NEAR(num(row, "var_contamination_rel_max"), std::fabs(v_in - v_ex) / v_ex, tol);
        CHECK_NEAR(num(row, "real_output_max_abs_diff"), in_diff, 1e-5);
    }
    // "seq0 alone, unpadded, equals seq0 masked": masked InstanceNorm survives re-padding
    // (up to the rounding of a sum over more padded positions).
    auto in_masked = one(rows, {{"data", "seq"}, {"norm", "in_masked"}});
    CHECK(in_masked.at("padding_invariant") == "true");
    CHECK(num(in_masked, "repad_max_abs_diff") <= num(in_masked, "tolerance"));
    CHECK(num(in_masked, "tolerance") < 1e-5);
    CHECK(one(rows, {{"data", "seq"}, {"norm", "in"}}).at("padding_invariant") == "false");

    // GroupNorm (1,2,5), one group: statistics over both channels' real frames.
    auto gu = saved(r, "grp", "gn"), gm = saved(r, "grp", "gn_masked");
    double gn_diff = 0;
    for (std::size_t ch = 0; ch < 2; ++ch)
        for (std::size_t t = 0; t < 3; ++t) {
            const double em = ge["masked"]["valid_output"][ch][t], eu = ge["unmasked"]["valid_output"][ch][t];
            CHECK_NEAR(gm[ch * 5 + t], em, tol);
            CHECK_NEAR(gu[ch * 5 + t], eu, tol);
            gn_diff = std::max(gn_diff, std::fabs(em - eu));
        }
    for (const std::string n : {"gn", "gn_masked"}) {
        CAPTURE(n);
        auto row = one(rows, {{"data", "grp"}, {"norm", n}});
        CHECK_NEAR(num(row, "mean_included_avg"), ge["unmasked"]["mean"].get<double>(), tol);
        CHECK_NEAR(num(row, "mean_excluded_avg"), ge["masked"]["mean"].get<double>(), tol);
        CHECK_NEAR(num(row, "var_included_avg"), ge["unmasked"]["var"].get<double>(), 1e-4);
        CHECK_NEAR(num(row, "var_excluded_avg"), ge["masked"]["var"].get<double>(), 1e-4);
        CHECK_NEAR(num(row, "real_output_max_abs_diff"), gn_diff, 1e-5);
    }
    CHECK(one(rows, {{"data", "grp"}, {"norm", "gn_masked"}}).at("padding_invariant") == "true");
    CHECK(one(rows, {{"data", "grp"}, {"norm", "gn"}}).at("padding_invariant") == "false");
}

TEST_CASE("padding: re-padding leaves LayerNorm over D and RMSNorm exactly unchanged, not BatchNorm or LayerNorm over (T,D)") {
    // Gaussian (B,T,D) with sequence lengths: padded positions hold random values, not zeros.
    json data = {{"seqs", {{"source", "gaussian"}, {"shape", {4, 6, 8}}, {"mean", 1}, {"std", 2}, {"channel_axis", -1},
                           {"lengths", {6, 3, 1, 4}}}},
                 {"toks", {{"source", "tokens"}, {"batch", 5}, {"max_len", 7}, {"dim", 8}}}};
    json norms = {{"ln_d", {{"type", "layernorm"}, {"normalized_shape", {8}}}},
                  {"rms_d", {{"type", "rmsnorm"}, {"normalized_shape", {8}}}},
                  {"bn", {{"type", "batchnorm"}}},
                  {"bn_masked", {{"type", "batchnorm"}, {"mask", true}}},
                  {"ln_td", {{"type", "layernorm"}, {"axes", {1, 2}}}},
                  {"ln_td_masked", {{"type", "layernorm"}, {"axes", {1, 2}}, {"mask", true}}},
                  {"in_masked", {{"type", "instancenorm"}, {"mask", true}}}};
    const json all = {"ln_d", "rms_d", "bn", "bn_masked", "ln_td", "ln_td_masked", "in_masked"};
    for (const std::string dt : {"float32", "float64"}) {
        CAPTURE(dt);
        auto r = run_config("repad_" + dt,
                            config(data, norms, {{{"type", "padding"}, {"data", {"seqs", "toks"}}, {"norms", all}}}, dt));
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        auto rows = r.csv("padding");
        CHECK(rows.size() == 14);
        for (const std::string d : {"seqs", "toks"}) {
            CAPTURE(d);
            // Statistics that never span the padded axis: exactly the same outputs.
            for (const std::string n : {"ln_d", "rms_d"}) {
                CAPTURE(n);
                auto row = one(rows, {{"data", d}, {"norm", n}});
                CHECK(row.at("repad_max_abs_diff") == "0");
                CHECK(row.at("padding_invariant") == "true");
            }
            // Masked statistics over the padded axis: the same real positions, summed in
            // another order among more padded ones, so equal up to a few ulps.
            for (const std::string n : {"ln_td_masked", "in_masked"}) {
                CAPTURE(n);
                auto row = one(rows, {{"data", d}, {"norm", n}});
                CHECK(num(row, "repad_max_abs_diff") <= num(row, "tolerance"));
                CHECK(num(row, "tolerance") < 1e-5);
                CHECK(row.at("padding_invariant") == "true");
            }
            for (const std::string n : {"bn", "bn_masked", "ln_td"}) {
                CAPTURE(n);
                auto row = one(rows, {{"data", d}, {"norm", n}});
                CHECK(num(row, "repad_max_abs_diff") > 1e-3);
                CHECK(row.at("padding_invariant") == "false");
            }
            // Per-position norms never see the padding: no contamination (the masked and
            // unmasked kernels may differ in the last bit of a float64 sum).
            for (const std::string n : {"ln_d", "rms_d"}) {
                CAPTURE(n);
                auto row = one(rows, {{"data", d}, {"norm", n}});
                CHECK(num(row, "real_output_max_abs_diff") <= 1e-6);
                CHECK(num(row, "mean_contamination_max") <= 1e-12);
                CHECK(num(row, "var_contamination_rel_max") <= 1e-12);
            }
            CHECK(num(one(rows, {{"data", d}, {"norm", "ln_td"}}), "real_output_max_abs_diff") > 1e-3);
            // The re-padded batch: two batch-mates, a longer T.
            auto shape = one(rows, {{"data", d}, {"norm", "bn"}}).at("repad_shape");
            CHECK(shape == (d == "seqs" ? "[6,9,8]" : "[7,11,8]"));
        }
    }
}

TEST_CASE("padding: a norm that cannot take the re-padded batch leaves the re-padding columns empty, not nan") {
    // LayerNorm over (T, D) with a given (T, D) weight: the longer batch needs a (T', D)
    // weight, so the re-padding check does not apply (repad_note says why).
    json data = {{"s", {{"source", "gaussian"}, {"shape", {2, 3, 2}}, {"channel_axis", -1}, {"lengths", {3, 2}}}}};
    json norms = {{"ln_td", {{"type", "layernorm"}, {"normalized_shape", {3, 2}}, {"weight", {{"npy", "w.npy"}}}}},
                  {"ln_d", {{"type", "layernorm"}, {"normalized_shape", {2}}}}};
    xt::xarray<double> w = {{1, 2}, {3, 4}, {5, 6}};
    auto r = run_config("repad_na", config(data, norms, {{{"type", "padding"}, {"data", {"s"}}, {"norms", {"ln_td", "ln_d"}}}},
                                           "float64"),
                        {{"w.npy", normlab::npy_bytes(w, normlab::DType::float64)}});
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rows = r.csv("padding");
    auto na = one(rows, {{"norm", "ln_td"}});
    CHECK(na.at("repad_note").rfind("not applicable: ", 0) == 0);
    CHECK(na.at("repad_max_abs_diff").empty());
    CHECK(na.at("padding_invariant").empty());  // neither true nor false: not checked
    CHECK(std::isfinite(num(na, "real_output_max_abs_diff")));
    auto ok = one(rows, {{"norm", "ln_d"}});
    CHECK(ok.at("repad_max_abs_diff") == "0");
    CHECK(ok.at("padding_invariant") == "true");
    for (const auto& row : report_rows(r.out, "padding")) {
        const bool applies = row["repad_note"] == "";
        CHECK((row["repad_max_abs_diff"] == "") == !applies);
        CHECK((row["padding_invariant"] == "") == !applies);
    }
    CHECK_FALSE(html_flags_nonfinite(r.out));
}

TEST_CASE("padding: input errors name the analysis and the data") {
    json data = {{"x", {{"source", "values"}, {"values", {{1, 2}, {3, 4}}}}}};
    json norms = {{"ln", {{"type", "layernorm"}, {"axes", {-1}}}}};
    auto r = run_config("pad_nomask", config(data, norms, {{{"type", "padding"}, {"data", {"x"}}, {"norms", {"ln"}}}}));
    CHECK(r.cli.exit_code == 2);
    CHECK_MESSAGE(r.cli.err.find("/analyses/0/data: padding on data \"x\": needs data with a padding mask") != std::string::npos, r.cli.err);
    // validate refuses it too, before anything runs.
    const CliResult v = run_normlab("validate " + (r.out.parent_path() / "cfg.json").string());
    CHECK(v.exit_code == 2);
    CHECK_MESSAGE(v.err.find("/analyses/0/data: padding on data \"x\": needs data with a padding mask") != std::string::npos, v.err);
    auto r2 = run_config("pad_badkey", config(data, norms, {{{"type", "padding"}, {"data", {"x"}}, {"norms", {"ln"}}, {"batch_mate", 3}}}));
    CHECK(r2.cli.exit_code == 2);
    CHECK_MESSAGE(r2.cli.err.find("/analyses/0/batch_mate: unknown key \"batch_mate\"; did you mean \"batch_mates\"?") != std::string::npos, r2.cli.err);
}

TEST_CASE("equivalence: LayerNorm over D is InstanceNorm on (B,T,D,1); LayerNorm over (T,D) is not") {
    json data = {{"tok", {{"source", "gaussian"}, {"shape", {3, 5, 7}}, {"mean", 4}, {"std", 3}, {"channel_axis", -1}}},
                 {"img", {{"source", "gaussian"}, {"shape", {2, 6, 3, 4}}, {"mean", -2}, {"std", 5}}}};
    json norms = {{"ln_d", {{"type", "layernorm"}, {"normalized_shape", {7}}}},
                  {"in_t", {{"type", "instancenorm"}, {"channel_axis", 1}}},
                  {"ln_td", {{"type", "layernorm"}, {"normalized_shape", {5, 7}}}},
                  {"ln_chw", {{"type", "layernorm"}, {"normalized_shape", {6, 3, 4}}}},
                  {"gn_1", {{"type", "groupnorm"}, {"num_groups", 1}}},
                  {"gn_3", {{"type", "groupnorm"}, {"num_groups", 3}}},
                  {"gn_6", {{"type", "groupnorm"}, {"num_groups", 6}}},
                  {"in", {{"type", "instancenorm"}}}};
    json analyses = {{{"type", "equivalence"}, {"data", {"tok"}}, {"norms", {"ln_d", "in_t", "ln_td"}}, {"reshape", {{"in_t", {0, 0, 0, 1}}}}},
                     {{"type", "equivalence"}, {"data", {"img"}}, {"norms", {"ln_chw", "gn_1", "gn_3", "gn_6", "in"}}}};
    auto r = run_config("equiv", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "equivalence.csv"))
              .rfind("data,norm_a,norm_b,reduction_axes_a,reduction_axes_b,max_abs_diff,max_rel_diff,equivalent", 0) == 0);
    auto rows = r.csv("equivalence");
    CHECK(rows.size() == 3 + 10);
    auto li = one(rows, {{"norm_a", "ln_d"}, {"norm_b", "in_t"}});
    CHECK(num(li, "max_abs_diff") <= 1e-6);
    CHECK(li.at("equivalent") == "true");
    CHECK(li.at("reduction_axes_a") == "[2]");
    CHECK(li.at("reduction_axes_b") == "[2]");   // InstanceNorm's (D, 1) read back in (B,T,D)
    CHECK(li.at("shape_b") == "[3,5,7,1]");
    auto lt = one(rows, {{"norm_a", "ln_d"}, {"norm_b", "ln_td"}});
    CHECK(lt.at("equivalent") == "false");
    CHECK(num(lt, "max_abs_diff") > 0.01);
    CHECK(lt.at("reduction_axes_b") == "[1,2]");
    CHECK(one(rows, {{"norm_a", "in_t"}, {"norm_b", "ln_td"}}).at("equivalent") == "false");

    // Flax's identities: GroupNorm(1) = LayerNorm over (C,H,W); GroupNorm(C) = InstanceNorm.
    auto equivalent = [&](const char* a, const char* b) { return one(rows, {{"norm_a", a}, {"norm_b", b}}).at("equivalent"); };
    CHECK(equivalent("ln_chw", "gn_1") == "true");
    CHECK(equivalent("gn_6", "in") == "true");
    CHECK(num(one(rows, {{"norm_a", "gn_6"}, {"norm_b", "in"}}), "max_abs_diff") <= 1e-6);
    CHECK(equivalent("ln_chw", "gn_3") == "false");
    CHECK(equivalent("gn_3", "in") == "false");
    CHECK(equivalent("ln_chw", "in") == "false");
    auto g3 = one(rows, {{"norm_a", "gn_1"}, {"norm_b", "gn_3"}});
    CHECK(g3.at("reduction_axes_b") == "[1,2,3]");   // the channel axis is split into groups
    CHECK(num(g3, "num_stats_b") == 6);
    CHECK(one(rows, {{"norm_a", "gn_6"}, {"norm_b", "in"}}).at("reduction_axes_a") == "[2,3]");
}

TEST_CASE("equivalence: bad reshape and too few norms are input errors at the analysis") {
    json data = {{"x", {{"source", "gaussian"}, {"shape", {2, 3, 4}}}}};
    json norms = {{"a", {{"type", "layernorm"}, {"axes", {-1}}}}, {"b", {{"type", "instancenorm"}}}};
    auto r = run_config("equiv_bad", config(data, norms, {{{"type", "equivalence"}, {"data", {"x"}}, {"norms", {"a", "b"}},
                                                           {"reshape", {{"b", {0, 5, -1}}}}}}));
    CHECK(r.cli.exit_code == 2);
    CHECK_MESSAGE(r.cli.err.find("/analyses/0/reshape/b: cannot reshape data \"x\" of shape [2, 3, 4] (24 elements) with a -1 dim") != std::string::npos, r.cli.err);
    auto r2 = run_config("equiv_one", config(data, norms, {{{"type", "equivalence"}, {"data", {"x"}}, {"norms", {"a"}}}}));
    CHECK(r2.cli.exit_code == 2);
    CHECK_MESSAGE(r2.cli.err.find("/analyses/0/norms: equivalence compares norms pairwise") != std::string::npos, r2.cli.err);
    auto r3 = run_config("equiv_unknown", config(data, norms, {{{"type", "equivalence"}, {"data", {"x"}}, {"norms", {"a", "b"}},
                                                                 {"reshape", {{"c", {0, 0, 0, 1}}}}}}));
    CHECK(r3.cli.exit_code == 2);
    CHECK_MESSAGE(r3.cli.err.find("/analyses/0/reshape/c: \"c\" is not among this analysis' norms") != std::string::npos, r3.cli.err);
}
