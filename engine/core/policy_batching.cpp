// The built-in batch formations (policy_list.hpp registers them).
#include "engine/core/policy.hpp"
#include "engine/core/scheduler_config.hpp"

namespace twin {

namespace {

class Continuous final : public BatchPolicy {
 public:
  bool forms_batches() const override { return false; }
  std::optional<Time> ready_at(const WaitingView&) const override { return std::nullopt; }
};

// A batch forms as soon as anything waits.
class StaticBatch final : public BatchPolicy {
 public:
  bool forms_batches() const override { return true; }
  std::optional<Time> ready_at(const WaitingView&) const override { return std::nullopt; }
};

// A batch forms once batch_size wait or the oldest has waited batch_timeout.
class DynamicBatch final : public BatchPolicy {
 public:
  DynamicBatch(std::int32_t batch_size, Time timeout) : batch_size_(batch_size), timeout_(timeout) {}
  bool forms_batches() const override { return true; }
  std::optional<Time> ready_at(const WaitingView& waiting) const override {
    if (waiting.size() >= static_cast<std::size_t>(batch_size_)) return std::nullopt;
    return waiting.oldest_queued_at() + timeout_;
  }

 private:
  std::int32_t batch_size_;
  Time timeout_;
};

}  // namespace

std::unique_ptr<BatchPolicy> make_continuous_batching(const SchedulerConfig&) {
  return std::make_unique<Continuous>();
}
std::unique_ptr<BatchPolicy> make_static_batching(const SchedulerConfig&) { return std::make_unique<StaticBatch>(); }
std::unique_ptr<BatchPolicy> make_dynamic_batching(const SchedulerConfig& config) {
  return std::make_unique<DynamicBatch>(config.batch_size, config.batch_timeout);
}

}  // namespace twin
