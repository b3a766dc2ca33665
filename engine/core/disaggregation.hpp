#pragma once
// Prefill/decode disaggregation (Splitwise, DistServe, vLLM's disaggregated
// prefill, Dynamo): a cluster's replicas form a prefill pool and a decode
// pool. A request disaggregated runs its prefill on a prefill replica, which
// samples its first token there; its KV then moves to a decode replica,
// which must first reserve free blocks for it (admission control: the
// transfer waits until they are there), and it decodes there. The serving
// loop (serving_loop.hpp) moves requests between the pools; a clock prices
// the transfer. The plain structs here are what passes between them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/types.hpp"
#include "engine/core/request.hpp"

namespace twin {

// What a replica serves. `mixed` (the default: no pools) runs prefill and
// decode; a `prefill` replica hands every request off after its first
// token (unless that was its last); a `decode` replica takes hand-offs and,
// for requests not disaggregated, prefills them locally.
enum class ReplicaRole : std::uint8_t { mixed, prefill, decode };

// Which requests go through the prefill pool: none (`never`: the prefill
// pool idles, a baseline), all (`always`), or those whose prompt has more
// than `conditional_threshold` tokens not cached on the decode replica the
// decode router picks (`conditional`, as vLLM's and Dynamo's conditional
// disaggregation: a short or mostly cached prompt prefills locally).
enum class DisaggMode : std::uint8_t { never, always, conditional };

std::vector<std::string> replica_role_names();
ReplicaRole replica_role(std::string_view name);  // UsageError listing the names
std::string_view replica_role_name(ReplicaRole role);
std::vector<std::string> disagg_mode_names();
DisaggMode disagg_mode(std::string_view name);  // UsageError listing the names
std::string_view disagg_mode_name(DisaggMode mode);

// A request whose prefill is done on a prefill replica, with tokens left to
// generate. The prefill replica keeps its KV blocks until the transfer is
// done (the decode side reads them) or the request ends before it starts.
struct Handoff {
  Request request;
  std::int32_t from_replica = -1;
  Time prefill_start = kNoTime;    // its first prefill step began
  Time first_token = kNoTime;      // its prefill ended: the first token exists
  std::int32_t cached_prompt_tokens = 0;  // prefix hits on the prefill replica
  std::int32_t preemptions = 0;
  std::int64_t energy_uj = 0;  // its share of the prefill side's steps (RequestRecord::energy_uj)
};

// A transfer a decode replica can start now: it has reserved the blocks.
struct InboundTransfer {
  RequestId id = 0;
  std::int32_t from_replica = -1;
  std::int32_t to_replica = -1;
  std::int32_t tokens = 0;         // KV tokens to move: the prompt less the decode side's own prefix hits
  Time prefill_start = kNoTime;
  Time prefill_end = kNoTime;
  Time start = kNoTime;            // blocks reserved: the transfer may begin
};

// What a clock says of a transfer.
struct TransferTiming {
  Time done = kNoTime;             // the KV is on the decode replica
  std::int64_t bytes = 0;
};

}  // namespace twin
