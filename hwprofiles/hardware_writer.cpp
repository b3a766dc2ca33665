#include "hwprofiles/hardware_writer.hpp"

#include <sstream>
#include <string>

#include "base/error.hpp"

namespace twin {
namespace {

using Json = nlohmann::ordered_json;

// memory_reported is "<number> <unit>" as the loader set it: the same key back.
void put_memory(Json& j, const HardwareDesc& hw) {
  std::istringstream in(hw.memory_reported);
  double value = 0;
  std::string unit;
  if (in >> value >> unit) {
    if (unit == "bytes") j["memory_bytes"] = value;
    else if (unit == "MiB") j["memory_mib"] = value;
    else if (unit == "GiB") j["memory_gib"] = value;
    else if (unit == "GB") j["memory_gb"] = value;
    if (!j.contains("memory_bytes") && !j.contains("memory_mib") && !j.contains("memory_gib") && !j.contains("memory_gb"))
      throw Error("hardware " + hw.name + ": unknown memory unit '" + unit + "'");
    return;
  }
  j["memory_bytes"] = hw.memory_capacity_bytes;
}

Json points_json(const std::vector<std::pair<double, double>>& points) {
  Json out = Json::array();
  for (const auto& [x, e] : points) out.push_back(Json::array({x, e}));
  return out;
}

Json curve_json(const EfficiencyCurveDesc& c) {
  Json j;
  j["roof"] = curve_roof_name(c.roof);
  j["x"] = curve_axis_name(c.axis);
  if (c.has_y) {
    j["y"] = curve_axis_name(c.y_axis);
    Json rows = Json::array();
    for (const auto& r : c.rows) rows.push_back(Json{{"y", r.y}, {"points", points_json(r.points)}});
    j["rows"] = rows;
  } else {
    j["points"] = points_json(c.points);
  }
  j["ops"] = c.ops;
  if (!c.dtype.empty()) j["dtype"] = c.dtype;
  return j;
}

Json efficiency_json(const HardwareDesc& hw) {
  Json e;
  e["compute"] = hw.compute_efficiency;
  e["memory"] = hw.memory_efficiency;
  e["allreduce"] = hw.allreduce_efficiency;
  e["pcie"] = hw.pcie_efficiency;
  Json curve = Json::array();
  for (const GemmCurvePoint& p : hw.gemm_curve) curve.push_back(Json::array({p.flops, p.efficiency}));
  e["gemm_curve"] = curve;
  if (!hw.curves.empty()) {
    Json curves = Json::object();
    for (const EfficiencyCurveDesc& c : hw.curves) curves[c.name] = curve_json(c);
    e["curves"] = curves;
  }
  if (!hw.gemm_dtype_ratio.empty()) {
    Json ratios = Json::object();
    for (const auto& [dtype, ratio] : hw.gemm_dtype_ratio) ratios[dtype] = ratio;
    e["dtype_ratio"] = ratios;
  }
  return e;
}

Json collectives_json(const HardwareDesc& hw) {
  Json out = Json::object();
  for (const CollectiveCurveDesc& c : hw.collectives) {
    out[c.name] = Json{{"kind", collective_kind_name(c.kind)},
                       {"link", collective_link_name(c.link)},
                       {"gpus", c.gpus},
                       {"points", points_json(c.points)}};
  }
  return out;
}

// The optional blocks of the format (host work, vendor, P2P, collectives,
// power): written where the profile had them, so a fitted profile keeps
// every figure of the one it was fitted from.
void put_optional(Json& j, const HardwareDesc& hw) {
  const std::pair<const char*, double> host[] = {{"host_speed", hw.host_speed},
                                                 {"host_per_seq_us", hw.host_per_seq_us},
                                                 {"host_per_token_us", hw.host_per_token_us},
                                                 {"host_per_sample_us", hw.host_per_sample_us},
                                                 {"host_exposed_us", hw.host_exposed_us}};
  for (const auto& [key, v] : host)
    if (hw.sources.count(key)) j[key] = v;
  if (hw.vendor != "nvidia" || hw.sources.count("vendor")) j["vendor"] = hw.vendor;
  if (hw.sources.count("pcie_p2p")) j["pcie_p2p"] = hw.pcie_p2p;
  if (hw.sources.count("compute_capability")) j["compute_capability"] = hw.compute_capability;
  if (hw.sources.count("mixed_attention_block_ns")) j["mixed_attention_block_ns"] = hw.mixed_attention_block_ns;
  if (!hw.collectives.empty()) j["collectives"] = collectives_json(hw);
  if (hw.power.known) {
    j["power"] = Json{{"idle_w", hw.power.idle_w},
                      {"memory_w", hw.power.memory_w},
                      {"compute_w", hw.power.compute_w},
                      {"max_w", hw.power.max_w}};
  }
}

}  // namespace

nlohmann::ordered_json hardware_json(const HardwareDesc& hw) {
  Json j;
  j["name"] = hw.name;
  j["kind"] = hw.kind == DeviceKind::gpu ? "gpu" : "cpu";
  Json peaks = Json::object();
  const std::pair<const char*, double> peak_fields[] = {
      {"fp32", hw.peak_tflops.fp32}, {"tf32", hw.peak_tflops.tf32}, {"bf16", hw.peak_tflops.bf16},
      {"fp16", hw.peak_tflops.fp16}, {"fp8", hw.peak_tflops.fp8},   {"int8", hw.peak_tflops.int8},
      {"fp4", hw.peak_tflops.fp4}};
  for (const auto& [key, v] : peak_fields)
    if (v > 0) peaks[key] = v;
  j["peak_tflops"] = peaks;
  put_memory(j, hw);
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
  // Optional in the format: written where the profile had them (a source
  // note says so), else left to the defaults they came from.
  if (hw.sources.count("runtime_reserve_mib")) j["runtime_reserve_mib"] = hw.runtime_reserve_bytes / (1024.0 * 1024.0);
  if (hw.sources.count("collective_reserve_mib"))
    j["collective_reserve_mib"] = hw.collective_reserve_bytes / (1024.0 * 1024.0);
  j["efficiency"] = efficiency_json(hw);
  j["price_per_gpu_hour"] = hw.price_per_gpu_hour;
  put_optional(j, hw);
  Json sources = Json::object();
  for (const auto& [key, note] : hw.sources) sources[key] = note;
  j["sources"] = sources;
  return j;
}

}  // namespace twin
