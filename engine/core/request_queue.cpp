#include "engine/core/request_queue.hpp"

namespace twin {

RequestQueue::RequestQueue(const SchedulerConfig& config)
    : order_(queue_orders().make(config.order, config)), rotating_(order_->service() == QueueService::rotating_keys) {}

QueueEntry RequestQueue::push(const Request& req, std::int32_t slot, bool at_front, std::int32_t num_output) {
  QueueEntry e;
  e.slot = slot;
  e.ticket = at_front ? --front_ticket_ : ++back_ticket_;
  e.key = order_->key(req, num_output);
  entries_.insert(e);
  return e;
}

}  // namespace twin
