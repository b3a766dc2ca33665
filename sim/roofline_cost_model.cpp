#include "sim/roofline_cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "base/error.hpp"

namespace twin {

namespace {
// Whether a curve's x is the work its roof is priced by (holds_time).
bool curve_axis_is_work(CurveRoof roof, CurveAxis axis) {
  return roof == CurveRoof::compute ? axis == CurveAxis::flops
                                    : axis == CurveAxis::bytes || axis == CurveAxis::tokens;
}
}  // namespace

double EfficiencyCurve::time_floor(std::size_t i) const {
  if (time_floor_.size() == points.size()) return time_floor_[i];
  double t = 0;
  for (std::size_t k = 0; k <= i; ++k) t = std::max(t, points[k].first / points[k].second);
  return t;
}

double EfficiencyCurve::at(double flops) const {
  // `flops` is the curve's x, whatever its axis.
  if (points.empty()) return 1.0;
  // Below the first point the efficiency is flat, so the time grows with x.
  if (flops <= points.front().first) return points.front().second;
  if (flops >= points.back().first) {
    const double e = points.back().second;
    return holds_time ? std::min(e, flops / time_floor(points.size() - 1)) : e;
  }
  const auto hi = std::upper_bound(points.begin(), points.end(), flops,
                                   [](double f, const auto& p) { return f < p.first; });
  const auto lo = hi - 1;
  const std::size_t i = static_cast<std::size_t>(lo - points.begin());
  const bool prepared = log_flops_.size() == points.size();
  const double x0 = prepared ? log_flops_[i] : std::log10(lo->first);
  const double x1 = prepared ? log_flops_[i + 1] : std::log10(hi->first);
  const double t = x1 > x0 ? (std::log10(flops) - x0) / (x1 - x0) : 0.0;
  const double e = lo->second + t * (hi->second - lo->second);
  return holds_time ? std::min(e, flops / time_floor(i)) : e;
}

double EfficiencyCurve::at(double x, double y) const {
  if (!has_y || rows.empty()) return at(x);
  if (y <= row_y.front()) return rows.front().at(x);
  if (y >= row_y.back()) return rows.back().at(x);
  const std::size_t hi = static_cast<std::size_t>(std::upper_bound(row_y.begin(), row_y.end(), y) - row_y.begin());
  const std::size_t lo = hi - 1;
  const double t = (y - row_y[lo]) / (row_y[hi] - row_y[lo]);
  // Time per unit of work is linear in y: the op is a mix of the rows' work.
  return 1.0 / ((1 - t) / rows[lo].at(x) + t / rows[hi].at(x));
}

void EfficiencyCurve::prepare() {
  log_flops_.clear();
  time_floor_.clear();
  double t = 0;
  for (const auto& p : points) {
    log_flops_.push_back(std::log10(p.first));
    t = std::max(t, p.first / p.second);
    time_floor_.push_back(t);
  }
  for (EfficiencyCurve& r : rows) r.prepare();
}

double CollectiveCurve::time_ns(double bytes) const {
  if (points.empty()) return 0;
  if (bytes <= points.front().first) return points.front().second;
  if (bytes >= points.back().first) return points.back().second * bytes / points.back().first;
  const auto hi = std::upper_bound(points.begin(), points.end(), bytes,
                                   [](double b, const auto& p) { return b < p.first; });
  const auto lo = hi - 1;
  const double t = std::log(bytes / lo->first) / std::log(hi->first / lo->first);
  return lo->second * std::pow(hi->second / lo->second, t);
}

const CollectiveCurve* find_collective_curve(const RooflineParams& params, CollectiveKind kind, PathLink link,
                                             std::int32_t gpus) {
  CollectiveLink want{};
  switch (link) {
    case PathLink::nvswitch: want = CollectiveLink::nvswitch; break;
    case PathLink::nvlink_bridge: want = CollectiveLink::nvlink_bridge; break;
    case PathLink::pcie: want = params.pcie_p2p ? CollectiveLink::pcie_p2p : CollectiveLink::pcie_host; break;
    case PathLink::none:
    case PathLink::network: return nullptr;  // one GPU, or across nodes: the formula
  }
  for (const CollectiveCurve& c : params.collective_curves)
    if (c.kind == kind && c.link == want && c.gpus == gpus) return &c;
  return nullptr;
}

namespace {
// The profile's collective curves in ns, their times held non-decreasing.
std::vector<CollectiveCurve> collective_curves(const HardwareDesc& hw) {
  std::vector<CollectiveCurve> out;
  for (const CollectiveCurveDesc& d : hw.collectives) {
    CollectiveCurve c{d.name, d.kind, d.link, d.gpus, {}};
    double held = 0;
    for (const auto& [bytes, us] : d.points) {
      held = std::max(held, us * 1e3);
      c.points.emplace_back(bytes, held);
    }
    out.push_back(std::move(c));
  }
  return out;
}
}  // namespace

// FLOPs per weight element of a weight-only kernel's dequantisation, in
// CUDA-core FLOPs: unpack (a shift and mask, or an 8-bit convert), subtract
// the zero point, multiply by the scale; the kernels do these on pairs of
// 16-bit values, so about 2 per element. An estimate, not a measurement
// (docs/quantization.md).
constexpr double kDequantFlopsPerWeight = 2.0;
// Rows of activations per pass over the weights in a Marlin-style kernel
// (4 tiles of 16): a larger batch dequantises every weight again per 64.
constexpr double kDequantTileTokens = 64.0;

RooflineParams roofline_params(const HardwareDesc& hw, const WeightPrecision& weights) {
  RooflineParams p;
  p.peak_flops = peak_flops(hw, weights.dtype);
  if (weights.quantized()) {
    p.quant_experts_only = weights.quant.experts_only;
    if (!weights.quant.weight_only) {
      p.quant_gemm_peak_flops = peak_flops(hw, weights.quant.gemm_dtype);
    } else {
      p.dequant_flops_per_weight = kDequantFlopsPerWeight;
      p.dequant_tile_tokens = kDequantTileTokens;
      p.dequant_flops_rate = hw.peak_tflops.fp32 > 0 ? hw.peak_tflops.fp32 * 1e12 : p.peak_flops;
    }
  }
  p.memory_bandwidth = hw.memory_bandwidth_gbps * 1e9;
  p.compute_efficiency = hw.compute_efficiency;
  p.gemm_efficiency.name = "gemm_curve";
  p.gemm_efficiency.holds_time = true;
  for (const auto& point : hw.gemm_curve) p.gemm_efficiency.points.emplace_back(point.flops, point.efficiency);
  p.memory_efficiency = hw.memory_efficiency;
  p.allreduce_efficiency = hw.allreduce_efficiency;
  p.kernel_launch_ns = hw.kernel_launch_us * 1e3;
  p.host = flat_host_work(hw);
  if (hw.curves.size() > 127) throw UsageError("hardware " + hw.name + ": more than 127 efficiency curves");
  p.collective_curves = collective_curves(hw);
  p.pcie_p2p = hw.pcie_p2p;
  // Only a profile that says its GPUs lack peer-to-peer stages through the
  // host; one that says nothing keeps the link's own rate.
  p.pcie_host_staged = !hw.pcie_p2p && hw.sources.contains("pcie_p2p");
  // W8A8 GEMMs run in gemm_dtype: its own curves where the profile has them,
  // else the dtype-less curves times the measured ratio.
  const bool w8a8 = weights.quantized() && !weights.quant.weight_only;
  const std::string gemm_dtype = w8a8 ? std::string(dtype_name(weights.quant.gemm_dtype)) : std::string();
  if (w8a8) {
    const auto ratio = hw.gemm_dtype_ratio.find(gemm_dtype);
    if (ratio != hw.gemm_dtype_ratio.end()) p.quant_gemm_efficiency_ratio = ratio->second;
  }
  for (const EfficiencyCurveDesc& d : hw.curves) {
    if (!d.dtype.empty() && d.dtype != gemm_dtype) continue;  // another format's kernels
    const auto index = static_cast<std::int8_t>(p.curves.size());
    EfficiencyCurve curve;
    curve.name = d.name;
    curve.axis = d.axis;
    curve.points = d.points;
    curve.has_y = d.has_y;
    curve.y_axis = d.y_axis;
    curve.holds_time = curve_axis_is_work(d.roof, d.axis);
    for (const EfficiencyCurveDesc::Row& r : d.rows) {
      EfficiencyCurve row;
      row.name = d.name;
      row.axis = d.axis;
      row.holds_time = curve.holds_time;
      row.points = r.points;
      curve.row_y.push_back(r.y);
      curve.rows.push_back(std::move(row));
    }
    p.curves.push_back(std::move(curve));
    auto& slots = !d.dtype.empty() ? p.quant_compute_curve
                  : d.roof == CurveRoof::compute ? p.compute_curve : p.memory_curve;
    for (const std::string& op : d.ops) slots[static_cast<std::size_t>(parse_op_kind(op))] = index;
  }
  return p;
}

RooflineCostModel::RooflineCostModel(ModelDesc model, ParallelLayout layout, WeightPrecision weights, Dtype kv,
                                     RooflineParams params)
    : model_(std::move(model)), layout_(layout), weights_(weights), kv_(kv), params_(std::move(params)) {
  check_layout(model_, layout_);
  auto positive = [](double v, const char* what) {
    if (!(v > 0)) throw UsageError(std::string("roofline cost model: ") + what + " must be positive");
  };
  positive(params_.peak_flops, "peak FLOP/s");
  positive(params_.memory_bandwidth, "memory bandwidth");
  positive(params_.compute_efficiency, "compute efficiency");
  positive(params_.memory_efficiency, "memory efficiency");
  positive(params_.allreduce_efficiency, "all-reduce efficiency");
  for (std::size_t i = 1; i < params_.gemm_efficiency.points.size(); ++i) {
    if (params_.gemm_efficiency.points[i].first <= params_.gemm_efficiency.points[i - 1].first) {
      throw UsageError("roofline cost model: GEMM efficiency points must ascend in FLOPs");
    }
  }
  params_.gemm_efficiency.prepare();
  auto check_points = [](const EfficiencyCurve& c) {
    if (c.points.empty()) throw UsageError("roofline cost model: efficiency curve '" + c.name + "' has no points");
    for (std::size_t i = 0; i < c.points.size(); ++i) {
      if (!(c.points[i].first > 0) || !(c.points[i].second > 0) || (i > 0 && c.points[i].first <= c.points[i - 1].first))
        throw UsageError("roofline cost model: efficiency curve '" + c.name + "' needs positive points ascending in x");
    }
  };
  for (EfficiencyCurve& c : params_.curves) {
    if (!c.has_y) {
      check_points(c);
    } else {
      if (c.rows.empty() || c.rows.size() != c.row_y.size())
        throw UsageError("roofline cost model: efficiency curve '" + c.name + "' has a y axis and no rows");
      for (std::size_t i = 0; i < c.rows.size(); ++i) {
        check_points(c.rows[i]);
        if (i > 0 && !(c.row_y[i] > c.row_y[i - 1]))
          throw UsageError("roofline cost model: efficiency curve '" + c.name + "' needs rows ascending in y");
      }
    }
    c.prepare();
  }
  const auto curve_count = static_cast<std::int8_t>(params_.curves.size());
  for (std::size_t k = 0; k < params_.compute_curve.size(); ++k) {
    if (params_.compute_curve[k] >= curve_count || params_.memory_curve[k] >= curve_count ||
        params_.quant_compute_curve[k] >= curve_count)
      throw UsageError("roofline cost model: an op kind names an efficiency curve that does not exist");
  }
  positive(params_.quant_gemm_efficiency_ratio, "W8A8 GEMM efficiency ratio");
  params_.tp_rings.resize(layout_.pp);
  params_.pp_links.resize(layout_.pp);
  params_.ep_groups.resize(layout_.pp);
  params_.custom_all_reduce_below.resize(layout_.pp, 0.0);
  auto curve_index = [&](CollectiveKind kind, PathLink link, std::int32_t gpus) -> std::int16_t {
    const CollectiveCurve* c = find_collective_curve(params_, kind, link, gpus);
    return c ? static_cast<std::int16_t>(c - params_.collective_curves.data()) : std::int16_t{-1};
  };
  for (std::int32_t s = 0; s < layout_.pp; ++s) {
    const RingCost& ring = params_.tp_rings[static_cast<std::size_t>(s)];
    const AllToAllCost& ep = params_.ep_groups[static_cast<std::size_t>(s)];
    const bool custom = params_.custom_all_reduce_below[static_cast<std::size_t>(s)] > 0;
    stage_collectives_.push_back({curve_index(CollectiveKind::all_reduce, ring.link, ring.size),
                                  curve_index(CollectiveKind::all_gather, ring.link, ring.size),
                                  curve_index(CollectiveKind::all_to_all, ep.link, ep.size),
                                  custom ? curve_index(CollectiveKind::custom_all_reduce, ring.link, ring.size)
                                         : std::int16_t{-1}});
  }
  ops_.reserve(32);
}

OpCost RooflineCostModel::price(const Op& op, std::int32_t stage) const {
  OpCost c;
  c.kind = op.kind;
  c.flops = op.flops * op.repeat;
  c.bytes = op.bytes * op.repeat;
  c.comm_bytes = op.comm_bytes * op.repeat;
  c.repeat = op.repeat;
  double one = 0;
  switch (op.kind) {
    case OpKind::tp_allreduce:
    case OpKind::tp_gather:
    case OpKind::ep_dispatch:
    case OpKind::ep_combine:
      one = collective_ns(op, stage, c.curve);
      break;
    case OpKind::pp_send:
      one = params_.pp_links[stage].time(op.comm_bytes) + params_.kernel_launch_ns;
      c.curve = "link";
      break;
    default: {
      const double compute_eff = compute_efficiency_for(op);
      const double memory_eff = memory_efficiency_for(op);
      const double compute = compute_ns(op, compute_eff);
      const double memory = op.bytes / (params_.memory_bandwidth * memory_eff) * 1e9;
      c.compute_bound = compute > memory;
      one = std::max(compute, memory) + params_.kernel_launch_ns + op.fixed_ns;
      if ((params_.separate_input_quant & op_kind_bit(op.kind)) != 0) {
        // The engine's own quantisation kernel before this GEMM: reads the
        // m x k activations, writes them in fp8 with a 4-byte scale per row.
        const double rows = static_cast<double>(op.m), width = static_cast<double>(op.k);
        const double quant_bytes = rows * width * (weights_.activation() + 1.0) + rows * 4.0;
        c.bytes += quant_bytes * op.repeat;
        one += quant_bytes / (params_.memory_bandwidth * params_.memory_efficiency) * 1e9 + params_.kernel_launch_ns;
      }
      const auto k = static_cast<std::size_t>(op.kind);
      const bool own_format = params_.quant_gemm_peak_flops > 0 && is_quantized_linear(op.kind) &&
                              params_.quant_compute_curve[k] >= 0;
      const std::int8_t index = !c.compute_bound ? params_.memory_curve[k]
                                : own_format     ? params_.quant_compute_curve[k]
                                                 : params_.compute_curve[k];
      c.curve = index >= 0 ? std::string_view(params_.curves[static_cast<std::size_t>(index)].name)
                : c.compute_bound ? (attention_priced_flat(op) ? std::string_view("attention") : std::string_view("gemm_curve"))
                                  : std::string_view("memory");
      c.efficiency = c.compute_bound ? compute_eff : memory_eff;
      break;
    }
  }
  c.time_ns = one * op.repeat;
  return c;
}

double RooflineCostModel::host_staged_share(PathLink link) const {
  // Without peer-to-peer, NCCL stages PCIe transfers through host memory
  // (its SHM transport): every byte is written to and read back from the
  // host, and the two directions of an all-reduce or all-to-all cross the
  // root complex at once. NCCL's maintainers report 2-GPU SHM all-reduce
  // at 3.9 GB/s where the one-way broadcast reached 10.3 on the same PCIe
  // Gen3 link ("some CPUs do not handle bidirectional traffic well",
  // NVIDIA/nccl issue 384): about half the link, taken here as 0.5.
  // Measured curves (pcie_host ones) are used as they are.
  return link == PathLink::pcie && params_.pcie_host_staged ? kHostStagedShare : 1.0;
}

double RooflineCostModel::collective_ns(const Op& op, std::int32_t stage, std::string_view& curve) const {
  const auto& chosen = stage_collectives_[static_cast<std::size_t>(stage)];
  if (op.kind == OpKind::tp_allreduce || op.kind == OpKind::tp_gather) {
    const bool reduce = op.kind == OpKind::tp_allreduce;
    // The engine's own kernel for a message under its bound, where the
    // profile measured one; NCCL's curve (or the formula) otherwise.
    const bool custom =
        reduce && chosen[3] >= 0 && op.comm_bytes < params_.custom_all_reduce_below[static_cast<std::size_t>(stage)];
    const std::int16_t index = custom ? chosen[3] : chosen[reduce ? 0 : 1];
    if (index >= 0) {
      // A measured call: launch and synchronisation included.
      const CollectiveCurve& c = params_.collective_curves[static_cast<std::size_t>(index)];
      curve = c.name;
      return c.time_ns(op.comm_bytes);
    }
    RingCost effective = params_.tp_rings[stage];
    effective.bandwidth *= params_.allreduce_efficiency * host_staged_share(effective.link);
    curve = "link";
    // A gather moves (n-1)/n of the buffer once: half an all-reduce.
    const double t = effective.allreduce_time(op.comm_bytes);
    return (reduce ? t : t / 2) + params_.kernel_launch_ns;
  }
  const AllToAllCost& group = params_.ep_groups[stage];
  if (chosen[2] >= 0 && group.size > 1) {
    const CollectiveCurve& c = params_.collective_curves[static_cast<std::size_t>(chosen[2])];
    curve = c.name;
    // comm_bytes leaves out the rank's own share; nccl-tests' size counts it.
    const double n = group.size;
    return c.time_ns(op.comm_bytes * n / (n - 1));
  }
  // All-to-all over the EP group at the collectives' achieved fraction of
  // the links (as the TP all-reduce).
  AllToAllCost effective = group;
  effective.bandwidth *= params_.allreduce_efficiency * host_staged_share(effective.link);
  curve = "link";
  return effective.time(op.comm_bytes) + params_.kernel_launch_ns;
}

double RooflineCostModel::compute_ns(const Op& op, double efficiency) const {
  // An experts-only format (mxfp4) leaves the other linear layers 16-bit.
  const bool quantized = is_quantized_linear(op.kind) && (!params_.quant_experts_only || is_expert_linear(op.kind));
  if (!quantized) return op.flops / (params_.peak_flops * efficiency) * 1e9;
  const double peak = params_.quant_gemm_peak_flops > 0 ? params_.quant_gemm_peak_flops : params_.peak_flops;
  double ns = op.flops / (peak * efficiency) * 1e9;
  if (params_.dequant_flops_per_weight > 0 && params_.dequant_flops_rate > 0 && op.m > 0) {
    // MoE: each touched expert's weights, per tile of its share of the rows.
    const double matrices = op.num_seqs > 0 ? static_cast<double>(op.num_seqs) : 1.0;
    const double rows = static_cast<double>(op.m) / matrices;
    const double tiles = std::ceil(rows / params_.dequant_tile_tokens);
    const double weights = matrices * static_cast<double>(op.n) * static_cast<double>(op.k);
    ns += weights * tiles * params_.dequant_flops_per_weight / params_.dequant_flops_rate * 1e9;
  }
  return ns;
}

bool RooflineCostModel::attention_priced_flat(const Op& op) const {
  const bool attention = op.kind == OpKind::attn_prefill || op.kind == OpKind::attn_decode;
  return attention && params_.attention_efficiency > 0;
}

namespace {
// The ops that depend on the step's prefill/decode split (attention_ops):
// attention and the hybrid models' state scans.
bool is_attention(OpKind kind) {
  return kind == OpKind::attn_prefill || kind == OpKind::attn_decode || kind == OpKind::state_scan;
}

double axis_value(CurveAxis axis, const Op& op) {
  switch (axis) {
    case CurveAxis::flops: return op.flops;
    case CurveAxis::bytes: return op.bytes;
    case CurveAxis::intensity: return op.bytes > 0 ? op.flops / op.bytes : 0.0;
    case CurveAxis::tokens: return static_cast<double>(op.tokens);
    case CurveAxis::context_share: {
      // Pairs against cached context over all pairs, for n new tokens after
      // c cached ones: n c / (n c + n^2 / 2); from the op's sums for a batch.
      const double c = static_cast<double>(op.context), n = static_cast<double>(op.tokens);
      return c > 0 ? c / (c + n / 2) : 0.0;
    }
  }
  return op.flops;
}
}  // namespace

double RooflineCostModel::curve_at(std::int32_t index, double x, double y, bool memo_it) const {
  if (!memo_it) {
    return index < 0 ? std::min(params_.compute_efficiency, params_.gemm_efficiency.at(x))
                     : params_.curves[static_cast<std::size_t>(index)].at(x, y);
  }
  std::uint64_t bits, ybits;
  std::memcpy(&bits, &x, sizeof bits);
  std::memcpy(&ybits, &y, sizeof ybits);
  bits = (bits ^ (ybits * 0xC2B2AE3D27D4EB4FULL) ^ static_cast<std::uint64_t>(index + 2)) * 0x9E3779B97F4A7C15ULL;
  EfficiencyMemo& memo = memo_[(bits >> 52) & (kMemoSize - 1)];
  if (memo.x != x || memo.y != y || memo.curve != index) {
    memo.x = x;
    memo.y = y;
    memo.curve = index;
    memo.efficiency = index < 0 ? std::min(params_.compute_efficiency, params_.gemm_efficiency.at(x))
                                : params_.curves[static_cast<std::size_t>(index)].at(x, y);
  }
  return memo.efficiency;
}

double RooflineCostModel::named_curve_at(std::int32_t index, const Op& op) const {
  const EfficiencyCurve& c = params_.curves[static_cast<std::size_t>(index)];
  return curve_at(index, axis_value(c.axis, op), c.has_y ? axis_value(c.y_axis, op) : 0.0, !is_attention(op.kind));
}

double RooflineCostModel::compute_efficiency_for(const Op& op) const {
  if (params_.quant_gemm_peak_flops > 0 && is_quantized_linear(op.kind)) {
    // A W8A8 GEMM: its format's own curve, else the 16-bit one scaled by the
    // measured ratio (capped at the whole roof).
    const std::int8_t own = params_.quant_compute_curve[static_cast<std::size_t>(op.kind)];
    if (own >= 0) return named_curve_at(own, op);
    return std::min(1.0, dense_compute_efficiency(op) * params_.quant_gemm_efficiency_ratio);
  }
  return dense_compute_efficiency(op);
}

double RooflineCostModel::dense_compute_efficiency(const Op& op) const {
  const std::int8_t index = params_.compute_curve[static_cast<std::size_t>(op.kind)];
  if (index >= 0) return named_curve_at(index, op);
  if (attention_priced_flat(op)) return params_.attention_efficiency;
  if (params_.gemm_efficiency.points.empty()) return params_.compute_efficiency;
  return curve_at(-1, op.flops, 0.0, !is_attention(op.kind));
}

double RooflineCostModel::memory_efficiency_for(const Op& op) const {
  const std::int8_t index = params_.memory_curve[static_cast<std::size_t>(op.kind)];
  if (index < 0) return params_.memory_efficiency;
  return named_curve_at(index, op);
}

namespace {
void add_to_mix(StepMix& mix, const OpCost& c) {
  (c.compute_bound ? mix.compute_ns : mix.memory_ns) += c.time_ns;
}
void add_mix(StepMix* to, const StepMix& from) {
  if (!to) return;
  to->compute_ns += from.compute_ns;
  to->memory_ns += from.memory_ns;
}
}  // namespace

void RooflineCostModel::merge_mixed_attention() {
  if (params_.mixed_attention_rows <= 0 || model_.is_mla()) return;
  std::size_t prefill = ops_.size(), decode = ops_.size();
  int prefills = 0, decodes = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (ops_[i].kind == OpKind::attn_prefill) prefill = i, ++prefills;
    if (ops_[i].kind == OpKind::attn_decode) decode = i, ++decodes;
  }
  // The plain case only: one call each (no local-window groups beside).
  if (prefills != 1 || decodes != 1 || ops_[prefill].repeat != ops_[decode].repeat) return;
  // A decode's query fills one row of a `rows`-row tile: the kernel does
  // `rows` times its QK^T and PV work; the call reads both parts' bytes and
  // runs at the chunk's attention efficiency (its shape keys the curves).
  ops_[prefill].flops += ops_[decode].flops * params_.mixed_attention_rows;
  ops_[prefill].bytes += ops_[decode].bytes;
  // The call's grid has a block per seq, query head and tile of the longest
  // chunk; a decode's blocks past its one query row exit at once, but every
  // block takes the device's time (fitted to vLLM's calls on the card,
  // tools/fit-lss-curves.py --check-mixed).
  const double tiles = std::ceil(static_cast<double>(ops_[prefill].m) / params_.mixed_attention_rows);
  ops_[prefill].fixed_ns += static_cast<double>(ops_[decode].num_seqs) * static_cast<double>(ops_[prefill].n) *
                            tiles * params_.mixed_attention_block_ns;
  ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(decode));
}

double RooflineCostModel::price_all(const StepSums& sums, std::int32_t stage, std::vector<OpCost>* breakdown,
                                     StepPrice* slot, StepMix* mix) {
  ops_.clear();
  step_ops(model_, sums, layout_, weights_, kv_, stage, ops_);
  merge_mixed_attention();
  if (ops_.empty()) return 0;
  double total = 0;
  std::size_t tail = 0;
  bool after_attention = false;
  bool fits = slot != nullptr;
  StepMix all, head, tail_mix;
  if (fits) slot->head_ns = total;
  for (const Op& op : ops_) {
    const OpCost c = price(op, stage);
    total += c.time_ns;
    add_to_mix(all, c);
    if (breakdown) breakdown->push_back(c);
    if (is_attention(op.kind)) {
      after_attention = true;
    } else if (after_attention) {
      if (tail == kMaxTailOps) fits = false;
      if (fits) slot->tail_ns[tail++] = c.time_ns;
      add_to_mix(tail_mix, c);
    } else if (fits) {
      slot->head_ns = total;
      head = all;
    }
  }
  add_mix(mix, all);
  if (fits && after_attention) {
    slot->tokens = sums.tokens();
    slot->sampling = sums.sampling;
    slot->group_tokens = sums.group_tokens;
    slot->stage = stage;
    slot->tail_count = static_cast<std::int32_t>(tail);
    slot->head_mix = head;
    slot->tail_mix = tail_mix;
  }
  return total;
}

HostCost RooflineCostModel::host_cost_of(const StepInput& step) const {
  std::int64_t tokens = 0, samples = 0;
  for (const SeqShape& s : step.shape->seqs) {
    tokens += s.new_tokens;  // speculative proposals are among them
    if (s.samples) ++samples;
  }
  return host_cost(params_.host, static_cast<std::int64_t>(step.shape->seqs.size()), tokens, samples, step.idle_ns);
}

Time RooflineCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  StepSums sums = step_sums(model_, *step.shape);
  if (sums.tokens() == 0) return 0;
  sums.padding = graph_tokens(sums) - sums.tokens();
  sums.group_tokens = step.group_tokens;
  const HostCost host = host_cost_of(step);
  if (breakdown) {
    const double gpu = price_all(sums, step.stage, breakdown, nullptr, step.mix);
    return priced_ns(gpu > 0 ? compose_step_ns(gpu, host) : 0, "roofline cost model: a step");
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(sums.tokens()) * 0x9E3779B97F4A7C15ULL) ^
                            (static_cast<std::uint64_t>(sums.sampling) * 0xC2B2AE3D27D4EB4FULL) ^
                            static_cast<std::uint64_t>(step.stage) ^
                            (static_cast<std::uint64_t>(sums.group_tokens + 1) * 0x165667B19E3779F9ULL);
  StepPrice& slot = prices_[(key * 0xFF51AFD7ED558CCDULL >> 40) & (kPriceSlots - 1)];
  if (slot.tokens != sums.tokens() || slot.sampling != sums.sampling || slot.stage != step.stage ||
      slot.group_tokens != sums.group_tokens) {
    slot.tokens = -1;  // refilled below when the step has attention and its ops fit
    const double gpu = price_all(sums, step.stage, nullptr, &slot, step.mix);
    return priced_ns(gpu > 0 ? compose_step_ns(gpu, host) : 0, "roofline cost model: a step");
  }
  // Same order as price_all: the head, this step's attention, the tail.
  ops_.clear();
  attention_ops(model_, sums, layout_, weights_, kv_, step.stage, ops_);
  merge_mixed_attention();
  double total = slot.head_ns;
  StepMix attention;
  for (const Op& op : ops_) {
    const OpCost c = price(op, step.stage);
    total += c.time_ns;
    add_to_mix(attention, c);
  }
  for (std::int32_t i = 0; i < slot.tail_count; ++i) total += slot.tail_ns[static_cast<std::size_t>(i)];
  add_mix(step.mix, slot.head_mix);
  add_mix(step.mix, attention);
  add_mix(step.mix, slot.tail_mix);
  return priced_ns(compose_step_ns(total, host), "roofline cost model: a step");
}

Time RooflineCostModel::swap_time(std::int64_t num_blocks) {
  if (num_blocks <= 0) return 0;
  // One copy per block and layer in practice; priced as one stream over the host link.
  return priced_ns(params_.host_link.time(params_.kv_block_bytes_per_gpu * num_blocks), "roofline cost model: a KV swap");
}

}  // namespace twin
