#pragma once
// The replay cost model: each step lasts what the engine measured for it.
// Fed an engine run's steps.csv, the simulator must reproduce that run's
// per-request timings exactly (replay parity): the policy code is the same on
// both sides, so any prediction error left belongs to the cost model.
//
// Steps are consumed per replica in the order the simulator plans them. Each
// planned step is checked against its record (batch size, new tokens): a
// mismatch means the two runs diverged, which is an error naming the step,
// not a number silently off.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "sim/cost_model.hpp"

namespace twin {

class ReplayCostModel final : public CostModel {
 public:
  // `origin` names the records in errors (e.g. the steps.csv path).
  ReplayCostModel(const std::vector<StepRecord>& steps, std::string origin);
  static ReplayCostModel from_file(const std::string& steps_csv);

  // The recorded duration of the replica's next step (it includes any swap
  // copies, so swap_time is 0). Throws twin::Error when the records run out
  // or the planned step differs from the recorded one.
  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t) override { return 0; }

  // Steps not yet replayed, over all replicas (0 after a faithful replay).
  std::int64_t remaining() const;

 private:
  struct Recorded {
    Time duration = 0;
    std::int32_t batch_size = 0;
    std::int64_t new_tokens = 0;
  };
  struct Log {
    std::vector<Recorded> steps;  // in step order
    std::size_t next = 0;         // the next step to replay
  };
  std::string origin_;
  // Keyed by replica id, not indexed: the ids come from a file, and one row
  // with replica 2147483647 must not size a vector by it.
  std::map<std::int32_t, Log> by_replica_;
};

}  // namespace twin
