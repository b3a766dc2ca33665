#pragma once
// How many of a step's proposals the simulated target accepts (speculative
// decoding; engine/core/scheduler.md). The virtual clock asks it for every
// step with lookahead and hands the counts to the core through
// StepResult::accepted, exactly where the engine's verification puts them.
//   - RateAcceptance: each proposal is accepted with probability alpha given
//     the ones before it were; draws are a hash of (seed, request, position),
//     so the same seed gives the same bytes in any batch, on any replica.
//   - ReplayAcceptance: the counts an engine run recorded (steps.csv), step
//     by step per replica, checked against the plan (replay parity).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/core/step_plan.hpp"

namespace twin {

class AcceptanceModel {
 public:
  virtual ~AcceptanceModel() = default;
  // `accepted` comes sized to plan.seqs and zeroed; fill the seqs with lookahead.
  virtual void draw(std::int32_t replica, const StepPlan& plan, std::vector<std::int32_t>& accepted) = 0;
};

class RateAcceptance final : public AcceptanceModel {
 public:
  RateAcceptance(double alpha, std::uint64_t seed);  // UsageError unless 0 <= alpha <= 1
  void draw(std::int32_t replica, const StepPlan& plan, std::vector<std::int32_t>& accepted) override;
  double alpha() const { return alpha_; }

 private:
  double alpha_;
  std::uint64_t seed_;
};

class ReplayAcceptance final : public AcceptanceModel {
 public:
  // `origin` names the records in errors. Steps are ordered per replica as
  // the replay cost model orders them (start, then step id).
  ReplayAcceptance(const std::vector<StepRecord>& steps, std::string origin);
  // twin::Error naming the step when the log runs out or its lookahead
  // differs from the plan's: the replay diverged.
  void draw(std::int32_t replica, const StepPlan& plan, std::vector<std::int32_t>& accepted) override;

 private:
  struct Log {
    std::vector<const StepRecord*> steps;
    std::size_t next = 0;
  };
  std::vector<StepRecord> records_;
  std::string origin_;
  std::map<std::int32_t, Log> by_replica_;
};

// The per-position rate that best explains recorded steps (maximum
// likelihood of the model above: accepted proposals over accepted proposals
// plus rejections, a rejection being a seq that accepted fewer than it had).
// twin::Error naming `origin` when the steps hold no speculation.
double measured_acceptance_rate(const std::vector<StepRecord>& steps, const std::string& origin);
// True when any step recorded lookahead per seq (an engine run with
// speculation writes it).
bool has_recorded_acceptance(const std::vector<StepRecord>& steps);

}  // namespace twin
