#pragma once
// The canonical request record: what a trace says about one request. Traces
// produce it, the router and replicas consume it. Mutable serving state lives
// in the scheduler, not here.
#include <cstdint>
#include <vector>

#include "base/types.hpp"

namespace twin {

// Prompt tokens [begin, end) that request `request` generated: a session's
// earlier answer, which the prompt repeats (traces/clients.hpp). That
// request's own sequence, its prompt and output, is the prompt's first `end`
// tokens, so the blocks it generated are named as it named them
// (generated_block_hash, engine/core/prefix_hash.hpp) and hit in the cache.
struct GeneratedSpan {
  RequestId request = 0;
  std::int32_t begin = 0;
  std::int32_t end = 0;
};

struct Request {
  RequestId id = 0;
  Time arrival = 0;
  std::int32_t prompt_len = 0;  // tokens
  std::int32_t output_len = 0;  // target number of generated tokens (>= 1)

  // Optional concrete prompt (engine runs, or traces that carry tokens).
  // When present its size equals prompt_len.
  std::vector<TokenId> prompt_tokens;
  // Leading prompt tokens whose content names prefix-cache blocks; -1: all.
  // The engine fills prompt positions a trace leaves unnamed (no hash id)
  // with per-request filler tokens and sets this to the named count, so its
  // cache names exactly the blocks the simulator names from the hash ids
  // (filler would otherwise let a request hit its own blocks after a
  // recompute preemption where the simulator cannot: replay parity).
  std::int32_t named_prompt_tokens = -1;

  // Optional Mooncake-style block ids: hash_ids[i] names prompt tokens
  // [i * hash_block_size, (i + 1) * hash_block_size). Requests that share a
  // leading run of ids share that prompt prefix.
  std::vector<std::uint64_t> hash_ids;
  std::int32_t hash_block_size = 0;
  // Earlier answers inside the prompt, ascending and disjoint (empty for a
  // trace's requests); positions outside them are named by hash_ids.
  std::vector<GeneratedSpan> generated;

  std::int32_t priority = 0;       // smaller is more urgent (as vLLM)
  std::int64_t session_id = -1;    // multi-turn conversation, -1 if none
  Time cancel_time = kNoTime;      // client gives up at this time, if set
};

}  // namespace twin
