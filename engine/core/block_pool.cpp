#include "engine/core/block_pool.hpp"

#include <algorithm>

namespace twin {

BlockPool::BlockPool(std::int32_t num_blocks, std::int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_free_(std::max(num_blocks, 0)),
      tail_uncached_(std::max(num_blocks, 0)) {
  ring_.assign(16, RingEntry{});
  ring_mask_ = ring_.size() - 1;
}

std::size_t BlockPool::state_bytes() const {
  return nodes_.capacity() * sizeof(Node) + ring_.capacity() * sizeof(RingEntry) +
         uncached_.capacity() * sizeof(BlockId) + hash_.capacity() * sizeof(BlockHash) +
         tokens_.capacity() * sizeof(TokenId) + index_.bytes();
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
  std::vector<RingEntry> bigger(ring_.size() * 2, RingEntry{});
  const std::uint64_t mask = bigger.size() - 1;
  for (std::uint64_t pos = head_; pos != tail_; ++pos) bigger[pos & mask] = ring_[pos & ring_mask_];
  ring_ = std::move(bigger);
  ring_mask_ = mask;
}

// Drops the stale entries (blocks taken from the middle as prefix hits); the
// uncached slots counted before a dropped entry move to the next live one
// (or to the tail). `pushing` is the block being pushed: its ref is already
// 0, so an old entry of it would look live.
void BlockPool::compact(BlockId pushing) {
  std::uint64_t out = head_;
  std::int32_t carried = 0;
  for (std::uint64_t pos = head_; pos != tail_; ++pos) {
    const RingEntry e = ring_[pos & ring_mask_];
    if (e.block == pushing || !live_entry(pos, e.block)) {
      carried += e.uncached_before;
      continue;
    }
    nodes_[at(e.block)].ring_pos = static_cast<std::uint32_t>(out);
    ring_[out & ring_mask_] = RingEntry{e.block, e.uncached_before + carried};
    carried = 0;
    ++out;
  }
  tail_ = out;
  tail_uncached_ += carried;
}

BlockId BlockPool::take_uncached() {
  if (!uncached_.empty()) {
    const BlockId b = uncached_.back();
    uncached_.pop_back();
    nodes_[at(b)].word = 1;  // ref 1; an uncached block has no flags
    return b;
  }
  // Untouched blocks, lowest id first: the next one gets state.
  const auto b = static_cast<BlockId>(nodes_.size());
  nodes_.push_back(Node{1, 0});
  hash_.push_back(0);
  return b;
}

BlockId BlockPool::pop_free(bool& evicted) {
  --num_free_;
  evicted = false;
  // Whose turn it is: the uncached slots before the head entry, then the
  // head entry's block if it is still free; with no entry left, the tail's
  // uncached slots (one of them must remain: num_free() > 0).
  while (head_ != tail_) {
    RingEntry& e = ring_[head_ & ring_mask_];
    if (e.uncached_before > 0) {
      --e.uncached_before;
      return take_uncached();
    }
    if (live_entry(head_, e.block)) break;
    ++head_;
  }
  if (head_ == tail_) {
    --tail_uncached_;
    return take_uncached();
  }
  const BlockId b = ring_[head_ & ring_mask_].block;
  ++head_;
  // The ring says which cached blocks go next: start loading the state of
  // one a few pops ahead. A slot past the tail may hold anything: only a
  // valid id is followed.
  // Its hash's index slot, erased then, too (the hash was loaded four pops
  // before that): an eviction's one cache miss, taken early.
  const BlockId ahead = ring_[(head_ + 4) & ring_mask_].block;
  if (touched(ahead)) {
    __builtin_prefetch(nodes_.data() + at(ahead));
    index_.prefetch(hash_[at(ahead)]);
  }
  const BlockId further = ring_[(head_ + 8) & ring_mask_].block;
  if (touched(further)) __builtin_prefetch(hash_.data() + at(further));
  Node& node = nodes_[at(b)];
  evicted = true;
  index_.erase(hash_[at(b)]);
  node.word = 1;  // ref 1, flags cleared
  return b;
}

void BlockPool::acquire(BlockId b) {
  // A free block's ring entry goes stale with its ref above 0.
  if ((nodes_[at(b)].word++ & kRefMask) == 0) --num_free_;
}

BlockId BlockPool::find(BlockHash h) const {
  return index_.find(h);
}

bool BlockPool::publish(BlockId b, BlockHash h, std::span<const TokenId> tokens) {
  Node& node = nodes_[at(b)];
  if ((node.word & kCached) != 0) return false;
  if (!index_.insert(h, b)) return false;
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
  std::vector<std::uint8_t> seen(nodes_.size(), 0);
  if (tail_ - head_ > ring_.size()) return "free list ring overflows";
  std::int32_t walked = 0;               // live ring entries: free cached blocks
  std::int64_t slots = tail_uncached_;   // uncached turns counted in the ring and at its tail
  if (tail_uncached_ < 0) return "free list counts negative uncached blocks at its tail";
  for (std::uint64_t pos = head_; pos != tail_; ++pos) {
    const RingEntry& e = ring_[pos & ring_mask_];
    if (!touched(e.block)) return "free list holds invalid block " + std::to_string(e.block);
    if (e.uncached_before < 0) return "free list counts negative uncached blocks before block " +
                                      std::to_string(e.block);
    slots += e.uncached_before;
    if (!live_entry(pos, e.block)) continue;  // stale: the block left from the middle
    if (!is_cached(e.block)) return "free list ring holds uncached block " + std::to_string(e.block);
    if (seen[at(e.block)]) return "free list visits block " + std::to_string(e.block) + " twice";
    seen[at(e.block)] = 1;
    ++walked;
  }
  for (const BlockId b : uncached_) {
    if (!touched(b)) return "uncached free stack holds invalid block " + std::to_string(b);
    if (ref_count(b) != 0 || is_cached(b)) {
      return "uncached free stack holds block " + std::to_string(b) + ", which is held or cached";
    }
    if (seen[at(b)]) return "free list visits block " + std::to_string(b) + " twice";
    seen[at(b)] = 1;
  }
  // The untouched blocks are free without an entry; with the stack they
  // fill the uncached turns.
  const std::int32_t untouched = num_blocks_ - touched_blocks;
  if (slots != static_cast<std::int64_t>(uncached_.size()) + untouched) {
    return "free list counts " + std::to_string(slots) + " uncached turns for " + std::to_string(uncached_.size()) +
           " stacked and " + std::to_string(untouched) + " untouched blocks";
  }
  if (walked + slots != num_free_) {
    return "free list has " + std::to_string(walked) + " cached blocks and " + std::to_string(slots) +
           " uncached, counter says " + std::to_string(num_free_);
  }
  std::int32_t zero_ref = 0;
  for (BlockId b = 0; b < touched_blocks; ++b) {
    if (ref_count(b) == 0) ++zero_ref;
  }
  if (zero_ref != walked + static_cast<std::int32_t>(uncached_.size())) {
    return "free list has " + std::to_string(walked + static_cast<std::int32_t>(uncached_.size())) +
           " touched blocks but " + std::to_string(zero_ref) + " have ref 0";
  }
  std::int32_t cached = 0;
  for (BlockId b = 0; b < touched_blocks; ++b) {
    if (!is_cached(b)) continue;
    ++cached;
    if (index_.find(hash_[at(b)]) != b) return "cached block " + std::to_string(b) + " is not indexed";
  }
  std::string bad;
  index_.for_each([&](BlockHash h, BlockId b) {
    if (bad.empty() && (!touched(b) || !is_cached(b) || hash_[at(b)] != h)) {
      bad = "hash index entry points to block " + std::to_string(b) + " whose stored hash differs";
    }
  });
  if (!bad.empty()) return bad;
  if (cached != static_cast<std::int32_t>(index_.size())) return "hash index size differs from cached blocks";
  return {};
}

}  // namespace twin
