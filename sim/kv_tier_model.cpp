#include "sim/kv_tier_model.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"

namespace twin {
namespace {

// A PCIe 4.0 x4 NVMe drive (Samsung 990 Pro class: about 7 GB/s sequential
// read, 5-6 GB/s write, tens of microseconds per command; we take 100 us
// for a block-sized transfer with the file layer above it).
constexpr double kSsdReadBytesPerS = 7e9;
constexpr double kSsdWriteBytesPerS = 5e9;
constexpr Time kSsdLatency = 100 * kNsPerUs;

}  // namespace

KvTierModel::KvTierModel(std::vector<KvTierLink> tiers, double block_bytes, bool load_overlap, bool measured)
    : tiers_(std::move(tiers)), block_bytes_(block_bytes), load_overlap_(load_overlap), measured_(measured) {}

std::vector<KvTierConfig> KvTierModel::core_tiers() const {
  std::vector<KvTierConfig> out;
  for (const KvTierLink& t : tiers_) out.push_back(KvTierConfig{t.name, t.capacity_blocks});
  return out;
}

Time KvTierModel::load_time(std::span<const std::int32_t> loads) const {
  if (measured_) return 0;
  double ns = 0;
  for (std::size_t i = 0; i < loads.size() && i < tiers_.size(); ++i) {
    if (loads[i] <= 0) continue;
    const KvTierLink& t = tiers_[i];
    ns += static_cast<double>(t.latency) + 1e9 * block_bytes_ * loads[i] / t.read_bytes_per_s;
  }
  return static_cast<Time>(std::ceil(ns));
}

std::vector<KvTierLink> resolve_kv_tiers(const std::vector<KvTierSpec>& specs, double block_bytes,
                                         double host_bytes_per_s, Time host_latency) {
  std::vector<KvTierLink> out;
  for (const KvTierSpec& s : specs) {
    const std::string where = "kv_tiers '" + s.name + "': ";
    KvTierLink t;
    t.name = s.name;
    if (s.capacity_blocks > 0) {
      t.capacity_blocks = s.capacity_blocks;
    } else {
      const double blocks = std::floor(s.capacity_gib * 1024.0 * 1024.0 * 1024.0 / block_bytes);
      if (blocks < 1) {
        throw UsageError(where + "capacity_gib " + std::to_string(s.capacity_gib) + " holds no KV block of " +
                         std::to_string(static_cast<std::int64_t>(block_bytes)) + " bytes");
      }
      t.capacity_blocks = static_cast<std::int64_t>(std::min(blocks, 9e18));
    }
    double read = 0, write = 0;
    Time latency = 0;
    if (s.name == "dram") {
      // Host DRAM sits behind the GPU's host link: the link is the bottleneck.
      read = write = host_bytes_per_s;
      latency = host_latency;
    } else if (s.name == "ssd") {
      read = kSsdReadBytesPerS;
      write = kSsdWriteBytesPerS;
      latency = kSsdLatency;
    }
    if (s.read_gbps > 0) read = s.read_gbps * 1e9;
    if (s.write_gbps > 0) write = s.write_gbps * 1e9;
    if (s.latency_us >= 0) latency = static_cast<Time>(std::llround(s.latency_us * 1e3));
    if (read <= 0) throw UsageError(where + "read_gbps is needed (only dram and ssd have defaults)");
    if (write <= 0) throw UsageError(where + "write_gbps is needed (only dram and ssd have defaults)");
    t.read_bytes_per_s = read;
    t.write_bytes_per_s = write;
    t.latency = latency;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace twin
