#pragma once
// A seeded random number generator whose output is the same on every platform and compiler.
//
// Why not <random>'s distributions: std::mt19937_64's output sequence is fixed by the C++
// standard, but std::uniform_real_distribution and std::normal_distribution are
// implementation-defined (libstdc++, libc++ and MSVC give different numbers for the same
// engine state). Only the raw engine bits are used here; the transforms to uniform and
// normal numbers are written out below, using nothing but IEEE-exact operations (+ - * /,
// sqrt, frexp/ldexp) so that the results are bit-identical wherever the library builds.
#include <cstdint>
#include <random>
#include <string>

namespace normlab {

/// splitmix64 finaliser (Steele, Lea, Flood 2014; the mixer of java.util.SplittableRandom):
/// a bijection on 64-bit words that spreads every input bit over the output.
std::uint64_t splitmix64(std::uint64_t x);

/// 64-bit FNV-1a hash of the bytes of s (offset basis 14695981039346656037, prime 1099511628211).
std::uint64_t fnv1a64(const std::string& s);

/// The seed of one named stream under a run seed: each data entry calls
/// derive_seed(run_seed, its name), so entries get independent streams and renaming or
/// reordering one entry does not change the values of the others.
std::uint64_t derive_seed(std::uint64_t base_seed, const std::string& label);

/// Natural logarithm for x > 0 (finite), computed with basic operations only so that the
/// result is the same on every platform (libm's log may differ in the last bit between C
/// libraries). Relative error below 1e-15; not correctly rounded.
double portable_log(double x);

/// e^x for finite x, with basic operations only (see portable_log). Relative error below
/// 1e-15; underflows to 0 below about -745 and overflows to inf above about 709.8.
double portable_exp(double x);

/// cos and sin of 2*pi*t for t in [0, 1), with basic operations only (see portable_log).
/// Absolute error below 1e-15.
void portable_cos_sin_2pi(double t, double& c, double& s);

/// Seeded generator: std::mt19937_64 raw bits plus portable transforms.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : m_engine(seed) {}

    /// 64 raw bits (the mt19937_64 sequence, specified by the C++ standard).
    std::uint64_t bits() { return m_engine(); }
    /// Uniform in [0, 1) with 53 random bits: (bits >> 11) * 2^-53.
    double uniform();
    /// Uniform integer in [0, n), without modulo bias (rejection sampling). n must be > 0.
    std::uint64_t below(std::uint64_t n);
    /// Uniform integer in [lo, hi] (inclusive). Requires lo <= hi.
    long long between(long long lo, long long hi);
    /// Standard normal N(0, 1) by the Box-Muller transform; values come in pairs, the
    /// second of each pair is returned by the next call.
    double normal();
    /// mean + std * normal().
    double normal(double mean, double std) { return mean + std * normal(); }

private:
    std::mt19937_64 m_engine;
    double m_spare = 0.0;
    bool m_has_spare = false;
};

}  // namespace normlab
