// twinserve hw list | show NAME [--json]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "hwprofiles/hardware_desc.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"

namespace {

using namespace twin;

const char* kind_name(DeviceKind k) { return k == DeviceKind::gpu ? "gpu" : "cpu"; }

void list_hardware() {
  // The name column as wide as the longest name (rtx-pro-6000-blackwell-workstation).
  int width = 4;
  for (const auto& name : hardware_names()) width = std::max(width, static_cast<int>(name.size()));
  std::printf("%-*s %-4s %-6s %10s %10s %10s %8s %10s %5s %8s\n", width, "name", "kind", "vendor", "bf16 TF/s",
              "fp8 TF/s", "fp4 TF/s", "mem GiB", "mem GB/s", "nodeN", "$/hour");
  for (const auto& name : hardware_names()) {
    auto hw = resolve_hardware(name);
    auto tf = [](double v) { return v > 0 ? std::to_string(static_cast<long long>(v + 0.5)) : std::string("-"); };
    // nodeN: GPUs per node (per NVLink domain: 72 on an NVL72 rack).
    std::printf("%-*s %-4s %-6s %10s %10s %10s %8.0f %10.0f %5d %8.2f\n", width, name.c_str(), kind_name(hw.kind),
                hw.kind == DeviceKind::gpu ? hw.vendor.c_str() : "-", tf(hw.peak_tflops.bf16).c_str(),
                tf(hw.peak_tflops.fp8).c_str(), tf(hw.peak_tflops.fp4).c_str(),
                hw.memory_capacity_bytes / (1024.0 * 1024 * 1024), hw.memory_bandwidth_gbps, hw.gpus_per_node,
                hw.price_per_gpu_hour);
  }
}

nlohmann::ordered_json hardware_json(const HardwareDesc& hw) {
  nlohmann::ordered_json j;
  j["name"] = hw.name;
  j["kind"] = kind_name(hw.kind);
  if (hw.kind == DeviceKind::gpu) j["vendor"] = hw.vendor;
  auto& peak = j["peak_tflops"];
  peak = nlohmann::ordered_json::object();
  const std::pair<const char*, double> peaks[] = {
      {"fp32", hw.peak_tflops.fp32}, {"tf32", hw.peak_tflops.tf32}, {"bf16", hw.peak_tflops.bf16},
      {"fp16", hw.peak_tflops.fp16}, {"fp8", hw.peak_tflops.fp8},   {"int8", hw.peak_tflops.int8},
      {"fp4", hw.peak_tflops.fp4}};
  for (const auto& [k, v] : peaks)
    if (v > 0) peak[k] = v;
  // Back in the unit the profile gave, so that the output loads again.
  const std::string& reported = hw.memory_reported;
  const auto space = reported.rfind(' ');
  const std::string unit = space == std::string::npos ? "bytes" : reported.substr(space + 1);
  const double scale = unit == "MiB" ? 1024.0 * 1024 : unit == "GiB" ? 1024.0 * 1024 * 1024 : unit == "GB" ? 1e9 : 1.0;
  const char* key = unit == "MiB" ? "memory_mib" : unit == "GiB" ? "memory_gib" : unit == "GB" ? "memory_gb" : "memory_bytes";
  j[key] = hw.memory_capacity_bytes / scale;
  j["memory_bandwidth_gbps"] = hw.memory_bandwidth_gbps;
  j["nvlink_bandwidth_gbps"] = hw.nvlink_bandwidth_gbps;
  j["nvlink_latency_us"] = hw.nvlink_latency_us;
  j["gpus_per_node"] = hw.gpus_per_node;
  j["interconnect"] = hw.interconnect;
  j["pcie_bandwidth_gbps"] = hw.pcie_bandwidth_gbps;
  j["pcie_latency_us"] = hw.pcie_latency_us;
  j["nic_bandwidth_gbps"] = hw.nic_bandwidth_gbps;
  j["nic_latency_us"] = hw.nic_latency_us;
  j["kernel_launch_us"] = hw.kernel_launch_us;
  j["step_overhead_us"] = hw.step_overhead_us;
  // The optional host-work keys, as the profile gave them.
  for (const auto& [key, value] : {std::pair{"host_speed", hw.host_speed}, std::pair{"host_per_seq_us", hw.host_per_seq_us},
                                   std::pair{"host_per_token_us", hw.host_per_token_us},
                                   std::pair{"host_per_sample_us", hw.host_per_sample_us},
                                   std::pair{"host_exposed_us", hw.host_exposed_us}})
    if (hw.sources.count(key)) j[key] = value;
  if (hw.sources.count("runtime_reserve_mib")) j["runtime_reserve_mib"] = hw.runtime_reserve_bytes / (1024.0 * 1024);
  if (hw.sources.count("collective_reserve_mib"))
    j["collective_reserve_mib"] = hw.collective_reserve_bytes / (1024.0 * 1024);
  auto& eff = j["efficiency"];
  eff["compute"] = hw.compute_efficiency;
  eff["memory"] = hw.memory_efficiency;
  eff["allreduce"] = hw.allreduce_efficiency;
  eff["pcie"] = hw.pcie_efficiency;
  eff["gemm_curve"] = nlohmann::ordered_json::array();
  for (const auto& p : hw.gemm_curve) eff["gemm_curve"].push_back({p.flops, p.efficiency});
  for (const auto& [dtype, ratio] : hw.gemm_dtype_ratio) eff["dtype_ratio"][dtype] = ratio;
  if (hw.sources.count("pcie_p2p")) j["pcie_p2p"] = hw.pcie_p2p;
  for (const auto& c : hw.collectives) {
    auto& out = j["collectives"][c.name];
    out["kind"] = collective_kind_name(c.kind);
    out["link"] = collective_link_name(c.link);
    out["gpus"] = c.gpus;
    out["points"] = nlohmann::ordered_json::array();
    for (const auto& [bytes, us] : c.points) out["points"].push_back({bytes, us});
  }
  j["price_per_gpu_hour"] = hw.price_per_gpu_hour;
  if (hw.power.known) {  // issue 44: optional
    auto& power = j["power"];
    power["idle_w"] = hw.power.idle_w;
    power["memory_w"] = hw.power.memory_w;
    power["compute_w"] = hw.power.compute_w;
    power["max_w"] = hw.power.max_w;
  }
  auto& src = j["sources"];
  for (const auto& [k, v] : hw.sources) src[k] = v;  // std::map: sorted, deterministic
  return j;
}

void show_hardware(const std::string& name, bool json) {
  const HardwareDesc hw = resolve_hardware(name);
  const auto j = hardware_json(hw);
  if (json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  // One line per number, with its source note beside it.
  auto source_of = [&](const std::string& path) {
    auto it = hw.sources.find(path);
    return it == hw.sources.end() ? std::string() : it->second;
  };
  std::printf("%-28s %s\n%-28s %s\n", "name", hw.name.c_str(), "kind", kind_name(hw.kind));
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "kind" || key == "sources") continue;
    if (value.is_object()) {
      for (const auto& [sub, v] : value.items()) {
        const std::string path = key + "." + sub;
        std::string shown = v.dump();
        if (sub == "gemm_curve") shown = std::to_string(v.size()) + " points (flops, efficiency): " + v.dump();
        std::printf("%-28s %-14s %s\n", path.c_str(), shown.c_str(),
                    sub == "gemm_curve" ? "" : source_of(path).c_str());
        if (sub == "gemm_curve") std::printf("%-28s %-14s %s\n", "", "", source_of(path).c_str());
      }
    } else {
      std::printf("%-28s %-14s %s\n", key.c_str(), value.dump().c_str(), source_of(key).c_str());
    }
  }
}

twin::cli::RegisterCommand reg{"hw", [](CLI::App& root) {
  auto* hw = root.add_subcommand("hw", "Bundled hardware profiles (peaks, bandwidths, efficiencies, sources)");
  hw->require_subcommand(1);
  hw->add_subcommand("list", "List the bundled hardware profiles")->callback([] { list_hardware(); });
  auto* show = hw->add_subcommand("show", "Show one hardware profile with the source of every number");
  auto name = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  show->add_option("name", *name, "A bundled profile name, or the path of a profile JSON file")->required();
  twin::cli::add_switch(*show, twin::cli::FlagId::json, *json, "the profile's own keys");
  show->callback([name, json] { show_hardware(*name, *json); });
}};

}  // namespace
