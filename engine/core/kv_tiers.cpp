#include "engine/core/kv_tiers.hpp"

#include <utility>
#include <vector>

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

std::int32_t KvTiers::hit(BlockHash h) {
  Where& w = index_.at(h);
  Tier& t = tiers_[static_cast<std::size_t>(w.tier)];
  t.lru.splice(t.lru.end(), t.lru, w.pos);
  ++t.stats.hit_blocks;
  ++t.pending_loads;
  moved_ = true;
  if (!record_copies_) return -1;
  const std::int32_t stage = next_stage_++;
  copies_.push_back({TierCopy::Kind::tier_to_stage, w.tier, -1, w.slot, stage});
  return stage;
}

void KvTiers::free_slot(Tier& t, std::int32_t slot) { t.free_slots.push_back(slot); }

// Makes h the most recent block of `tier` (a write into it). A full tier
// first moves its least recent block down to the next tier (another write,
// recursively making room there) or, from the last, drops it; h then takes
// that block's slot, so the copy out of the slot is recorded before the
// write into it.
void KvTiers::insert(std::size_t tier, BlockHash h, Source source) {
  Tier& t = tiers_[tier];
  std::int32_t slot = 0;
  if (t.stats.resident_blocks >= t.config.capacity_blocks) {
    const BlockHash victim = t.lru.front();
    const auto at = index_.find(victim);
    slot = at->second.slot;
    t.lru.pop_front();
    --t.stats.resident_blocks;
    ++t.stats.demoted_blocks;
    index_.erase(at);
    if (tier + 1 < tiers_.size()) insert(tier + 1, victim, Source{static_cast<std::int32_t>(tier), slot});
  } else if (!t.free_slots.empty()) {
    slot = t.free_slots.back();
    t.free_slots.pop_back();
  } else {
    slot = t.next_slot++;
  }
  t.lru.push_back(h);
  index_[h] = Where{static_cast<std::int32_t>(tier), std::prev(t.lru.end()), slot};
  ++t.stats.stored_blocks;
  ++t.stats.resident_blocks;
  ++t.pending_stores;
  moved_ = true;
  if (record_copies_) {
    const bool from_device = source.tier < 0;
    copies_.push_back({from_device ? TierCopy::Kind::device_to_tier : TierCopy::Kind::tier_to_tier, source.tier,
                       static_cast<std::int32_t>(tier), source.index, slot});
  }
}

void KvTiers::spill(BlockHash h, BlockId block) {
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
    free_slot(t, it->second.slot);
    index_.erase(it);
  }
  insert(0, h, Source{-1, block});
}

void KvTiers::take_copies(std::vector<TierCopy>& out) {
  out.clear();
  out.swap(copies_);
  next_stage_ = 0;
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
    std::vector<bool> used(static_cast<std::size_t>(t.config.capacity_blocks), false);
    for (const BlockHash h : t.lru) {
      const auto it = index_.find(h);
      if (it == index_.end()) continue;  // reported below
      const std::int32_t slot = it->second.slot;
      if (slot < 0 || slot >= t.config.capacity_blocks || used[static_cast<std::size_t>(slot)]) {
        return "tier '" + t.config.name + "' has a slot outside its capacity or held twice";
      }
      used[static_cast<std::size_t>(slot)] = true;
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
