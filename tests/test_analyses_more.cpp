// The invariance, batch_dependence and train_eval analyses end to end with known answers;
// the batch helpers they share (analysis/batch_ops) as units; every example config runs.
#include <doctest/doctest.h>

#include <cmath>

#include <xtensor/xadapt.hpp>

#include "analysis/batch_ops.hpp"
#include "analysis/common.hpp"
#include "analysis_util.hpp"
#include "data/npy.hpp"

using namespace normlab_test;
using nlohmann::json;

namespace {

const std::string kSrc = NORMLAB_SOURCE_DIR;

json config(const json& data, const json& norms, const json& analyses, const std::string& dtype = "float32") {
    return json{{"name", "t"}, {"seed", 3}, {"dtype", dtype}, {"data", data}, {"norms", norms}, {"analyses", analyses}};
}

// Sample 0's output under BatchNorm in training (weight 1, bias 0, eps) in float64, when a
// batch holds `samples` in order: each sample a list of positions of C values, whose first
// `lengths[i]` positions are real (the statistics are taken over those only).
// Returns sample 0's outputs, position by position then channel by channel.
std::vector<double> batchnorm_first(const std::vector<std::vector<std::vector<double>>>& samples,
                                    const std::vector<std::size_t>& lengths, double eps) {
    const std::size_t C = samples.at(0).at(0).size();
    std::vector<double> mean(C, 0), var(C, 0);
    std::size_t count = 0;
    for (std::size_t i = 0; i < samples.size(); ++i)
        for (std::size_t t = 0; t < lengths.at(i); ++t, ++count)
            for (std::size_t c = 0; c < C; ++c) mean[c] += samples[i][t][c];
    for (double& m : mean) m /= static_cast<double>(count);
    for (std::size_t i = 0; i < samples.size(); ++i)
        for (std::size_t t = 0; t < lengths[i]; ++t)
            for (std::size_t c = 0; c < C; ++c) var[c] += (samples[i][t][c] - mean[c]) * (samples[i][t][c] - mean[c]);
    std::vector<double> y;
    for (const auto& pos : samples[0])
        for (std::size_t c = 0; c < C; ++c) y.push_back((pos[c] - mean[c]) / std::sqrt(var[c] / static_cast<double>(count) + eps));
    return y;
}

// max |a - b| over positions.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b.at(i)));
    return m;
}

normlab::Batch make(const std::vector<double>& v, const normlab::Shape& s, std::size_t channel_axis) {
    normlab::Batch b;
    b.name = "b";
    xt::xarray<double> x = xt::adapt(v, s);
    b.x = normlab::Tensor::from_double(x, normlab::DType::float64);
    b.channel_axis = channel_axis;
    return b;
}

}  // namespace

TEST_CASE("output pool: a step's buffers pass to the next step of the same size and dtype") {
    // What lets sweep points write into warm memory: the run installs a pool, and each
    // forward step takes a free output of its size from it and gives it back when done.
    auto batch = [](std::size_t rows, normlab::DType dtype = normlab::DType::float32) {
        normlab::Batch b;
        b.name = "x";
        b.channel_axis = 1;
        xt::xarray<double> v = xt::xarray<double>::from_shape({rows, 64});
        for (std::size_t i = 0; i < v.size(); ++i) v.data()[i] = std::sin(static_cast<double>(i)) * 3 + 1;
        b.x = normlab::Tensor::from_double(v, dtype);
        return b;
    };
    normlab::NormDef d;
    d.name = "ln";
    d.type = normlab::NormType::layernorm;
    d.normalized_shape = std::vector<long long>{64};
    const normlab::Batch b4 = batch(4), b5 = batch(5);
    const xt::xarray<float> expect = normlab::apply_norm(d, normlab::DType::float32, b4).fwd.y.f32;
    CHECK(normlab::current_output_pool() == nullptr);
    normlab::OutputPool pool;
    {
        normlab::OutputPoolScope scope(pool);
        CHECK(normlab::current_output_pool() == &pool);
        const float* first = nullptr;
        {
            normlab::Step s = normlab::apply_norm(d, normlab::DType::float32, b4);
            first = s.fwd.y.f32.data();
        }
        normlab::Step other = normlab::apply_norm(d, normlab::DType::float32, b5);  // another size: fresh
        CHECK(other.fwd.y.f32.data() != first);
        normlab::Step again = normlab::apply_norm(d, normlab::DType::float32, b4);
        CHECK(again.fwd.y.f32.data() == first);
        CHECK(again.fwd.y.f32 == expect);  // the same bits in recycled memory
        // another dtype, same element count: fresh
        normlab::Step dbl = normlab::apply_norm(d, normlab::DType::float64, batch(4, normlab::DType::float64));
        CHECK(dbl.fwd.y.dtype == normlab::DType::float64);
        CHECK(dbl.fwd.y.f64.size() == 4 * 64);
    }
    CHECK(normlab::current_output_pool() == nullptr);

    // Across sweep points: a miss drops what earlier points gave back (a point whose shape
    // changed must not hold its predecessors' outputs while it allocates its own), and keeps
    // what the current point gave back (data entries of other sizes alternate in a point).
    normlab::OutputPool points;
    normlab::OutputPoolScope scope(points);
    const normlab::Batch b6 = batch(6);
    { normlab::Step s = normlab::apply_norm(d, normlab::DType::float32, b4); }
    CHECK(points.size() == 1);
    points.next_point();
    { normlab::Step s = normlab::apply_norm(d, normlab::DType::float32, b4); }  // a hit
    {
        normlab::Step s = normlab::apply_norm(d, normlab::DType::float32, b5);  // a miss in the same point
        CHECK(points.size() == 1);
    }
    CHECK(points.size() == 2);
    points.next_point();
    {
        normlab::Step s = normlab::apply_norm(d, normlab::DType::float32, b4);  // a hit keeps the rest
        CHECK(points.size() == 1);
        normlab::Step t = normlab::apply_norm(d, normlab::DType::float32, b6);  // a miss: b5's output dropped
        CHECK(points.size() == 0);
        CHECK(t.fwd.y.f32.size() == 6 * 64);
    }
    CHECK(points.size() == 2);
}

TEST_CASE("invariance: which norm is invariant to which scale and shift (the textbook table)") {
    json data = {{"img", {{"source", "gaussian"}, {"shape", {6, 4, 3, 3}}, {"mean", 2}, {"std", 3}}}};
    json norms = {{"bn", {{"type", "batchnorm"}}},
                  {"bn_eval", {{"type", "batchnorm"}, {"training", false}}},
                  {"ln", {{"type", "layernorm"}, {"normalized_shape", {4, 3, 3}}}},
                  {"in", {{"type", "instancenorm"}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 2}}},
                  {"rms", {{"type", "rmsnorm"}, {"normalized_shape", {4, 3, 3}}}}};
    auto r = run_config("invariance", config(data, norms, {{{"type", "invariance"}, {"data", {"img"}},
                                                            {"norms", {"bn", "bn_eval", "ln", "in", "gn", "rms"}},
                                                            {"scale_range", {1.5, 3}}, {"shift_range", {1, 4}}}}));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "invariance.csv")).rfind("data,norm,type,transform,granularity,max_abs_diff,invariant", 0) == 0);
    auto rows = r.csv("invariance");
    CHECK(rows.size() == 6 * 6);
    // Expected verdicts per norm: scale batch/sample/channel, then shift batch/sample/channel.
    const std::map<std::string, std::string> expected = {
        {"bn", "TFT TFT"}, {"bn_eval", "FFF FFF"}, {"ln", "TTF TTF"},
        {"in", "TTT TTT"}, {"gn", "TTF TTF"},      {"rms", "TTF FFF"}};
    const std::string gran[] = {"batch", "sample", "channel"};
    for (const auto& [norm, verdicts] : expected)
        for (int t = 0; t < 2; ++t)
            for (int g = 0; g < 3; ++g) {
                const std::string transform = t == 0 ? "scale" : "shift";
                CAPTURE(norm);
                CAPTURE(transform);
                CAPTURE(gran[g]);
                auto row = one(rows, {{"norm", norm}, {"transform", transform}, {"granularity", gran[g]}});
                const bool inv = verdicts[static_cast<std::size_t>(t * 4 + g)] == 'T';
                CHECK(row.at("invariant") == (inv ? "true" : "false"));
                if (inv) {
                    // Exact with eps = 0 up to float64 rounding; eps and float32 leave a little.
                    CHECK(num(row, "max_abs_diff_eps0") <= 1e-12);
                    CHECK(num(row, "max_abs_diff") <= 1e-4);
                } else {
                    CHECK(num(row, "max_abs_diff_eps0") > 1e-2);
                    CHECK(num(row, "max_abs_diff") > 1e-2);
                }
            }
}

TEST_CASE("invariance: eps makes scale invariance approximate, by about |x_hat| eps/(2 var) (1 - 1/a^2)") {
    // LayerNorm on [1,2,3,4] (var 1.25) with eps 0.125: scaling the row by a changes the
    // output from (x-m)/sqrt(v+eps) to (x-m)/sqrt(v+eps/a^2). With the scale range pinned to
    // [2, 2] the largest change is at |x - m| = 1.5.
    json data = {{"row", {{"source", "values"}, {"values", {{1, 2, 3, 4}}}}}};
    json norms = {{"ln", {{"type", "layernorm"}, {"normalized_shape", {4}}, {"eps", 0.125}}}};
    auto r = run_config("invariance_eps", config(data, norms, {{{"type", "invariance"}, {"data", {"row"}}, {"norms", {"ln"}},
                                                                {"scale_range", {2, 2}}}}, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto row = one(r.csv("invariance"), {{"transform", "scale"}, {"granularity", "batch"}});
    const double expected = 1.5 / std::sqrt(1.25 + 0.125 / 4) - 1.5 / std::sqrt(1.25 + 0.125);
    CHECK(num(row, "max_abs_diff") == doctest::Approx(expected).epsilon(1e-12));
    CHECK(num(row, "max_abs_diff_f64") == doctest::Approx(expected).epsilon(1e-12));
    CHECK(row.at("invariant") == "true");
    CHECK(num(row, "eps") == 0.125);
}

TEST_CASE("batch_dependence: only BatchNorm in training depends on batch-mates; a batch of one is reported") {
    json data = {{"feat", {{"source", "gaussian"}, {"shape", {5, 6}}, {"mean", 1}, {"std", 2}}},
                 {"img", {{"source", "gaussian"}, {"shape", {3, 2, 4, 4}}}}};
    json norms = {{"bn", {{"type", "batchnorm"}}},
                  {"bn_eval", {{"type", "batchnorm"}, {"training", false}}},
                  {"ln", {{"type", "layernorm"}, {"axes", {-1}}}},
                  {"rms", {{"type", "rmsnorm"}, {"axes", {-1}}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 3}}},
                  {"gn2", {{"type", "groupnorm"}, {"num_groups", 2}}},
                  {"in", {{"type", "instancenorm"}}},
                  {"ln_img", {{"type", "layernorm"}, {"axes", {1, 2, 3}}}}};
    json analyses = {{{"type", "batch_dependence"}, {"data", {"feat"}}, {"norms", {"bn", "bn_eval", "ln", "rms", "gn"}},
                      {"sizes", {1, 2, 7}}, {"sample", 2}},
                     {{"type", "batch_dependence"}, {"data", {"img"}}, {"norms", {"bn", "gn2", "in", "ln_img"}}, {"sizes", {1, 3, 9}}}};
    auto r = run_config("batch_dep", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "batch_dependence.csv")) ==
          "data,norm,type,batch_size,max_abs_diff,batch_dependent,status,sample,kind,mates,replicas");
    auto rows = r.csv("batch_dependence");
    CHECK(rows.size() == 5 * 3 + 4 * 3);
    for (const auto& row : rows) CHECK(row.at("mates") == "drawn");  // the default
    for (const std::string n : {"bn_eval", "ln", "rms", "gn"})
        for (const std::string s : {"1", "2", "7"}) {
            CAPTURE(n);
            CAPTURE(s);
            auto row = one(rows, {{"data", "feat"}, {"norm", n}, {"batch_size", s}});
            CHECK(row.at("max_abs_diff") == "0");
            CHECK(row.at("batch_dependent") == "false");
            CHECK(row.at("status") == "ok");
            CHECK(row.at("sample") == "2");
        }
    for (const std::string n : {"gn2", "in", "ln_img"})
        for (const std::string s : {"1", "3", "9"}) {
            CAPTURE(n);
            CAPTURE(s);
            CHECK(one(rows, {{"data", "img"}, {"norm", n}, {"batch_size", s}}).at("max_abs_diff") == "0");
        }
    // (N, C) data: alone, BatchNorm has one value per channel, which PyTorch refuses.
    auto alone = one(rows, {{"data", "feat"}, {"norm", "bn"}, {"batch_size", "1"}});
    CHECK(alone.at("max_abs_diff").empty());  // refused: no difference computed (not nan)
    CHECK(alone.at("batch_dependent") == "true");
    CHECK_MESSAGE(alone.at("status").rfind("error: batchnorm \"bn\" on data \"feat\": in training mode: one value per channel", 0) == 0,
                  alone.at("status"));
    for (const std::string s : {"2", "7"}) {
        auto row = one(rows, {{"data", "feat"}, {"norm", "bn"}, {"batch_size", s}});
        CHECK(num(row, "max_abs_diff") > 1e-3);
        CHECK(row.at("batch_dependent") == "true");
    }
    // (N, C, H, W) data: alone, BatchNorm still has 16 values per channel, and they differ.
    auto img1 = one(rows, {{"data", "img"}, {"norm", "bn"}, {"batch_size", "1"}});
    CHECK(img1.at("status") == "ok");
    CHECK(num(img1, "max_abs_diff") > 1e-3);
    // report.json: "" where the layer refused; report.html flags nothing as non-finite.
    for (const auto& row : report_rows(r.out, "batch_dependence"))
        CHECK((row["max_abs_diff"] == "") == (row["status"] != "ok"));
    CHECK_FALSE(html_flags_nonfinite(r.out));
}

TEST_CASE("batch_dependence: BatchNorm's difference is the one its batch statistics predict") {
    // Sample 0 of [[0, 10], [4, 10]] normalised in the given batch: channel 0 gives -1
    // (mean 2, var 4; eps 0); channel 1 is constant (0/0 in every batch). At batch size 3 its
    // two batch-mates are drawn N(mean_c, std_c) = N(2, 2) in channel 0 and are exactly 10 in
    // channel 1 (std 0). The test recomputes those draws with the same seeded stream.
    json data = {{"x", {{"source", "values"}, {"values", {{0, 10}, {4, 10}}}}}};
    json norms = {{"bn", {{"type", "batchnorm"}, {"eps", 0}}}};
    auto r = run_config("batch_dep_known", config(data, norms, {{{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"bn"}},
                                                                 {"sizes", {3}}}}, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    normlab::Batch b = make({0, 10, 4, 10}, {2, 2}, 1);
    normlab::Rng rng(normlab::derive_seed(3, "batch_dependence/x/3"));
    normlab::Batch mates = normlab::gaussian_like(b, 2, rng, normlab::DType::float64);
    const double m1 = mates.x.f64(0, 0), m2 = mates.x.f64(1, 0);
    CHECK(mates.x.f64(0, 1) == 10);
    CHECK(mates.x.f64(1, 1) == 10);
    // Channel 0 of the batch [0, m1, m2]: biased batch statistics.
    const double mean = (m1 + m2) / 3;
    const double var = (mean * mean + (m1 - mean) * (m1 - mean) + (m2 - mean) * (m2 - mean)) / 3;
    const double expected = std::fabs(-mean / std::sqrt(var) - (-1.0));
    CHECK(expected > 1e-3);
    auto row = one(r.csv("batch_dependence"), {{"batch_size", "3"}});
    CHECK(num(row, "max_abs_diff") == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("batch_dependence, mates data: BatchNorm's difference is the one the data's own samples predict") {
    // Sample 1 of five (N, C) samples whose channels are far from normal (outliers of 40 and
    // 30): at size n < N its batch is [x1, x0, x2, ...], the first n - 1 others in order; at
    // N the given batch. From
    // size 3 on, drawn mates give other numbers, so the exact match there could not come from
    // draws (at size 2 the sample normalises to about +-1 beside any mate).
    const std::vector<std::vector<double>> x = {{0, 1}, {4, -2}, {40, 3}, {-6, 5}, {1, 30}};
    json data = {{"x", {{"source", "values"}, {"values", x}}}};
    json norms = {{"bn", {{"type", "batchnorm"}}}};
    json analyses = {{{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"bn"}}, {"sizes", {1, 2, 3, 4, 5}},
                      {"sample", 1}, {"mates", "data"}},
                     {{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"bn"}}, {"sizes", {3, 4}},
                      {"sample", 1}, {"mates", "drawn"}}};
    auto r = run_config("batch_dep_data_mates", config(data, norms, analyses, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("batch_dependence");
    CHECK(rows.size() == 5 + 2);
    // Each sample is one position of C values, all real.
    auto batch = [&](std::vector<std::size_t> order) {
        std::vector<std::vector<std::vector<double>>> b;
        for (std::size_t i : order) b.push_back({x[i]});
        return b;
    };
    const std::vector<double> ref = batchnorm_first(batch({1, 0, 2, 3, 4}), {1, 1, 1, 1, 1}, 1e-5);  // the given batch
    // One value per channel: refused, as PyTorch does.
    auto alone = one(rows, {{"mates", "data"}, {"batch_size", "1"}});
    CHECK(alone.at("max_abs_diff").empty());
    CHECK(alone.at("status").rfind("error: ", 0) == 0);
    const std::map<std::string, std::vector<std::size_t>> orders = {
        {"2", {1, 0}}, {"3", {1, 0, 2}}, {"4", {1, 0, 2, 3}}};
    // All N samples: the given batch itself, the sample at its own place, so exactly 0 (the
    // sample first, the sums would round differently).
    const auto all = one(rows, {{"mates", "data"}, {"batch_size", "5"}});
    CHECK(all.at("max_abs_diff") == "0");
    CHECK(all.at("batch_dependent") == "false");
    for (const auto& [n, order] : orders) {
        CAPTURE(n);
        const double expected = max_abs_diff(batchnorm_first(batch(order), std::vector<std::size_t>(order.size(), 1), 1e-5), ref);
        auto row = one(rows, {{"mates", "data"}, {"batch_size", n}});
        CHECK(row.at("status") == "ok");
        CHECK(row.at("kind") == "size");
        CHECK(num(row, "max_abs_diff") == doctest::Approx(expected).epsilon(1e-12));
        CHECK(expected > 0.1);
        CHECK(row.at("batch_dependent") == "true");
        // Drawn mates move the sample elsewhere.
        if (n != "2") CHECK(std::fabs(num(one(rows, {{"mates", "drawn"}, {"batch_size", n}}), "max_abs_diff") - expected) > 0.1);
    }
}

TEST_CASE("batch_dependence, mates data: per-sample norms give exactly 0; the whole batch in order gives 0") {
    json data = {{"img", {{"source", "gaussian"}, {"shape", {4, 4, 3, 3}}, {"mean", 2}, {"std", 3}}}};
    json norms = {{"bn", {{"type", "batchnorm"}}},
                  {"bn_eval", {{"type", "batchnorm"}, {"training", false}}},
                  {"ln", {{"type", "layernorm"}, {"axes", {1, 2, 3}}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 2}}},
                  {"in", {{"type", "instancenorm"}}},
                  {"rms", {{"type", "rmsnorm"}, {"axes", {-1}}}}};
    json analyses = {{{"type", "batch_dependence"}, {"data", {"img"}}, {"norms", {"bn_eval", "ln", "gn", "in", "rms"}},
                      {"sizes", {1, 2, 3, 4}}, {"sample", 2}, {"mates", "data"}},
                     {{"type", "batch_dependence"}, {"data", {"img"}}, {"norms", {"bn"}}, {"sizes", {2, 4}},
                      {"mates", "data"}}};
    auto r = run_config("batch_dep_data_mates_zero", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("batch_dependence");
    CHECK(rows.size() == 5 * 4 + 2);
    for (const std::string n : {"bn_eval", "ln", "gn", "in", "rms"})
        for (const std::string s : {"1", "2", "3", "4"}) {
            CAPTURE(n);
            CAPTURE(s);
            auto row = one(rows, {{"norm", n}, {"batch_size", s}});
            CHECK(row.at("max_abs_diff") == "0");
            CHECK(row.at("batch_dependent") == "false");
            CHECK(row.at("mates") == "data");
            CHECK(row.at("sample") == "2");
        }
    // Sample 0 beside the next three samples is the given batch itself.
    CHECK(one(rows, {{"norm", "bn"}, {"batch_size", "4"}}).at("max_abs_diff") == "0");
    CHECK(num(one(rows, {{"norm", "bn"}, {"batch_size", "2"}}), "max_abs_diff") > 1e-3);
}

TEST_CASE("batch_dependence, replicas: every count must divide the batch; per-sample norms give exactly 0") {
    // (16, 6) data: R = 1, 2, 4 split it into equal slices; LayerNorm and BatchNorm in eval
    // do not depend on the batch, synchronised or not.
    json data = {{"x", {{"source", "gaussian"}, {"shape", {16, 6}}, {"mean", 1}, {"std", 2}}}};
    json norms = {{"ln", {{"type", "layernorm"}, {"normalized_shape", {6}}}},
                  {"bn_eval", {{"type", "batchnorm"}, {"training", false}}}};
    json analysis = {{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"ln", "bn_eval"}}, {"sizes", {2}},
                     {"replicas", {1, 2, 4}}};
    auto r = run_config("batch_dep_replicas_zero", config(data, norms, json::array({analysis})));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("batch_dependence");
    CHECK(rows.size() == 2 * (1 + 3 * 2));
    for (const auto& row : rows) {
        CHECK(row.at("max_abs_diff") == "0");
        CHECK(row.at("batch_dependent") == "false");
        CHECK(row.at("status") == "ok");
    }
    // R = 3 does not divide N = 16: an input error at that element of "replicas", before any
    // row is written (it used to give error rows of batch size 5 marked batch_dependent).
    analysis["replicas"] = {1, 2, 4, 3};
    auto bad = run_config("batch_dep_replicas_uneven", config(data, norms, json::array({analysis})));
    CHECK(bad.cli.exit_code == 2);
    CHECK_MESSAGE(bad.cli.err.find("/analyses/0/replicas/3: batch_dependence on data \"x\": replicas 3 does not divide "
                                   "the batch of N = 16 samples into equal slices (use 1, 2, 4, 8 or 16)") != std::string::npos,
                  bad.cli.err);
    CHECK_FALSE(std::filesystem::exists(bad.out));
}

TEST_CASE("batch_dependence, mates data: the batch-mates bring their own mask rows") {
    // (B, T, D) = (4, 3, 2) with lengths [1, 2, 3, 2]: sample 2 is all real, its mates are
    // padded with 1000, which a masked BatchNorm must not see. At size 3 the batch is
    // [x2, x0, x1]: statistics over x2's three positions, x0's first and x1's first two.
    const double P = 1000;
    const std::vector<std::vector<std::vector<double>>> x = {{{1, -1}, {P, P}, {P, P}},
                                                             {{3, 2}, {-2, 0}, {P, P}},
                                                             {{0, 4}, {5, 1}, {2, -3}},
                                                             {{7, 7}, {-1, 6}, {P, P}}};
    const std::vector<std::size_t> len = {1, 2, 3, 2};
    json data = {{"seq", {{"source", "values"}, {"values", x}, {"channel_axis", -1}, {"lengths", len}}}};
    json norms = {{"bn", {{"type", "batchnorm"}, {"mask", true}}}, {"ln", {{"type", "layernorm"}, {"axes", {-1}}, {"mask", true}}}};
    auto r = run_config("batch_dep_data_mates_mask",
                        config(data, norms, {{{"type", "batch_dependence"}, {"data", {"seq"}}, {"norms", {"bn", "ln"}},
                                              {"sizes", {1, 2, 3, 4}}, {"sample", 2}, {"mates", "data"}}}, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("batch_dependence");
    auto take = [&](const std::vector<std::size_t>& order, std::vector<std::vector<std::vector<double>>>& b,
                    std::vector<std::size_t>& l) {
        for (std::size_t i : order) b.push_back(x[i]), l.push_back(len[i]);
    };
    std::vector<std::vector<std::vector<double>>> full;
    std::vector<std::size_t> full_len;
    take({2, 0, 1, 3}, full, full_len);
    const std::vector<double> ref = batchnorm_first(full, full_len, 1e-5);
    const std::map<std::string, std::vector<std::size_t>> orders = {
        {"1", {2}}, {"2", {2, 0}}, {"3", {2, 0, 1}}, {"4", {2, 0, 1, 3}}};
    for (const auto& [n, order] : orders) {
        CAPTURE(n);
        std::vector<std::vector<std::vector<double>>> b;
        std::vector<std::size_t> l;
        take(order, b, l);
        const double expected = max_abs_diff(batchnorm_first(b, l, 1e-5), ref);
        if (n == "1" || n == "2") CHECK(expected > 0.1);
        auto row = one(rows, {{"norm", "bn"}, {"batch_size", n}});
        CHECK(row.at("status") == "ok");
        CHECK(num(row, "max_abs_diff") == doctest::Approx(expected).epsilon(1e-12));
        CHECK(one(rows, {{"norm", "ln"}, {"batch_size", n}}).at("max_abs_diff") == "0");
    }
}

TEST_CASE("train_eval: running statistics follow the momentum rule; norms without them agree in both modes") {
    // Every channel of the held-out batch is constant (3 in channel 0, -1 in channel 1), so
    // every training batch drawn like it is that constant too: batch mean mu_c, variance 0.
    // torch (momentum 0.1 on the new value): running_mean = mu (1 - 0.9^k), running_var =
    // 0.9^k; keras (0.99 on the old value): 0.99^k; momentum null (cumulative): mu and 0 after
    // step 1. Training output is 0 (x = mean); inference gives (x - rm)/sqrt(rv + eps).
    json data = {{"x", {{"source", "values"}, {"values", {{{3, 3}, {-1, -1}}, {{3, 3}, {-1, -1}}, {{3, 3}, {-1, -1}}}}}}};
    json norms = {{"bn", {{"type", "batchnorm"}}},
                  {"bn_keras", {{"type", "batchnorm"}, {"convention", "keras"}}},
                  {"bn_cma", {{"type", "batchnorm"}, {"momentum", nullptr}}},
                  {"in_track", {{"type", "instancenorm"}, {"track_running_stats", true}}},
                  {"in", {{"type", "instancenorm"}}},
                  {"ln", {{"type", "layernorm"}, {"axes", {1, 2}}}},
                  {"gn", {{"type", "groupnorm"}, {"num_groups", 1}}},
                  {"rms", {{"type", "rmsnorm"}, {"axes", {2}}}}};
    auto r = run_config("train_eval", config(data, norms, {{{"type", "train_eval"}, {"data", {"x"}}, {"steps", 4},
                                                            {"norms", {"bn", "bn_keras", "bn_cma", "in_track", "in", "ln", "gn", "rms"}}}}, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    CHECK(csv_header(read_text(r.out / "train_eval.csv"))
              .rfind("data,norm,type,step,running_mean_avg,running_var_avg,eval_train_max_abs_diff", 0) == 0);
    auto rows = r.csv("train_eval");
    CHECK(rows.size() == 8 * 5);
    auto expect = [&](const std::string& norm, double decay_mean, double decay_var, double eps) {
        for (int k = 0; k <= 4; ++k) {
            CAPTURE(norm);
            CAPTURE(k);
            auto row = one(rows, {{"norm", norm}, {"step", std::to_string(k)}});
            const double dm = std::pow(decay_mean, k), dv = std::pow(decay_var, k);
            // Channel averages: mean (3 + -1)/2 = 1.
            CHECK(num(row, "running_mean_avg") == doctest::Approx(1 * (1 - dm)).epsilon(1e-12));
            CHECK(num(row, "running_var_avg") == doctest::Approx(dv).epsilon(1e-12));
            CHECK(num(row, "eval_train_max_abs_diff") == doctest::Approx(3 * dm / std::sqrt(dv + eps)).epsilon(1e-9));
            CHECK(row.at("has_running_stats") == "true");
        }
    };
    expect("bn", 0.9, 0.9, 1e-5);
    expect("bn_keras", 0.99, 0.99, 1e-3);
    expect("in_track", 0.9, 0.9, 1e-5);
    auto cma = one(rows, {{"norm", "bn_cma"}, {"step", "3"}});
    CHECK(num(cma, "running_mean_avg") == doctest::Approx(1).epsilon(1e-12));
    CHECK(num(cma, "running_var_avg") == 0);
    CHECK(num(cma, "eval_train_max_abs_diff") == 0);
    for (const std::string n : {"in", "ln", "gn", "rms"})
        for (int k = 0; k <= 4; ++k) {
            CAPTURE(n);
            CAPTURE(k);
            auto row = one(rows, {{"norm", n}, {"step", std::to_string(k)}});
            CHECK(row.at("eval_train_max_abs_diff") == "0");
            // No running statistics: not applicable (empty), never nan (a computed value).
            CHECK(row.at("running_mean_avg").empty());
            CHECK(row.at("running_var_avg").empty());
            CHECK(row.at("has_running_stats") == "false");
        }
    // report.json says the same (""), and report.html flags no cell as non-finite.
    const json rep = report_rows(r.out, "train_eval");
    REQUIRE(rep.size() == rows.size());
    for (const auto& row : rep) {
        const bool running = row["has_running_stats"].get<bool>();
        CHECK((row["running_mean_avg"] == "") == !running);
        CHECK((row["running_var_avg"] == "") == !running);
    }
    CHECK_FALSE(html_flags_nonfinite(r.out));
}

TEST_CASE("apply, sequential: a data entry listed twice keeps each step's arrays; rows in step order") {
    // One channel, batches of mean 2 (a) and 6 (b), steps a, b, a. PyTorch's update with
    // momentum 0.1 from 0: running_mean 0.2, then 0.9 * 0.2 + 0.6 = 0.78, then 0.9 * 0.78 +
    // 0.2 = 0.902.
    const json data = {{"a", {{"source", "values"}, {"values", {{1.0}, {3.0}}}}},
                       {"b", {{"source", "values"}, {"values", {{5.0}, {7.0}}}}}};
    const json analyses = json::array({{{"type", "apply"}, {"data", {"a", "b", "a"}}, {"norms", {"bn"}},
                                        {"sequential", true}, {"save", {"running_mean"}}}});
    const json norms = {{"bn", {{"type", "batchnorm"}}}, {"bn2", {{"type", "batchnorm"}, {"momentum", 0.5}}}};
    json two = analyses;
    two[0]["norms"] = {"bn", "bn2"};
    RunResult r = run_config("apply_sequential_repeat", config(data, norms, two, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    auto rm = [&](const std::string& rel) {
        const std::filesystem::path p = r.out / "arrays" / rel / "running_mean.npy";
        REQUIRE_MESSAGE(std::filesystem::exists(p), p.string());
        return normlab::read_npy(p).values.at(0);
    };
    CHECK_NEAR(rm("a/bn/step1"), 0.2, 1e-15);
    CHECK_NEAR(rm("b/bn"), 0.78, 1e-15);
    CHECK_NEAR(rm("a/bn/step3"), 0.902, 1e-15);
    CHECK_FALSE(std::filesystem::exists(r.out / "arrays" / "a" / "bn" / "running_mean.npy"));
    // momentum 0.5: 1, then 0.5 + 3 = 3.5, then 1.75 + 1 = 2.75
    CHECK_NEAR(rm("a/bn2/step3"), 2.75, 1e-15);
    // (step, norm) order
    const auto rows = r.csv("apply");
    REQUIRE(rows.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
        CHECK(rows[i].at("step") == std::to_string(i / 2 + 1));
        CHECK(rows[i].at("data") == (i / 2 == 1 ? "b" : "a"));
        CHECK(rows[i].at("norm") == (i % 2 ? "bn2" : "bn"));
    }
}

TEST_CASE("apply: out_rms is the spread RMSNorm sets, which its std and mean do not show") {
    // Rows [1,2,3,4] and [10,10,10,11]. RMSNorm scales row i by 1/sqrt(ms_i + eps) (ms: mean
    // square), so its output's rms about 0 is sqrt(ms_i / (ms_i + eps)); the second row's
    // output is near 1 everywhere, with a std of about 0.04. LayerNorm's output has mean 0,
    // so its rms is its std, sqrt(var_i / (var_i + eps)).
    const json data = {{"x", {{"source", "values"}, {"values", {{1, 2, 3, 4}, {10, 10, 10, 11}}}}}};
    const json norms = {{"rms", {{"type", "rmsnorm"}, {"axes", {-1}}, {"eps", 0.5}}},
                        {"ln", {{"type", "layernorm"}, {"axes", {-1}}, {"eps", 0.5}}}};
    const json analyses = json::array({{{"type", "apply"}, {"data", {"x"}}, {"norms", {"rms", "ln"}}}});
    RunResult r = run_config("apply_rms_columns", config(data, norms, analyses, "float64"));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
    const auto rows = r.csv("apply");
    const double ms1 = 30.0 / 4, ms2 = 421.0 / 4, var1 = 1.25, var2 = 0.1875;
    const auto rms = one(rows, {{"norm", "rms"}}), ln = one(rows, {{"norm", "ln"}});
    CHECK(num(rms, "out_rms_min") == doctest::Approx(std::sqrt(ms1 / (ms1 + 0.5))).epsilon(1e-14));
    CHECK(num(rms, "out_rms_max") == doctest::Approx(std::sqrt(ms2 / (ms2 + 0.5))).epsilon(1e-14));
    CHECK(num(rms, "out_std_min") < 0.05);
    CHECK(num(ln, "out_rms_min") == doctest::Approx(std::sqrt(var2 / (var2 + 0.5))).epsilon(1e-14));
    CHECK(num(ln, "out_rms_max") == doctest::Approx(std::sqrt(var1 / (var1 + 0.5))).epsilon(1e-14));
    CHECK(num(ln, "out_rms_min") == doctest::Approx(num(ln, "out_std_min")).epsilon(1e-14));
}

TEST_CASE("analyses that add samples refuse data without a batch axis") {
    json data = {{"v", {{"source", "values"}, {"values", {1, 2, 3}}}}};
    json norms = {{"ln", {{"type", "layernorm"}, {"axes", {0}}}}};
    for (const std::string type : {"batch_dependence", "train_eval"}) {
        CAPTURE(type);
        auto r = run_config(std::string("nobatch_") + type, config(data, norms, {{{"type", type}, {"data", {"v"}}, {"norms", {"ln"}}}}));
        CHECK(r.cli.exit_code == 2);
        CHECK_MESSAGE(r.cli.err.find(std::string("/analyses/0: ") + type + " on data \"v\": needs a batch axis 0 apart from the channel axis") != std::string::npos, r.cli.err);
    }
    auto r = run_config("bad_sizes", config({{"x", {{"source", "gaussian"}, {"shape", {2, 3}}}}}, norms,
                                            {{{"type", "batch_dependence"}, {"data", {"x"}}, {"norms", {"ln"}}, {"sizes", {2, 0}}}}));
    CHECK(r.cli.exit_code == 2);
    CHECK(r.cli.err.find("/analyses/0/sizes/1: a batch size must be >= 1, but got 0") != std::string::npos);
}

TEST_CASE("batch_ops: samples taken, stacked and drawn keep values, masks and lengths") {
    normlab::Batch b = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 2, 2}, 1);
    b.mask = xt::xarray<std::uint8_t>({{{1, 1}}, {{1, 0}}, {{0, 0}}});  // (3,1,2): per position
    b.lengths = {2, 1, 0};
    normlab::Batch mid = normlab::take_samples(b, 1, 2);
    CHECK(mid.x.shape() == normlab::Shape{2, 2, 2});
    CHECK(mid.x.f64(0, 0, 0) == 5);
    CHECK(mid.x.f64(1, 1, 1) == 12);
    CHECK(mid.mask.shape()[1] == 2);                 // broadcast to full shape
    CHECK(mid.mask(0, 1, 0) == 1);
    CHECK(mid.mask(0, 1, 1) == 0);
    CHECK(mid.lengths == std::vector<std::size_t>{1, 0});
    normlab::Batch both = normlab::concat_samples(normlab::take_samples(b, 0, 1), mid);
    CHECK(both.x.to_double() == b.x.to_double());
    CHECK(both.mask == normlab::full_mask(b));
    CHECK(both.lengths == b.lengths);

    // Drawn samples: per-channel moments of the real positions (channel 0: 1,2,5; channel 1: 3,4,7).
    normlab::ChannelMoments cm = normlab::channel_moments(b);
    CHECK(cm.mean(0) == doctest::Approx(8.0 / 3));
    CHECK(cm.mean(1) == doctest::Approx(14.0 / 3));
    normlab::Rng rng(7);
    normlab::Batch g = normlab::gaussian_like(b, 4000, rng, normlab::DType::float64);
    CHECK(g.x.shape() == normlab::Shape{4000, 2, 2});
    double s0 = 0, s1 = 0;
    for (std::size_t i = 0; i < 4000; ++i)
        for (std::size_t t = 0; t < 2; ++t) s0 += g.x.f64(i, 0, t), s1 += g.x.f64(i, 1, t);
    // 8000 draws per channel: the sample mean is within 4 standard errors.
    CHECK(std::fabs(s0 / 8000 - cm.mean(0)) < 4 * cm.std(0) / std::sqrt(8000.0));
    CHECK(std::fabs(s1 / 8000 - cm.mean(1)) < 4 * cm.std(1) / std::sqrt(8000.0));
    // Every drawn mask row is one of b's, with its length.
    for (std::size_t i = 0; i < 4000; ++i) {
        const std::size_t len = g.lengths.at(i);
        CHECK(g.mask(i, 0, 0) == (len >= 1));
        CHECK(g.mask(i, 1, 1) == (len >= 2));
    }
    normlab::Rng again(7);
    CHECK(normlab::gaussian_like(b, 4000, again, normlab::DType::float64).x.to_double() == g.x.to_double());
}

TEST_CASE("every analysis runs on every data source with every norm type") {
    const std::string d = kSrc + "/configs/data/";
    const json sources = {
        {"gaussian", {{"source", "gaussian"}, {"shape", {4, 3, 5}}}},
        {"values", {{"source", "values"}, {"values", {{{1, 2}, {3, 5}}, {{0, 4}, {2, -1}}}}, {"channel_axis", -1}, {"lengths", {2, 1}}}},
        {"images", {{"source", "images"}, {"shape", {3, 3, 8, 8}}}},
        {"tokens", {{"source", "tokens"}, {"batch", 4}, {"max_len", 6}, {"dim", 8}}},
        {"text", {{"source", "text"}, {"path", d + "prose.txt"}, {"dim", 16}, {"max_sentences", 5}, {"max_len", 10}}},
        {"csv", {{"source", "csv"}, {"path", d + "digits.csv.gz"}, {"drop_columns", {-1}}, {"row_shape", {1, 8, 8}}, {"max_rows", 12}}},
        {"image_files", {{"source", "image_files"}, {"paths", {d + "china.jpg", d + "flower.jpg"}}, {"patch", {8, 8}}, {"max_patches", 3}}}};
    // Norms that fit any batch of rank >= 3 (GroupNorm with one group always divides C). The
    // masked sources are (B,T,D), so axes -1 is the feature axis, not the padded one.
    const json norms = {{"bn", {{"type", "batchnorm"}}},
                        {"ln", {{"type", "layernorm"}, {"axes", {-1}}}},
                        {"in", {{"type", "instancenorm"}}},
                        {"gn", {{"type", "groupnorm"}, {"num_groups", 1}}},
                        {"rms", {{"type", "rmsnorm"}, {"axes", {-1}}}}};
    const json all = {"bn", "ln", "in", "gn", "rms"};
    for (const auto& [name, src] : sources.items()) {
        CAPTURE(name);
        const bool masked = name == "values" || name == "tokens" || name == "text";
        json analyses = {{{"type", "epsilon"}, {"data", {name}}, {"norms", all}, {"eps", {0, 1e-3}}, {"scales", {1, 1e-3}}},
                         {{"type", "equivalence"}, {"data", {name}}, {"norms", all}},
                         {{"type", "invariance"}, {"data", {name}}, {"norms", all}},
                         {{"type", "batch_dependence"}, {"data", {name}}, {"norms", all}, {"sizes", {1, 3}}},
                         {{"type", "batch_dependence"}, {"data", {name}}, {"norms", all}, {"sizes", {1, 2}}, {"mates", "data"}},
                         {{"type", "train_eval"}, {"data", {name}}, {"norms", all}, {"steps", 2}}};
        if (masked) analyses.push_back({{"type", "padding"}, {"data", {name}}, {"norms", all}});
        auto r = run_config("sources_" + name, config({{name, src}}, norms, analyses));
        REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);
        CHECK(r.csv("epsilon").size() == 5 * (2 + 1) * 2);  // norms x (eps list + default) x scales
        CHECK(r.csv("equivalence").size() == 10);
        // Norms with per-sample statistics never depend on the batch, on any data.
        for (const std::string n : {"ln", "in", "gn", "rms"}) {
            CAPTURE(n);
            for (const auto& row : select(r.csv("batch_dependence"), {{"norm", n}})) CHECK(row.at("max_abs_diff") == "0");
            for (const auto& row : select(r.csv("train_eval"), {{"norm", n}})) CHECK(row.at("eval_train_max_abs_diff") == "0");
        }
        // InstanceNorm's statistics are per sample and channel: invariant at every granularity.
        for (const auto& row : select(r.csv("invariance"), {{"norm", "in"}})) CHECK(row.at("invariant") == "true");
        if (masked) {
            CHECK(r.csv("padding").size() == 5);
            CHECK(one(r.csv("padding"), {{"norm", "rms"}}).at("padding_invariant") == "true");
        }
    }
}

TEST_CASE("every example config of the analyses runs and writes its table") {
    const std::map<std::string, std::string> header = {
        {"epsilon", "data,norm,type,dtype,eps,scale,mean_abs_xhat,std_err_mean,std_err_max,max_abs_diff_vs_eps0,frac_var_below_10eps"},
        {"padding", "data,norm,type,masked,pad_fraction,mean_contamination_max,var_contamination_rel_max,real_output_max_abs_diff,repad_max_abs_diff,padding_invariant"},
        {"equivalence", "data,norm_a,norm_b,reduction_axes_a,reduction_axes_b,max_abs_diff,max_rel_diff,equivalent"},
        {"invariance", "data,norm,type,transform,granularity,max_abs_diff,invariant"},
        {"batch_dependence", "data,norm,type,batch_size,max_abs_diff,batch_dependent"},
        {"train_eval", "data,norm,type,step,running_mean_avg,running_var_avg,eval_train_max_abs_diff"}};
    for (const auto& [name, h] : header) {
        CAPTURE(name);
        const auto out = fresh_dir("example_" + name) / "out";
        CliResult r = run_normlab("run " + kSrc + "/configs/" + name + ".json --out " + out.string() + " -q");
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const std::string text = read_text(out / (name + ".csv"));
        CHECK(csv_header(text).rfind(h, 0) == 0);
        CHECK(parse_csv(text).size() > 1);
        auto report = json::parse(read_text(out / "report.json"));
        CHECK(report["analyses"][0]["type"] == name);
    }
    // The claims the example configs make.
    const auto eq = fresh_dir("example_eq_claims") / "out";
    REQUIRE(run_normlab("run " + kSrc + "/configs/equivalence.json --out " + eq.string() + " -q").exit_code == 0);
    auto rows = parse_csv(read_text(eq / "equivalence.csv"));
    CHECK(one(rows, {{"norm_a", "ln_d"}, {"norm_b", "in_t"}}).at("equivalent") == "true");
    CHECK(one(rows, {{"norm_a", "ln_d"}, {"norm_b", "ln_td"}}).at("equivalent") == "false");
}

TEST_CASE("summaries skip fully padded groups and count them in empty_groups") {
    // Tokens of lengths 3 and 1 padded to 4: under a masked LayerNorm over D, the 4 padded
    // tokens are groups without a real position (NaN statistics). The summaries must come
    // from the 4 real tokens, as if the padded ones were not there.
    const json data = {{"x", {{"source", "tokens"}, {"batch", 2}, {"max_len", 4}, {"dim", 8}, {"lengths", {3, 1}},
                              {"scale", 3}, {"offset", 2}}}};
    const json norms = {{"ln", {{"type", "layernorm"}, {"normalized_shape", {8}}, {"mask", true}}},
                        {"ln_plain", {{"type", "layernorm"}, {"normalized_shape", {8}}}},
                        {"rms", {{"type", "rmsnorm"}, {"normalized_shape", {8}}, {"mask", true}}},
                        {"bn", {{"type", "batchnorm"}, {"mask", true}}}};
    const json analyses = json::array({
        {{"type", "apply"}, {"data", {"x"}}, {"norms", {"ln", "ln_plain", "rms", "bn"}}},
        {{"type", "epsilon"}, {"data", {"x"}}, {"norms", {"ln", "rms"}}, {"eps", {1e-5, 0}}},
        {{"type", "precision"}, {"data", {"x"}}, {"norms", {"ln"}}, {"dtypes", {"float32"}}},
        {{"type", "gradients"}, {"data", {"x"}}, {"norms", {"ln", "rms", "bn"}}},
        {{"type", "jacobian"}, {"data", {"x"}}, {"norms", {"ln"}}, {"groups", 8}},
        {{"type", "port_check"}, {"data", {"x"}}, {"norms", {"ln", "rms"}}},
    });
    RunResult r = run_config("empty_groups", config(data, norms, analyses));
    REQUIRE_MESSAGE(r.cli.exit_code == 0, r.cli.err);

    auto apply = r.csv("apply");
    for (const std::string n : {"ln", "rms"}) {
        CAPTURE(n);
        const auto row = one(apply, {{"norm", n}});
        CHECK(num(row, "empty_groups") == 4);
        for (const char* col : {"out_mean_min", "out_mean_max", "out_std_min", "out_std_max", "out_rms_min", "out_rms_max",
                                "out_min", "out_max"})
            CHECK_MESSAGE(std::isfinite(num(row, col)), col);
        CHECK(num(row, "nonfinite_count") == 0);   // the NaN of padded tokens is not an output anyone reads
        CHECK(num(row, "nonfinite_stats") == 0);
    }
    const auto ln = one(apply, {{"norm", "ln"}});
    CHECK(num(ln, "out_mean_max") < 1e-6);
    CHECK(num(ln, "out_std_max") <= 1.0);
    CHECK(num(ln, "out_std_min") > 0.99);
    // Unmasked and BatchNorm (channels always hold real tokens): no empty group.
    CHECK(num(one(apply, {{"norm", "ln_plain"}}), "empty_groups") == 0);
    CHECK(num(one(apply, {{"norm", "bn"}}), "empty_groups") == 0);

    auto eps = r.csv("epsilon");
    for (const auto& row : eps) {
        CAPTURE(row.at("norm"));
        CAPTURE(row.at("eps"));
        CHECK(num(row, "empty_groups") == 4);
        CHECK(num(row, "zero_var_groups") == 0);  // empty groups are not zero-variance groups
        CHECK(std::isfinite(num(row, "std_err_max")));
        CHECK(num(row, "nonfinite_count") == 0);
    }
    // Gradients: dx of a padded token's group is NaN; the summaries read the real ones.
    for (const auto& row : r.csv("gradients")) {
        CAPTURE(row.at("norm"));
        CHECK(num(row, "empty_groups") == (row.at("norm") == "bn" ? 0 : 4));
        for (const char* col : {"grad_input_rms", "grad_upstream_rms", "grad_ratio", "cross_sample_fraction", "fd_max_rel_err"})
            CHECK_MESSAGE(std::isfinite(num(row, col)), col);
        CHECK(num(row, "fd_max_rel_err") < 1e-6);
    }
    // Jacobian: the 4 real tokens' groups, not the first 8 groups (4 of them padded).
    auto jac = r.csv("jacobian");
    REQUIRE(jac.size() == 4);
    std::vector<std::string> groups;
    for (const auto& row : jac) {
        groups.push_back(row.at("group"));
        CHECK(std::isfinite(num(row, "rstd")));
    }
    CHECK(groups == std::vector<std::string>{"0", "1", "2", "4"});  // tokens (0,0..2) and (1,0)
    // port_check compares real positions: the padded tokens' NaN is not counted either.
    const auto pc = one(r.csv("port_check"), {{"port", "rms"}});
    CHECK(num(pc, "ref_nonfinite") == 0);
    CHECK(num(pc, "port_nonfinite") == 0);
    CHECK(std::isfinite(num(pc, "max_abs_diff")));
    auto prec = r.csv("precision");
    for (const auto& row : prec) {
        CAPTURE(row.at("algorithm"));
        CHECK(num(row, "empty_groups") == 4);
        CHECK(std::isfinite(num(row, "var_min")));
    }
}
