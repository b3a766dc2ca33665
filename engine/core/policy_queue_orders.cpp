// The built-in queue orders (policy_list.hpp registers them).
#include <algorithm>
#include <vector>

#include "engine/core/policy.hpp"
#include "engine/core/scheduler_config.hpp"

namespace twin {

namespace {

// All keys equal: enqueue order.
class Fcfs final : public QueueOrderPolicy {
 public:
  std::int64_t key(const Request&, std::int32_t) const override { return 0; }
  bool arrival_order() const override { return true; }
};

class Priority final : public QueueOrderPolicy {
 public:
  std::int64_t key(const Request& request, std::int32_t) const override { return request.priority; }
};

class ShortestPrompt final : public QueueOrderPolicy {
 public:
  std::int64_t key(const Request& request, std::int32_t) const override { return request.prompt_len; }
};

// Reordered at admission by the cache's hits, which change every step; the
// queue itself keeps enqueue order (and falls back to it on long queues).
class LongestPrefix final : public QueueOrderPolicy {
 public:
  std::int64_t key(const Request&, std::int32_t) const override { return 0; }
  QueueService service() const override { return QueueService::cached_prefix; }
};

// Bucket i holds prompts up to bounds[i]; the last bucket is unbounded.
class LengthBuckets final : public QueueOrderPolicy {
 public:
  explicit LengthBuckets(std::vector<std::int32_t> bounds) : bounds_(std::move(bounds)) {
    std::sort(bounds_.begin(), bounds_.end());
  }
  std::int64_t key(const Request& request, std::int32_t) const override {
    return std::lower_bound(bounds_.begin(), bounds_.end(), request.prompt_len) - bounds_.begin();
  }
  QueueService service() const override { return QueueService::rotating_keys; }

 private:
  std::vector<std::int32_t> bounds_;
};

}  // namespace

std::unique_ptr<QueueOrderPolicy> make_fcfs_order(const SchedulerConfig&) { return std::make_unique<Fcfs>(); }
std::unique_ptr<QueueOrderPolicy> make_priority_order(const SchedulerConfig&) { return std::make_unique<Priority>(); }
std::unique_ptr<QueueOrderPolicy> make_shortest_prompt_order(const SchedulerConfig&) {
  return std::make_unique<ShortestPrompt>();
}
std::unique_ptr<QueueOrderPolicy> make_longest_prefix_order(const SchedulerConfig&) {
  return std::make_unique<LongestPrefix>();
}
std::unique_ptr<QueueOrderPolicy> make_length_buckets_order(const SchedulerConfig& config) {
  return std::make_unique<LengthBuckets>(config.length_bucket_bounds);
}

}  // namespace twin
