#include "sim/topology.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

// GCC 12 with -O2 and ASan reports boost::optional's storage in
// named_graph.hpp as maybe used uninitialised where add_vertex inlines it
// (a known false positive of boost::optional); the rest of -Werror stays.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <boost/graph/adjacency_list.hpp>

#include "base/error.hpp"

namespace twin {
namespace {

enum class VertexKind { gpu, nvswitch, host, nic, network };

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  std::int32_t node = -1;
  std::string name;
};

struct LinkProps {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // ns
  double route_weight = 0;
  PathLink kind = PathLink::pcie;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProps, LinkProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

// Routes are chosen for a message of this size: large enough that bandwidth
// matters (an NVLink hop beats a PCIe detour), small enough that latency does.
constexpr double kRouteBytes = 1 << 20;

}  // namespace

double RingCost::allreduce_time(double bytes) const {
  if (size <= 1) return 0;
  const double n = size;
  return 2.0 * (n - 1) / n * bytes / bandwidth * 1e9 + 2.0 * (n - 1) * latency;
}

struct ClusterTopology::Impl {
  Graph graph;
  std::vector<Vertex> gpus;          // by GpuId
  std::vector<Vertex> hosts;         // by node
  std::vector<std::int32_t> gpu_node;
  std::vector<bool> node_mesh;       // by node: GPUs joined by a full mesh of links
  std::int32_t nodes = 0;
  bool has_network = false;
  Vertex network{};

  Vertex add_vertex(VertexKind kind, std::int32_t node, std::string name) {
    return boost::add_vertex(VertexProps{kind, node, std::move(name)}, graph);
  }
  void add_link(Vertex a, Vertex b, double bandwidth, double latency, PathLink kind) {
    boost::add_edge(a, b, LinkProps{bandwidth, latency, latency + kRouteBytes / bandwidth * 1e9, kind}, graph);
  }

  // Dijkstra from `from`, stopped once `to` is settled, keeping distances
  // only for the vertices it reaches: a route within a node visits that
  // node, not the cluster. (A pass over the whole graph per route made
  // building a cluster quadratic in its groups: 4,000 groups took 36 s.)
  // Ties settle the lower vertex first: the same route every time.
  std::vector<Vertex> route(Vertex from, Vertex to) const {
    struct Reached {
      double dist;
      Vertex pred;
    };
    std::unordered_map<Vertex, Reached> reached{{from, {0.0, from}}};
    using Item = std::pair<double, Vertex>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
    queue.push({0.0, from});
    while (!queue.empty()) {
      const auto [dist, v] = queue.top();
      queue.pop();
      if (dist > reached.at(v).dist) continue;  // a stale entry
      if (v == to) break;
      for (auto [e, end] = boost::out_edges(v, graph); e != end; ++e) {
        const Vertex w = boost::target(*e, graph);
        const double through = dist + graph[*e].route_weight;
        const auto it = reached.find(w);
        if (it != reached.end() && !(through < it->second.dist)) continue;
        reached[w] = {through, v};
        queue.push({through, w});
      }
    }
    if (!reached.contains(to)) {
      throw Error("cluster topology: no path between " + graph[from].name + " and " + graph[to].name);
    }
    std::vector<Vertex> path{to};
    for (Vertex v = to; v != from; v = reached.at(v).pred) path.push_back(reached.at(v).pred);
    std::reverse(path.begin(), path.end());
    return path;
  }

  PathCost cost(const std::vector<Vertex>& path) const {
    PathCost c;
    c.bandwidth = std::numeric_limits<double>::infinity();
    for (std::size_t i = 1; i < path.size(); ++i) {
      // Parallel links do not occur in our wiring: the one edge is the link.
      const auto [edge, found] = boost::edge(path[i - 1], path[i], graph);
      (void)found;
      const LinkProps& link = graph[edge];
      c.bandwidth = std::min(c.bandwidth, link.bandwidth);
      c.latency += link.latency;
      c.link = std::max(c.link, link.kind);
      ++c.hops;
    }
    if (c.hops == 0) c.bandwidth = std::numeric_limits<double>::infinity();
    return c;
  }
};

ClusterTopology::ClusterTopology() : impl_(std::make_unique<Impl>()) {}
ClusterTopology::~ClusterTopology() = default;
ClusterTopology::ClusterTopology(ClusterTopology&&) noexcept = default;
ClusterTopology& ClusterTopology::operator=(ClusterTopology&&) noexcept = default;

std::vector<GpuId> ClusterTopology::add_nodes(const NodeLinks& links, std::int32_t num_nodes) {
  if (num_nodes <= 0) throw UsageError("cluster topology: node count must be positive");
  if (links.gpus_per_node <= 0) throw UsageError("cluster topology: gpus_per_node must be positive");
  if (links.pcie_bandwidth <= 0) throw UsageError("cluster topology: the host link (PCIe) bandwidth must be positive");
  if (links.nvlink_bandwidth < 0 || links.nic_bandwidth < 0 || links.nvlink_latency < 0 ||
      links.pcie_latency < 0 || links.nic_latency < 0) {
    throw UsageError("cluster topology: link bandwidths and latencies must not be negative");
  }
  Impl& s = *impl_;
  std::vector<GpuId> added;
  for (std::int32_t n = 0; n < num_nodes; ++n) {
    const std::int32_t node = s.nodes++;
    const std::string prefix = "node" + std::to_string(node) + ".";
    const Vertex host = s.add_vertex(VertexKind::host, node, prefix + "host");
    s.hosts.push_back(host);
    const bool nvlink = links.nvlink_bandwidth > 0 && links.interconnect != Interconnect::pcie;
    const bool switched = nvlink && links.interconnect == Interconnect::nvswitch;
    const bool mesh = nvlink && links.interconnect == Interconnect::mesh;
    s.node_mesh.push_back(mesh);
    const std::size_t first_gpu = s.gpus.size();
    Vertex nvswitch{};
    if (switched) nvswitch = s.add_vertex(VertexKind::nvswitch, node, prefix + "nvswitch");
    Vertex partner{};
    for (std::int32_t g = 0; g < links.gpus_per_node; ++g) {
      const Vertex gpu = s.add_vertex(VertexKind::gpu, node, prefix + "gpu" + std::to_string(g));
      s.add_link(gpu, host, links.pcie_bandwidth, links.pcie_latency, PathLink::pcie);
      // The GPU-to-GPU latency is split over the two hops through the switch;
      // a bridge is one hop carrying all of it.
      if (switched) s.add_link(gpu, nvswitch, links.nvlink_bandwidth, links.nvlink_latency / 2, PathLink::nvswitch);
      if (nvlink && !switched && !mesh && g % 2 == 1)
        s.add_link(partner, gpu, links.nvlink_bandwidth, links.nvlink_latency, PathLink::nvlink_bridge);
      // A mesh: one direct link to every GPU added before on this node.
      for (std::size_t peer = first_gpu; mesh && peer < s.gpus.size(); ++peer)
        s.add_link(s.gpus[peer], gpu, links.nvlink_bandwidth, links.nvlink_latency, PathLink::nvlink_bridge);
      partner = gpu;
      added.push_back(static_cast<GpuId>(s.gpus.size()));
      s.gpus.push_back(gpu);
      s.gpu_node.push_back(node);
    }
    if (links.nic_bandwidth > 0) {
      if (!s.has_network) {
        s.network = s.add_vertex(VertexKind::network, -1, "network");
        s.has_network = true;
      }
      const Vertex nic = s.add_vertex(VertexKind::nic, node, prefix + "nic");
      // GPUDirect RDMA: the NIC sits on the node's PCIe fabric.
      s.add_link(host, nic, links.pcie_bandwidth, 0, PathLink::pcie);
      s.add_link(nic, s.network, links.nic_bandwidth, links.nic_latency / 2, PathLink::network);
    }
  }
  return added;
}

std::int32_t ClusterTopology::num_gpus() const { return static_cast<std::int32_t>(impl_->gpus.size()); }
std::int32_t ClusterTopology::num_nodes() const { return impl_->nodes; }
std::int32_t ClusterTopology::node_of(GpuId gpu) const { return impl_->gpu_node.at(gpu); }
std::int32_t ClusterTopology::num_vertices() const {
  return static_cast<std::int32_t>(boost::num_vertices(impl_->graph));
}
std::int32_t ClusterTopology::num_links() const { return static_cast<std::int32_t>(boost::num_edges(impl_->graph)); }

PathCost ClusterTopology::path(GpuId from, GpuId to) const {
  const Impl& s = *impl_;
  return s.cost(s.route(s.gpus.at(from), s.gpus.at(to)));
}

PathCost ClusterTopology::host_path(GpuId gpu) const {
  const Impl& s = *impl_;
  return s.cost(s.route(s.gpus.at(gpu), s.hosts.at(s.gpu_node.at(gpu))));
}

RingCost ClusterTopology::ring(std::span<const GpuId> group) const {
  RingCost r;
  r.size = static_cast<std::int32_t>(group.size());
  if (group.size() <= 1) return r;
  r.bandwidth = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < group.size(); ++i) {
    const PathCost hop = path(group[i], group[(i + 1) % group.size()]);
    r.bandwidth = std::min(r.bandwidth, hop.bandwidth);
    r.latency = std::max(r.latency, hop.latency);
    r.link = std::max(r.link, hop.link);
  }
  // In a mesh the collective library runs rings over disjoint links at
  // once: a group within one node moves (k - 1) links' worth per GPU.
  if (within_mesh_node(group)) r.bandwidth *= static_cast<double>(group.size() - 1);
  return r;
}

double AllToAllCost::time(double bytes) const {
  if (size <= 1 || bytes <= 0) return 0;
  return latency + bytes / bandwidth * 1e9;
}

AllToAllCost ClusterTopology::all_to_all(std::span<const GpuId> group) const {
  AllToAllCost a;
  a.size = static_cast<std::int32_t>(group.size());
  if (group.size() <= 1) return a;
  const GpuId self = group.front();
  const std::int32_t node = node_of(self);
  double local_bw = std::numeric_limits<double>::infinity(), remote_bw = local_bw;
  double local = 0, remote = 0;  // peers on the node and off it; group GPUs on the node (self included)
  double on_node = 0;
  for (const GpuId g : group) on_node += node_of(g) == node ? 1 : 0;
  for (std::size_t i = 1; i < group.size(); ++i) {
    const PathCost p = path(self, group[i]);
    a.latency = std::max(a.latency, p.latency);
    a.link = std::max(a.link, p.link);
    if (node_of(group[i]) == node) {
      local += 1;
      local_bw = std::min(local_bw, p.bandwidth);
    } else {
      remote += 1;
      remote_bw = std::min(remote_bw, p.bandwidth);
    }
  }
  // Seconds per byte of one GPU's exchange: its share to local peers over
  // its own link, its share off the node times the node's GPUs sharing the path.
  const double peers = local + remote;
  // In a mesh each local peer has a link of its own, all busy at once.
  const double local_links = impl_->node_mesh.at(node) ? local : 1.0;
  const double local_s = local > 0 ? local / peers / (local_bw * local_links) : 0.0;
  const double remote_s = remote > 0 ? remote / peers * on_node / remote_bw : 0.0;
  a.bandwidth = 1.0 / std::max(local_s, remote_s);
  return a;
}

bool ClusterTopology::within_mesh_node(std::span<const GpuId> group) const {
  if (group.empty() || !impl_->node_mesh.at(node_of(group.front()))) return false;
  const std::int32_t node = node_of(group.front());
  return std::all_of(group.begin(), group.end(), [&](GpuId g) { return node_of(g) == node; });
}

std::vector<std::string> ClusterTopology::path_names(GpuId from, GpuId to) const {
  const Impl& s = *impl_;
  std::vector<std::string> names;
  for (Vertex v : s.route(s.gpus.at(from), s.gpus.at(to))) names.push_back(s.graph[v].name);
  return names;
}

}  // namespace twin
