#include "engine/runtime/ngram_proposer.hpp"

#include <algorithm>
#include <string>

#include "base/error.hpp"

namespace twin {

void ngram_propose(std::span<const TokenId> tokens, std::int32_t count, std::int32_t lookup_max,
                   std::int32_t lookup_min, std::vector<TokenId>& out) {
  const auto n_tokens = static_cast<std::int64_t>(tokens.size());
  const std::size_t first = out.size();
  if (count <= 0 || n_tokens == 0) {
    out.insert(out.end(), static_cast<std::size_t>(std::max(0, count)), TokenId{0});
    return;
  }
  // The continuation starts right after the match: `from` indexes the
  // virtual sequence tokens ++ proposals.
  std::int64_t from = -1;
  for (std::int64_t n = std::min<std::int64_t>(lookup_max, n_tokens - 1); n >= lookup_min && from < 0; --n) {
    const std::span<const TokenId> suffix = tokens.subspan(static_cast<std::size_t>(n_tokens - n));
    // Latest occurrence ending before the suffix itself.
    for (std::int64_t start = n_tokens - n - 1; start >= 0; --start) {
      if (std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) {
        from = start + n;
        break;
      }
    }
  }
  for (std::int32_t m = 0; m < count; ++m) {
    if (from < 0) {
      out.push_back(tokens.back());
      continue;
    }
    const std::int64_t at = from + m;
    out.push_back(at < n_tokens ? tokens[static_cast<std::size_t>(at)]
                                : out[first + static_cast<std::size_t>(at - n_tokens)]);
  }
}

NgramProposer::NgramProposer(std::int32_t lookup_max, std::int32_t lookup_min) : max_(lookup_max), min_(lookup_min) {
  if (lookup_min < 1 || lookup_max < lookup_min) {
    throw UsageError("speculative config: prompt_lookup_min " + std::to_string(lookup_min) + " and prompt_lookup_max " +
                     std::to_string(lookup_max) + " must satisfy 1 <= min <= max");
  }
}

void NgramProposer::propose(std::span<const ProposerSeq> seqs, std::vector<TokenId>& out) {
  out.clear();
  for (const ProposerSeq& s : seqs) {
    if (s.num_lookahead <= 0) continue;
    joined_.assign(s.prompt.begin(), s.prompt.end());
    joined_.insert(joined_.end(), s.output.begin(), s.output.end());
    ngram_propose(joined_, s.num_lookahead, max_, min_, out);
  }
}

}  // namespace twin
