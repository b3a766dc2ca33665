// Shortest remaining first: the waiting request with the fewest output
// tokens left to generate is served first (ties in arrival order). A
// decode step per output token is what holds a request in the batch, so
// this is SRPT measured in steps; a request put back by a recompute
// preemption counts only the outputs it still owes.
//
// The worked example of docs/policies.md: a policy is this one file and
// its line in policy_list.hpp. It reads the trace's output length, which a
// live server does not know: an oracle bound for what an output-length
// predictor could buy, not a deployable order.
#include "engine/core/policy.hpp"

namespace twin {

namespace {

class ShortestRemaining final : public QueueOrderPolicy {
 public:
  std::int64_t key(const Request& request, std::int32_t num_output) const override {
    return static_cast<std::int64_t>(request.output_len) - num_output;
  }
};

}  // namespace

std::unique_ptr<QueueOrderPolicy> make_shortest_remaining_order(const SchedulerConfig&) {
  return std::make_unique<ShortestRemaining>();
}

}  // namespace twin
