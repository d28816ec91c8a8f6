// Stress search for the float path's output formula (src/norm/normalize.hpp), outside the
// engine: random rows built to make float32 arithmetic fail, each element's error in the
// precision contract's ulps (float32 ulp of the largest of |x̂·w|, |b| and |y|) against a
// long double reference, worst per row type, for the formula the engine uses and for the one
// it used before:
//   now:    y = fma(x - hi, a, fma(-lo, a, fl(b)))          (c = fl(b) where lo is 0)
//   before: y = (((x - hi) - lo) - lo2) * a + fl(b), each operation rounded
// hi, lo, lo2: the mean's float parts; a = fl(rstd * w) folded in double.
// Rows: means 1e4, 1e3, 0, 5, -300, 1 and 0 with stds 1, 1e-2, 1, 1e-3, 30, 1e-6 and 1e-20;
// 2 to 768 values; every 16th or 3rd value 0, 8, 100 or 1000 std away; the floats next to
// the mean planted; weights N(1, 0.5) or N(1, 2), biases N(0, 0.5) or N(0, 2), or none.
//
//   g++ -O2 -ffp-contract=off -mfma -o /tmp/float_path_stress scripts/float_path_stress.cpp
//   /tmp/float_path_stress 300000000 11     # elements, seed: about 90 s
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

double ulp_f32(double v) {
    v = std::fabs(v);
    if (v < FLT_MIN) return std::ldexp(1.0, -149);
    int e;
    std::frexp(v, &e);
    return std::ldexp(1.0, e - 24);
}

struct RowType {
    const char* name;
    double mean, std;
};
const RowType kRows[] = {{"1e4/1", 1e4, 1},    {"1e3/1e-2", 1e3, 1e-2}, {"0/1", 0, 1},       {"5/1e-3", 5, 1e-3},
                         {"-300/30", -300, 30}, {"1/1e-6", 1, 1e-6},     {"0/1e-20", 0, 1e-20}};
constexpr int kTypes = sizeof(kRows) / sizeof(kRows[0]);

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s ELEMENTS SEED\n", argv[0]);
        return 2;
    }
    const long total = std::atol(argv[1]);
    std::mt19937_64 gen(static_cast<unsigned>(std::atoi(argv[2])));
    std::normal_distribution<double> normal(0, 1);
    const int sizes[] = {2, 3, 5, 16, 64, 768};
    const double fars[] = {0, 8, 100, 1e3};
    double worst_now[kTypes] = {}, worst_before[kTypes] = {};
    for (long done = 0; done < total;) {
        const int t = static_cast<int>(gen() % kTypes), n = sizes[gen() % 6];
        const double far = fars[gen() % 4], spread = gen() % 2 ? 0.5 : 2.0;
        const int every = gen() % 2 ? 16 : 3;
        const bool weight = gen() % 2, bias = gen() % 2;
        std::vector<float> x(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i)
            x[i] = static_cast<float>(normal(gen) * kRows[t].std + kRows[t].mean + (i % every ? 0 : far * kRows[t].std));
        if (n > 3) {  // the float nearest the mean and the next one up
            long double s = 0;
            for (float v : x) s += v;
            const float m = static_cast<float>(s / n);
            x[1] = m;
            x[2] = std::nextafter(m, 1e30f);
        }
        // Reference statistics in long double, the mean corrected once (two-pass).
        long double s = 0, c = 0, m2 = 0;
        for (float v : x) s += v;
        long double mean = s / n;
        for (float v : x) c += v - mean;
        mean += c / n;
        for (float v : x) m2 += (v - mean) * (v - mean);
        const long double eps = kRows[t].std > 1e-4 ? 1e-5L : 0.0L;
        const long double rstd = 1.0L / std::sqrt(m2 / n + eps + 1e-30L);
        // The engine's inputs: the mean as a double and its low part, rstd as a double.
        const double md = static_cast<double>(mean), ml = static_cast<double>(mean - md);
        const float hi = static_cast<float>(md);
        const double rest = (md - hi) + ml;
        const float lo = static_cast<float>(rest), lo2 = static_cast<float>(rest - lo);
        for (int i = 0; i < n; ++i) {
            const double w = weight ? normal(gen) * spread + 1.0 : 1.0, b = bias ? normal(gen) * spread : 0.0;
            const float a = static_cast<float>(static_cast<double>(rstd) * w), bf = static_cast<float>(b);
            const long double xw = (x[i] - mean) * rstd * w, ref = xw + b;
            const double basis = std::max({std::fabs(static_cast<double>(xw)), std::fabs(b), std::fabs(static_cast<double>(ref))});
            const volatile float xi = x[i];  // keeps each operation in float, in order
            const float now = std::fma(xi - hi, a, lo == 0 ? bf : std::fma(-lo, a, bf));
            const float before = (((xi - hi) - lo) - lo2) * a + bf;
            const double u = ulp_f32(basis);
            worst_now[t] = std::max(worst_now[t], std::fabs(now - static_cast<double>(ref)) / u);
            worst_before[t] = std::max(worst_before[t], std::fabs(before - static_cast<double>(ref)) / u);
        }
        done += n;
    }
    std::printf("%-10s %8s %8s\n", "rows", "now", "before");
    for (int t = 0; t < kTypes; ++t) std::printf("%-10s %8.3f %8.3f\n", kRows[t].name, worst_now[t], worst_before[t]);
    return 0;
}
