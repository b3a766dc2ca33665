#include <cmath>
#include <string>

#include "base/error.hpp"
#include "hwprofiles/hardware_desc.hpp"

namespace twin {

namespace {
double peak_tflops_of(const HardwareDesc& hw, Dtype d) {
  switch (d) {
    case Dtype::fp32: return hw.peak_tflops.fp32;
    case Dtype::fp16: return hw.peak_tflops.fp16;
    case Dtype::bf16: return hw.peak_tflops.bf16;
    case Dtype::fp8: return hw.peak_tflops.fp8;
    case Dtype::int8: return hw.peak_tflops.int8;
    case Dtype::fp4: return hw.peak_tflops.fp4;
  }
  return 0;
}
}  // namespace

bool supports(const HardwareDesc& hw, Dtype d) { return peak_tflops_of(hw, d) > 0; }

double peak_flops(const HardwareDesc& hw, Dtype d) {
  const double t = peak_tflops_of(hw, d);
  if (t > 0) return t * 1e12;
  std::string have;
  for (Dtype x : kAllDtypes)
    if (supports(hw, x)) have += (have.empty() ? "" : ", ") + std::string(dtype_name(x));
  if (supports(hw, Dtype::fp4)) have += ", fp4";
  throw UsageError("hardware " + hw.name + " has no " + std::string(dtype_name(d)) +
                   " compute; it supports: " + have);
}

double gemm_efficiency(const HardwareDesc& hw, double flops) {
  const auto& c = hw.gemm_curve;
  if (c.empty()) return hw.compute_efficiency;
  if (!(flops > c.front().flops)) return c.front().efficiency;
  if (flops >= c.back().flops) return c.back().efficiency;
  size_t i = 1;
  while (c[i].flops < flops) ++i;
  const double x0 = std::log(c[i - 1].flops), x1 = std::log(c[i].flops);
  const double t = (std::log(flops) - x0) / (x1 - x0);
  return c[i - 1].efficiency + t * (c[i].efficiency - c[i - 1].efficiency);
}

const char* curve_roof_name(CurveRoof r) { return r == CurveRoof::compute ? "compute" : "memory"; }

const char* curve_axis_name(CurveAxis a) {
  switch (a) {
    case CurveAxis::flops: return "flops";
    case CurveAxis::bytes: return "bytes";
    case CurveAxis::intensity: return "intensity";
    case CurveAxis::tokens: return "tokens";
    case CurveAxis::context_share: return "context_share";
  }
  return "flops";
}

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_to_all: return "all_to_all";
    case CollectiveKind::custom_all_reduce: return "custom_all_reduce";
  }
  return "all_reduce";
}

const char* collective_link_name(CollectiveLink l) {
  switch (l) {
    case CollectiveLink::nvswitch: return "nvswitch";
    case CollectiveLink::nvlink_bridge: return "nvlink_bridge";
    case CollectiveLink::pcie_p2p: return "pcie_p2p";
    case CollectiveLink::pcie_host: return "pcie_host";
  }
  return "nvswitch";
}

double memory_bytes(const HardwareDesc& hw) { return hw.memory_capacity_bytes; }

QuantHardware quant_hardware(const HardwareDesc& hw) {
  QuantHardware q;
  q.name = hw.name;
  q.gpu = hw.kind == DeviceKind::gpu;
  q.cuda = hw.vendor == "nvidia";
  q.fp8 = supports(hw, Dtype::fp8);
  q.int8 = supports(hw, Dtype::int8);
  q.fp4 = supports(hw, Dtype::fp4);
  return q;
}

}  // namespace twin
