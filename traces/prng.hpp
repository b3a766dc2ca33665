#pragma once
// Our own seeded random numbers and the few distributions the generators
// need. std:: distributions differ between standard libraries; these give the
// same sequence everywhere (up to libm's log/exp/cos, which are correctly
// rounded or nearly so on the platforms we build on).
#include <cmath>
#include <cstdint>

namespace twin {

// splitmix64: turns a seed (and a stream number) into well-mixed state.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna): fast, 256-bit state, good statistics.
class Rng {
 public:
  // Different stream numbers give independent sequences for one seed, so
  // each part of a generator draws from its own stream and changing one
  // option does not shift the others' numbers.
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) {
    std::uint64_t sm = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (auto& word : s_) word = splitmix64(sm);
  }

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe to take the log of.
  double uniform_pos() { return 1.0 - uniform(); }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased).
  std::uint64_t below(std::uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
      const auto low = static_cast<std::uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
    }
  }

  double exponential(double mean) { return -mean * std::log(uniform_pos()); }
  // Standard normal by Box-Muller (one value per call; simpler than caching).
  double normal() {
    const double u1 = uniform_pos();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Gamma(shape, scale) by Marsaglia and Tsang; shape < 1 via the boost
  // Gamma(shape + 1) * U^(1/shape).
  double gamma(double shape, double scale) {
    if (shape < 1.0) return gamma(shape + 1.0, scale) * std::pow(uniform_pos(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform_pos();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
    }
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

}  // namespace twin
