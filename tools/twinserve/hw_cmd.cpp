// twinserve hw list | show NAME [--json]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "hwprofiles/hardware_desc.hpp"
#include "hwprofiles/hardware_writer.hpp"  // hardware_json: the profile as it loads again
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
