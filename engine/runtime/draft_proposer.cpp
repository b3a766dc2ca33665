#include "engine/runtime/draft_proposer.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"

namespace twin {

DraftModelProposer::DraftModelProposer(ModelRunner& draft, const ModelRunner& target) : draft_(&draft) {
  const ModelConfig& d = draft_->config();
  const ModelConfig& t = target.config();
  if (d.vocab_size != t.vocab_size) {
    throw UsageError("speculative config: draft model '" + d.name + "' has a vocabulary of " +
                     std::to_string(d.vocab_size) + " tokens, the target '" + t.name + "' " +
                     std::to_string(t.vocab_size) + ": a draft must share the target's vocabulary");
  }
  if (draft_->options().block_size != target.options().block_size ||
      draft_->num_blocks() != target.num_blocks() || draft_->num_host_blocks() != target.num_host_blocks()) {
    throw Error("draft model: its KV pool must mirror the target's blocks (internal error)");
  }
}

void DraftModelProposer::verified(RequestId id, std::int32_t valid_tokens) {
  const auto it = valid_.find(id);
  if (it != valid_.end()) it->second = std::min(it->second, valid_tokens);
}

void DraftModelProposer::propose(std::span<const ProposerSeq> seqs, std::vector<TokenId>& out) {
  out.clear();
  offsets_.assign(seqs.size(), 0);
  std::int32_t max_lookahead = 0;
  for (std::size_t j = 0; j < seqs.size(); ++j) {
    offsets_[j] = out.size();
    out.resize(out.size() + static_cast<std::size_t>(seqs[j].num_lookahead));
    max_lookahead = std::max(max_lookahead, seqs[j].num_lookahead);
  }
  auto token_at = [](const ProposerSeq& s, std::int32_t p) {
    const auto prompt = static_cast<std::int32_t>(s.prompt.size());
    return p < prompt ? s.prompt[static_cast<std::size_t>(p)] : s.output[static_cast<std::size_t>(p - prompt)];
  };

  // Pass 1: every seq's known tokens, from where the draft's KV stops being
  // right (a catch-up after a verification) to the target's new end; a seq
  // with lookahead samples its first proposal from the last row.
  batch_.clear();
  owners_.clear();
  for (std::size_t j = 0; j < seqs.size(); ++j) {
    const ProposerSeq& s = seqs[j];
    std::int32_t start = s.num_computed;
    // A request seen before whose draft KV stops short of the target's
    // catches up; one never seen (or recomputed from 0) starts where the
    // target does: prefix-cache hits hold the draft's KV too.
    const auto it = valid_.find(s.id);
    if (it != valid_.end() && it->second < start) start = it->second;
    const std::int32_t end = s.num_computed + s.num_known_new;
    for (std::int32_t p = start; p < end; ++p) batch_.tokens.push_back(token_at(s, p));
    BatchSeq b;
    b.id = s.id;
    b.start = start;
    b.num_new = end - start;
    b.block_table = s.block_table;
    b.samples = s.num_lookahead > 0;
    batch_.seqs.push_back(b);
    if (b.samples) owners_.push_back(j);
    valid_[s.id] = end;
  }
  draft_->forward(batch_, output_);
  ++passes_;
  for (std::size_t i = 0; i < owners_.size(); ++i) out[offsets_[owners_[i]]] = output_.sampled[i];

  // Passes 2..k: one token per seq still proposing (its last proposal in,
  // the next out), batched over the seqs.
  for (std::int32_t m = 1; m < max_lookahead; ++m) {
    batch_.clear();
    owners_.clear();
    for (std::size_t j = 0; j < seqs.size(); ++j) {
      const ProposerSeq& s = seqs[j];
      if (s.num_lookahead <= m) continue;
      const std::int32_t pos = s.num_computed + s.num_known_new + m - 1;
      batch_.tokens.push_back(out[offsets_[j] + static_cast<std::size_t>(m - 1)]);
      BatchSeq b;
      b.id = s.id;
      b.start = pos;
      b.num_new = 1;
      b.block_table = s.block_table;
      b.samples = true;
      batch_.seqs.push_back(b);
      owners_.push_back(j);
      valid_[s.id] = pos + 1;
    }
    draft_->forward(batch_, output_);
    ++passes_;
    for (std::size_t i = 0; i < owners_.size(); ++i) {
      out[offsets_[owners_[i]] + static_cast<std::size_t>(m)] = output_.sampled[i];
    }
  }
}

}  // namespace twin
