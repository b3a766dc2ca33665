#pragma once
// Content names for full prompt blocks: a 64-bit hash chained over the
// parent's hash and the block's content, with a fixed seed so every run (and
// the engine and the simulator) names blocks identically.
#include <cstdint>
#include <span>

#include "base/types.hpp"

namespace twin {

// A strong 64-bit finaliser (splitmix64's): every input bit affects every
// output bit, so chaining it over words gives a well-spread hash.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Folds one 64-bit word into a running hash state.
constexpr std::uint64_t hash_combine(std::uint64_t state, std::uint64_t word) {
  return mix64(state ^ mix64(word + 0x632BE59BD9B4E019ull));
}

// Chain roots. Token blocks and trace-id blocks start from different seeds so
// that the two naming schemes never collide by construction.
inline constexpr BlockHash kTokenChainSeed = 0x5457494E544F4B31ull;  // "TWINTOK1"
inline constexpr BlockHash kTraceChainSeed = 0x5457494E54524331ull;  // "TWINTRC1"

// Hash of a block holding `tokens`, chained on `parent`.
BlockHash hash_token_block(BlockHash parent, std::span<const TokenId> tokens);

// One piece of a block's content described by a trace: tokens
// [begin, end) of the trace block named `trace_id`.
struct TraceSegment {
  std::uint64_t trace_id = 0;
  std::int32_t begin = 0;
  std::int32_t end = 0;
};

// Hash of a block whose content is the given trace segments, chained on
// `parent`.
BlockHash hash_trace_block(BlockHash parent, std::span<const TraceSegment> segments);

inline constexpr BlockHash kGeneratedChainSeed = 0x5457494E47454E31ull;  // "TWINGEN1"

// The name of block `block_index` (tokens [index * B, (index + 1) * B)) of
// request `request`'s sequence when its last token is one the request
// generated, chained on `parent` (the block before it in the same chain).
// The request's prompt and its output fix every token up to there, so the
// request and the index name the content. The KV cache names the full blocks
// a request generates so, and a later prompt that repeats the sequence (a
// session's next turn: Request::generated) names them alike, so it hits them.
constexpr BlockHash generated_block_hash(BlockHash parent, RequestId request, std::int32_t block_index) {
  const std::uint64_t h = hash_combine(hash_combine(kGeneratedChainSeed, parent), static_cast<std::uint64_t>(request));
  return hash_combine(h, static_cast<std::uint64_t>(static_cast<std::uint32_t>(block_index)));
}

}  // namespace twin
