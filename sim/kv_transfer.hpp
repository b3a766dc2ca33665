#pragma once
// Prices the KV transfers of a disaggregated cluster (engine/core/
// disaggregation.hpp): a request's KV bytes (KV bytes per token of the
// prefill replica's model at its KV dtype x the tokens that move) over the
// cluster graph's path between the two replicas (sim/topology.hpp: NVLink
// within a node, PCIe to the host, the NIC and the network across nodes).
//
// Every GPU of the smaller replica is one lane: TP and PP shards move in
// parallel, GPU to GPU (vLLM's NIXL connector and Mooncake move each rank's
// shard on its own), so each lane carries bytes / lanes. Across nodes the
// lanes share the node's NIC (nic_bandwidth_gbps is per node). A replica
// sends and receives one transfer at a time: a transfer starts when the
// decode side has reserved its blocks and both replicas' links are free.
//
// Two ways to move it:
//   - whole: the KV moves after the prefill ends, path latency + bytes / bw;
//   - layerwise: each layer's KV is sent as soon as the layer is computed
//     (vLLM's and LMCache's layer-wise connectors), overlapped with the
//     prefill; if the transfer can start the instant the prefill ends, it
//     ends at the later of the prefill end + one layer's share and the
//     prefill start + the whole transfer (the link, not the prefill, is the
//     bottleneck). A transfer that had to wait (for blocks or the link)
//     moves whole from when it starts: nothing could stream meanwhile.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/core/disaggregation.hpp"
#include "sim/replay_transfers.hpp"
#include "sim/topology.hpp"

namespace twin {

enum class KvTransferMode : std::uint8_t { whole, layerwise };
KvTransferMode kv_transfer_mode(std::string_view name);  // UsageError listing whole, layerwise
std::string_view kv_transfer_mode_name(KvTransferMode mode);

class KvTransferModel {
 public:
  // One per replica, in replica order.
  struct Endpoint {
    std::int32_t group = 0;
    GpuId first_gpu = 0;
    std::int32_t gpus = 1;           // GPUs of the replica: lanes
    std::int32_t node = 0;
    double kv_bytes_per_token = 0;   // whole replica (all layers, all KV heads), at its KV dtype
    std::int32_t layers = 1;
    double nic_bandwidth = 0;        // bytes/s per node
  };

  // Paths between every prefill and decode replica are looked up in
  // `topology` now (one route per distinct kind of pair).
  KvTransferModel(KvTransferMode mode, std::vector<Endpoint> endpoints, const ClusterTopology& topology,
                  const std::vector<std::int32_t>& senders, const std::vector<std::int32_t>& receivers);

  KvTransferMode mode() const { return mode_; }
  // When a transfer starting no earlier than t.start ends, and its bytes.
  TransferTiming price(const InboundTransfer& t);
  // Replays an engine run's transfers instead of pricing them (each lasts
  // what it measured; the engine moves one at a time, so no link queueing).
  void replay(std::shared_ptr<const ReplayTransfers> recorded) { replay_ = std::move(recorded); }
  // The link cost between two replicas: bottleneck bandwidth per lane
  // (bytes/s) and latency (ns); for tests and explanations.
  PathCost lane_path(std::int32_t from, std::int32_t to) const;

 private:
  using Key = std::tuple<std::int32_t, std::int32_t, bool, GpuId, GpuId>;
  Key key(std::int32_t from, std::int32_t to) const;

  KvTransferMode mode_;
  std::vector<Endpoint> endpoints_;
  std::map<Key, PathCost> paths_;  // per lane, NIC sharing applied
  std::vector<Time> send_free_at_, receive_free_at_;
  std::shared_ptr<const ReplayTransfers> replay_;
};

}  // namespace twin
