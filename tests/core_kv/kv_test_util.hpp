#pragma once
// Request builders shared by the KV cache tests.
#include <cstdint>
#include <vector>

#include "engine/core/prefix_hash.hpp"
#include "engine/core/request.hpp"

namespace twin::test {

inline Request token_request(RequestId id, std::vector<TokenId> tokens) {
  Request r;
  r.id = id;
  r.prompt_len = static_cast<std::int32_t>(tokens.size());
  r.output_len = 1;
  r.prompt_tokens = std::move(tokens);
  return r;
}

inline Request iota_request(RequestId id, std::int32_t len, TokenId first = 0) {
  std::vector<TokenId> t(static_cast<std::size_t>(len));
  for (std::int32_t i = 0; i < len; ++i) t[static_cast<std::size_t>(i)] = first + i;
  return token_request(id, std::move(t));
}

inline Request length_request(RequestId id, std::int32_t len) {
  Request r;
  r.id = id;
  r.prompt_len = len;
  r.output_len = 1;
  return r;
}

inline Request trace_request(RequestId id, std::int32_t len, std::vector<std::uint64_t> ids, std::int32_t t) {
  Request r;
  r.id = id;
  r.prompt_len = len;
  r.output_len = 1;
  r.hash_ids = std::move(ids);
  r.hash_block_size = t;
  return r;
}

// The token a trace block id stands for at `offset`: what an engine would
// materialise, a function of (id, offset) only.
inline TokenId materialised_token(std::uint64_t id, std::int32_t offset) {
  return static_cast<TokenId>(mix64(id * 1000003u + static_cast<std::uint64_t>(offset)) >> 33);
}

inline Request materialise(const Request& trace) {
  std::vector<TokenId> t(static_cast<std::size_t>(trace.prompt_len));
  for (std::int32_t p = 0; p < trace.prompt_len; ++p) {
    const auto j = static_cast<std::size_t>(p / trace.hash_block_size);
    // Past the trace's ids the prompt is this request's own content.
    t[static_cast<std::size_t>(p)] =
        j < trace.hash_ids.size()
            ? materialised_token(trace.hash_ids[j], p % trace.hash_block_size)
            : materialised_token(0xABCD000000000000ull + static_cast<std::uint64_t>(trace.id), p);
  }
  return token_request(trace.id, std::move(t));
}

// Small deterministic generator (the core forbids <random>; tests keep to the
// same style so runs are reproducible everywhere).
struct Rng {
  std::uint64_t state;
  explicit Rng(std::uint64_t seed) : state(seed) {}
  std::uint64_t next() { return mix64(state++); }
  std::int32_t uniform(std::int32_t lo, std::int32_t hi) {  // inclusive
    return lo + static_cast<std::int32_t>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
};

}  // namespace twin::test
