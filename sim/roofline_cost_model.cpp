#include "sim/roofline_cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/error.hpp"

namespace twin {

double EfficiencyCurve::at(double flops) const {
  if (points.empty()) return 1.0;
  if (flops <= points.front().first) return points.front().second;
  if (flops >= points.back().first) return points.back().second;
  const auto hi = std::upper_bound(points.begin(), points.end(), flops,
                                   [](double f, const auto& p) { return f < p.first; });
  const auto lo = hi - 1;
  const std::size_t i = static_cast<std::size_t>(lo - points.begin());
  const bool prepared = log_flops_.size() == points.size();
  const double x0 = prepared ? log_flops_[i] : std::log10(lo->first);
  const double x1 = prepared ? log_flops_[i + 1] : std::log10(hi->first);
  const double t = x1 > x0 ? (std::log10(flops) - x0) / (x1 - x0) : 0.0;
  return lo->second + t * (hi->second - lo->second);
}

void EfficiencyCurve::prepare() {
  log_flops_.clear();
  for (const auto& p : points) log_flops_.push_back(std::log10(p.first));
}

RooflineCostModel::RooflineCostModel(ModelDesc model, ParallelLayout layout, Dtype weights, Dtype kv,
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
  params_.tp_rings.resize(layout_.pp);
  params_.pp_links.resize(layout_.pp);
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
    case OpKind::tp_gather: {
      const RingCost& ring = params_.tp_rings[stage];
      RingCost effective = ring;
      effective.bandwidth = ring.bandwidth * params_.allreduce_efficiency;
      // A gather moves (n-1)/n of the buffer once: half an all-reduce.
      one = op.kind == OpKind::tp_allreduce ? effective.allreduce_time(op.comm_bytes)
                                             : effective.allreduce_time(op.comm_bytes) / 2;
      one += params_.kernel_launch_ns;
      break;
    }
    case OpKind::pp_send:
      one = params_.pp_links[stage].time(op.comm_bytes) + params_.kernel_launch_ns;
      break;
    default: {
      const double efficiency = efficiency_for(op);
      const double compute = op.flops / (params_.peak_flops * efficiency) * 1e9;
      const double memory = op.bytes / (params_.memory_bandwidth * params_.memory_efficiency) * 1e9;
      c.compute_bound = compute > memory;
      one = std::max(compute, memory) + params_.kernel_launch_ns;
      break;
    }
  }
  c.time_ns = one * op.repeat;
  return c;
}

double RooflineCostModel::efficiency_for(const Op& op) const {
  const bool attention = op.kind == OpKind::attn_prefill || op.kind == OpKind::attn_decode;
  if (attention && params_.attention_efficiency > 0) return params_.attention_efficiency;
  if (params_.gemm_efficiency.points.empty()) return params_.compute_efficiency;
  std::uint64_t bits;
  std::memcpy(&bits, &op.flops, sizeof bits);
  bits *= 0x9E3779B97F4A7C15ULL;
  EfficiencyMemo& memo = memo_[(bits >> 52) & (kMemoSize - 1)];
  if (memo.flops != op.flops) {
    memo.flops = op.flops;
    memo.efficiency = std::min(params_.compute_efficiency, params_.gemm_efficiency.at(op.flops));
  }
  return memo.efficiency;
}

Time RooflineCostModel::stage_time(const StepInput& step, std::vector<OpCost>* breakdown) {
  ops_.clear();
  step_ops(model_, *step.shape, layout_, weights_, kv_, step.stage, ops_);
  if (ops_.empty()) return 0;
  double total = params_.step_overhead_ns;
  for (const Op& op : ops_) {
    const OpCost c = price(op, step.stage);
    total += c.time_ns;
    if (breakdown) breakdown->push_back(c);
  }
  return priced_ns(total, "roofline cost model: a step");
}

Time RooflineCostModel::swap_time(std::int64_t num_blocks) {
  if (num_blocks <= 0) return 0;
  // One copy per block and layer in practice; priced as one stream over the host link.
  return priced_ns(params_.host_link.time(params_.kv_block_bytes_per_gpu * num_blocks), "roofline cost model: a KV swap");
}

}  // namespace twin
