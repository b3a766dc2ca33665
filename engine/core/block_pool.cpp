#include "engine/core/block_pool.hpp"

#include <algorithm>

namespace twin {

BlockPool::BlockPool(std::int32_t num_blocks, std::int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size), num_free_(std::max(num_blocks, 0)) {
  ring_.assign(16, 0);
  ring_mask_ = ring_.size() - 1;
}

std::size_t BlockPool::state_bytes() const {
  // The hash index: its nodes (key, value, next pointer, cached hash) and
  // its bucket array.
  const std::size_t index_node = sizeof(void*) + sizeof(BlockHash) + sizeof(BlockId) + sizeof(std::size_t);
  return nodes_.capacity() * sizeof(Node) + ring_.capacity() * sizeof(BlockId) +
         hash_.capacity() * sizeof(BlockHash) + tokens_.capacity() * sizeof(TokenId) +
         index_.size() * index_node + index_.bucket_count() * sizeof(void*);
}

// Room for one more entry: while the ring is smaller than twice the touched
// blocks it doubles (positions are absolute, so every entry keeps its
// position and each block's ring_pos stays valid); past that, compaction
// frees at least half of it, since at most num_touched entries are live.
void BlockPool::make_room(BlockId pushing) {
  if (ring_.size() >= 2 * nodes_.size()) {
    compact(pushing);
    return;
  }
  std::vector<BlockId> bigger(ring_.size() * 2, 0);
  const std::uint64_t mask = bigger.size() - 1;
  for (std::uint64_t pos = head_; pos != tail_; ++pos) bigger[pos & mask] = ring_[pos & ring_mask_];
  ring_ = std::move(bigger);
  ring_mask_ = mask;
}

// Drops the stale entries (blocks taken from the middle as prefix hits).
// `pushing` is the block being pushed: its ref is already 0, so an old entry
// of it would look live.
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
  --num_free_;
  if (nodes_.size() < at(num_blocks_)) {
    // Untouched blocks come first, lowest id first: the next one gets state.
    const auto b = static_cast<BlockId>(nodes_.size());
    nodes_.push_back(Node{1, 0});  // ref 1, flags cleared
    hash_.push_back(0);
    evicted = false;
    return b;
  }
  BlockId b = ring_[head_ & ring_mask_];
  while (!live_entry(head_, b)) {
    ++head_;
    b = ring_[head_ & ring_mask_];
  }
  ++head_;
  // The ring says which blocks go next: start loading the state of one a few
  // pops ahead (a decode step pops several blocks, a prefill many). A slot
  // past the tail may hold anything: only a valid id is followed.
  const BlockId ahead = ring_[(head_ + 4) & ring_mask_];
  if (touched(ahead)) __builtin_prefetch(nodes_.data() + at(ahead));
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
    const std::size_t end = (at(b) + 1) * at(block_size_);
    // Grown with the touched blocks (amortised by resize's doubling), not
    // sized for every block of the pool.
    if (tokens_.size() < end) tokens_.resize(std::max(end, nodes_.size() * at(block_size_)));
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
  const std::int32_t touched_blocks = num_touched();
  if (touched_blocks > num_blocks_) return "more blocks touched than the pool holds";
  if (hash_.size() != nodes_.size()) return "stored hashes and block states differ in number";
  std::int32_t walked = 0;
  std::vector<std::uint8_t> seen(nodes_.size(), 0);
  if (tail_ - head_ > ring_.size()) return "free list ring overflows";
  for (std::uint64_t pos = head_; pos != tail_; ++pos) {
    const BlockId b = ring_[pos & ring_mask_];
    if (!touched(b)) return "free list holds invalid block " + std::to_string(b);
    if (!live_entry(pos, b)) continue;  // stale: the block left from the middle
    if (seen[at(b)]) return "free list visits block " + std::to_string(b) + " twice";
    seen[at(b)] = 1;
    ++walked;
  }
  // The untouched blocks are free without a ring entry.
  const std::int32_t untouched = num_blocks_ - touched_blocks;
  if (walked + untouched != num_free_) {
    return "free list has " + std::to_string(walked) + " blocks and " + std::to_string(untouched) +
           " untouched, counter says " + std::to_string(num_free_);
  }
  std::int32_t zero_ref = 0;
  for (BlockId b = 0; b < touched_blocks; ++b) {
    if (ref_count(b) == 0) ++zero_ref;
  }
  if (zero_ref != walked) return "free list has " + std::to_string(walked) + " blocks but " +
                                 std::to_string(zero_ref) + " have ref 0";
  std::int32_t cached = 0;
  for (BlockId b = 0; b < touched_blocks; ++b) {
    if (!is_cached(b)) continue;
    ++cached;
    const auto it = index_.find(hash_[at(b)]);
    if (it == index_.end() || it->second != b) return "cached block " + std::to_string(b) + " is not indexed";
  }
  for (const auto& [h, b] : index_) {
    if (!touched(b) || !is_cached(b) || hash_[at(b)] != h) {
      return "hash index entry points to block " + std::to_string(b) + " whose stored hash differs";
    }
  }
  if (cached != static_cast<std::int32_t>(index_.size())) return "hash index size differs from cached blocks";
  return {};
}

}  // namespace twin
