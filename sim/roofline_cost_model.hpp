#pragma once
// The roofline cost model: each op of models/step_ops is limited either by
// compute or by memory traffic, whichever takes longer, plus a kernel launch;
// collectives and stage-to-stage sends are priced from the cluster graph.
//   op time = repeat x (max(flops / (peak x eff(flops)), bytes / (bw x mem_eff)) + launch)
//   stage time = sum of op times + per-step overhead
#include <cstdint>
#include <vector>

#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"
#include "sim/topology.hpp"

namespace twin {

// A size-dependent efficiency: points (op FLOPs, fraction of peak),
// interpolated linearly in log10(FLOPs), clamped at the ends. Small GEMMs run
// far below peak.
struct EfficiencyCurve {
  std::vector<std::pair<double, double>> points;  // ascending FLOPs
  double at(double flops) const;
  // Precomputes the points' logarithms; at() works without, only slower.
  void prepare();

 private:
  std::vector<double> log_flops_;
};

// Everything the roofline needs about one replica's GPUs and links: plain
// numbers, filled from the hardware profile and the cluster graph.
struct RooflineParams {
  double peak_flops = 0;             // per GPU, FLOP/s at the weight dtype
  double memory_bandwidth = 0;       // bytes/s
  double compute_efficiency = 0.75;  // large-GEMM fraction of peak; caps the curve
  EfficiencyCurve gemm_efficiency;   // empty: compute_efficiency for every size
  double attention_efficiency = 0;   // fraction of peak attention kernels reach; 0: as GEMMs
  double memory_efficiency = 0.85;
  double allreduce_efficiency = 1.0; // achieved fraction of the ring's link bandwidth
  double kernel_launch_ns = 0;
  double step_overhead_ns = 0;
  std::vector<RingCost> tp_rings;    // per stage: the TP group as a ring
  std::vector<PathCost> pp_links;    // per stage: to the next stage (last unused)
  PathCost host_link;                // GPU to host memory (swap)
  double kv_block_bytes_per_gpu = 0; // swap copy size per block
};

class RooflineCostModel final : public CostModel {
 public:
  // Throws UsageError if the layout does not fit the model (check_layout) or
  // a rate is not positive.
  RooflineCostModel(ModelDesc model, ParallelLayout layout, Dtype weights, Dtype kv, RooflineParams params);

  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override;

  // The price of one op (all its repeats), in ns.
  OpCost price(const Op& op, std::int32_t stage) const;

  const RooflineParams& params() const { return params_; }
  const ModelDesc& model() const { return model_; }
  const ParallelLayout& layout() const { return layout_; }

 private:
  ModelDesc model_;
  ParallelLayout layout_;
  Dtype weights_;
  Dtype kv_;
  RooflineParams params_;
  std::vector<Op> ops_;  // reused every step
  // Direct-mapped memo of the curve by op FLOPs: GEMM sizes depend only on
  // the batch's token count, which repeats across steps and replicas.
  struct EfficiencyMemo {
    double flops = -1;
    double efficiency = 0;
  };
  static constexpr std::size_t kMemoSize = 4096;
  mutable std::vector<EfficiencyMemo> memo_ = std::vector<EfficiencyMemo>(kMemoSize);
  double efficiency_for(const Op& op) const;
};

}  // namespace twin
