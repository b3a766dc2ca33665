#pragma once
// Speculative decoding's proposers: what fills a step's lookahead slots (the
// core schedules them, engine/core/scheduler.md "Speculative decoding") with
// guesses of the target's next tokens. The executor verifies them with the
// target in the same pass that computes the step's known tokens, so a
// proposer decides only how fast a request goes, never what it outputs.
//   - n-gram prompt lookup (ngram_proposer.hpp): no model, the continuation
//     of the latest earlier occurrence of the last n tokens;
//   - a draft model (draft_proposer.hpp): another model the engine runs,
//     with its own KV pool addressed by the target's block tables.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/types.hpp"

namespace twin {

// One seq of a step as a proposer sees it. Its known tokens are prompt then
// output; the target computes positions [num_computed, num_computed +
// num_known_new) of them, then verifies num_lookahead proposals.
struct ProposerSeq {
  RequestId id = 0;
  std::span<const TokenId> prompt;
  std::span<const TokenId> output;
  std::int32_t num_computed = 0;
  std::int32_t num_known_new = 0;
  std::int32_t num_lookahead = 0;
  std::span<const BlockId> block_table;  // the target's: covers num_computed + num_known_new + num_lookahead
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  // Called once per step with every seq of the plan, in plan order (a draft
  // model mirrors the target's prefill chunks). Replaces `out` with the
  // proposals of the seqs with lookahead: num_lookahead each, in plan order.
  virtual void propose(std::span<const ProposerSeq> seqs, std::vector<TokenId>& out) = 0;
  // After verification: request `id`'s first `valid_tokens` positions hold
  // the target's accepted tokens.
  virtual void verified(RequestId /*id*/, std::int32_t /*valid_tokens*/) {}
  // The plan's KV copies, on the proposer's own cache where it has one.
  virtual void swap_out(std::span<const BlockCopy> /*moves*/) {}
  virtual void swap_in(std::span<const BlockCopy> /*moves*/) {}
  // A request ended: drop what is kept for it.
  virtual void forget(RequestId /*id*/) {}
};

}  // namespace twin
