// Collectives priced from measured curves and GEMMs priced per format
// (docs/hardware.md "Collectives" and "GEMMs per format"; docs/op-costs.md).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwprofiles/hardware_desc.hpp"
#include "models/embedded_file.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

nlohmann::json bundled(const std::string& name) {
  for (const auto& f : bundled_hardware_files())
    if (f.name == name) return nlohmann::json::parse(f.text);
  FAIL(name + " is not bundled");
  return {};
}

// The profile without its collective curves (and their source notes).
nlohmann::json without_collectives(nlohmann::json j) {
  j.erase("collectives");
  std::vector<std::string> stale;
  for (auto it = j["sources"].begin(); it != j["sources"].end(); ++it)
    if (it.key().rfind("collectives.", 0) == 0) stale.push_back(it.key());
  for (const std::string& key : stale) j["sources"].erase(key);
  return j;
}

// A profile written to a temp file for the cluster to load; removed after.
struct ProfileFile {
  std::string path;
  explicit ProfileFile(const nlohmann::json& j, const std::string& tag)
      : path((std::filesystem::temp_directory_path() /
              ("twin_collectives_" + std::to_string(::getpid()) + "_" + tag + ".json"))
                 .string()) {
    std::ofstream(path) << j.dump(2);
  }
  ~ProfileFile() { std::filesystem::remove(path); }
};

const OpCost* find_op(const std::vector<OpCost>& ops, OpKind kind) {
  for (const auto& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

CollectiveCurve curve(CollectiveKind kind, CollectiveLink link, int gpus, const std::string& name) {
  return CollectiveCurve{name, kind, link, gpus, {{1e3, 10e3}, {1e5, 100e3}}};
}

BatchShape prefill(int tokens) {
  BatchShape s;
  s.seqs.push_back(SeqShape{tokens, 0, true});
  return s;
}

}  // namespace

TEST_CASE("a collective curve interpolates log time in log bytes, flat below and at its bandwidth above") {
  const CollectiveCurve c = curve(CollectiveKind::all_reduce, CollectiveLink::nvswitch, 2, "c");
  CHECK(c.time_ns(1e3) == Approx(10e3));
  CHECK(c.time_ns(1e4) == Approx(std::sqrt(10e3 * 100e3)));  // halfway in log bytes: the geometric mean
  CHECK(c.time_ns(10) == Approx(10e3));                        // latency-bound below the first point
  CHECK(c.time_ns(2e5) == Approx(200e3));                      // the last point's bandwidth beyond it
}

TEST_CASE("a profile's measured times are held non-decreasing in bytes") {
  nlohmann::json j = without_collectives(bundled("h100-80gb"));
  j["collectives"] = {{"dip", {{"kind", "all_reduce"}, {"link", "nvswitch"}, {"gpus", 2},
                               {"points", {{1024, 40.0}, {4096, 20.0}, {16384, 60.0}}}}}};
  j["sources"]["collectives.dip"] = "test";
  const RooflineParams p = roofline_params(parse_hardware_json(j.dump(), "test", "t"), Dtype::bf16);
  REQUIRE(p.collective_curves.size() == 1);
  const CollectiveCurve& c = p.collective_curves.front();
  CHECK(c.time_ns(4096) == Approx(40e3));  // the dip to 20 us is held at 40
  CHECK(c.time_ns(2048) == Approx(40e3));
  CHECK(c.time_ns(16384) == Approx(60e3));
}

TEST_CASE("the curve is chosen by collective kind, link and group size, and never across nodes") {
  RooflineParams p;
  p.collective_curves = {curve(CollectiveKind::all_reduce, CollectiveLink::nvswitch, 2, "ar_sw_2"),
                         curve(CollectiveKind::all_reduce, CollectiveLink::nvswitch, 4, "ar_sw_4"),
                         curve(CollectiveKind::all_reduce, CollectiveLink::pcie_host, 2, "ar_host_2"),
                         curve(CollectiveKind::all_reduce, CollectiveLink::pcie_p2p, 2, "ar_p2p_2"),
                         curve(CollectiveKind::all_gather, CollectiveLink::nvswitch, 2, "ag_sw_2"),
                         curve(CollectiveKind::all_to_all, CollectiveLink::nvlink_bridge, 2, "a2a_br_2")};
  auto name = [&](CollectiveKind k, PathLink l, int n) {
    const CollectiveCurve* c = find_collective_curve(p, k, l, n);
    return c ? c->name : std::string("formula");
  };
  CHECK(name(CollectiveKind::all_reduce, PathLink::nvswitch, 2) == "ar_sw_2");
  CHECK(name(CollectiveKind::all_reduce, PathLink::nvswitch, 4) == "ar_sw_4");
  CHECK(name(CollectiveKind::all_reduce, PathLink::nvswitch, 8) == "formula");  // no 8-GPU curve
  CHECK(name(CollectiveKind::all_gather, PathLink::nvswitch, 2) == "ag_sw_2");
  CHECK(name(CollectiveKind::all_gather, PathLink::nvswitch, 4) == "formula");
  CHECK(name(CollectiveKind::all_to_all, PathLink::nvlink_bridge, 2) == "a2a_br_2");
  CHECK(name(CollectiveKind::all_reduce, PathLink::nvlink_bridge, 2) == "formula");
  CHECK(name(CollectiveKind::all_reduce, PathLink::pcie, 2) == "ar_host_2");  // no P2P: through host memory
  p.pcie_p2p = true;
  CHECK(name(CollectiveKind::all_reduce, PathLink::pcie, 2) == "ar_p2p_2");
  CHECK(name(CollectiveKind::all_reduce, PathLink::network, 2) == "formula");
  CHECK(name(CollectiveKind::all_reduce, PathLink::none, 2) == "formula");
}

TEST_CASE("the cluster graph names the kind of link a ring runs over") {
  SECTION("on an NVSwitch board") {
    Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb", 2));
    const auto& params = dynamic_cast<RooflineCostModel&>(*c.replicas[0].cost_model).params();
    CHECK(params.tp_rings[0].link == PathLink::nvswitch);
  }
  SECTION("PCIe cards") {
    Cluster c = build_cluster(one_group("llama-3.1-8b", "rtx-4090", 2));
    const auto& params = dynamic_cast<RooflineCostModel&>(*c.replicas[0].cost_model).params();
    CHECK(params.tp_rings[0].link == PathLink::pcie);
  }
}

TEST_CASE("a TP2 step on PCIe cards prices each all-reduce at the profile's curve") {
  nlohmann::json j = bundled("rtx-4090");
  j["collectives"] = {{"host_2", {{"kind", "all_reduce"}, {"link", "pcie_host"}, {"gpus", 2},
                                  {"points", {{8192, 50.0}, {1048576, 150.0}}}}}};
  j["sources"]["collectives.host_2"] = "test curve";
  const ProfileFile file(j, "pcie");
  Cluster c = build_cluster(one_group("llama-3.1-8b", file.path, 2));
  const auto& model = dynamic_cast<RooflineCostModel&>(*c.replicas[0].cost_model);
  std::vector<OpCost> ops;
  price(*c.replicas[0].cost_model, decode_batch(8, 512), &ops);
  const OpCost* ar = find_op(ops, OpKind::tp_allreduce);
  REQUIRE(ar);
  const double bytes = 8 * 4096 * 2.0;  // 8 tokens of the 4096-wide hidden state in bf16
  CHECK(ar->comm_bytes / ar->repeat == Approx(bytes));
  CHECK(ar->curve == "host_2");
  CHECK(ar->time_ns / ar->repeat == Approx(model.params().collective_curves.front().time_ns(bytes)));
  CHECK(ar->time_ns / ar->repeat == Approx(50e3 * std::pow(3.0, std::log(8.0) / std::log(128.0))));
  // The gather has no curve: the ring formula.
  const OpCost* gather = find_op(ops, OpKind::tp_gather);
  REQUIRE(gather);
  CHECK(gather->curve == "link");

  SECTION("with peer-to-peer the host curve does not apply: the formula") {
    j["pcie_p2p"] = true;
    j["sources"]["pcie_p2p"] = "test";
    const ProfileFile p2p(j, "p2p");
    Cluster d = build_cluster(one_group("llama-3.1-8b", p2p.path, 2));
    std::vector<OpCost> formula;
    price(*d.replicas[0].cost_model, decode_batch(8, 512), &formula);
    CHECK(find_op(formula, OpKind::tp_allreduce)->curve == "link");
  }
}

TEST_CASE("without peer-to-peer a formula-priced PCIe all-reduce gets half the link and a silent profile all of it") {
  // The bundled RTX 4090 says its cards have no P2P and carries no curves.
  nlohmann::json j = without_collectives(bundled("rtx-4090"));
  REQUIRE(j.at("pcie_p2p") == false);
  const ProfileFile staged_file(j, "staged");
  j.erase("pcie_p2p");
  j["sources"].erase("pcie_p2p");
  const ProfileFile silent_file(j, "silent");
  Cluster staged = build_cluster(one_group("llama-3.1-8b", staged_file.path, 2));
  Cluster silent = build_cluster(one_group("llama-3.1-8b", silent_file.path, 2));
  const auto& params = dynamic_cast<RooflineCostModel&>(*staged.replicas[0].cost_model).params();
  CHECK(params.pcie_host_staged);
  CHECK_FALSE(dynamic_cast<RooflineCostModel&>(*silent.replicas[0].cost_model).params().pcie_host_staged);
  std::vector<OpCost> a, b;
  price(*staged.replicas[0].cost_model, decode_batch(64, 512), &a);
  price(*silent.replicas[0].cost_model, decode_batch(64, 512), &b);
  const OpCost* slow = find_op(a, OpKind::tp_allreduce);
  const OpCost* fast = find_op(b, OpKind::tp_allreduce);
  REQUIRE(slow);
  REQUIRE(fast);
  CHECK(slow->curve == "link");
  // Two GPUs: the ring moves the whole buffer once; at half the rate it
  // takes bytes / (bw x efficiency) longer, latency and launch unchanged.
  const double bytes = 64 * 4096 * 2.0;
  const double link = params.tp_rings[0].bandwidth * params.allreduce_efficiency;
  CHECK((slow->time_ns - fast->time_ns) / slow->repeat == Approx(bytes / link * 1e9));
}

TEST_CASE("bundled RTX PRO 6000 profiles price two-GPU collectives on their measured curves") {
  for (const char* hw : {"rtx-pro-6000-blackwell-server", "rtx-pro-6000-blackwell-workstation"}) {
    INFO(hw);
    Cluster tp2 = build_cluster(one_group("llama-3.1-8b", hw, 2));
    std::vector<OpCost> ops;
    price(*tp2.replicas[0].cost_model, decode_batch(64, 512), &ops);
    CHECK(find_op(ops, OpKind::tp_allreduce)->curve == "nccl_all_reduce_pcie_p2p_2");
    CHECK(find_op(ops, OpKind::tp_gather)->curve == "nccl_all_gather_pcie_p2p_2");
    // 128 tokens of 4,096 bf16 values is 1 MiB: the curve's own point, 2 x 46.57 us.
    std::vector<OpCost> mib;
    price(*tp2.replicas[0].cost_model, decode_batch(128, 512), &mib);
    const OpCost* ar = find_op(mib, OpKind::tp_allreduce);
    CHECK(ar->time_ns / ar->repeat == Approx(93.1e3));
    Cluster tp4 = build_cluster(one_group("llama-3.1-8b", hw, 4));
    std::vector<OpCost> four;
    price(*tp4.replicas[0].cost_model, decode_batch(64, 512), &four);
    CHECK(find_op(four, OpKind::tp_allreduce)->curve == "nccl_all_reduce_pcie_p2p_4");
  }
}

TEST_CASE("bundled NVSwitch profiles price TP all-reduce on their measured curves") {
  for (const char* hw : {"a100-80gb", "h100-80gb", "h200"}) {
    for (int tp : {2, 4, 8}) {
      INFO(hw << " tp " << tp);
      // NCCL's curve when the engine's own kernel is off...
      ClusterConfig nccl = one_group("llama-3.1-8b", hw, tp);
      nccl.groups.front().scheduler_options.emplace_back("custom_all_reduce", "false");
      Cluster c = build_cluster(nccl);
      std::vector<OpCost> ops;
      price(*c.replicas[0].cost_model, decode_batch(1, 512), &ops);
      CHECK(find_op(ops, OpKind::tp_allreduce)->curve == "nccl_all_reduce_nvswitch_" + std::to_string(tp));
      // ...and the custom all-reduce's for the vllm preset's small messages,
      // where the profile measured it (the A100's at 2 and 4 GPUs only).
      const bool measured = std::string(hw) != "a100-80gb" || tp != 8;
      Cluster v = build_cluster(one_group("llama-3.1-8b", hw, tp));
      ops.clear();
      price(*v.replicas[0].cost_model, decode_batch(1, 512), &ops);
      CHECK(find_op(ops, OpKind::tp_allreduce)->curve ==
            (measured ? "custom_all_reduce_nvswitch_" : "nccl_all_reduce_nvswitch_") + std::to_string(tp));
    }
  }
}

TEST_CASE("W8A8 fp8 GEMMs are priced on fp8 efficiency, not the bf16 curve at the fp8 peak") {
  auto quantized = [](const std::string& hw) {
    ClusterConfig c = one_group("llama-3.1-8b", hw);
    c.groups.front().quantization = "fp8";
    return c;
  };
  nlohmann::json j = bundled("h200");
  REQUIRE(j["efficiency"]["dtype_ratio"]["fp8"].get<double>() < 1.0);
  nlohmann::json unscaled = j;
  unscaled["efficiency"].erase("dtype_ratio");
  unscaled["sources"].erase("efficiency.dtype_ratio.fp8");
  const ProfileFile plain(unscaled, "unscaled");
  std::vector<OpCost> with_ratio, without;
  Cluster a = build_cluster(quantized("h200")), b = build_cluster(quantized(plain.path));
  price(*a.replicas[0].cost_model, prefill(4096), &with_ratio);
  price(*b.replicas[0].cost_model, prefill(4096), &without);
  const double ratio = j["efficiency"]["dtype_ratio"]["fp8"].get<double>();
  const OpCost* q = find_op(with_ratio, OpKind::gate_up_proj);
  const OpCost* q0 = find_op(without, OpKind::gate_up_proj);
  REQUIRE(q->compute_bound);
  CHECK(q->efficiency == Approx(q0->efficiency * ratio));
  // Unquantised ops keep their prices.
  CHECK(find_op(with_ratio, OpKind::lm_head)->time_ns == find_op(without, OpKind::lm_head)->time_ns);

  SECTION("an fp8 curve of its own wins over the ratio, for fp8 replicas only") {
    nlohmann::json own = j;
    own["efficiency"]["curves"]["fp8_gate_up"] = {
        {"roof", "compute"}, {"x", "flops"}, {"dtype", "fp8"}, {"points", {{1e6, 0.5}}}, {"ops", {"gate_up_proj"}}};
    own["sources"]["efficiency.curves.fp8_gate_up"] = "test";
    const ProfileFile file(own, "own");
    std::vector<OpCost> fp8, bf16;
    Cluster f = build_cluster(quantized(file.path)), g = build_cluster(one_group("llama-3.1-8b", file.path));
    price(*f.replicas[0].cost_model, prefill(4096), &fp8);
    price(*g.replicas[0].cost_model, prefill(4096), &bf16);
    CHECK(find_op(fp8, OpKind::gate_up_proj)->curve == "fp8_gate_up");
    CHECK(find_op(fp8, OpKind::gate_up_proj)->efficiency == Approx(0.5));
    CHECK(find_op(bf16, OpKind::gate_up_proj)->curve != "fp8_gate_up");
  }
}
