#pragma once
// What a router with a refresh period knows of the replicas: their figures
// as of its last refresh, plus its own count of what it has sent each one
// since. Production routers work this way (llm-d's scorers, Dynamo's KV
// router and the vLLM production stack's router read metrics scraped every
// so often and count the requests they dispatch in between), and it is
// what lets replicas advance apart between refreshes (docs/simulate.md,
// "Router refresh").
//
// Between refreshes the router's view of replica i is
//   outstanding = outstanding at the refresh + requests sent to i since
//   kv_usage    = usage at the refresh + prompt blocks sent to i since / its blocks
//   waiting     = waiting at the refresh + requests sent to i since (vLLM's
//                 DP client counts its own sends the same way)
//   running     = running at the refresh
//   cached prefix tokens = what i's cache held at the refresh (set per
//                request by the caller, who can reach the replicas then)
// so a burst inside one period spreads as the router's own bookkeeping says,
// while the replicas' progress (finished requests, freed blocks, newly
// cached prefixes) is seen only at the next refresh.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/router.hpp"

namespace twin {

// One replica's figures at a refresh.
struct ReplicaFigures {
  std::int64_t outstanding = 0;   // admitted, not yet ended
  double kv_usage = 0;            // share of its KV blocks in use
  std::int64_t waiting = 0;       // queued, not yet scheduled
  std::int64_t running = 0;
  std::int64_t kv_blocks = 1;     // its KV blocks
  std::int32_t block_size = 16;   // tokens per block
};

ReplicaFigures load_of(const Replica& replica);

class RouterSnapshot {
 public:
  // Takes the figures of a refresh and forgets what was sent before it.
  void refresh(std::vector<ReplicaFigures> loads);
  // The router sent `request` to replica i.
  void sent(std::int32_t i, const Request& request);
  // The cached prefix of the request about to be routed, per replica, as of
  // the refresh (prefix_affinity only; others never ask).
  void set_prefix_hits(std::span<const std::int32_t> hits) { hits_ = hits; }

  // RouterView (router.hpp).
  std::int32_t size() const { return static_cast<std::int32_t>(loads_.size()); }
  std::int64_t outstanding(std::int32_t i) const {
    return loads_[static_cast<std::size_t>(i)].outstanding + sent_[static_cast<std::size_t>(i)];
  }
  double kv_usage(std::int32_t i) const;
  std::int64_t waiting(std::int32_t i) const {
    return loads_[static_cast<std::size_t>(i)].waiting + sent_[static_cast<std::size_t>(i)];
  }
  std::int64_t running(std::int32_t i) const { return loads_[static_cast<std::size_t>(i)].running; }
  std::int32_t cached_prefix_tokens(std::int32_t i, const Request& request) const;

 private:
  std::vector<ReplicaFigures> loads_;
  std::vector<std::int64_t> sent_;         // requests sent since the refresh
  std::vector<std::int64_t> sent_blocks_;  // their prompt blocks
  std::span<const std::int32_t> hits_;
};

static_assert(RouterView<RouterSnapshot>);

}  // namespace twin
