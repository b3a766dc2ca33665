#pragma once
// Helpers shared by the scheduler tests: requests, configs, a tiny driver.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/replica.hpp"

namespace twin::test {

inline Request make_request(RequestId id, std::int32_t prompt, std::int32_t output, Time arrival = 0) {
  Request r;
  r.id = id;
  r.arrival = arrival;
  r.prompt_len = prompt;
  r.output_len = output;
  return r;
}

// A request whose prompt is `shared` tokens of prefix `family` then unique tokens.
inline Request make_token_request(RequestId id, std::int32_t prompt, std::int32_t output, std::int32_t family,
                                  std::int32_t shared) {
  Request r = make_request(id, prompt, output);
  r.prompt_tokens.resize(static_cast<std::size_t>(prompt));
  for (std::int32_t i = 0; i < prompt; ++i) {
    r.prompt_tokens[static_cast<std::size_t>(i)] =
        i < shared ? family * 100003 + i : static_cast<TokenId>(1'000'000 + id * 4099 + i);
  }
  return r;
}

inline ReplicaConfig config_for(const std::string& preset, std::int32_t num_blocks) {
  ReplicaConfig c = replica_preset(preset);
  c.kv.num_blocks = num_blocks;
  return c;
}

// Plans and completes one step at `now`; returns the plan.
inline StepPlan step(Replica& r, Time now, Time duration = kNsPerMs) {
  StepPlan p = r.plan(now);
  if (!p.empty()) r.complete(p, StepResult{}, now + duration);
  return p;
}

// The plan's entry for request `id`, or nullptr.
inline const ScheduledSeq* find_seq(const StepPlan& p, RequestId id) {
  for (const auto& q : p.seqs) {
    if (q.id == id) return &q;
  }
  return nullptr;
}

// Checks the KV invariants over every live table; returns the first violation.
inline std::string kv_violation(const Replica& r) {
  std::vector<const SeqKv*> tables;
  for (const auto& v : r.live_seqs()) tables.push_back(v.kv);
  return r.kv_cache().check_invariants(tables);
}

}  // namespace twin::test
