#include "sim/custom_all_reduce.hpp"

#include "sim/engine_traits.hpp"

namespace twin {

double custom_all_reduce_below(const ReplicaConfig& replica, const RingCost& ring, bool pcie_p2p) {
  if (!replica.custom_all_reduce) return 0;
  // CustomAllreduce._SUPPORTED_WORLD_SIZES.
  if (ring.size != 2 && ring.size != 4 && ring.size != 6 && ring.size != 8) return 0;
  switch (ring.link) {
    case PathLink::nvswitch:
    case PathLink::nvlink_bridge:
      break;  // fully NVLink-connected
    case PathLink::pcie:
      // More than two PCIe-only GPUs: disabled; two need working P2P
      // (GeForce cards have none, and vLLM's P2P check turns it off).
      if (ring.size != 2 || !pcie_p2p) return 0;
      break;
    case PathLink::none:
    case PathLink::network:
      return 0;  // one GPU, or a group spanning nodes
  }
  // vLLM >= 0.11 enables torch symmetric memory by default and then caps
  // the custom kernel per world size (all_reduce_utils.py,
  // CUSTOM_ALL_REDUCE_MAX_SIZES for compute capability 9.0).
  const EngineTraits* engine = engine_traits(replica.scheduler.preset);
  if (engine && engine->symmetric_memory_all_reduce) {
    if (ring.size == 6) return 512.0 * 1024;
    if (ring.size == 8) return 256.0 * 1024;
  }
  return kCustomAllReduceBufferBytes;
}

}  // namespace twin
