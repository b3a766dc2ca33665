#include "engine/core/block_pool.hpp"

#include <algorithm>

namespace twin {

BlockPool::BlockPool(std::int32_t num_blocks, std::int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      sentinel_(num_blocks),
      ref_(static_cast<std::size_t>(num_blocks), 0),
      prev_(static_cast<std::size_t>(num_blocks) + 1),
      next_(static_cast<std::size_t>(num_blocks) + 1),
      hash_(static_cast<std::size_t>(num_blocks), 0),
      cached_(static_cast<std::size_t>(num_blocks), 0),
      has_tokens_(static_cast<std::size_t>(num_blocks), 0) {
  prev_[at(sentinel_)] = sentinel_;
  next_[at(sentinel_)] = sentinel_;
  for (BlockId b = 0; b < num_blocks_; ++b) push_tail(b);
  index_.reserve(static_cast<std::size_t>(num_blocks_));
}

void BlockPool::unlink(BlockId b) {
  next_[at(prev_[at(b)])] = next_[at(b)];
  prev_[at(next_[at(b)])] = prev_[at(b)];
  --num_free_;
}

void BlockPool::push_tail(BlockId b) {
  const BlockId last = prev_[at(sentinel_)];
  prev_[at(b)] = last;
  next_[at(b)] = sentinel_;
  next_[at(last)] = b;
  prev_[at(sentinel_)] = b;
  ++num_free_;
}

BlockId BlockPool::pop_free(bool& evicted) {
  const BlockId b = next_[at(sentinel_)];
  unlink(b);
  evicted = cached_[at(b)] != 0;
  if (evicted) {
    index_.erase(hash_[at(b)]);
    cached_[at(b)] = 0;
  }
  has_tokens_[at(b)] = 0;
  ref_[at(b)] = 1;
  return b;
}

void BlockPool::acquire(BlockId b) {
  if (ref_[at(b)]++ == 0) unlink(b);
}

void BlockPool::release(BlockId b) {
  if (--ref_[at(b)] == 0) push_tail(b);
}

BlockId BlockPool::find(BlockHash h) const {
  const auto it = index_.find(h);
  return it == index_.end() ? -1 : it->second;
}

bool BlockPool::publish(BlockId b, BlockHash h, std::span<const TokenId> tokens) {
  if (cached_[at(b)] != 0) return false;
  if (!index_.emplace(h, b).second) return false;
  hash_[at(b)] = h;
  cached_[at(b)] = 1;
  if (!tokens.empty()) {
    if (tokens_.empty()) tokens_.resize(static_cast<std::size_t>(num_blocks_) * at(block_size_));
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(at(b) * at(block_size_)));
    has_tokens_[at(b)] = 1;
  }
  return true;
}

bool BlockPool::tokens_match(BlockId b, std::span<const TokenId> tokens) const {
  const auto first = tokens_.begin() + static_cast<std::ptrdiff_t>(at(b) * at(block_size_));
  return std::equal(tokens.begin(), tokens.end(), first);
}

std::string BlockPool::check() const {
  std::int32_t walked = 0;
  std::vector<std::uint8_t> seen(at(num_blocks_), 0);
  for (BlockId b = next_[at(sentinel_)]; b != sentinel_; b = next_[at(b)]) {
    if (b < 0 || b >= num_blocks_) return "free list holds invalid block " + std::to_string(b);
    if (seen[at(b)]) return "free list visits block " + std::to_string(b) + " twice";
    seen[at(b)] = 1;
    if (prev_[at(next_[at(b)])] != b) return "free list links broken at block " + std::to_string(b);
    if (ref_[at(b)] != 0) return "block " + std::to_string(b) + " is in the free list with ref " +
                                 std::to_string(ref_[at(b)]);
    ++walked;
  }
  if (walked != num_free_) return "free list has " + std::to_string(walked) + " blocks, counter says " +
                                  std::to_string(num_free_);
  std::int32_t zero_ref = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (ref_[at(b)] < 0) return "block " + std::to_string(b) + " has negative ref count";
    if (ref_[at(b)] == 0) ++zero_ref;
  }
  if (zero_ref != walked) return "free list has " + std::to_string(walked) + " blocks but " +
                                 std::to_string(zero_ref) + " have ref 0";
  std::int32_t cached = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (!cached_[at(b)]) continue;
    ++cached;
    const auto it = index_.find(hash_[at(b)]);
    if (it == index_.end() || it->second != b) return "cached block " + std::to_string(b) + " is not indexed";
  }
  for (const auto& [h, b] : index_) {
    if (b < 0 || b >= num_blocks_ || !cached_[at(b)] || hash_[at(b)] != h) {
      return "hash index entry points to block " + std::to_string(b) + " whose stored hash differs";
    }
  }
  if (cached != static_cast<std::int32_t>(index_.size())) return "hash index size differs from cached blocks";
  return {};
}

}  // namespace twin
