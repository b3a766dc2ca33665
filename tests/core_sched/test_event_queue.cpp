#include <catch2/catch.hpp>

#include "engine/core/event_queue.hpp"

using namespace twin;

TEST_CASE("events run in time order, ties in insertion order") {
  EventQueue q;
  q.push(30, EventKind::wakeup, 3);
  q.push(10, EventKind::arrival, 1);
  q.push(20, EventKind::plan_done, 0, 0);
  q.push(10, EventKind::plan_done, 2, 1);
  q.push(10, EventKind::stage_free, 5);
  std::vector<std::pair<Time, std::int32_t>> order;
  while (!q.empty()) {
    const Event e = q.pop();
    order.emplace_back(e.time, e.replica);
  }
  const std::vector<std::pair<Time, std::int32_t>> expected{{10, 1}, {10, 2}, {10, 5}, {20, 0}, {30, 3}};
  CHECK(order == expected);
}

TEST_CASE("many ties keep insertion order through heap reshuffles") {
  EventQueue q;
  for (int i = 0; i < 1000; ++i) q.push((i * 7919) % 5, EventKind::arrival, i);
  Time last_time = -1;
  std::int32_t last_replica = -1;
  while (!q.empty()) {
    const Event e = q.pop();
    if (e.time == last_time) CHECK(e.replica > last_replica);
    CHECK(e.time >= last_time);
    last_time = e.time;
    last_replica = e.replica;
  }
}
