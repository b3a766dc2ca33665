#pragma once
// Prices the moves between HBM and the tiers below it (engine/core/kv_tiers.hpp)
// for one replica group: a tier's figures resolved from the cluster config
// (docs/simulate.md, "KV tiers") and the group's block size in bytes.
//
// A step's loads (prefix blocks read back from a tier) run before its
// compute, one stream per tier that has any: bytes / read bandwidth + the
// tier's latency, the tiers one after another (they share the host link);
// with load overlap the step lasts the longer of the two instead of their
// sum (LMCache's and vLLM's offloading connectors load layer by layer
// beside the forward pass). Stores (evicted blocks written down, demotions)
// are asynchronous, as those connectors do them: their bytes are counted,
// their time is not on the step's path.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/types.hpp"
#include "engine/core/kv_tiers.hpp"
#include "sim/cluster_config.hpp"

namespace twin {

struct KvTierLink {
  std::string name;
  std::int64_t capacity_blocks = 0;  // per replica
  double read_bytes_per_s = 0;
  double write_bytes_per_s = 0;
  Time latency = 0;
};

class KvTierModel {
 public:
  // measured: the step times already hold the loads (a replayed engine
  // step log: the engine's tier copies ran inside its steps), so loads add
  // no time; the books and the bytes are kept as ever.
  KvTierModel(std::vector<KvTierLink> tiers, double block_bytes, bool load_overlap, bool measured = false);

  const std::vector<KvTierLink>& tiers() const { return tiers_; }
  double block_bytes() const { return block_bytes_; }
  bool load_overlap() const { return load_overlap_; }
  // The core's tier list (names and capacities in blocks).
  std::vector<KvTierConfig> core_tiers() const;
  // How long a step's loads take (blocks per tier, as StepPlan::tier_loads).
  Time load_time(std::span<const std::int32_t> loads) const;
  // A step's duration given its compute time and its loads' time.
  Time step_time(Time compute, Time load) const { return load_overlap_ ? std::max(compute, load) : compute + load; }

 private:
  std::vector<KvTierLink> tiers_;
  double block_bytes_ = 0;
  bool load_overlap_ = false;
  bool measured_ = false;
};

// Resolves the config's tiers for a group whose KV block is `block_bytes`
// (all its GPUs together) and whose host link moves `host_bytes_per_s` with
// `host_latency` per copy. Throws UsageError naming the tier and the key
// for a tier smaller than one block or a name without defaults lacking a
// bandwidth.
std::vector<KvTierLink> resolve_kv_tiers(const std::vector<KvTierSpec>& specs, double block_bytes,
                                         double host_bytes_per_s, Time host_latency);

}  // namespace twin
