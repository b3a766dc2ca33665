#include "traces/arrival_process.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"

namespace twin {

namespace {
constexpr double kMaxSeconds = 9.0e9;   // int64 ns reach about 292 years
constexpr std::uint64_t kArrivalStream = 1;  // the generator's arrival stream (generator.cpp)
}  // namespace

ArrivalKind parse_arrival_kind(std::string_view name, std::string_view flag) {
  if (name == "poisson") return ArrivalKind::poisson;
  if (name == "gamma") return ArrivalKind::gamma;
  if (name == "constant") return ArrivalKind::constant;
  throw UsageError(std::string(flag) + " '" + excerpt(name, 80) + "': known: poisson, gamma, constant");
}

ArrivalProcess::ArrivalProcess(const ArrivalOptions& options)
    : options_(options), rng_(options.seed, kArrivalStream) {
  if (!(options_.rate > 0 && std::isfinite(options_.rate))) throw UsageError("--rate must be a number > 0");
  if (options_.kind == ArrivalKind::gamma && !(options_.cv > 0 && std::isfinite(options_.cv)))
    throw UsageError("--cv must be a number > 0");
  if (options_.kind == ArrivalKind::replay) throw UsageError("replayed arrivals need a trace, not a rate");
  if (options_.kind == ArrivalKind::burst) throw UsageError("burst arrivals are trace generate's, not a rate's");
}

Time ArrivalProcess::next() {
  if (started_) {
    const double mean = 1.0 / options_.rate;
    switch (options_.kind) {
      case ArrivalKind::poisson:
        clock_s_ += rng_.exponential(mean);
        break;
      case ArrivalKind::gamma: {
        // Gamma gaps with shape 1/cv^2 have mean `mean` and CV `cv`.
        const double shape = 1.0 / (options_.cv * options_.cv);
        clock_s_ += rng_.gamma(shape, mean / shape);
        break;
      }
      case ArrivalKind::constant:
      case ArrivalKind::replay:
        clock_s_ += mean;
        break;
      case ArrivalKind::burst:
        break;
    }
  }
  started_ = true;
  if (!(clock_s_ <= kMaxSeconds)) throw Error("arrival past the clock's range (about 292 years); raise --rate");
  return from_seconds(clock_s_);
}

}  // namespace twin
