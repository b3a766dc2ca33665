#pragma once
// The waiting queue of one replica, ordered by the configured queue order
// (a QueueOrderPolicy, policy.hpp). Entries are (key, ticket, slot): key is
// the policy's primary key (priority, prompt length, bucket index, or 0),
// computed once at enqueue, ticket the enqueue order. A request put
// back after preemption gets a ticket below every other, so it leads its key.
// Iteration is lazy so an admission pass that stops early costs O(admitted).
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include "engine/core/policy.hpp"
#include "engine/core/request.hpp"
#include "engine/core/scheduler_config.hpp"

namespace twin {

struct QueueEntry {
  std::int64_t key = 0;
  std::int64_t ticket = 0;
  std::int32_t slot = 0;
  friend bool operator<(const QueueEntry& a, const QueueEntry& b) {
    return a.key != b.key ? a.key < b.key : a.ticket < b.ticket;
  }
};

class RequestQueue {
 public:
  using Set = std::set<QueueEntry>;
  using Iterator = Set::const_iterator;

  explicit RequestQueue(const SchedulerConfig& config);

  // Queues slot; at_front for a preempted request, which has generated
  // num_output tokens so far. Returns its entry (keep it to erase).
  QueueEntry push(const Request& req, std::int32_t slot, bool at_front, std::int32_t num_output = 0);
  void erase(const QueueEntry& entry) { entries_.erase(entry); }
  std::size_t size() const { return entries_.size(); }
  const Set& entries() const { return entries_; }  // key order (not bucket rotation)
  bool empty() const { return entries_.empty(); }

  // Visits slots in service order until visit returns false. With
  // rotating keys (length_buckets), service starts at the current bucket (the first non-empty
  // one at or after the last served) and wraps around.
  template <class Visit>
  void for_each(Visit&& visit) {
    if (entries_.empty()) return;
    Iterator start = entries_.begin();
    if (rotating_) {
      start = entries_.lower_bound(QueueEntry{current_bucket_, std::numeric_limits<std::int64_t>::min(), 0});
      if (start == entries_.end()) start = entries_.begin();
      current_bucket_ = start->key;
    }
    const std::int64_t start_key = start->key;
    for (Iterator it = start; it != entries_.end();) {
      Iterator next = std::next(it);  // visit may erase it
      if (!visit(it->slot)) return;
      it = next;
    }
    if (!rotating_) return;
    // Wrap around to the buckets before the current one (start may be erased).
    for (Iterator it = entries_.begin(); it != entries_.end() && it->key < start_key;) {
      Iterator next = std::next(it);
      if (!visit(it->slot)) return;
      it = next;
    }
  }

  const QueueOrderPolicy& order() const { return *order_; }

 private:
  std::unique_ptr<QueueOrderPolicy> order_;
  bool rotating_;  // order_->service() == rotating_keys, read per admission pass
  Set entries_;
  std::int64_t back_ticket_ = 0;
  std::int64_t front_ticket_ = 0;
  std::int64_t current_bucket_ = 0;
};

}  // namespace twin
