#include "sim/kv_transfer.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"

namespace twin {

KvTransferMode kv_transfer_mode(std::string_view name) {
  if (name == "whole") return KvTransferMode::whole;
  if (name == "layerwise") return KvTransferMode::layerwise;
  throw UsageError("unknown KV transfer mode '" + excerpt(name) + "': known ones are whole, layerwise");
}

std::string_view kv_transfer_mode_name(KvTransferMode mode) {
  return mode == KvTransferMode::whole ? "whole" : "layerwise";
}

KvTransferModel::Key KvTransferModel::key(std::int32_t from, std::int32_t to) const {
  const Endpoint& a = endpoints_[static_cast<std::size_t>(from)];
  const Endpoint& b = endpoints_[static_cast<std::size_t>(to)];
  // Across nodes every pair of two groups takes the same kind of path
  // (GPU, host, NIC, network and back); within a node the GPUs matter.
  if (a.node != b.node) return {a.group, b.group, false, -1, -1};
  return {a.group, b.group, true, a.first_gpu, b.first_gpu};
}

KvTransferModel::KvTransferModel(KvTransferMode mode, std::vector<Endpoint> endpoints, const ClusterTopology& topology,
                                 const std::vector<std::int32_t>& senders, const std::vector<std::int32_t>& receivers)
    : mode_(mode), endpoints_(std::move(endpoints)) {
  send_free_at_.assign(endpoints_.size(), 0);
  receive_free_at_.assign(endpoints_.size(), 0);
  for (const std::int32_t from : senders) {
    for (const std::int32_t to : receivers) {
      const Key k = key(from, to);
      if (paths_.count(k)) continue;
      const Endpoint& a = endpoints_[static_cast<std::size_t>(from)];
      const Endpoint& b = endpoints_[static_cast<std::size_t>(to)];
      PathCost p = topology.path(a.first_gpu, b.first_gpu);
      const double lanes = std::min(a.gpus, b.gpus);
      if (a.node != b.node) {
        // The lanes of a replica share its node's NIC, on either side.
        p.bandwidth = std::min({p.bandwidth, a.nic_bandwidth / lanes, b.nic_bandwidth / lanes});
      }
      paths_.emplace(k, p);
    }
  }
}

PathCost KvTransferModel::lane_path(std::int32_t from, std::int32_t to) const {
  const auto it = paths_.find(key(from, to));
  if (it == paths_.end()) {
    throw Error("KV transfer: no path priced from replica " + std::to_string(from) + " to replica " + std::to_string(to));
  }
  return it->second;
}

TransferTiming KvTransferModel::price(const InboundTransfer& t) {
  if (t.from_replica < 0 || t.to_replica < 0 || t.from_replica >= static_cast<std::int32_t>(endpoints_.size()) ||
      t.to_replica >= static_cast<std::int32_t>(endpoints_.size())) {
    throw Error("KV transfer: replica " + std::to_string(t.from_replica) + " to " + std::to_string(t.to_replica) +
                " is outside the cluster");
  }
  if (replay_) return replay_->price(t);
  const Endpoint& a = endpoints_[static_cast<std::size_t>(t.from_replica)];
  const Endpoint& b = endpoints_[static_cast<std::size_t>(t.to_replica)];
  const PathCost path = lane_path(t.from_replica, t.to_replica);
  const double bytes = a.kv_bytes_per_token * std::max(0, t.tokens);
  const double lane_bytes = bytes / std::min(a.gpus, b.gpus);
  const double whole = path.time(lane_bytes);  // ns
  Time& send_free = send_free_at_[static_cast<std::size_t>(t.from_replica)];
  Time& receive_free = receive_free_at_[static_cast<std::size_t>(t.to_replica)];
  const Time start = std::max({t.start, send_free, receive_free});
  Time done = start + static_cast<Time>(std::ceil(whole));
  if (mode_ == KvTransferMode::layerwise && start == t.prefill_end && t.prefill_start != kNoTime) {
    const double tail = path.time(lane_bytes / std::max(1, a.layers));
    done = std::max(start + static_cast<Time>(std::ceil(tail)), t.prefill_start + static_cast<Time>(std::ceil(whole)));
  }
  done = std::max(done, start);
  send_free = done;
  receive_free = done;
  return TransferTiming{done, static_cast<std::int64_t>(std::llround(bytes))};
}

}  // namespace twin
