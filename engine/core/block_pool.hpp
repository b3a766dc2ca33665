#pragma once
// The device block pool: ref counts, an intrusive LRU free list and the hash
// index of published blocks. Every operation is O(1) per block touched.
//
// Free list: blocks with ref count 0, least recently freed at the head. It
// is intrusive (prev/next indices in each block's node, a sentinel node at
// index num_blocks), so a cached block taken as a prefix hit leaves from the
// middle in O(1). A block's links, ref count and flags share one 16-byte
// node: the free list is visited in effectively random order, and a big
// cluster's pools do not fit in cache, so one cache miss per block touched
// instead of one per array matters (it was a third of a simulation's time). A freed block that was published keeps its hash (it stays a
// prefix-cache hit) until it is popped from the head for reuse: only then is
// its index entry dropped (lazy eviction).
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/types.hpp"

namespace twin {

class BlockPool {
 public:
  BlockPool(std::int32_t num_blocks, std::int32_t block_size);

  std::int32_t num_blocks() const { return num_blocks_; }
  std::int32_t block_size() const { return block_size_; }
  std::int32_t num_free() const { return num_free_; }
  std::int32_t num_cached() const { return static_cast<std::int32_t>(index_.size()); }
  std::int32_t ref_count(BlockId b) const { return nodes_[at(b)].ref; }
  bool is_cached(BlockId b) const { return nodes_[at(b)].cached != 0; }
  bool has_tokens(BlockId b) const { return nodes_[at(b)].has_tokens != 0; }

  // Pops the least recently freed block, dropping its cached hash if any
  // (returns true in `evicted` then). Precondition: num_free() > 0.
  BlockId pop_free(bool& evicted);
  // Takes one more reference on b; a free block leaves the free list.
  void acquire(BlockId b);
  // Drops one reference; at zero the block joins the free list's tail.
  void release(BlockId b);

  // The cached block published under h, or -1.
  BlockId find(BlockHash h) const;
  // Publishes b under h unless h is already taken (first publisher wins);
  // stores `tokens` for verification when non-empty. Returns whether b was
  // published.
  bool publish(BlockId b, BlockHash h, std::span<const TokenId> tokens);
  // Whether b's stored tokens equal `tokens` (b must have tokens).
  bool tokens_match(BlockId b, std::span<const TokenId> tokens) const;

  // First violated invariant of the pool alone (free list vs ref counts, hash
  // index vs stored hashes), or empty. O(num_blocks): tests only.
  std::string check() const;

 private:
  void unlink(BlockId b);
  void push_tail(BlockId b);
  std::size_t at(BlockId b) const { return static_cast<std::size_t>(b); }

  std::int32_t num_blocks_;
  std::int32_t block_size_;
  std::int32_t num_free_ = 0;
  BlockId sentinel_;  // == num_blocks_
  struct Node {
    BlockId prev = 0;
    BlockId next = 0;
    std::int32_t ref = 0;
    std::uint8_t cached = 0;      // published and still in index_
    std::uint8_t has_tokens = 0;  // stored tokens are valid
  };
  std::vector<Node> nodes_;              // num_blocks + 1 (the sentinel)
  std::vector<BlockHash> hash_;          // valid where cached
  std::vector<TokenId> tokens_;          // block_size per block, sized on first use
  std::unordered_map<BlockHash, BlockId> index_;
};

}  // namespace twin
