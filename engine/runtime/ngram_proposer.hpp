#pragma once
// Prompt-lookup decoding (vLLM's "ngram" method; Saxena's prompt lookup):
// for n from prompt_lookup_max down to prompt_lookup_min, find the latest
// earlier occurrence of the request's last n tokens in its prompt and
// output and propose the tokens that followed it. No model, no KV.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/proposer.hpp"

namespace twin {

// The proposals for one request: `count` tokens continuing `tokens` (its
// prompt then output). Where the match's continuation runs into the end of
// `tokens` it continues with the proposals themselves (a repeating pattern
// goes on repeating); with no match, the last token repeated.
void ngram_propose(std::span<const TokenId> tokens, std::int32_t count, std::int32_t lookup_max,
                   std::int32_t lookup_min, std::vector<TokenId>& out);

class NgramProposer final : public Proposer {
 public:
  // UsageError unless 1 <= lookup_min <= lookup_max.
  NgramProposer(std::int32_t lookup_max, std::int32_t lookup_min);
  std::string name() const override { return "ngram"; }
  void propose(std::span<const ProposerSeq> seqs, std::vector<TokenId>& out) override;

 private:
  std::int32_t max_, min_;
  std::vector<TokenId> joined_;  // prompt then output, reused
};

}  // namespace twin
