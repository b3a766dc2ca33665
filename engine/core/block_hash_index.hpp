#pragma once
// The block pool's prefix index: block hash -> block id, as one flat table
// with linear probing. A hash map with a node per entry (std::unordered_map)
// pays a division, a pointer chase and an allocation per insert and erase:
// with every published block inserted and every evicted one erased, that
// was most of a simulated step (bench_sim, 32 replicas: 70% of the CPU in
// the pool's publish and pop). Here an entry is 16 bytes in one array;
// insert, find and erase touch one or two cache lines. Erasing shifts the
// following entries of the probe run back (no tombstones), so lookups never
// slow down with churn. Iteration order is the table's, used only by the
// pool's self-check; outputs never depend on it.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/types.hpp"

namespace twin {

class BlockHashIndex {
 public:
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

  // The block of hash `h`, or -1.
  BlockId find(BlockHash h) const {
    if (slots_.empty()) return -1;
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.block < 0) return -1;
      if (s.hash == h) return s.block;
    }
  }

  // Adds h -> b; false (and nothing changed) when h is already there.
  bool insert(BlockHash h, BlockId b) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    std::size_t i = home(h);
    for (; slots_[i].block >= 0; i = (i + 1) & mask_)
      if (slots_[i].hash == h) return false;
    slots_[i] = Slot{h, b};
    ++size_;
    return true;
  }

  // Drops h if present.
  void erase(BlockHash h) {
    if (slots_.empty()) return;
    std::size_t i = home(h);
    for (; slots_[i].block >= 0; i = (i + 1) & mask_)
      if (slots_[i].hash == h) break;
    if (slots_[i].block < 0) return;
    // Backward shift: an entry further along the run moves into the hole
    // unless its home lies cyclically in (hole, its slot].
    for (std::size_t j = (i + 1) & mask_; slots_[j].block >= 0; j = (j + 1) & mask_) {
      const std::size_t k = home(slots_[j].hash);
      const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].block = -1;
    --size_;
  }

  // Starts loading the slot where `h` would be found.
  void prefetch(BlockHash h) const {
    if (!slots_.empty()) __builtin_prefetch(slots_.data() + home(h));
  }

  template <typename F>
  void for_each(F f) const {
    for (const Slot& s : slots_)
      if (s.block >= 0) f(s.hash, s.block);
  }

 private:
  struct Slot {
    BlockHash hash = 0;
    BlockId block = -1;  // -1: empty
  };
  // The hashes are a chain hash's output already; the multiply spreads any
  // that are not (tests build small ones by hand) over the table.
  std::size_t home(BlockHash h) const {
    return static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const std::size_t n = old.empty() ? 64 : old.size() * 2;
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64;
    for (std::size_t m = n; m > 1; m >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.block >= 0) insert(s.hash, s.block);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace twin
