#pragma once
// The serving loop's agenda (engine/core/serving_loop.hpp): events ordered
// by (time, sequence number). The sequence number is the insertion order, so
// events at the same time run in the order they were scheduled and a run is
// reproducible bit for bit.
#include <cstdint>
#include <vector>

#include "base/types.hpp"

namespace twin {

enum class EventKind : std::uint8_t {
  arrival,      // the next trace request reaches the router
  stage_free,   // a replica's first pipeline stage can take another plan
  plan_done,    // a plan left the last stage: its tokens exist
  wakeup,       // a replica asked to be polled (batch timeout, cancel time)
  transfer_done,  // a request's KV reached its decode replica (slot: the loop's transfer)
  cancel,       // a live source's client gave up on a request (ServingLoop::run_live)
};

struct Event {
  Time time = 0;
  std::uint64_t seq = 0;
  EventKind kind = EventKind::arrival;
  std::int32_t replica = -1;
  std::int32_t slot = -1;  // plan_done: which in-flight plan of the replica
};

class EventQueue {
 public:
  void push(Time time, EventKind kind, std::int32_t replica = -1, std::int32_t slot = -1);
  // The earliest event; ties in insertion order. Precondition: !empty().
  Event pop();
  const Event& top() const { return heap_.front(); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  std::vector<Event> heap_;  // binary min-heap on (time, seq)
  std::uint64_t next_seq_ = 0;
};

}  // namespace twin
