#include "validate/fit_params.hpp"

#include <algorithm>
#include <cstdio>

#include "base/error.hpp"

namespace twin {
namespace {

bool is_attention_op(const std::string& op) { return op == "attn_prefill" || op == "attn_decode"; }

// A curve that prices attention only: the attention scale's, not the
// compute or memory scale's.
bool attention_curve(const EfficiencyCurveDesc& c) {
  return std::all_of(c.ops.begin(), c.ops.end(), is_attention_op);
}

constexpr const char* kAttentionCurve[2] = {"fitted_attention_compute", "fitted_attention_memory"};

// snprintf, not operator+ on a temporary: GCC 12 warns (-Wrestrict) on
// "x" + std::string when inlined.
std::string times(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "x%.6g", v);
  return buf;
}

// The field's source note says it was fitted, by how much, and keeps the
// base's note.
void note(HardwareDesc& hw, const HardwareDesc& base, const std::string& key, const std::string& how) {
  const auto it = base.sources.find(key);
  hw.sources[key] = "fitted by twinserve calibrate --measured (" + how + "; see fitted_from)" +
                    (it == base.sources.end() ? std::string() : "; base: " + it->second);
}

template <typename F>
void for_points(EfficiencyCurveDesc& c, F f) {
  for (auto& p : c.points) f(p.second);
  for (auto& r : c.rows)
    for (auto& p : r.points) f(p.second);
}

double max_efficiency(const EfficiencyCurveDesc& c) {
  double m = 0;
  auto copy = c;
  for_points(copy, [&](double& e) { m = std::max(m, e); });
  return m;
}

void scale_curve(HardwareDesc& hw, const HardwareDesc& base, std::size_t i, double v) {
  hw.curves[i] = base.curves[i];
  for_points(hw.curves[i], [&](double& e) { e = std::min(1.0, e * v); });
  note(hw, base, "efficiency.curves." + base.curves[i].name, times(v));
}

// A roof's scale stops where the profile's headline efficiency of that roof
// (compute: large GEMMs; memory: streaming) reaches 1; points of its curves
// above that are held at 1 (a curve already at 1 somewhere would otherwise
// forbid any scale above 1).
double roof_max(const HardwareDesc& base, CurveRoof roof) {
  return roof == CurveRoof::compute ? base.compute_efficiency : base.memory_efficiency;
}

void apply_roof(HardwareDesc& hw, const HardwareDesc& base, CurveRoof roof, double v) {
  if (roof == CurveRoof::compute) {
    hw.compute_efficiency = std::min(1.0, base.compute_efficiency * v);
    note(hw, base, "efficiency.compute", times(v));
    for (std::size_t i = 0; i < base.gemm_curve.size(); ++i)
      hw.gemm_curve[i].efficiency = std::min(1.0, base.gemm_curve[i].efficiency * v);
    note(hw, base, "efficiency.gemm_curve", times(v));
  } else {
    hw.memory_efficiency = std::min(1.0, base.memory_efficiency * v);
    note(hw, base, "efficiency.memory", times(v));
  }
  for (std::size_t i = 0; i < base.curves.size(); ++i)
    if (base.curves[i].roof == roof && !attention_curve(base.curves[i])) scale_curve(hw, base, i, v);
}

// Attention's own curves: the base's, or, where it has none for a roof,
// one made from the default that roof prices attention with (the GEMM
// curve capped at the compute efficiency; the constant memory efficiency).
std::vector<EfficiencyCurveDesc> attention_curves(const HardwareDesc& base) {
  std::vector<EfficiencyCurveDesc> out;
  for (const CurveRoof roof : {CurveRoof::compute, CurveRoof::memory}) {
    bool covered[2] = {false, false};  // attn_prefill, attn_decode
    for (const auto& c : base.curves)
      if (c.roof == roof)
        for (const auto& op : c.ops) covered[op == "attn_decode" ? 1 : 0] |= is_attention_op(op);
    if (covered[0] || covered[1]) continue;  // the base's own curves (or part of one) stay as they are
    EfficiencyCurveDesc d;
    d.name = kAttentionCurve[roof == CurveRoof::compute ? 0 : 1];
    d.roof = roof;
    d.ops = {"attn_prefill", "attn_decode"};
    if (roof == CurveRoof::compute) {
      d.axis = CurveAxis::flops;
      for (const auto& p : base.gemm_curve) d.points.emplace_back(p.flops, std::min(p.efficiency, base.compute_efficiency));
    } else {
      d.axis = CurveAxis::bytes;
      d.points.emplace_back(1.0, base.memory_efficiency);
    }
    out.push_back(std::move(d));
  }
  return out;
}

double attention_max(const HardwareDesc& base) {
  double m = 0;
  for (const auto& c : base.curves)
    if (attention_curve(c)) m = std::max(m, max_efficiency(c));
  for (const auto& c : attention_curves(base)) m = std::max(m, max_efficiency(c));
  return m;
}

void apply_attention(HardwareDesc& hw, const HardwareDesc& base, double v) {
  for (std::size_t i = 0; i < base.curves.size(); ++i)
    if (attention_curve(base.curves[i])) scale_curve(hw, base, i, v);
  for (EfficiencyCurveDesc c : attention_curves(base)) {
    for_points(c, [&](double& e) { e = std::min(1.0, e * v); });
    hw.sources["efficiency.curves." + c.name] =
        "fitted by twinserve calibrate --measured (attention's default efficiency " + times(v) +
        "; see fitted_from)";
    hw.curves.push_back(std::move(c));
  }
}

double one(const HardwareDesc&) { return 1.0; }
double tenth(const HardwareDesc&) { return 0.1; }

const std::vector<FitParam> kParams = {
    {"compute_scale", "compute efficiency (GEMM curve, compute-roof curves) x this", "x", true, false, one, tenth,
     [](const HardwareDesc& b) { return 1.0 / std::max(roof_max(b, CurveRoof::compute), 1e-9); },
     [](HardwareDesc& hw, const HardwareDesc& b, double v) { apply_roof(hw, b, CurveRoof::compute, v); }},
    {"memory_scale", "memory efficiency (and memory-roof curves) x this", "x", true, false, one, tenth,
     [](const HardwareDesc& b) { return 1.0 / std::max(roof_max(b, CurveRoof::memory), 1e-9); },
     [](HardwareDesc& hw, const HardwareDesc& b, double v) { apply_roof(hw, b, CurveRoof::memory, v); }},
    {"attention_scale", "attention kernels' efficiency (both roofs) x this", "x", true, false, one, tenth,
     [](const HardwareDesc& b) { return 1.0 / std::max(attention_max(b), 1e-9); }, apply_attention},
    {"host_overhead_us", "host work per step (step_overhead_us)", "us", false, false,
     [](const HardwareDesc& b) { return b.step_overhead_us; }, [](const HardwareDesc&) { return 0.0; },
     [](const HardwareDesc& b) { return std::max(20000.0, 10 * b.step_overhead_us); },
     [](HardwareDesc& hw, const HardwareDesc& b, double v) {
       hw.step_overhead_us = v;
       char was[48];
       std::snprintf(was, sizeof was, "was %.6g us", b.step_overhead_us);
       note(hw, b, "step_overhead_us", was);
     }},
    {"allreduce_scale", "collective bandwidth efficiency (allreduce) x this", "x", true, true, one, tenth,
     [](const HardwareDesc& b) { return 1.0 / std::max(b.allreduce_efficiency, 1e-9); },
     [](HardwareDesc& hw, const HardwareDesc& b, double v) {
       hw.allreduce_efficiency = std::min(1.0, b.allreduce_efficiency * v);
       note(hw, b, "efficiency.allreduce", times(v));
     }},
    {"collective_latency_scale", "collective latency (nvlink_latency_us; pcie_latency_us on a PCIe node) x this", "x",
     true, true, one, tenth, [](const HardwareDesc&) { return 20.0; },
     [](HardwareDesc& hw, const HardwareDesc& b, double v) {
       hw.nvlink_latency_us = b.nvlink_latency_us * v;
       note(hw, b, "nvlink_latency_us", times(v));
       if (b.interconnect == "pcie") {
         hw.pcie_latency_us = b.pcie_latency_us * v;
         note(hw, b, "pcie_latency_us", times(v));
       }
     }},
};

}  // namespace

const std::vector<FitParam>& fit_params() { return kParams; }

const FitParam& fit_param(const std::string& name) {
  std::string names;
  for (const FitParam& p : kParams) {
    if (name == p.name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw UsageError("unknown fit parameter '" + excerpt(name) + "'; known: " + names);
}

HardwareDesc apply_fit_params(const HardwareDesc& base, const std::vector<const FitParam*>& params,
                              const std::vector<double>& values) {
  HardwareDesc hw = base;
  for (std::size_t i = 0; i < params.size(); ++i) params[i]->apply(hw, base, values[i]);
  return hw;
}

}  // namespace twin
