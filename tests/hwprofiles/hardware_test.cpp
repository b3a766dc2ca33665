// Hardware profiles: every bundled one loads; the strict loader names the
// field it rejects; the GEMM efficiency curve interpolates in log space.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "hwprofiles/hardware_writer.hpp"
#include "models/embedded_file.hpp"

using namespace twin;

namespace {

// The bundled H100 profile as JSON, to be broken one field at a time.
nlohmann::json h100_json() {
  for (const auto& f : bundled_hardware_files())
    if (f.name == "h100-80gb") return nlohmann::json::parse(f.text);
  FAIL("h100-80gb is not bundled");
  return {};
}

// Writes `j` to a temp file, loads it, and returns the error message ("" if
// it loaded).
std::string load_error(const nlohmann::json& j) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("twin_hw_test_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << j.dump(2);
  std::string msg;
  try {
    load_hardware_file(path.string());
  } catch (const Error& e) {
    msg = e.what();
    CHECK(msg.find(path.string()) != std::string::npos);
  }
  std::filesystem::remove(path);
  return msg;
}

}  // namespace

TEST_CASE("every bundled profile loads, with a source for every number") {
  const auto names = hardware_names();
  REQUIRE(names == std::vector<std::string>{"a100-80gb", "b200", "b300", "cpu", "gb200-nvl72", "gb300-nvl72", "h100-80gb",
                                            "h100-nvl", "h100-pcie", "h20", "h200", "l4", "l40s", "mi300x", "mi325x",
                                            "mi355x", "rtx-4090",
                                            "rtx-pro-6000-blackwell-server", "rtx-pro-6000-blackwell-workstation"});
  for (const auto& name : names) {
    INFO(name);
    auto hw = resolve_hardware(name);
    CHECK(hw.name == name);
    CHECK(hw.memory_bandwidth_gbps > 0);
    CHECK(hw.sources.count("memory_bandwidth_gbps"));
    CHECK(hw.sources.count("efficiency.gemm_curve"));
    CHECK(supports(hw, Dtype::fp32));
    CHECK(supports(hw, Dtype::bf16));
  }
}

TEST_CASE("bundled figures match the reference table") {
  auto h100 = resolve_hardware("h100-80gb");
  CHECK(h100.kind == DeviceKind::gpu);
  CHECK(peak_flops(h100, Dtype::bf16) == Approx(989.4e12));
  CHECK(peak_flops(h100, Dtype::fp8) == Approx(1978.9e12));
  CHECK(h100.memory_bandwidth_gbps == 3350);
  CHECK(h100.memory_efficiency == Approx(0.89));
  // Memory as the device reports it, not the marketed decimal figure.
  CHECK(memory_bytes(h100) == 81559.0 * 1024 * 1024);
  CHECK(h100.memory_reported == "81559 MiB");
  CHECK(memory_bytes(resolve_hardware("a100-80gb")) == 85'899'345'920.0);  // 80 GiB
  CHECK(memory_bytes(resolve_hardware("h200")) == 143771.0 * 1024 * 1024);
  CHECK(h100.collective_reserve_bytes == 1792.0 * 1024 * 1024);
  auto a100 = resolve_hardware("a100-80gb");
  CHECK_FALSE(supports(a100, Dtype::fp8));
  CHECK_THROWS_AS(peak_flops(a100, Dtype::fp8), UsageError);
  CHECK_THROWS_WITH(peak_flops(a100, Dtype::fp8), Catch::Contains("int8"));
  CHECK(resolve_hardware("cpu").kind == DeviceKind::cpu);
}

TEST_CASE("a missing field is rejected with the field named") {
  for (const char* key : {"memory_mib", "nvlink_latency_us", "price_per_gpu_hour", "kind"}) {
    auto j = h100_json();
    j.erase(key);
    j["sources"].erase(key);
    INFO(key);
    const auto msg = load_error(j);
    CHECK(msg.find(key) != std::string::npos);
    CHECK(msg.find("missing") != std::string::npos);
  }
  auto j = h100_json();
  j["efficiency"].erase("memory");
  CHECK(load_error(j).find("efficiency.memory") != std::string::npos);
}

TEST_CASE("memory may be given in bytes, MiB, GiB or (older files) decimal GB, once") {
  auto j = h100_json();
  j.erase("memory_mib");
  j["sources"].erase("memory_mib");
  const std::pair<const char*, double> units[] = {
      {"memory_bytes", 1.0}, {"memory_gib", 1024.0 * 1024 * 1024}, {"memory_gb", 1e9}};
  for (const auto& [key, scale] : units) {
    auto k = j;
    k[key] = 80;
    k["sources"][key] = "test";
    INFO(key);
    CHECK(memory_bytes(parse_hardware_json(k.dump(), "test", "x")) == 80 * scale);
  }
  auto both = h100_json();
  both["memory_gb"] = 80;
  both["sources"]["memory_gb"] = "test";
  CHECK(load_error(both).find("give the memory once") != std::string::npos);
  // The reserves are optional; without them the defaults hold.
  auto bare = h100_json();
  for (const char* key : {"runtime_reserve_mib", "collective_reserve_mib"}) {
    bare.erase(key);
    bare["sources"].erase(key);
  }
  const HardwareDesc hw = parse_hardware_json(bare.dump(), "test", "x");
  CHECK(hw.runtime_reserve_bytes == 1024.0 * 1024 * 1024);
  CHECK(hw.collective_reserve_bytes == 512.0 * 1024 * 1024);
}

TEST_CASE("a negative field is rejected with the field named") {
  auto j = h100_json();
  j["memory_bandwidth_gbps"] = -1;
  CHECK(load_error(j).find("memory_bandwidth_gbps") != std::string::npos);
  j = h100_json();
  j["kernel_launch_us"] = -0.5;
  CHECK(load_error(j).find("kernel_launch_us") != std::string::npos);
  j = h100_json();
  j["peak_tflops"]["fp8"] = -10;
  CHECK(load_error(j).find("peak_tflops.fp8") != std::string::npos);
  j = h100_json();
  j["efficiency"]["compute"] = 1.5;
  CHECK(load_error(j).find("efficiency.compute") != std::string::npos);
}

TEST_CASE("unknown keys, missing sources and bad curves are errors") {
  auto j = h100_json();
  j["memory_bandwith_gbps"] = 1;
  CHECK(load_error(j).find("memory_bandwith_gbps") != std::string::npos);
  j = h100_json();
  j["sources"].erase("nic_latency_us");
  CHECK(load_error(j).find("sources.nic_latency_us") != std::string::npos);
  j = h100_json();
  j["efficiency"]["gemm_curve"] = nlohmann::json::array({{1e9, 0.5}, {1e8, 0.6}});
  CHECK(load_error(j).find("gemm_curve[1]") != std::string::npos);
  j = h100_json();
  j["peak_tflops"]["fp4"] = 9000;
  CHECK(load_error(j).find("peak_tflops.fp4") != std::string::npos);
  // The unmodified profile loads from a file too, named after its stem.
  CHECK(load_error(h100_json()).empty());
}

TEST_CASE("GEMM efficiency interpolates in log space between curve points") {
  HardwareDesc hw;
  hw.gemm_curve = {{1e6, 0.1}, {1e8, 0.5}, {1e10, 0.7}};
  CHECK(gemm_efficiency(hw, 1e3) == Approx(0.1));  // flat below the first point
  CHECK(gemm_efficiency(hw, 1e6) == Approx(0.1));
  CHECK(gemm_efficiency(hw, 1e7) == Approx(0.3));  // halfway in log(flops)
  CHECK(gemm_efficiency(hw, 1e8) == Approx(0.5));
  CHECK(gemm_efficiency(hw, std::pow(10.0, 8.5)) == Approx(0.55));
  CHECK(gemm_efficiency(hw, 1e12) == Approx(0.7));  // flat above the last point
  // The bundled curves rise with size, except where measured points fall
  // (the L4 throttles on large GEMMs; the roofline holds times
  // non-decreasing either way). The compute efficiency, which caps the
  // curve, is the curve's top.
  for (const auto& name : hardware_names()) {
    auto real = resolve_hardware(name);
    INFO(name);
    bool dips = false;
    for (std::size_t i = 1; i < real.gemm_curve.size(); ++i) {
      const auto& a = real.gemm_curve[i - 1];
      const auto& b = real.gemm_curve[i];
      dips = dips || b.efficiency < a.efficiency;
    }
    double prev = 0;
    for (double f = 1e5; f < 1e13; f *= 3) {
      const double e = gemm_efficiency(real, f);
      if (!dips) CHECK(e >= prev);
      prev = e;
    }
    double top = 0;
    for (const auto& p : real.gemm_curve) top = std::max(top, p.efficiency);
    if (real.kind == DeviceKind::gpu) CHECK(top == Approx(real.compute_efficiency).margin(0.01));
  }
}

TEST_CASE("an unknown hardware name lists the known ones") {
  CHECK_THROWS_AS(resolve_hardware("h300"), UsageError);
  CHECK_THROWS_WITH(resolve_hardware("h300"), Catch::Contains("h100-80gb") && Catch::Contains("cpu"));
}

TEST_CASE("the hardware flag takes a device name as the GPU reports it") {
  CHECK(resolve_hardware("NVIDIA GeForce RTX 4090").name == "rtx-4090");
  CHECK(resolve_hardware("NVIDIA H100 80GB HBM3").name == "h100-80gb");
  CHECK(resolve_hardware("NVIDIA RTX PRO 6000 Blackwell Server Edition").name == "rtx-pro-6000-blackwell-server");
  // A name no profile (or more than the card) matches is refused, not guessed.
  CHECK_THROWS_WITH(resolve_hardware("NVIDIA H100"), Catch::Contains("unknown hardware") && Catch::Contains("h100-pcie"));
  CHECK_THROWS_WITH(resolve_hardware("NVIDIA GeForce RTX 3090"), Catch::Contains("unknown hardware"));
}

TEST_CASE("the hardware profile of the device an engine ran on") {
  CHECK(hardware_for_device("cpu", "cpu (2 threads)") == "cpu");
  CHECK(hardware_for_device("cuda", "NVIDIA H200") == "h200");
  CHECK(hardware_for_device("cuda", "NVIDIA H100 80GB HBM3") == "h100-80gb");
  CHECK(hardware_for_device("cuda", "NVIDIA A100-SXM4-80GB") == "a100-80gb");
  CHECK(hardware_for_device("cuda", "NVIDIA L40S") == "l40s");
  // The PCIe and NVL H100 cards and the L4 by their own names.
  CHECK(hardware_for_device("cuda", "NVIDIA H100 PCIe") == "h100-pcie");
  CHECK(hardware_for_device("cuda", "NVIDIA H100 NVL") == "h100-nvl");
  CHECK(hardware_for_device("cuda", "NVIDIA H100 80GB HBM3") == "h100-80gb");
  CHECK(hardware_for_device("cuda", "NVIDIA L4") == "l4");
  CHECK(hardware_for_device("cuda", "NVIDIA GeForce RTX 4090") == "rtx-4090");
  CHECK(hardware_for_device("cuda", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition") ==
        "rtx-pro-6000-blackwell-workstation");
  CHECK(hardware_for_device("cuda", "NVIDIA RTX PRO 6000 Blackwell Server Edition") == "rtx-pro-6000-blackwell-server");
  CHECK_THROWS_WITH(hardware_for_device("cuda", "NVIDIA GeForce RTX 3090"),
                    Catch::Contains("RTX 3090") && Catch::Contains("--hw"));
}

// The datasheet figures of the PCIe cards users run, and what sets the two
// RTX PRO 6000 editions apart: the Server Edition's memory is slower (1,597
// against 1,792 GB/s) and its clocks lower (120 against 125 FP32 TFLOPS).
TEST_CASE("the RTX 4090 and the RTX PRO 6000 Blackwell editions carry their datasheet figures") {
  const HardwareDesc g = resolve_hardware("rtx-4090");
  // Ada whitepaper: dense FP16/BF16 with FP32 accumulate, half the FP16-accumulate 330.3.
  CHECK(peak_flops(g, Dtype::bf16) == Approx(165.2e12));
  CHECK(peak_flops(g, Dtype::fp16) == Approx(165.2e12));
  CHECK(peak_flops(g, Dtype::fp8) == Approx(330.3e12));
  CHECK(g.memory_bandwidth_gbps == 1008);
  CHECK(memory_bytes(g) == 25'250'627'584.0);  // as torch reports it: what vLLM plans from
  CHECK(g.memory_reported == "25250627584 bytes");
  CHECK(g.interconnect == "pcie");  // no NVLink, no P2P: collectives through host memory
  CHECK(g.pcie_bandwidth_gbps == 32);
  CHECK(g.sources.at("nvlink_bandwidth_gbps").find("no peer-to-peer") != std::string::npos);
  // Its GEMMs as vLLM's kernels measured them (tools/fit-lss-curves.py):
  // large ones at the datasheet peak (the cards boost above its clock), the
  // compute cap at the curve's top, prefill attention on a curve of its own.
  CHECK(g.gemm_curve.back().efficiency > 0.95);
  CHECK(g.compute_efficiency == g.gemm_curve.back().efficiency);
  CHECK(g.sources.at("efficiency.gemm_curve").find("LLMServingSim") != std::string::npos);
  bool attention_curve = false;
  for (const auto& c : g.curves) attention_curve |= c.name == "attention_prefill";
  CHECK(attention_curve);
  const HardwareDesc l40s = resolve_hardware("l40s");
  CHECK(g.memory_efficiency == l40s.memory_efficiency);

  const HardwareDesc ws = resolve_hardware("rtx-pro-6000-blackwell-workstation");
  const HardwareDesc sv = resolve_hardware("rtx-pro-6000-blackwell-server");
  CHECK(peak_flops(ws, Dtype::bf16) == Approx(503.8e12));
  CHECK(ws.peak_tflops.fp32 == 125.0);
  CHECK(sv.peak_tflops.fp32 == 120.0);
  CHECK(peak_flops(sv, Dtype::bf16) == Approx(503.8e12 * 120 / 125).epsilon(1e-3));
  CHECK(ws.memory_bandwidth_gbps == 1792);
  CHECK(sv.memory_bandwidth_gbps == 1597);
  // The Server's measured curve; the Workstation's at the same TFLOP/s.
  CHECK(gemm_efficiency(ws, 1e11) * 503.8 == Approx(gemm_efficiency(sv, 1e11) * 483.6).epsilon(1e-3));
  for (const HardwareDesc* pro : {&ws, &sv}) {
    CHECK(memory_bytes(*pro) == 97887.0 * 1024 * 1024);
    CHECK(pro->interconnect == "pcie");
    CHECK(pro->pcie_bandwidth_gbps == 64);  // PCIe 5.0 x16
    CHECK(supports(*pro, Dtype::fp8));
  }
}

TEST_CASE("named efficiency curves are read, checked and need a source") {
  const HardwareDesc a100 = resolve_hardware("a100-80gb");
  REQUIRE_FALSE(a100.curves.empty());
  for (const auto& c : a100.curves) {
    CHECK(a100.sources.count("efficiency.curves." + c.name));
    CHECK_FALSE(c.ops.empty());
  }
  CHECK_FALSE(resolve_hardware("h200").curves.empty());  // fitted to our H200's kernels
  CHECK(resolve_hardware("l40s").curves.empty());         // no measured curves: the defaults
  auto j = h100_json();
  auto& curves = j["efficiency"]["curves"];
  REQUIRE(curves.contains("gemm_memory"));
  curves["gemm_memory"]["ops"].push_back("qkv_projection");
  CHECK(load_error(j).find("efficiency.curves.gemm_memory.ops[") != std::string::npos);
  j = h100_json();
  j["efficiency"]["curves"]["extra"] = {{"roof", "memory"}, {"x", "bytes"}, {"points", {{1e6, 0.5}}}, {"ops", {"rmsnorm"}}};
  j["sources"]["efficiency.curves.extra"] = "E: a test";
  CHECK(load_error(j).find("already has a memory curve") != std::string::npos);
  j = h100_json();
  j["efficiency"]["curves"]["extra"] = {{"roof", "memory"}, {"x", "width"}, {"points", {{1e6, 0.5}}}, {"ops", {"embed"}}};
  CHECK(load_error(j).find("efficiency.curves.extra.x") != std::string::npos);
  j["efficiency"]["curves"]["extra"]["x"] = "bytes";
  CHECK(load_error(j).find("sources.efficiency.curves.extra") != std::string::npos);  // no source note
  j["sources"]["efficiency.curves.extra"] = "E: a test";
  CHECK(load_error(j).empty());
  j["efficiency"]["curves"]["extra"]["points"] = {{1e6, 0.5}, {1e5, 0.6}};
  CHECK(load_error(j).find("efficiency.curves.extra.points[1]") != std::string::npos);
  // A curve with a y axis: rows of points, ascending in y.
  j["efficiency"]["curves"]["extra"] = {{"roof", "compute"}, {"x", "flops"}, {"y", "context_share"}, {"ops", {"pp_send"}}};
  j["efficiency"]["curves"]["extra"]["rows"] = nlohmann::json::array(
      {{{"y", 0.0}, {"points", {{1e6, 0.2}}}}, {{"y", 1.0}, {"points", {{1e6, 0.4}, {1e9, 0.6}}}}});
  CHECK(load_error(j).empty());
  j["efficiency"]["curves"]["extra"]["rows"][1]["y"] = 0.0;
  CHECK(load_error(j).find("efficiency.curves.extra.rows[1].y") != std::string::npos);
  j["efficiency"]["curves"]["extra"]["rows"][1]["y"] = 1.0;
  j["efficiency"]["curves"]["extra"]["points"] = {{1e6, 0.5}};
  CHECK(load_error(j).find("efficiency.curves.extra.points") != std::string::npos);  // rows or points, not both
  j["efficiency"]["curves"]["extra"].erase("points");
  j["efficiency"]["curves"]["extra"].erase("y");
  CHECK(load_error(j).find("efficiency.curves.extra.rows") != std::string::npos);  // rows need a y axis
  const HardwareDesc a = resolve_hardware("a100-80gb");
  bool two_axes = false;
  for (const auto& c : a.curves) two_axes = two_axes || (c.name == "attn_prefill" && c.has_y && c.rows.size() == 2);
  CHECK(two_axes);
}

TEST_CASE("collective curves and GEMM format ratios are read, checked and need a source") {
  nlohmann::json good = h100_json();
  std::vector<std::string> stale;
  for (auto it = good["sources"].begin(); it != good["sources"].end(); ++it)
    if (it.key().rfind("collectives.", 0) == 0) stale.push_back(it.key());
  for (const std::string& key : stale) good["sources"].erase(key);
  good["collectives"] = {{"ar_host_2", {{"kind", "all_reduce"}, {"link", "pcie_host"}, {"gpus", 2},
                                        {"points", {{8192, 50.0}, {1048576, 150.0}}}}}};
  good["sources"]["collectives.ar_host_2"] = "a test";
  good["pcie_p2p"] = true;
  good["sources"]["pcie_p2p"] = "a test";
  CHECK(load_error(good).empty());
  const HardwareDesc hw = parse_hardware_json(good.dump(), "test", "t");
  CHECK(hw.pcie_p2p);
  REQUIRE(hw.collectives.size() == 1);  // ours replaced the bundled ones
  bool found = false;
  for (const auto& c : hw.collectives) {
    if (c.name != "ar_host_2") continue;
    found = true;
    CHECK(c.kind == CollectiveKind::all_reduce);
    CHECK(c.link == CollectiveLink::pcie_host);
    CHECK(c.gpus == 2);
    CHECK(c.points.size() == 2);
  }
  CHECK(found);
  CHECK(hw.gemm_dtype_ratio.at("fp8") > 0);

  auto broken = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    return load_error(j);
  };
  CHECK_THAT(broken([&](nlohmann::json& j) { j["collectives"]["ar_host_2"]["points"][1][0] = 4096; }),
             Catch::Contains("collectives.ar_host_2.points[1]") && Catch::Contains("bytes must increase"));
  CHECK_THAT(broken([&](nlohmann::json& j) { j["collectives"]["ar_host_2"]["points"][0][1] = -1; }),
             Catch::Contains("collectives.ar_host_2.points[0]") && Catch::Contains("positive time"));
  CHECK_THAT(broken([&](nlohmann::json& j) { j["collectives"]["ar_host_2"]["points"][0] = "x"; }),
             Catch::Contains("collectives.ar_host_2.points[0]"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["collectives"]["ar_host_2"]["link"] = "infiniband"; }),
             Catch::Contains("collectives.ar_host_2.link") && Catch::Contains("pcie_host"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["collectives"]["ar_host_2"]["kind"] = "broadcast"; }),
             Catch::Contains("collectives.ar_host_2.kind"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["collectives"]["ar_host_2"]["gpus"] = 1.5; }),
             Catch::Contains("collectives.ar_host_2.gpus"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["collectives"]["ar_host_2"]["bytes"] = 1; }),
             Catch::Contains("collectives.ar_host_2.bytes") && Catch::Contains("unknown field"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["sources"].erase("collectives.ar_host_2"); }),
             Catch::Contains("missing source note for collectives.ar_host_2"));
  CHECK_THAT(broken([](nlohmann::json& j) {
               j["collectives"]["again"] = j["collectives"]["ar_host_2"];
               j["sources"]["collectives.again"] = "dup";
             }),
             Catch::Contains("collectives.") && Catch::Contains("is already all_reduce over pcie_host on 2 GPUs"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["pcie_p2p"] = 1; }), Catch::Contains("pcie_p2p"));
  // The compute capability: a number like 8.9, with its source.
  CHECK(hw.compute_capability == 9.0);  // the H100's own, bundled with its source
  CHECK_THAT(broken([](nlohmann::json& j) { j["compute_capability"] = "sm_90"; }),
             Catch::Contains("compute_capability") && Catch::Contains("8.9"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["compute_capability"] = 0; }), Catch::Contains("compute_capability"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["sources"].erase("compute_capability"); }),
             Catch::Contains("compute_capability"));
  // The mixed attention call's time per grid block: optional, >= 0 ns.
  CHECK(hw.mixed_attention_block_ns == 0);  // none measured on the H100 (FlashAttention 3 there)
  CHECK_THAT(broken([](nlohmann::json& j) {
               j["mixed_attention_block_ns"] = -1;
               j["sources"]["mixed_attention_block_ns"] = "x";
             }),
             Catch::Contains("mixed_attention_block_ns") && Catch::Contains("nanoseconds"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["mixed_attention_block_ns"] = 2.0; }),
             Catch::Contains("missing source note for mixed_attention_block_ns"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["efficiency"]["dtype_ratio"]["fp4"] = 0.9; }),
             Catch::Contains("efficiency.dtype_ratio.fp4") && Catch::Contains("unknown field"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["efficiency"]["dtype_ratio"]["fp8"] = 0; }),
             Catch::Contains("efficiency.dtype_ratio.fp8"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["efficiency"]["curves"]["gemm_compute"]["dtype"] = "fp16"; }),
             Catch::Contains("efficiency.curves.gemm_compute.dtype"));
  CHECK_THAT(broken([](nlohmann::json& j) { j["efficiency"]["curves"]["gemm_memory"]["dtype"] = "fp8"; }),
             Catch::Contains("efficiency.curves.gemm_memory.dtype") && Catch::Contains("only a compute curve"));
}

TEST_CASE("the host-work keys are optional, need a source, and are checked") {
  // Absent: host speed 1 and every per-item figure left to the engine (-1).
  const HardwareDesc plain = parse_hardware_json(h100_json().dump(), "test", "x");
  CHECK(plain.host_speed == 1.0);
  CHECK(plain.host_per_seq_us == -1);
  CHECK(plain.host_per_token_us == -1);
  CHECK(plain.host_per_sample_us == -1);
  CHECK(plain.host_exposed_us == -1);
  auto j = h100_json();
  const std::pair<const char*, double> keys[] = {{"host_speed", 1.5},        {"host_per_seq_us", 3},
                                                 {"host_per_token_us", 0.1}, {"host_per_sample_us", 2},
                                                 {"host_exposed_us", 40}};
  for (const auto& [key, value] : keys) {
    j[key] = value;
    j["sources"][key] = "test";
  }
  const HardwareDesc hw = parse_hardware_json(j.dump(), "test", "x");
  CHECK(hw.host_speed == 1.5);
  CHECK(hw.host_per_seq_us == 3);
  CHECK(hw.host_per_token_us == 0.1);
  CHECK(hw.host_per_sample_us == 2);
  CHECK(hw.host_exposed_us == 40);
  for (const auto& [key, value] : keys) {
    INFO(key);
    auto unsourced = j;
    unsourced["sources"].erase(key);
    CHECK(load_error(unsourced).find(key) != std::string::npos);
    auto negative = j;
    negative[key] = -2;
    CHECK(load_error(negative).find(key) != std::string::npos);
  }
  auto zero_speed = j;
  zero_speed["host_speed"] = 0;
  CHECK(load_error(zero_speed).find("host_speed") != std::string::npos);
}

TEST_CASE("hardware_json writes every bundled profile back to the same numbers", "[hardware]") {
  for (const std::string& name : twin::hardware_names()) {
    CAPTURE(name);
    const twin::HardwareDesc hw = twin::resolve_hardware(name);
    const std::string text = twin::hardware_json(hw).dump(2);
    const twin::HardwareDesc back = twin::parse_hardware_json(text, "written " + name, name);
    CHECK(twin::hardware_json(back).dump(2) == text);
    // Every optional block survives (a fitted profile keeps them all).
    CHECK(back.collectives.size() == hw.collectives.size());
    CHECK(back.gemm_dtype_ratio == hw.gemm_dtype_ratio);
    CHECK(back.pcie_p2p == hw.pcie_p2p);
    CHECK(back.compute_capability == hw.compute_capability);
    CHECK(back.vendor == hw.vendor);
    CHECK(back.peak_tflops.fp4 == hw.peak_tflops.fp4);
    CHECK(back.power.known == hw.power.known);
    CHECK(back.power.max_w == hw.power.max_w);
    CHECK(back.host_speed == hw.host_speed);
    CHECK(back.curves.size() == hw.curves.size());
    // calibrate --measured's record of a fit loads with the profile.
    auto fitted = twin::hardware_json(hw);
    fitted["fitted_from"] = {{"tool", "twinserve calibrate --measured"}};
    CHECK_NOTHROW(twin::parse_hardware_json(fitted.dump(), "fitted " + name, name));
    fitted["fitted_from"] = 3;
    CHECK_THROWS_WITH(twin::parse_hardware_json(fitted.dump(), "fitted " + name, name), Catch::Contains("fitted_from"));
  }
}
