#pragma once
// Seeded, streaming workload generator. Same options and seed, same requests,
// on every platform (own PRNG and distributions, prng.hpp). Memory holds only
// the sessions still in progress.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/request.hpp"
#include "traces/arrival_process.hpp"

namespace twin {

struct GeneratorOptions {
  std::int64_t max_requests = 1000;  // stop after this many (0: no limit; then duration_s is needed)
  double duration_s = 0;             // stop at this arrival time (0: no limit)
  ArrivalKind arrivals = ArrivalKind::poisson;  // burst: every arrival at 0 (rate unused)
  double rate = 1.0;                 // requests (or, with sessions, new sessions) per second
  double cv = 1.0;                   // gamma: coefficient of variation of the gaps
  std::string replay_path;           // replay: the trace whose arrival times are reused
  std::string prompt = "lognormal:median=600:sigma=1.0:max=16384";  // LengthDist spec
  std::string output = "lognormal:median=200:sigma=0.9:max=4096";

  // Shared prefixes: `prefix_count` system prompts of `prefix_tokens` tokens;
  // a request starts with one of them (chosen uniformly) with probability
  // `prefix_fraction`, before its own prompt tokens.
  std::int32_t prefix_count = 0;
  std::int32_t prefix_tokens = 0;
  double prefix_fraction = 0;

  // Multi-turn sessions (on when session_turns is non-empty): each arrival
  // starts a session of `session_turns` turns; turn t+1 arrives a think time
  // (exponential, mean think_time_s) after turn t and its prompt is turn t's
  // prompt + turn t's output + new user tokens (`session_user_tokens`). A
  // session ends early once its prompt would exceed max_context.
  std::string session_turns;          // LengthDist spec, e.g. uniform:2:8
  double think_time_s = 30.0;
  std::string session_user_tokens = "lognormal:median=100:sigma=0.8:max=2048";
  std::int32_t max_context = 32768;

  std::int32_t hash_block_size = 16;  // tokens per hash id (shared prefixes and sessions)
  std::uint64_t seed = 0;
};

// Parses "K:L:f" into the three prefix fields; UsageError otherwise.
void parse_shared_prefix(std::string_view spec, GeneratorOptions& options);
// "poisson", "gamma", "constant" or "trace:PATH"; UsageError otherwise.
void parse_arrivals(std::string_view spec, GeneratorOptions& options);

class TraceGenerator {
 public:
  // Validates the options (UsageError naming the bad one).
  explicit TraceGenerator(const GeneratorOptions& options);
  ~TraceGenerator();
  TraceGenerator(TraceGenerator&&) noexcept;
  TraceGenerator& operator=(TraceGenerator&&) noexcept;

  // Next request in arrival order (ids 0, 1, ...); false when done.
  bool next(Request& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twin
