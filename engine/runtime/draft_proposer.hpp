#pragma once
// A draft model as proposer: another model the engine runs (a smaller one
// sharing the target's vocabulary) proposes k tokens by k greedy steps.
//
// Its KV cache is a second pool addressed by the target's block ids (same
// block count and size), so the core's one block table serves both and
// prefix caching, swapping and freeing need no second bookkeeping: the
// draft computes every position the target computes (it mirrors prefill
// chunks) and so a prefix-cached block holds both models' KV. Per request
// it remembers how many leading positions of its own KV are right; after a
// verification that is at most the target's accepted length, and the next
// step catches up from there.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/forward_batch.hpp"
#include "engine/runtime/model_runner.hpp"
#include "engine/runtime/proposer.hpp"

namespace twin {

class DraftModelProposer final : public Proposer {
 public:
  // `draft` (borrowed; it outlives the proposer) must have the target's
  // vocabulary (UsageError naming both models otherwise), block size and
  // block counts.
  DraftModelProposer(ModelRunner& draft, const ModelRunner& target);
  std::string name() const override { return "draft_model"; }
  void propose(std::span<const ProposerSeq> seqs, std::vector<TokenId>& out) override;
  void verified(RequestId id, std::int32_t valid_tokens) override;
  void swap_out(std::span<const BlockCopy> moves) override { draft_->swap_out(moves); }
  void swap_in(std::span<const BlockCopy> moves) override { draft_->swap_in(moves); }
  void forget(RequestId id) override { valid_.erase(id); }

  ModelRunner& runner() { return *draft_; }
  // Draft forward passes run so far (1 + the largest lookahead per step).
  std::int64_t passes() const { return passes_; }

 private:
  ModelRunner* draft_;
  std::map<RequestId, std::int32_t> valid_;  // leading positions of right draft KV
  ForwardBatch batch_;
  ForwardOutput output_;
  std::vector<std::size_t> owners_;  // per sampling seq of a pass: index into the step's seqs
  std::vector<std::size_t> offsets_;  // per step seq: where its proposals start in `out`
  std::int64_t passes_ = 0;
};

}  // namespace twin
