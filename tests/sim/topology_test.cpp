#include <catch2/catch.hpp>

#include <array>

#include "sim/cluster.hpp"
#include "sim/topology.hpp"
#include "tests/sim/sim_test_util.hpp"

using namespace twin;

namespace {
NodeLinks dgx() {
  NodeLinks l;
  l.gpus_per_node = 8;
  l.nvlink_bandwidth = 450e9;
  l.nvlink_latency = 2000;
  l.pcie_bandwidth = 64e9;
  l.pcie_latency = 10000;
  l.nic_bandwidth = 50e9;
  l.nic_latency = 5000;
  return l;
}
}  // namespace

TEST_CASE("GPUs in a node talk over NVLink, across nodes over PCIe and the network") {
  ClusterTopology t;
  const auto gpus = t.add_nodes(dgx(), 2);
  REQUIRE(gpus.size() == 16);
  CHECK(t.num_nodes() == 2);
  const PathCost in_node = t.path(gpus[0], gpus[1]);
  CHECK(in_node.bandwidth == Approx(450e9));
  CHECK(in_node.latency == Approx(2000));
  CHECK(in_node.hops == 2);
  CHECK(t.path_names(gpus[0], gpus[1]) == std::vector<std::string>{"node0.gpu0", "node0.nvswitch", "node0.gpu1"});

  const PathCost cross = t.path(gpus[0], gpus[8]);
  CHECK(cross.bandwidth == Approx(50e9));                  // the NIC is the bottleneck
  CHECK(cross.latency == Approx(10000 + 0 + 5000 + 10000));  // PCIe, NIC-to-NIC, PCIe
  CHECK(t.path_names(gpus[0], gpus[8]).size() == 7);
  CHECK(t.node_of(gpus[9]) == 1);

  const PathCost host = t.host_path(gpus[3]);
  CHECK(host.bandwidth == Approx(64e9));
  CHECK(host.latency == Approx(10000));
}

TEST_CASE("without NVLink, GPUs of a node go through the host") {
  NodeLinks l = dgx();
  l.nvlink_bandwidth = 0;
  ClusterTopology t;
  const auto gpus = t.add_nodes(l, 1);
  const PathCost p = t.path(gpus[0], gpus[1]);
  CHECK(p.bandwidth == Approx(64e9));
  CHECK(p.latency == Approx(20000));
}

TEST_CASE("ring all-reduce uses the ring's bottleneck and 2(n-1) latencies") {
  ClusterTopology t;
  const auto gpus = t.add_nodes(dgx(), 2);
  const std::array<GpuId, 4> in_node{gpus[0], gpus[1], gpus[2], gpus[3]};
  const RingCost ring = t.ring(in_node);
  CHECK(ring.size == 4);
  CHECK(ring.bandwidth == Approx(450e9));
  const double bytes = 64e6;
  CHECK(ring.allreduce_time(bytes) == Approx(2.0 * 3 / 4 * bytes / 450e9 * 1e9 + 2.0 * 3 * 2000));

  const std::array<GpuId, 2> across{gpus[0], gpus[8]};
  CHECK(t.ring(across).bandwidth == Approx(50e9));
  const std::array<GpuId, 1> alone{gpus[0]};
  CHECK(t.ring(alone).allreduce_time(bytes) == 0);
}

TEST_CASE("bad node links are rejected") {
  ClusterTopology t;
  NodeLinks l = dgx();
  l.pcie_bandwidth = 0;
  CHECK_THROWS_WITH(t.add_nodes(l, 1), Catch::Contains("PCIe"));
  CHECK_THROWS(t.add_nodes(dgx(), 0));
}

TEST_CASE("NVLink bridges join GPUs two by two - other pairs and PCIe-only nodes go through the host") {
  NodeLinks pairs = dgx();
  pairs.gpus_per_node = 4;
  pairs.interconnect = Interconnect::nvlink_pairs;
  ClusterTopology t;
  const auto gpus = t.add_nodes(pairs, 1);
  // A bridged pair: one NVLink hop carrying the whole GPU-to-GPU latency.
  const PathCost bridged = t.path(gpus[0], gpus[1]);
  CHECK(bridged.bandwidth == Approx(450e9));
  CHECK(bridged.latency == Approx(2000));
  CHECK(bridged.hops == 1);
  // Across pairs: up to the host and down again over PCIe.
  CHECK(t.path_names(gpus[1], gpus[2]) == std::vector<std::string>{"node0.gpu1", "node0.host", "node0.gpu2"});
  CHECK(t.path(gpus[1], gpus[2]).bandwidth == Approx(64e9));
  // So TP 2 on a pair rides NVLink and TP 4 is held to PCIe, with the
  // latency per message counted on every ring step.
  const std::array<GpuId, 2> two{gpus[0], gpus[1]};
  const std::array<GpuId, 4> four{gpus[0], gpus[1], gpus[2], gpus[3]};
  const RingCost r2 = t.ring(two), r4 = t.ring(four);
  CHECK(r2.bandwidth == Approx(450e9));
  CHECK(r4.bandwidth == Approx(64e9));
  CHECK(r4.allreduce_time(16e6) > 5 * r2.allreduce_time(16e6));

  NodeLinks pcie = dgx();
  pcie.interconnect = Interconnect::pcie;
  ClusterTopology p;
  const auto g = p.add_nodes(pcie, 1);
  CHECK(p.path(g[0], g[1]).bandwidth == Approx(64e9));
  CHECK(p.path(g[0], g[1]).latency == Approx(2 * 10000));
  // An NVSwitch board gives every pair the same NVLink path.
  ClusterTopology s;
  const auto h = s.add_nodes(dgx(), 1);
  CHECK(s.path(h[1], h[2]).bandwidth == Approx(450e9));
}

// Issue 41: a rack-scale NVLink domain is one node of the graph.

TEST_CASE("a 72-GPU NVLink domain holds TP x PP = 72 and EP = 64 on NVLink, an HGX node does not") {
  auto group = [](const std::string& model, const std::string& hw, int tp, int pp, int ep) {
    ClusterConfig c = twin::test::one_group(model, hw, tp, pp);
    c.groups.front().ep = ep;
    return build_cluster(c, StartUpCheck::report);
  };
  const Cluster rack = group("llama-3.1-70b", "gb200-nvl72", 8, 9, 1);
  REQUIRE(rack.groups.front().replica_gpus.front().size() == 72);
  CHECK(rack.topology.num_nodes() == 1);
  const auto& gpus = rack.groups.front().replica_gpus.front();
  // Any two GPUs of the rack, first and last, are one NVLink switch apart.
  const PathCost far = rack.topology.path(gpus.front(), gpus.back());
  CHECK(far.bandwidth == Approx(900e9));
  CHECK(rack.topology.path_names(gpus.front(), gpus.back())[1] == "node0.nvswitch");
  const Cluster ep = group("deepseek-v3", "gb200-nvl72", 1, 1, 64);
  CHECK(ep.topology.num_nodes() == 1);
  CHECK(ep.topology.all_to_all(ep.groups.front().replica_gpus.front()).bandwidth == Approx(900e9));
  // TP 16 on 8-GPU HGX B200 nodes: two nodes, the ring priced over the network.
  const Cluster hgx = group("llama-3.1-70b", "b200", 16, 1, 1);
  CHECK(hgx.topology.num_nodes() == 2);
  const RingCost ring = hgx.topology.ring(hgx.groups.front().replica_gpus.front());
  CHECK(ring.bandwidth < 900e9);
  CHECK(ring.bandwidth == Approx(64e9));  // the host link to the NIC is the bottleneck
}

TEST_CASE("an xGMI mesh: a direct link per pair, rings and all-to-alls over all of a GPU's links") {
  NodeLinks l = dgx();
  l.interconnect = Interconnect::mesh;
  l.nvlink_bandwidth = 64e9;
  ClusterTopology t;
  const auto gpus = t.add_nodes(l, 2);
  // 8 GPU-host links, 28 mesh links and a NIC link per node, plus the NICs' uplinks.
  CHECK(t.num_links() == 2 * (8 + 28 + 1) + 2);
  const PathCost pair = t.path(gpus[0], gpus[5]);
  CHECK(pair.bandwidth == Approx(64e9));
  CHECK(pair.hops == 1);
  const std::array<GpuId, 2> two{gpus[0], gpus[1]};
  const std::array<GpuId, 8> eight{gpus[0], gpus[1], gpus[2], gpus[3], gpus[4], gpus[5], gpus[6], gpus[7]};
  CHECK(t.ring(two).bandwidth == Approx(64e9));
  CHECK(t.ring(eight).bandwidth == Approx(7 * 64e9));
  CHECK(t.all_to_all(eight).bandwidth == Approx(7 * 64e9));
  // Across nodes the mesh does not help: the host link and the network.
  const std::array<GpuId, 2> across{gpus[0], gpus[8]};
  CHECK(t.ring(across).bandwidth == Approx(50e9));
  CHECK_FALSE(t.within_mesh_node(across));
}
