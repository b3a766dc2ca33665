#pragma once
// The device block pool: ref counts, an LRU free list and the hash index of
// published blocks. Every operation is O(1) per block touched (amortised).
//
// Lazily sized: a block has state only once it has been handed out. The
// blocks never handed out are the ids [num_touched, num_blocks): they are free
// and uncached, handed out lowest id first once no touched block is free
// and uncached, so they need no entry anywhere. A
// simulated replica sized from an 80 GB GPU holds millions of blocks and a
// run may use a few thousand: the pool's memory follows the blocks used,
// never the blocks there are.
//
// Free list: the touched blocks with ref count 0, in the order they were
// freed (least recently freed at the head). What the order decides is which
// cached block is evicted next; which uncached block is handed out changes
// nothing but its id (an uncached free block holds nothing anyone can find).
// So only cached blocks have entries, in a ring read from the head: each
// entry carries the number of uncached blocks freed just before it, and the
// uncached free blocks themselves sit on a stack, most recently freed on top.
// A pop whose turn falls on an uncached slot takes the stack's top (a block
// whose state is still in cache: over an LRU list of all blocks, 32 replicas'
// pools are visited in random block order, a cache miss per pop), and an
// untouched block only when the stack is empty. The blocks the pool evicts,
// and when, are those of one LRU list over every block (the reference test
// checks it). A cached block taken as a prefix hit leaves from the middle in
// O(1): its ring entry goes stale (each block remembers the ring position of
// its one live entry) and is skipped when the head reaches it, its count
// still counted; a ring full of stale entries is compacted, or doubled while
// it is under twice the touched blocks. A block's ref count, flags and ring
// position share one 8-byte node. A freed block that was published keeps its
// hash (it stays a prefix-cache hit) until it is popped from the head for
// reuse: only then is its index entry dropped (lazy eviction).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/types.hpp"
#include "engine/core/block_hash_index.hpp"

namespace twin {

class BlockPool {
 public:
  BlockPool(std::int32_t num_blocks, std::int32_t block_size);

  std::int32_t num_blocks() const { return num_blocks_; }
  std::int32_t block_size() const { return block_size_; }
  std::int32_t num_free() const { return num_free_; }
  std::int32_t num_cached() const { return static_cast<std::int32_t>(index_.size()); }
  // Blocks handed out at least once: the ones with state (tests, memory figures).
  std::int32_t num_touched() const { return static_cast<std::int32_t>(nodes_.size()); }
  // Bytes the pool's per-block containers hold (capacity, not size).
  std::size_t state_bytes() const;
  std::int32_t ref_count(BlockId b) const {
    return touched(b) ? static_cast<std::int32_t>(nodes_[at(b)].word & kRefMask) : 0;
  }
  bool is_cached(BlockId b) const { return touched(b) && (nodes_[at(b)].word & kCached) != 0; }
  bool has_tokens(BlockId b) const { return touched(b) && (nodes_[at(b)].word & kHasTokens) != 0; }

  // Pops the least recently freed block, dropping its cached hash if any
  // (returns true in `evicted` then); when that block is uncached, any
  // uncached free block may stand in for it (see the free list above).
  // Precondition: num_free() > 0.
  BlockId pop_free(bool& evicted);
  // Takes one more reference on b (a block handed out before); a free block
  // leaves the free list.
  void acquire(BlockId b);
  // Drops one reference; at zero the block joins the free list's tail.
  void release(BlockId b) {
    Node& node = nodes_[at(b)];
    if ((--node.word & kRefMask) == 0) push_free(b, node);
  }
  // Starts loading b's state (a caller about to release several blocks).
  void prefetch(BlockId b) const { __builtin_prefetch(nodes_.data() + at(b)); }

  // The hash b was last published under: right after pop_free evicted b,
  // the hash it was just dropped from the index under.
  BlockHash stored_hash(BlockId b) const { return hash_[at(b)]; }
  // The cached block published under h, or -1.
  BlockId find(BlockHash h) const;
  // Publishes b under h unless h is already taken (first publisher wins);
  // stores `tokens` for verification when non-empty. Returns whether b was
  // published.
  bool publish(BlockId b, BlockHash h, std::span<const TokenId> tokens);
  // Whether b's stored tokens equal `tokens` (b must have tokens).
  bool tokens_match(BlockId b, std::span<const TokenId> tokens) const;

  // First violated invariant of the pool alone (free list vs ref counts, hash
  // index vs stored hashes), or empty. O(touched blocks): tests only.
  std::string check() const;

 private:
  // The ref count and two flags share one word: a flag in another array
  // would be a second cache miss per block.
  static constexpr std::uint32_t kRefMask = (1u << 30) - 1;
  static constexpr std::uint32_t kCached = 1u << 30;      // published and still in index_
  static constexpr std::uint32_t kHasTokens = 1u << 31;   // stored tokens are valid
  struct Node {
    std::uint32_t word = 0;       // ref count | kCached | kHasTokens
    std::uint32_t ring_pos = 0;   // ring position of its live entry while free and cached (low 32 bits)
  };
  struct RingEntry {
    BlockId block = 0;                   // a cached block (stale once it left the free list)
    std::int32_t uncached_before = 0;    // uncached free blocks freed just before it, not yet popped
  };
  void push_free(BlockId b, Node& node) {
    ++num_free_;
    if ((node.word & kCached) == 0) {
      uncached_.push_back(b);
      ++tail_uncached_;
      return;
    }
    if (tail_ - head_ == ring_.size()) make_room(b);
    node.ring_pos = static_cast<std::uint32_t>(tail_);
    ring_[tail_ & ring_mask_] = RingEntry{b, tail_uncached_};
    tail_uncached_ = 0;
    ++tail_;
  }
  // An uncached free block for a pop whose turn fell on an uncached slot:
  // the most recently freed, else the lowest untouched id.
  BlockId take_uncached();
  bool live_entry(std::uint64_t pos, BlockId b) const {
    const Node& node = nodes_[at(b)];
    return (node.word & kRefMask) == 0 && node.ring_pos == static_cast<std::uint32_t>(pos);
  }
  bool touched(BlockId b) const { return b >= 0 && at(b) < nodes_.size(); }
  void make_room(BlockId pushing);
  void compact(BlockId pushing);
  std::size_t at(BlockId b) const { return static_cast<std::size_t>(b); }

  std::int32_t num_blocks_;
  std::int32_t block_size_;
  std::int32_t num_free_ = 0;
  std::vector<Node> nodes_;              // touched blocks: ids 0 .. num_touched-1
  std::vector<RingEntry> ring_;          // free cached blocks in free order, power-of-two size
  std::vector<BlockId> uncached_;        // free uncached touched blocks, most recently freed last
  std::int32_t tail_uncached_ = 0;       // uncached free slots after the last ring entry
  std::uint64_t ring_mask_ = 0;
  std::uint64_t head_ = 0;               // ring positions, never wrapped
  std::uint64_t tail_ = 0;
  std::vector<BlockHash> hash_;          // per touched block, valid where cached
  std::vector<TokenId> tokens_;          // block_size per touched block, sized on first use
  BlockHashIndex index_;
};

}  // namespace twin
