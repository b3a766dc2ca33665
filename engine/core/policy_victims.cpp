// The built-in preemption victims (policy_list.hpp registers them).
#include "engine/core/policy.hpp"

namespace twin {

namespace {

class Newest final : public VictimPolicy {
 public:
  std::size_t pick(const RunningView& running) const override {
    for (std::size_t k = running.size(); k-- > 0;) {
      if (running.eligible(k)) return k;
    }
    return running.size();
  }
};

class Oldest final : public VictimPolicy {
 public:
  std::size_t pick(const RunningView& running) const override {
    const std::size_t n = running.size();
    for (std::size_t k = 0; k < n; ++k) {
      if (running.eligible(k)) return k;
    }
    return n;
  }
};

// Largest priority value is least urgent; ties go to the newest (as vLLM).
class LowestPriority final : public VictimPolicy {
 public:
  std::size_t pick(const RunningView& running) const override {
    const std::size_t n = running.size();
    std::size_t best = n;
    for (std::size_t k = 0; k < n; ++k) {
      if (!running.eligible(k)) continue;
      if (best == n || running.request(k).priority >= running.request(best).priority) best = k;
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<VictimPolicy> make_newest_victim(const SchedulerConfig&) { return std::make_unique<Newest>(); }
std::unique_ptr<VictimPolicy> make_oldest_victim(const SchedulerConfig&) { return std::make_unique<Oldest>(); }
std::unique_ptr<VictimPolicy> make_lowest_priority_victim(const SchedulerConfig&) {
  return std::make_unique<LowestPriority>();
}

}  // namespace twin
