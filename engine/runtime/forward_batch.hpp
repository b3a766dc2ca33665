#pragma once
// One step's work as the model runner sees it: per sequence, the new tokens
// and where they go. Plain data built by the executor from a StepPlan and the
// replica's block tables (the runner never sees the core's types).
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/types.hpp"
#include "models/forward_program.hpp"

namespace twin {

struct BatchSeq {
  RequestId id = 0;
  std::int32_t start = 0;    // position of the first new token (tokens before it are in the KV cache)
  std::int32_t num_new = 0;  // new tokens, taken in order from ForwardBatch::tokens
  std::span<const BlockId> block_table;  // covers start + num_new tokens
  bool samples = false;      // sample a token from the last new token's logits
  // With `samples`: sample from each of the last num_sampled new tokens'
  // rows (speculative verification: the target's token after each proposal),
  // as output tokens token_index, token_index + 1, ...
  std::int32_t num_sampled = 1;
  // Sampling (greedy when temperature <= 0). The draw depends only on
  // (seed, id, token_index), so a request samples alike in any batch.
  float temperature = 0.0f;
  std::int32_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  std::int64_t token_index = 0;  // index of the token being sampled in the request's output
};

struct ForwardBatch {
  std::vector<BatchSeq> seqs;
  std::vector<TokenId> tokens;  // every seq's new tokens, seq after seq
  bool return_logits = false;   // copy the sampling rows' logits to the host (tests)

  void clear() {
    seqs.clear();
    tokens.clear();
  }
};


struct ForwardOutput {
  std::vector<TokenId> sampled;  // num_sampled per sampling seq, in batch order
  std::vector<float> logits;     // [sampling seqs, vocab] when asked for
  OpTimes op_ns{};               // this pass's time per op when timed, else zeros
};

}  // namespace twin
