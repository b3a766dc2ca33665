#pragma once
// Seeded arrival times for traces that carry none (Vidur's length-only CSVs,
// ShareGPT conversations): the same process and PRNG stream as
// `trace generate`, so a rate and seed give the arrivals generate would.
#include <cstdint>
#include <string_view>

#include "base/types.hpp"
#include "traces/prng.hpp"

namespace twin {

// burst: every arrival at 0 (the generator's, for static-batch experiments).
enum class ArrivalKind { poisson, gamma, constant, replay, burst };

struct ArrivalOptions {
  ArrivalKind kind = ArrivalKind::poisson;  // poisson, gamma or constant (replay is the generator's)
  double rate = 0;                          // requests per second; 0: not given
  double cv = 1.0;                          // gamma: coefficient of variation of the gaps
  std::uint64_t seed = 0;
};

// "poisson", "gamma" or "constant"; UsageError otherwise (naming `flag`).
ArrivalKind parse_arrival_kind(std::string_view name, std::string_view flag);

class ArrivalProcess {
 public:
  // UsageError for a rate or cv that is not a finite number > 0.
  explicit ArrivalProcess(const ArrivalOptions& options);
  // The next arrival: 0 first, then the sum of the gaps. twin::Error past
  // the clock's range (about 292 years).
  Time next();

 private:
  ArrivalOptions options_;
  Rng rng_;
  double clock_s_ = 0;
  bool started_ = false;
};

}  // namespace twin
