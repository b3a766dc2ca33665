#pragma once
// Shared by the parity tests: traces that exercise queueing, idle wake-ups,
// prefix sharing and preemption, and an exact comparison of request records.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/records.hpp"
#include "engine/core/request.hpp"
#include "sim/cluster_config.hpp"

namespace twin::test {

// Every record a run hands its sink, kept.
class CollectSink final : public RecordSink {
 public:
  void on_request(const RequestRecord& r) override { requests.push_back(r); }
  void on_step(const StepRecord& s) override { steps.push_back(s); }
  std::vector<RequestRecord> requests;
  std::vector<StepRecord> steps;
};

// One replica group of the tiny model with these scheduler options; the
// engine takes the simulator's resolved ReplicaConfig, so both run the same
// policy by construction (the CLI test checks the flags agree too).
inline ClusterConfig tiny_cluster(const std::string& preset, std::int32_t blocks, const OptionList& options) {
  ClusterConfig c;
  c.groups.emplace_back();
  c.groups.front().model = "tiny";
  c.groups.front().hardware = "cpu";
  c.scheduler_preset = preset;
  c.num_gpu_blocks_override = blocks;
  c.scheduler_options = options;
  return c;
}

// `count` requests in bursts of five 0.2 ms apart, bursts `gap_ms` apart: a
// burst queues behind the running batch, and with a long enough gap the
// engine goes idle and is woken by the next burst. Lengths vary with the id.
inline std::vector<Request> bursty_trace(std::int32_t count, double gap_ms, std::int32_t max_prompt,
                                         std::int32_t max_output) {
  std::vector<Request> out;
  for (std::int32_t i = 0; i < count; ++i) {
    Request r;
    r.id = i;
    r.arrival = static_cast<Time>((i / 5) * gap_ms * 1e6) + (i % 5) * 200'000;
    r.prompt_len = 4 + (i * 37) % (max_prompt - 3);
    r.output_len = 1 + (i * 11) % max_output;
    out.push_back(r);
  }
  return out;
}

// Every other request shares a prefix of `shared_blocks` trace blocks of
// `block` tokens (Mooncake-style hash ids), so later ones hit the prefix cache.
inline void add_shared_prefixes(std::vector<Request>& trace, std::int32_t block, std::int32_t shared_blocks) {
  for (Request& r : trace) {
    if (r.id % 2 != 0) continue;
    const std::int32_t own = 1 + static_cast<std::int32_t>(r.id % 3);
    r.hash_block_size = block;
    r.hash_ids.clear();
    for (std::int32_t b = 0; b < shared_blocks; ++b) r.hash_ids.push_back(1000 + static_cast<std::uint64_t>(b));
    for (std::int32_t b = 0; b < own; ++b) r.hash_ids.push_back(5000 + static_cast<std::uint64_t>(r.id) * 16 + b);
    // The last block may be partial: the prompt ends a few tokens into it.
    r.prompt_len = (shared_blocks + own - 1) * block + 1 + static_cast<std::int32_t>(r.id % block);
  }
}

// Checks that two runs' records agree exactly, request by request (matched by
// id); returns the largest difference in ns over every time and gap.
inline Time check_same_records(const std::vector<RequestRecord>& engine, const std::vector<RequestRecord>& sim,
                               bool compare_itl) {
  REQUIRE(engine.size() == sim.size());
  std::map<RequestId, const RequestRecord*> by_id;
  for (const RequestRecord& r : sim) by_id[r.id] = &r;
  Time worst = 0;
  auto diff = [&](Time a, Time b) {
    const Time d = a > b ? a - b : b - a;
    if (d > worst) worst = d;
  };
  for (const RequestRecord& e : engine) {
    INFO("request " << e.id);
    const auto it = by_id.find(e.id);
    REQUIRE(it != by_id.end());
    const RequestRecord& s = *it->second;
    CHECK(s.outcome == e.outcome);
    CHECK(s.replica == e.replica);
    CHECK(s.arrival == e.arrival);
    CHECK(s.first_token == e.first_token);
    CHECK(s.finish == e.finish);
    CHECK(s.prompt_tokens == e.prompt_tokens);
    CHECK(s.output_tokens == e.output_tokens);
    CHECK(s.cached_prompt_tokens == e.cached_prompt_tokens);
    CHECK(s.preemptions == e.preemptions);
    diff(s.arrival, e.arrival);
    diff(s.first_token, e.first_token);
    diff(s.finish, e.finish);
    if (compare_itl) {
      CHECK(s.itl == e.itl);
      if (s.itl.size() == e.itl.size()) {
        for (std::size_t k = 0; k < s.itl.size(); ++k) diff(s.itl[k], e.itl[k]);
      }
    }
  }
  return worst;
}

}  // namespace twin::test
