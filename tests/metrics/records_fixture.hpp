#pragma once
// A small hand-made run whose figures the tests know by hand:
//   r0 replica 0: arrival 0, first token 100 ms, finish 1100 ms, 11 tokens -> TTFT 100, TPOT 100, E2E 1100
//   r1 replica 1: arrival 1 s, first 1.5 s, finish 2.5 s, 3 tokens, gaps 200 + 800 ms, 2 preemptions
//                 -> TTFT 500, TPOT 500, E2E 1500, max ITL 800
//   r2 replica 0: arrival 2 s, first = finish = 2.05 s, 1 token -> TTFT 50, no TPOT, E2E 50
//   r3 replica 1: rejected at 3 s
//   r4 replica 1: aborted at 4 s after 2 tokens (the span's end)
// Prompts 100, 200, 300 tokens (completed), 50 + 0 + 100 of them cached.
#include <vector>

#include "engine/core/records.hpp"

namespace twin::test {

inline std::vector<RequestRecord> hand_requests() {
  std::vector<RequestRecord> r(5);
  r[0].id = 0; r[0].replica = 0; r[0].arrival = 0; r[0].first_token = 100 * kNsPerMs;
  r[0].finish = 1100 * kNsPerMs; r[0].prompt_tokens = 100; r[0].output_tokens = 11; r[0].cached_prompt_tokens = 50;
  r[0].itl.assign(10, 100 * kNsPerMs);
  r[0].first_scheduled = 50 * kNsPerMs;
  r[1].id = 1; r[1].replica = 1; r[1].arrival = 1 * kNsPerSec; r[1].first_token = 1500 * kNsPerMs;
  r[1].finish = 2500 * kNsPerMs; r[1].prompt_tokens = 200; r[1].output_tokens = 3; r[1].preemptions = 2;
  r[1].itl = {200 * kNsPerMs, 800 * kNsPerMs};
  r[2].id = 2; r[2].replica = 0; r[2].arrival = 2 * kNsPerSec; r[2].first_token = 2050 * kNsPerMs;
  r[2].finish = 2050 * kNsPerMs; r[2].prompt_tokens = 300; r[2].output_tokens = 1; r[2].cached_prompt_tokens = 100;
  r[3].id = 3; r[3].replica = 1; r[3].outcome = Outcome::rejected; r[3].reason = "prompt too long, \"4096\" > max";
  r[3].arrival = 3 * kNsPerSec; r[3].finish = 3 * kNsPerSec; r[3].prompt_tokens = 5000;
  r[4].id = 4; r[4].replica = 1; r[4].outcome = Outcome::aborted; r[4].reason = "cancelled";
  r[4].arrival = 3500 * kNsPerMs; r[4].first_token = 3600 * kNsPerMs; r[4].finish = 4 * kNsPerSec;
  r[4].prompt_tokens = 10; r[4].output_tokens = 2;
  return r;
}

inline std::vector<StepRecord> hand_steps() {
  std::vector<StepRecord> s(2);
  s[0].step_id = 0; s[0].replica = 0; s[0].start = 0; s[0].duration = 12'345'678; s[0].batch_size = 2;
  s[0].num_prefill_seqs = 1; s[0].num_decode_seqs = 1; s[0].new_tokens = 101; s[0].context_tokens = 7;
  s[0].kv_blocks_used = 10; s[0].waiting = 3;
  s[1].step_id = 1; s[1].replica = 1; s[1].start = 123'456'789'012'345; s[1].duration = 1; s[1].batch_size = 4;
  s[1].num_decode_seqs = 4; s[1].new_tokens = 4; s[1].context_tokens = 4000; s[1].kv_blocks_used = 30;
  s[1].preempted = 1;
  return s;
}

}  // namespace twin::test
