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

double one(const FitProfile&) { return 1.0; }
double tenth(const FitProfile&) { return 0.1; }
double zero(const FitProfile&) { return 0.0; }

// A roofline entry's functions on the hardware profile of a fit's base.
template <CurveRoof roof>
double roof_upper(const FitProfile& b) {
  return 1.0 / std::max(roof_max(b.hw, roof), 1e-9);
}
template <CurveRoof roof>
void roof_apply(FitProfile& p, const FitProfile& b, double v) {
  apply_roof(p.hw, b.hw, roof, v);
}

void apply_host_overhead(FitProfile& p, const FitProfile& b, double v) {
  p.hw.step_overhead_us = v;
  char was[48];
  std::snprintf(was, sizeof was, "was %.6g us", b.hw.step_overhead_us);
  note(p.hw, b.hw, "step_overhead_us", was);
}

void apply_collective_latency(FitProfile& p, const FitProfile& b, double v) {
  p.hw.nvlink_latency_us = b.hw.nvlink_latency_us * v;
  note(p.hw, b.hw, "nvlink_latency_us", times(v));
  if (b.hw.interconnect == "pcie") {
    p.hw.pcie_latency_us = b.hw.pcie_latency_us * v;
    note(p.hw, b.hw, "pcie_latency_us", times(v));
  }
}

// Every collective's time x v, however the profile prices it: a measured
// curve's times (NCCL's, the engines' own all-reduce kernels'), and where
// the formula prices one (no curve for that link and GPU count) its latency
// x v and its bandwidth efficiency / v (held at 1). One parameter whatever
// the deployment's collectives are priced by: allreduce_scale and
// collective_latency_scale move the formula only, which a profile with
// curves (H100, H200, A100) does not use for its common sizes.
void apply_collective_scale(FitProfile& p, const FitProfile& b, double v) {
  for (std::size_t i = 0; i < b.hw.collectives.size(); ++i) {
    p.hw.collectives[i] = b.hw.collectives[i];
    for (auto& point : p.hw.collectives[i].points) point.second *= v;
    note(p.hw, b.hw, "collectives." + b.hw.collectives[i].name, times(v));
  }
  p.hw.allreduce_efficiency = std::min(1.0, b.hw.allreduce_efficiency / v);
  note(p.hw, b.hw, "efficiency.allreduce", times(1.0 / v));
  apply_collective_latency(p, b, v);
}

// A calibrated base's step model (hwprofiles/calibrated_profile.hpp,
// StepOverhead): the profile's own fields, so the fitted file prices steps
// as the base's formula does.
const StepOverhead& overhead(const FitProfile& b) { return b.calibrated->overhead; }

// op_scale multiplies every op's table time and each timed op's fixed cost:
// the engine's ops as a whole slower or faster than where they were timed
// (another machine's load, the server's threads beside the engine's).
double op_scale_upper(const FitProfile& b) { return std::min(20.0, kMaxOpScale / overhead(b).op_scale); }
double op_scale_lower(const FitProfile& b) { return std::max(0.1, kMinOpScale / overhead(b).op_scale); }
void apply_op_scale(FitProfile& p, const FitProfile& b, double v) {
  StepOverhead& o = p.calibrated->overhead;
  o.op_scale = std::clamp(overhead(b).op_scale * v, kMinOpScale, kMaxOpScale);
  for (std::size_t k = 0; k < o.op_fixed_ns.size(); ++k) o.op_fixed_ns[k] = overhead(b).op_fixed_ns[k] * v;
}

// A group of op kinds' own scales (step_overhead.op_scales), x v: the
// engine's GEMMs, or its attention, slower or faster than their tables
// beside the rest (another attention kernel, another GEMM library).
template <OpKind... Kinds>
void apply_kind_scales(FitProfile& p, const FitProfile& b, double v) {
  for (const OpKind k : {Kinds...}) {
    const auto i = static_cast<std::size_t>(k);
    p.calibrated->overhead.op_scales[i] = std::clamp(overhead(b).op_scales[i] * v, kMinOpScale, kMaxOpScale);
  }
}
constexpr auto kGemmScales = apply_kind_scales<OpKind::qkv_proj, OpKind::o_proj, OpKind::gate_up_proj,
                                               OpKind::down_proj, OpKind::moe_gate_up_proj, OpKind::moe_down_proj,
                                               OpKind::lm_head>;
constexpr auto kAttentionScales = apply_kind_scales<OpKind::attn_prefill, OpKind::attn_decode>;

const std::vector<FitParam> kParams = {
    {"compute_scale", "compute efficiency (GEMM curve, compute-roof curves) x this", "x", true, false, false, one,
     tenth, roof_upper<CurveRoof::compute>, roof_apply<CurveRoof::compute>},
    {"memory_scale", "memory efficiency (and memory-roof curves) x this", "x", true, false, false, one, tenth,
     roof_upper<CurveRoof::memory>, roof_apply<CurveRoof::memory>},
    {"attention_scale", "attention kernels' efficiency (both roofs) x this", "x", true, false, false, one, tenth,
     [](const FitProfile& b) { return 1.0 / std::max(attention_max(b.hw), 1e-9); },
     [](FitProfile& p, const FitProfile& b, double v) { apply_attention(p.hw, b.hw, v); }},
    {"host_overhead_us", "host work per step (step_overhead_us)", "us", false, false, false,
     [](const FitProfile& b) { return b.hw.step_overhead_us; }, zero,
     [](const FitProfile& b) { return std::max(20000.0, 10 * b.hw.step_overhead_us); }, apply_host_overhead},
    {"collective_scale",
     "every collective's time x this (measured curves' times; the formula's latency x this, bandwidth / this)", "x",
     true, true, false, one, tenth, [](const FitProfile&) { return 20.0; }, apply_collective_scale},
    {"allreduce_scale", "collective bandwidth efficiency (allreduce) x this; the formula only", "x", true, true, false,
     one, tenth, [](const FitProfile& b) { return 1.0 / std::max(b.hw.allreduce_efficiency, 1e-9); },
     [](FitProfile& p, const FitProfile& b, double v) {
       p.hw.allreduce_efficiency = std::min(1.0, b.hw.allreduce_efficiency * v);
       note(p.hw, b.hw, "efficiency.allreduce", times(v));
     },
     false},
    {"collective_latency_scale",
     "collective latency (nvlink_latency_us; pcie_latency_us on a PCIe node) x this; the formula only", "x", true, true,
     false, one, tenth, [](const FitProfile&) { return 20.0; }, apply_collective_latency, false},
    {"op_scale", "every measured op's time and fixed cost (step_overhead.op_scale, op_fixed_ns) x this", "x", true,
     false, true, one, op_scale_lower, op_scale_upper, apply_op_scale},
    // The step terms are searched in log(value): from a GPU's tens of
    // microseconds to a CPU engine's milliseconds, the global pass then
    // samples every decade alike (in the value, the box's corner near 0 where
    // a GPU's terms lie got few points). The lower bounds are nothing
    // against any step; a term the runs do not need fits to one and is
    // reported as not identified.
    {"step_base_us", "fixed host work per step (step_overhead.base_ns)", "us", true, false, true,
     [](const FitProfile& b) { return overhead(b).base_ns / 1e3; }, [](const FitProfile&) { return 1.0; },
     [](const FitProfile& b) { return std::max(50000.0, 10 * overhead(b).base_ns / 1e3); },
     [](FitProfile& p, const FitProfile&, double v) { p.calibrated->overhead.base_ns = v * 1e3; }},
    {"step_per_seq_us", "host work per scheduled sequence per step (step_overhead.per_seq_ns)", "us", true, false,
     true, [](const FitProfile& b) { return overhead(b).per_seq_ns / 1e3; }, [](const FitProfile&) { return 0.1; },
     [](const FitProfile& b) { return std::max(5000.0, 10 * overhead(b).per_seq_ns / 1e3); },
     [](FitProfile& p, const FitProfile&, double v) { p.calibrated->overhead.per_seq_ns = v * 1e3; }},
    // Named only: with op_scale in the same fit one of the three is
    // redundant (docs/calibrate.md).
    {"gemm_op_scale", "the GEMMs' tables (op_scales of qkv, o, gate_up, down, MoE experts, lm_head) x this", "x", true,
     false, true, one, tenth, [](const FitProfile&) { return 20.0; }, kGemmScales, false},
    {"attention_op_scale", "the attention tables (op_scales of attn_prefill, attn_decode) x this", "x", true, false,
     true, one, tenth, [](const FitProfile&) { return 20.0; }, kAttentionScales, false},
};

std::string names_for(bool calibrated) {
  std::string names;
  for (const FitParam& p : kParams)
    if (p.calibrated == calibrated) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

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

std::vector<const FitParam*> fit_params_for(const FitProfile& base) {
  std::vector<const FitParam*> out;
  for (const FitParam& p : kParams)
    if (p.calibrated == base.calibrated.has_value()) out.push_back(&p);
  return out;
}

std::vector<const FitParam*> default_fit_params(const FitProfile& base, bool collectives) {
  std::vector<const FitParam*> out;
  for (const FitParam* p : fit_params_for(base))
    if (p->by_default && (collectives || !p->needs_collectives)) out.push_back(p);
  return out;
}

void check_fit_param_base(const FitParam& p, const FitProfile& base) {
  if (p.calibrated == base.calibrated.has_value()) return;
  if (p.calibrated) {
    throw UsageError("fit parameter " + std::string(p.name) +
                     " fits a calibrated profile's step model (give the base with --profile, made by calibrate "
                     "--model); the roofline profile " + base.hw.name + " fits " + names_for(false));
  }
  throw UsageError("fit parameter " + std::string(p.name) + " fits a roofline hardware profile; the calibrated profile " +
                   base.calibrated_path + " prices ops from measured tables and fits " + names_for(true));
}

FitProfile apply_fit_params(const FitProfile& base, const std::vector<const FitParam*>& params,
                            const std::vector<double>& values) {
  FitProfile p = base;
  for (std::size_t i = 0; i < params.size(); ++i) {
    check_fit_param_base(*params[i], base);
    params[i]->apply(p, base, values[i]);
  }
  return p;
}

}  // namespace twin
