#include "engine/core/block_pool.hpp"

#include <algorithm>

namespace twin {

BlockPool::BlockPool(std::int32_t num_blocks, std::int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      nodes_(static_cast<std::size_t>(std::max(num_blocks, 0))),
      hash_(static_cast<std::size_t>(std::max(num_blocks, 0)), 0) {
  std::size_t ring_size = 2;
  while (ring_size < 2 * nodes_.size()) ring_size *= 2;
  ring_.assign(ring_size, 0);
  ring_mask_ = ring_size - 1;
  for (BlockId b = 0; b < num_blocks_; ++b) push_tail(b, nodes_[at(b)]);
  index_.reserve(static_cast<std::size_t>(std::max(num_blocks_, 0)));
}

// Drops the stale entries (blocks taken from the middle as prefix hits). The
// ring is at least twice the pool, so after this at least half of it is
// free: amortised O(1) per push. `pushing` is the block being pushed: its ref
// is already 0, so an old entry of it would look live.
void BlockPool::compact(BlockId pushing) {
  std::uint64_t out = head_;
  for (std::uint64_t pos = head_; pos != tail_; ++pos) {
    const BlockId b = ring_[pos & ring_mask_];
    if (b == pushing || !live_entry(pos, b)) continue;
    nodes_[at(b)].ring_pos = static_cast<std::uint32_t>(out);
    ring_[out & ring_mask_] = b;
    ++out;
  }
  tail_ = out;
}

BlockId BlockPool::pop_free(bool& evicted) {
  BlockId b = ring_[head_ & ring_mask_];
  while (!live_entry(head_, b)) {
    ++head_;
    b = ring_[head_ & ring_mask_];
  }
  ++head_;
  --num_free_;
  // The ring says which blocks go next: start loading the state of one a few
  // pops ahead (a decode step pops several blocks, a prefill many).
  __builtin_prefetch(&nodes_[at(ring_[(head_ + 4) & ring_mask_])]);
  Node& node = nodes_[at(b)];
  evicted = (node.word & kCached) != 0;
  if (evicted) index_.erase(hash_[at(b)]);
  node.word = 1;  // ref 1, flags cleared
  return b;
}

void BlockPool::acquire(BlockId b) {
  // A free block's ring entry goes stale with its ref above 0.
  if ((nodes_[at(b)].word++ & kRefMask) == 0) --num_free_;
}

BlockId BlockPool::find(BlockHash h) const {
  const auto it = index_.find(h);
  return it == index_.end() ? -1 : it->second;
}

bool BlockPool::publish(BlockId b, BlockHash h, std::span<const TokenId> tokens) {
  Node& node = nodes_[at(b)];
  if ((node.word & kCached) != 0) return false;
  if (!index_.emplace(h, b).second) return false;
  hash_[at(b)] = h;
  node.word |= kCached;
  if (!tokens.empty()) {
    if (tokens_.empty()) tokens_.resize(static_cast<std::size_t>(num_blocks_) * at(block_size_));
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(at(b) * at(block_size_)));
    node.word |= kHasTokens;
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
  if (tail_ - head_ > ring_.size()) return "free list ring overflows";
  for (std::uint64_t pos = head_; pos != tail_; ++pos) {
    const BlockId b = ring_[pos & ring_mask_];
    if (b < 0 || b >= num_blocks_) return "free list holds invalid block " + std::to_string(b);
    if (!live_entry(pos, b)) continue;  // stale: the block left from the middle
    if (seen[at(b)]) return "free list visits block " + std::to_string(b) + " twice";
    seen[at(b)] = 1;
    ++walked;
  }
  if (walked != num_free_) return "free list has " + std::to_string(walked) + " blocks, counter says " +
                                  std::to_string(num_free_);
  std::int32_t zero_ref = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (ref_count(b) == 0) ++zero_ref;
  }
  if (zero_ref != walked) return "free list has " + std::to_string(walked) + " blocks but " +
                                 std::to_string(zero_ref) + " have ref 0";
  std::int32_t cached = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (!is_cached(b)) continue;
    ++cached;
    const auto it = index_.find(hash_[at(b)]);
    if (it == index_.end() || it->second != b) return "cached block " + std::to_string(b) + " is not indexed";
  }
  for (const auto& [h, b] : index_) {
    if (b < 0 || b >= num_blocks_ || !is_cached(b) || hash_[at(b)] != h) {
      return "hash index entry points to block " + std::to_string(b) + " whose stored hash differs";
    }
  }
  if (cached != static_cast<std::int32_t>(index_.size())) return "hash index size differs from cached blocks";
  return {};
}

}  // namespace twin
