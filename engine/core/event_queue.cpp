#include "engine/core/event_queue.hpp"

#include <algorithm>

namespace twin {
namespace {

// std heap algorithms build a max-heap: "less" here means "runs later".
bool runs_later(const Event& a, const Event& b) {
  if (a.time != b.time) return a.time > b.time;
  return a.seq > b.seq;
}

}  // namespace

void EventQueue::push(Time time, EventKind kind, std::int32_t replica, std::int32_t slot) {
  heap_.push_back(Event{time, next_seq_++, kind, replica, slot});
  std::push_heap(heap_.begin(), heap_.end(), runs_later);
}

Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), runs_later);
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace twin
