#include "data/random.hpp"

#include <cmath>
#include <limits>

namespace normlab {

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

std::uint64_t fnv1a64(const std::string& s) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

std::uint64_t derive_seed(std::uint64_t base_seed, const std::string& label) {
    // Mixing the base seed before combining keeps seeds 0, 1, 2, ... far apart, and the
    // final mix hides the structure of the FNV hash.
    return splitmix64(splitmix64(base_seed) ^ fnv1a64(label));
}

double portable_log(double x) {
    // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m-1)/(m+1),
    // |s| <= 0.1716, and the odd series of atanh converges fast enough that 13 terms leave
    // an error below 2^-60.
    int e = 0;
    double m = std::frexp(x, &e);  // m in [0.5, 1): exact
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e -= 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double term = s;
    double sum = 0.0;
    for (int k = 0; k < 13; ++k) {
        sum += term / static_cast<double>(2 * k + 1);
        term *= s2;
    }
    const double ln2 = 0.69314718055994530942;
    return static_cast<double>(e) * ln2 + 2.0 * sum;
}

double portable_exp(double x) {
    if (x > 709.8) return std::numeric_limits<double>::infinity();
    if (x < -745.2) return 0.0;
    // x = k ln2 + r with |r| <= ln2/2; ln2 is split in a high part with trailing zero bits
    // (so k * ln2_hi is exact) and a low correction (Cody-Waite reduction).
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double k = std::floor(x * 1.44269504088896340736 + 0.5);
    const double r = (x - k * ln2_hi) - k * ln2_lo;
    // Taylor series; |r| <= 0.347 and 18 terms leave an error below 2^-60.
    double term = 1.0, sum = 1.0;
    for (int n = 1; n < 18; ++n) {
        term *= r / static_cast<double>(n);
        sum += term;
    }
    // Two ldexp steps keep 2^k representable when k is near the ends of the range.
    const int ki = static_cast<int>(k);
    return std::ldexp(std::ldexp(sum, ki / 2), ki - ki / 2);
}

namespace {
// Taylor series of cos and sin on [0, pi/2); degree 24/25 leaves an error below 1e-17.
void cos_sin_quadrant(double a, double& c, double& s) {
    double a2 = a * a;
    double tc = 1.0, ts = a;
    c = 0.0;
    s = 0.0;
    for (int k = 0; k < 13; ++k) {
        c += tc;
        s += ts;
        tc *= -a2 / static_cast<double>((2 * k + 1) * (2 * k + 2));
        ts *= -a2 / static_cast<double>((2 * k + 2) * (2 * k + 3));
    }
}
}  // namespace

void portable_cos_sin_2pi(double t, double& c, double& s) {
    // Quadrant reduction is exact: 4t and its fractional part are exact in binary.
    double q4 = 4.0 * t;
    double qf = std::floor(q4);
    int q = static_cast<int>(qf) & 3;
    const double half_pi = 1.57079632679489661923;
    double cq, sq;
    cos_sin_quadrant((q4 - qf) * half_pi, cq, sq);
    switch (q) {
        case 0: c = cq; s = sq; break;
        case 1: c = -sq; s = cq; break;
        case 2: c = -cq; s = -sq; break;
        default: c = sq; s = -cq; break;
    }
}

double Rng::uniform() {
    return static_cast<double>(bits() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

std::uint64_t Rng::below(std::uint64_t n) {
    // Reject the top partial block of 2^64 so every residue is equally likely.
    std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                          std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t x;
    do x = bits();
    while (x >= limit);
    return x % n;
}

long long Rng::between(long long lo, long long hi) {
    std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    std::uint64_t off = span == std::numeric_limits<std::uint64_t>::max() ? bits() : below(span + 1);
    return static_cast<long long>(static_cast<std::uint64_t>(lo) + off);
}

double Rng::normal() {
    if (m_has_spare) {
        m_has_spare = false;
        return m_spare;
    }
    // 1 - uniform() lies in (0, 1], so the logarithm is finite.
    double u1 = 1.0 - uniform();
    double u2 = uniform();
    double r = std::sqrt(-2.0 * portable_log(u1));
    double c, s;
    portable_cos_sin_2pi(u2, c, s);
    m_spare = r * s;
    m_has_spare = true;
    return r * c;
}

}  // namespace normlab
