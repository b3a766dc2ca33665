#pragma once
// The cluster's wiring as a graph (Boost.Graph): GPUs, one NVLink switch per
// node, the node's host (CPU, host memory and PCIe root), a NIC per node and
// one network switch joining the nodes. Each link carries a bandwidth per
// direction and a latency. Point-to-point transfers, collectives and host
// copies are priced from the paths in this graph, so the same graph will
// price KV transfers between replicas for disaggregation.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/types.hpp"

namespace twin {

// How a node's GPUs reach each other: every GPU on an NVSwitch (HGX/DGX
// boards: any pair at full NVLink bandwidth), NVLink bridges joining GPUs
// two by two (PCIe cards such as A100 PCIe or H100 NVL: a bridged pair talks
// over NVLink, any other pair through the host's PCIe), or PCIe only.
// mesh (issue 41): AMD's Infinity Fabric, a direct link between every pair
// of a node's GPUs; RCCL drives all of a GPU's links at once, so a ring or
// an all-to-all over k GPUs of a node moves (k - 1) links' worth.
enum class Interconnect { nvswitch, nvlink_pairs, pcie, mesh };

// The links of one kind of node, from its hardware profile. Bandwidths in
// bytes per second per direction, latencies in nanoseconds.
struct NodeLinks {
  std::int32_t gpus_per_node = 8;
  Interconnect interconnect = Interconnect::nvswitch;
  double nvlink_bandwidth = 0;   // 0: no NVLink, GPUs talk over PCIe via the host
  double nvlink_latency = 0;     // GPU to GPU through the switch
  double pcie_bandwidth = 0;     // GPU to host
  double pcie_latency = 0;
  double nic_bandwidth = 0;      // node to the network
  double nic_latency = 0;        // node to node through the network switch
};

// The kind of a path's hops, worst last: a path is as its worst hop (two
// GPUs joined through a switch are nvswitch, through the host pcie, across
// nodes network). A collective's measured curve is chosen by it.
enum class PathLink { none, nvswitch, nvlink_bridge, pcie, network };

// A transfer along one path: bottleneck bandwidth and summed latency.
struct PathCost {
  double bandwidth = 0;  // bytes per second
  double latency = 0;    // ns
  std::int32_t hops = 0;
  PathLink link = PathLink::none;
  // ns to move `bytes` along the path.
  double time(double bytes) const { return latency + (bytes > 0 ? bytes / bandwidth * 1e9 : 0.0); }
};

// A ring collective over a group: the ring's bottleneck link bandwidth and
// its slowest hop's latency.
struct RingCost {
  std::int32_t size = 1;
  double bandwidth = 0;
  double latency = 0;
  PathLink link = PathLink::none;  // the ring's worst hop
  // Ring all-reduce: 2(n-1)/n x bytes / bw + 2(n-1) x latency; 0 for n = 1.
  double allreduce_time(double bytes) const;
};

// An all-to-all over a group (MoE expert parallelism: dispatch and
// combine): every GPU exchanges with every other at once, so a GPU's
// traffic to peers on its node shares its own link, and its traffic to
// other nodes shares the node's network path with the group's other GPUs
// there. `bandwidth` is the rate at which one GPU's whole exchange drains
// (bytes/s), `latency` the slowest peer path's.
struct AllToAllCost {
  std::int32_t size = 1;
  double bandwidth = 0;
  double latency = 0;
  PathLink link = PathLink::none;  // the worst path to a peer
  // latency + bytes / bw, for `bytes` one GPU sends (or receives); 0 for n = 1.
  double time(double bytes) const;
};

using GpuId = std::int32_t;

class ClusterTopology {
 public:
  ClusterTopology();
  ~ClusterTopology();
  ClusterTopology(ClusterTopology&&) noexcept;
  ClusterTopology& operator=(ClusterTopology&&) noexcept;

  // Adds `num_nodes` nodes wired as `links` says and returns their GPUs,
  // node by node. Throws UsageError for a non-positive count or bandwidth.
  std::vector<GpuId> add_nodes(const NodeLinks& links, std::int32_t num_nodes);

  std::int32_t num_gpus() const;
  std::int32_t num_nodes() const;
  std::int32_t node_of(GpuId gpu) const;
  std::int32_t num_vertices() const;
  std::int32_t num_links() const;

  // The quickest path for a typical message (latency plus 1 MiB at the
  // link's bandwidth, summed over links), then its bottleneck and latency.
  PathCost path(GpuId from, GpuId to) const;
  // GPU to its node's host memory (swap, offload).
  PathCost host_path(GpuId gpu) const;
  // The group in the given order as a ring.
  RingCost ring(std::span<const GpuId> group) const;
  // The group's all-to-all, priced from its first GPU (groups are placed
  // alike): the bytes to peers on its node over the slowest such path, the
  // rest over the slowest path off the node shared by the group's GPUs on
  // it, both at once.
  AllToAllCost all_to_all(std::span<const GpuId> group) const;

  // Whether every GPU of the group is on one node whose GPUs form a mesh.
  bool within_mesh_node(std::span<const GpuId> group) const;

  // Names of the vertices on the path, for tests and explanations.
  std::vector<std::string> path_names(GpuId from, GpuId to) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twin
