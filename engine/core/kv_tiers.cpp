#include "engine/core/kv_tiers.hpp"

#include <utility>

#include "base/error.hpp"

namespace twin {

KvTiers::KvTiers(std::vector<KvTierConfig> tiers) {
  for (std::size_t i = 0; i < tiers.size(); ++i) {
    KvTierConfig& c = tiers[i];
    if (c.name.empty()) throw UsageError("kv tiers: tier " + std::to_string(i) + " has no name");
    if (c.capacity_blocks < 1) {
      throw UsageError("kv tiers: tier '" + c.name + "' holds " + std::to_string(c.capacity_blocks) +
                       " blocks; it needs at least 1");
    }
    Tier t;
    t.config = std::move(c);
    tiers_.push_back(std::move(t));
  }
}

std::int32_t KvTiers::find(BlockHash h) const {
  const auto it = index_.find(h);
  return it == index_.end() ? -1 : it->second.tier;
}

void KvTiers::hit(BlockHash h) {
  Where& w = index_.at(h);
  Tier& t = tiers_[static_cast<std::size_t>(w.tier)];
  t.lru.splice(t.lru.end(), t.lru, w.pos);
  ++t.stats.hit_blocks;
  ++t.pending_loads;
  moved_ = true;
}

// Appends h as the most recent block of `tier` (a write into it), then
// cascades: while a tier is over capacity its least recent block moves to
// the next tier (another write) or, from the last, is dropped.
void KvTiers::insert(std::size_t tier, BlockHash h) {
  for (std::size_t i = tier; i < tiers_.size(); ++i) {
    Tier& t = tiers_[i];
    t.lru.push_back(h);
    index_[h] = Where{static_cast<std::int32_t>(i), std::prev(t.lru.end())};
    ++t.stats.stored_blocks;
    ++t.stats.resident_blocks;
    ++t.pending_stores;
    moved_ = true;
    if (t.stats.resident_blocks <= t.config.capacity_blocks) return;
    h = t.lru.front();
    t.lru.pop_front();
    --t.stats.resident_blocks;
    ++t.stats.demoted_blocks;
    index_.erase(h);
  }
}

void KvTiers::spill(BlockHash h) {
  if (tiers_.empty()) return;
  const auto it = index_.find(h);
  if (it != index_.end()) {
    Tier& t = tiers_[static_cast<std::size_t>(it->second.tier)];
    if (it->second.tier == 0) {
      t.lru.splice(t.lru.end(), t.lru, it->second.pos);  // the copy there is current: no write
      return;
    }
    // Written from HBM into the first tier; its old copy below is dropped
    // (tiers stay exclusive).
    t.lru.erase(it->second.pos);
    --t.stats.resident_blocks;
    index_.erase(it);
  }
  insert(0, h);
}

void KvTiers::take_moves(std::vector<std::int32_t>& loads, std::vector<std::int32_t>& stores) {
  loads.assign(tiers_.size(), 0);
  stores.assign(tiers_.size(), 0);
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    loads[i] = std::exchange(tiers_[i].pending_loads, 0);
    stores[i] = std::exchange(tiers_[i].pending_stores, 0);
  }
  moved_ = false;
}

std::string KvTiers::check() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    const Tier& t = tiers_[i];
    if (static_cast<std::int64_t>(t.lru.size()) != t.stats.resident_blocks) {
      return "tier '" + t.config.name + "' lists " + std::to_string(t.lru.size()) + " blocks, counter says " +
             std::to_string(t.stats.resident_blocks);
    }
    if (t.stats.resident_blocks > t.config.capacity_blocks) {
      return "tier '" + t.config.name + "' holds more than its " + std::to_string(t.config.capacity_blocks) + " blocks";
    }
    for (auto pos = t.lru.begin(); pos != t.lru.end(); ++pos) {
      const auto it = index_.find(*pos);
      if (it == index_.end() || it->second.tier != static_cast<std::int32_t>(i) || it->second.pos != pos) {
        return "tier '" + t.config.name + "' holds a block its index does not point to";
      }
    }
    total += t.lru.size();
  }
  if (total != index_.size()) return "tier index has " + std::to_string(index_.size()) + " entries for " +
                                     std::to_string(total) + " blocks";
  return {};
}

}  // namespace twin
