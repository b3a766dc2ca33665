#include "engine/core/request_queue.hpp"

#include <algorithm>

namespace twin {

RequestQueue::RequestQueue(const SchedulerConfig& config)
    : config_order_(config.order), bounds_(config.length_bucket_bounds) {
  std::sort(bounds_.begin(), bounds_.end());
}

std::int64_t RequestQueue::bucket_of(std::int32_t prompt_len) const {
  // Bucket i holds prompts up to bounds_[i]; the last bucket is unbounded.
  return std::lower_bound(bounds_.begin(), bounds_.end(), prompt_len) - bounds_.begin();
}

QueueEntry RequestQueue::push(const Request& req, std::int32_t slot, bool at_front) {
  QueueEntry e;
  e.slot = slot;
  e.ticket = at_front ? --front_ticket_ : ++back_ticket_;
  switch (config_order_) {
    case QueueOrder::fcfs:
    case QueueOrder::longest_prefix:  // reordered at admission time (cache-dependent)
      e.key = 0;
      break;
    case QueueOrder::priority:
      e.key = req.priority;
      break;
    case QueueOrder::shortest_prompt:
      e.key = req.prompt_len;
      break;
    case QueueOrder::length_buckets:
      e.key = bucket_of(req.prompt_len);
      break;
  }
  entries_.insert(e);
  return e;
}

}  // namespace twin
