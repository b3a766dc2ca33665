#pragma once
// Token-length distributions for the generators, built from a spec string:
//   fixed:N                      always N
//   uniform:LO:HI                integers LO..HI inclusive
//   lognormal:median=M:sigma=S   exp(N(ln M, S)), rounded; or mean=M instead of median
//                                (optional :max=N clips)
//   zipf:max=N:s=A               P(k) proportional to k^-A on 1..N
//   trace:PATH:prompt|output     resampled uniformly from a trace's lengths
// Samples are at least 1.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "traces/prng.hpp"

namespace twin {

// The longest length a spec may give (16,777,216 tokens): longer is no
// workload, and a generated request's hash ids grow with its length (a
// fixed:2147483647 prompt would be a gigabyte of ids per request).
inline constexpr std::int32_t kMaxSpecLength = std::int32_t{1} << 24;

class LengthDist {
 public:
  // Throws UsageError naming `what` (e.g. "--prompt") and the expected forms.
  static LengthDist parse(std::string_view spec, std::string_view what);

  std::int32_t sample(Rng& rng) const;
  const std::string& spec() const { return spec_; }

 private:
  enum class Kind { fixed, uniform, lognormal, zipf, samples };
  Kind kind_ = Kind::fixed;
  std::string spec_;
  std::int32_t lo_ = 1, hi_ = 1;   // fixed / uniform; hi_ also lognormal's clip
  double mu_ = 0, sigma_ = 0;      // lognormal
  std::vector<double> cdf_;        // zipf
  std::vector<std::int32_t> values_;  // samples from a trace

  struct Parser;  // the spec's forms, one function each (length_dist.cpp)
};

// Usage text listing the forms above (help and error messages).
const char* length_spec_help();

}  // namespace twin
