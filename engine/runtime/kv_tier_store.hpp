#pragma once
// The engine's KV tiers below the device: where the KV of the prefix blocks
// the serving core spills (engine/core/kv_tiers.hpp) really lives. A tier
// named "dram" is host memory (pinned on CUDA, like the swap space); "ssd"
// is a file, unlinked as soon as it is opened so nothing is left behind.
// The core says what moves (TierCopy, in order); this carries it out, layer
// by layer, K and V, through the backend's block copies and pread/pwrite.
#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/core/kv_tiers.hpp"

namespace twin {

struct KvTierStoreConfig {
  std::string name;            // "dram" or "ssd"
  std::int64_t num_blocks = 0;
  std::string dir;             // ssd: where the file goes (empty: the system's temporary directory)
};

class KvTierStore {
 public:
  // `device`: the device cache's layers (their geometry and dtype are the
  // tiers'). Throws UsageError for a tier name other than dram or ssd, and
  // twin::Error when memory or the file cannot be had.
  KvTierStore(Backend& backend, std::span<const KvCacheView> device, std::vector<KvTierStoreConfig> tiers);
  ~KvTierStore();
  KvTierStore(const KvTierStore&) = delete;
  KvTierStore& operator=(const KvTierStore&) = delete;

  // The core's view: each tier's name and capacity in blocks.
  std::vector<KvTierConfig> core_configs() const;
  // Carries out one step's copies, in order, before the step runs.
  void apply(std::span<const TierCopy> copies, std::span<const KvCacheView> device);
  std::int64_t bytes_per_block() const { return 2 * per_tensor_ * static_cast<std::int64_t>(layers_); }

 private:
  struct Tier {
    KvTierStoreConfig config;
    bool file = false;
    Buffer memory;                    // dram
    std::vector<KvCacheView> layers;  // dram
    int fd = -1;                      // ssd
    std::string path;                 // ssd, for messages
  };
  std::vector<KvCacheView> host_layers(Buffer& buffer, std::int64_t blocks);
  void ensure_stages(std::int64_t blocks);
  void sync_if_pending();
  // Block `slot` of layer l of a file tier <-> a host view's block.
  void file_write(const Tier& t, std::int32_t slot, std::size_t l, const KvCacheView& host, std::int64_t block);
  void file_read(const Tier& t, std::int32_t slot, std::size_t l, const KvCacheView& host, std::int64_t block);
  char* host_block(const KvCacheView& v, bool value, std::int64_t block) const;
  // Where block `slot`'s K (or V) of one layer sits in a file tier.
  off_t file_offset(std::int32_t slot, std::size_t layer, bool value) const;
  // One block's K and V between host views (host memory on both sides).
  void copy_host_block(const KvCacheView& from, std::int64_t from_block, const KvCacheView& to,
                       std::int64_t to_block) const;

  Backend& backend_;
  KvCacheView proto_;
  std::size_t layers_ = 0;
  std::int64_t per_tensor_ = 0;  // bytes of one block's K (or V) in one layer
  std::vector<Tier> tiers_;
  Buffer stage_memory_, bounce_memory_;
  std::vector<KvCacheView> stage_, bounce_;  // loads' staging blocks; a file tier's one-block bounce
  std::int64_t stage_blocks_ = 0;
  bool pending_ = false;  // device copies that may still be in flight
};

}  // namespace twin
