#include "engine/core/block_pool.hpp"

#include <algorithm>

namespace twin {

BlockPool::BlockPool(std::int32_t num_blocks, std::int32_t block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      sentinel_(num_blocks),
      nodes_(static_cast<std::size_t>(num_blocks) + 1),
      hash_(static_cast<std::size_t>(num_blocks), 0) {
  nodes_[at(sentinel_)].prev = sentinel_;
  nodes_[at(sentinel_)].next = sentinel_;
  for (BlockId b = 0; b < num_blocks_; ++b) push_tail(b);
  index_.reserve(static_cast<std::size_t>(num_blocks_));
}

void BlockPool::unlink(BlockId b) {
  Node& node = nodes_[at(b)];
  nodes_[at(node.prev)].next = node.next;
  nodes_[at(node.next)].prev = node.prev;
  --num_free_;
}

void BlockPool::push_tail(BlockId b) {
  Node& sentinel = nodes_[at(sentinel_)];
  const BlockId last = sentinel.prev;
  Node& node = nodes_[at(b)];
  node.prev = last;
  node.next = sentinel_;
  nodes_[at(last)].next = b;
  sentinel.prev = b;
  ++num_free_;
}

BlockId BlockPool::pop_free(bool& evicted) {
  const BlockId b = nodes_[at(sentinel_)].next;
  unlink(b);
  // unlink loaded the new head's node; start loading the one after it, which
  // the next pop will need (a decode step pops several blocks in a row).
  __builtin_prefetch(&nodes_[at(nodes_[at(sentinel_)].next)]);
  Node& node = nodes_[at(b)];
  evicted = node.cached != 0;
  if (evicted) {
    index_.erase(hash_[at(b)]);
    node.cached = 0;
  }
  node.has_tokens = 0;
  node.ref = 1;
  return b;
}

void BlockPool::acquire(BlockId b) {
  if (nodes_[at(b)].ref++ == 0) unlink(b);
}

void BlockPool::release(BlockId b) {
  if (--nodes_[at(b)].ref == 0) push_tail(b);
}

BlockId BlockPool::find(BlockHash h) const {
  const auto it = index_.find(h);
  return it == index_.end() ? -1 : it->second;
}

bool BlockPool::publish(BlockId b, BlockHash h, std::span<const TokenId> tokens) {
  Node& node = nodes_[at(b)];
  if (node.cached != 0) return false;
  if (!index_.emplace(h, b).second) return false;
  hash_[at(b)] = h;
  node.cached = 1;
  if (!tokens.empty()) {
    if (tokens_.empty()) tokens_.resize(static_cast<std::size_t>(num_blocks_) * at(block_size_));
    std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(at(b) * at(block_size_)));
    node.has_tokens = 1;
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
  for (BlockId b = nodes_[at(sentinel_)].next; b != sentinel_; b = nodes_[at(b)].next) {
    if (b < 0 || b >= num_blocks_) return "free list holds invalid block " + std::to_string(b);
    if (seen[at(b)]) return "free list visits block " + std::to_string(b) + " twice";
    seen[at(b)] = 1;
    if (nodes_[at(nodes_[at(b)].next)].prev != b) return "free list links broken at block " + std::to_string(b);
    if (nodes_[at(b)].ref != 0) return "block " + std::to_string(b) + " is in the free list with ref " +
                                 std::to_string(nodes_[at(b)].ref);
    ++walked;
  }
  if (walked != num_free_) return "free list has " + std::to_string(walked) + " blocks, counter says " +
                                  std::to_string(num_free_);
  std::int32_t zero_ref = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (nodes_[at(b)].ref < 0) return "block " + std::to_string(b) + " has negative ref count";
    if (nodes_[at(b)].ref == 0) ++zero_ref;
  }
  if (zero_ref != walked) return "free list has " + std::to_string(walked) + " blocks but " +
                                 std::to_string(zero_ref) + " have ref 0";
  std::int32_t cached = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    if (!nodes_[at(b)].cached) continue;
    ++cached;
    const auto it = index_.find(hash_[at(b)]);
    if (it == index_.end() || it->second != b) return "cached block " + std::to_string(b) + " is not indexed";
  }
  for (const auto& [h, b] : index_) {
    if (b < 0 || b >= num_blocks_ || !nodes_[at(b)].cached || hash_[at(b)] != h) {
      return "hash index entry points to block " + std::to_string(b) + " whose stored hash differs";
    }
  }
  if (cached != static_cast<std::int32_t>(index_.size())) return "hash index size differs from cached blocks";
  return {};
}

}  // namespace twin
