#pragma once
// vLLM bench serve's peak figures (vllm/benchmarks/serve.py,
// calculate_metrics): max_output_tokens_per_s, the most output tokens whose
// time falls in one whole second, and max_concurrent_requests, the most
// completed requests active in one second (a request counts in every second
// from its start's to its end's, both included). vLLM counts seconds from
// the first successful request's start; records carry no such origin until
// the end, so seconds here count from the run's time 0 (the first arrival
// of a rebased trace, the engine's start). Streams records in any order;
// memory grows with the run's span in seconds, not with its tokens.
#include <cstdint>
#include <map>
#include <unordered_map>

#include "engine/core/records.hpp"

namespace twin {

class PeakTally {
 public:
  // A finished request: its tokens at first_token and after each ITL gap
  // (vLLM's token times), its span from arrival to finish.
  void add(const RequestRecord& record);
  std::uint64_t max_output_tokens_per_s() const;
  std::uint64_t max_concurrent_requests() const;

 private:
  std::unordered_map<std::int64_t, std::uint64_t> tokens_;  // second -> tokens in it
  std::map<std::int64_t, std::int64_t> active_delta_;       // second -> requests starting - ending there
};

}  // namespace twin
