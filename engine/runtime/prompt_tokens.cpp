#include "engine/runtime/prompt_tokens.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

TokenId token_of(std::uint64_t key, std::uint64_t index, std::int64_t vocab) {
  return static_cast<TokenId>(mix(key + index) % static_cast<std::uint64_t>(vocab));
}

}  // namespace

void materialize_prompt_tokens(Request& req, std::int64_t vocab_size, std::uint64_t seed) {
  if (vocab_size <= 0) throw Error("materialize_prompt_tokens: vocabulary size must be positive");
  if (!req.prompt_tokens.empty()) {
    for (TokenId t : req.prompt_tokens) {
      if (t < 0 || t >= vocab_size) {
        throw Error("request " + std::to_string(req.id) + ": prompt token " + std::to_string(t) +
                    " outside the model's vocabulary of " + std::to_string(vocab_size));
      }
    }
    return;
  }
  const auto n = static_cast<std::size_t>(std::max(req.prompt_len, 0));
  req.prompt_tokens.resize(n);
  std::size_t covered = 0;
  if (req.hash_block_size > 0) {
    const auto hbs = static_cast<std::size_t>(req.hash_block_size);
    for (std::size_t b = 0; b < req.hash_ids.size() && covered < n; ++b) {
      const std::uint64_t key = mix(mix(seed ^ 0x68617368ull) ^ req.hash_ids[b]);  // "hash"
      for (std::size_t j = 0; j < hbs && covered < n; ++j) req.prompt_tokens[covered++] = token_of(key, j, vocab_size);
    }
  }
  req.named_prompt_tokens = static_cast<std::int32_t>(covered);
  const std::uint64_t key = mix(mix(seed) ^ static_cast<std::uint64_t>(req.id));
  for (std::size_t i = covered; i < n; ++i) req.prompt_tokens[i] = token_of(key, i, vocab_size);
}

}  // namespace twin
