#pragma once
// The roofline cost model: each op of models/step_ops is limited either by
// compute or by memory traffic, whichever takes longer, plus a kernel launch;
// collectives and stage-to-stage sends are priced from the cluster graph.
//   op time = repeat x (max(flops / (peak x eff_c), bytes / (bw x eff_m)) + launch)
// eff_c and eff_m come from the hardware profile's named curves configured
// for the op's kind (hwprofiles/hardware_desc.hpp), else from the GEMM
// curve and the constant memory efficiency.
//   stage time = sum of op times, composed with the engine's host work
//   (sim/host_work.hpp: added, or overlapped under async scheduling)
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"
#include "sim/cost_model.hpp"
#include "sim/host_work.hpp"
#include "sim/input_quant_kernels.hpp"
#include "sim/topology.hpp"

namespace twin {

// A size-dependent efficiency: points (x, fraction of the roof),
// interpolated linearly in log10(x), clamped at the ends. x is the op's
// FLOPs, bytes, FLOPs per byte, tokens or context share (`axis`). Small
// GEMMs run far below peak. With a y axis the curve is rows, each a curve
// at a y, and 1 / efficiency is interpolated linearly in y between them
// (hwprofiles/hardware_desc.hpp).
struct EfficiencyCurve {
  std::string name;
  CurveAxis axis = CurveAxis::flops;
  std::vector<std::pair<double, double>> points;  // ascending x; unused with a y axis
  bool has_y = false;
  CurveAxis y_axis = CurveAxis::context_share;
  std::vector<double> row_y;          // ascending
  std::vector<EfficiencyCurve> rows;  // one per row_y, 1-D
  // x is the op's own work (FLOPs on the compute roof, bytes or tokens on
  // the memory roof): the busy time x / efficiency is held at or above the
  // largest of the points' times at or below x, so a bigger op of a kind
  // is never priced below a smaller one (efficiency interpolated in log x
  // dips the time between points that rise steeply, and a profile's
  // points may be out of order in time).
  bool holds_time = false;
  double at(double x) const;
  double at(double x, double y) const;
  // Precomputes the points' logarithms and running times; at() works
  // without, only slower.
  void prepare();

 private:
  double time_floor(std::size_t i) const;  // the largest time of points 0..i
  std::vector<double> log_flops_;
  std::vector<double> time_floor_;
};


// A collective's measured time per call against its message bytes (a
// profile's "collectives" curve): log(time) interpolated linearly in
// log(bytes) between the points; below the first point its time (small
// messages are latency-bound), beyond the last the last point's bandwidth.
// The points' times are held non-decreasing (the largest so far), so a
// bigger message never costs less: NCCL's protocol switches make measured
// times dip (Vidur's A100 pair: 225 us at 474 KiB, 153 at 477 KiB).
struct CollectiveCurve {
  std::string name;
  CollectiveKind kind = CollectiveKind::all_reduce;
  CollectiveLink link = CollectiveLink::nvswitch;
  std::int32_t gpus = 2;
  std::vector<std::pair<double, double>> points;  // ascending bytes, ns (held)
  double time_ns(double bytes) const;
};

// The share of a PCIe link a collective staged through host memory gets
// (no peer-to-peer: NCCL's SHM transport); roofline_cost_model.cpp says why.
inline constexpr double kHostStagedShare = 0.5;

// Everything the roofline needs about one replica's GPUs and links: plain
// numbers, filled from the hardware profile and the cluster graph.
struct RooflineParams {
  static constexpr std::array<std::int8_t, kNumOpKinds> filled(std::int8_t v) {
    std::array<std::int8_t, kNumOpKinds> a{};
    for (auto& x : a) x = v;
    return a;
  }
  double peak_flops = 0;             // per GPU, FLOP/s at the (activation) dtype
  // Quantised linear layers (models/quantization.hpp). W8A8: their GEMMs
  // run at this peak (fp8/int8 tensor cores; 0: peak_flops). Weight-only
  // kernels dequantise every weight once per tile of `dequant_tile_tokens`
  // rows, `dequant_flops_per_weight` FLOPs each at `dequant_flops_rate`
  // (the CUDA cores): added to the GEMM's compute time, so it is hidden
  // under the weights' memory time at small batch and shows when compute
  // bound. 0: no such work.
  double quant_gemm_peak_flops = 0;
  bool quant_experts_only = false;  // issue 41: mxfp4 quantises the routed experts only
  double dequant_flops_per_weight = 0;
  double dequant_tile_tokens = 64;
  double dequant_flops_rate = 0;
  double memory_bandwidth = 0;       // bytes/s
  double compute_efficiency = 0.75;  // large-GEMM fraction of peak; caps the curve
  EfficiencyCurve gemm_efficiency;   // empty: compute_efficiency for every size
  double attention_efficiency = 0;   // fraction of peak attention kernels reach; 0: as GEMMs
  double memory_efficiency = 0.85;
  // Named curves and, per op kind, the index of the curve scaling its
  // compute and memory roofs (-1: the defaults above).
  std::vector<EfficiencyCurve> curves;
  std::array<std::int8_t, kNumOpKinds> compute_curve = filled(-1);
  std::array<std::int8_t, kNumOpKinds> memory_curve = filled(-1);
  double allreduce_efficiency = 1.0; // achieved fraction of the ring's link bandwidth
  double kernel_launch_ns = 0;
  // The engine's host work per step and whether it overlaps the GPU
  // (sim/host_work.hpp); roofline_params gives the profile's flat
  // step_overhead_us, the cluster the preset's engine.
  HostWork host;
  // Steps of at most this many tokens run as CUDA graphs padded to a capture
  // size (cudagraph_padded_tokens); max_tokens 0: eager, no padding.
  GraphCapture graph_capture;
  std::vector<RingCost> tp_rings;    // per stage: the TP group as a ring
  std::vector<PathCost> pp_links;    // per stage: to the next stage (last unused)
  std::vector<AllToAllCost> ep_groups;  // per stage: the EP ranks' all-to-all (size 1 without EP)
  PathCost host_link;                // GPU to host memory (swap)
  double kv_block_bytes_per_gpu = 0; // swap copy size per block
  // ---- Measured collectives and per-format GEMMs (docs/op-costs.md) ----
  // Collective curves of the profile; a TP ring or EP group within a node
  // is priced on the one matching its kind, link and size, else by the ring
  // and all-to-all formulas above. pcie_p2p: PCIe rings use pcie_p2p
  // curves, else pcie_host ones.
  std::vector<CollectiveCurve> collective_curves;
  bool pcie_p2p = false;
  // The profile says its GPUs have no peer-to-peer: formula-priced PCIe
  // collectives get kHostStagedShare of the link.
  bool pcie_host_staged = false;
  // A mixed step's attention runs as one varlen call padding each decode's
  // query to this many rows per head (sim/mixed_attention.hpp); 0: apart.
  std::int32_t mixed_attention_rows = 0;
  // That call's time per grid block (HardwareDesc::mixed_attention_block_ns).
  double mixed_attention_block_ns = 0;
  // Per stage: TP all-reduces of fewer bytes run the engine's own kernel
  // (sim/custom_all_reduce.hpp), priced on the profile's custom_all_reduce
  // curve for the group where it has one; 0 or missing: NCCL for all.
  std::vector<double> custom_all_reduce_below;
  // W8A8 linear layers: the compute curve per op kind fitted to kernels in
  // their GEMM format (-1: none), else the dtype-less curve times
  // quant_gemm_efficiency_ratio (measured format / bf16 efficiency).
  std::array<std::int8_t, kNumOpKinds> quant_compute_curve = filled(-1);
  double quant_gemm_efficiency_ratio = 1.0;
  // W8A8 fp8 linear layers whose input the engine quantises in a kernel of
  // its own (sim/input_quant_kernels.hpp): each such GEMM also pays that
  // kernel, a memory-bound pass over its input rows plus a launch.
  OpKindSet separate_input_quant = 0;
};

// The profile's curve for a collective of `kind` over `gpus` GPUs joined by
// `link` (a ring's or group's worst hop), or nullptr (then the formula):
// none across nodes.
const CollectiveCurve* find_collective_curve(const RooflineParams& params, CollectiveKind kind, PathLink link,
                                             std::int32_t gpus);

// The roofline parameters of a hardware profile at a precision (links left
// empty: the cluster fills them from its graph). UsageError when the device
// lacks the dtype.
RooflineParams roofline_params(const HardwareDesc& hw, const WeightPrecision& weights);

class RooflineCostModel final : public CostModel {
 public:
  // Throws UsageError if the layout does not fit the model (check_layout) or
  // a rate is not positive.
  RooflineCostModel(ModelDesc model, ParallelLayout layout, WeightPrecision weights, Dtype kv, RooflineParams params);

  Time stage_time(const StepInput& step, std::vector<OpCost>* breakdown = nullptr) override;
  Time swap_time(std::int64_t num_blocks) override;
  bool splits_steps() const override { return true; }

  // The price of one op (all its repeats), in ns.
  OpCost price(const Op& op, std::int32_t stage) const;

  // The host work of the step (the shape's sequences, tokens and samples).
  HostCost host_cost_of(const StepInput& step) const;

  const RooflineParams& params() const { return params_; }
  // The tokens a step of these sums runs at under the engine's CUDA graphs
  // (its own count when it runs eagerly); stage_time prices the difference.
  std::int64_t graph_tokens(const StepSums& sums) const {
    return cudagraph_padded_tokens(sums.tokens(), params_.graph_capture, sums.prefill.tokens == 0);
  }
  const ModelDesc& model() const { return model_; }
  const ParallelLayout& layout() const { return layout_; }

 private:
  ModelDesc model_;
  ParallelLayout layout_;
  WeightPrecision weights_;
  Dtype kv_;
  RooflineParams params_;
  // Per stage, the collective curve (index into params_.collective_curves,
  // -1: the formula) of the TP all-reduce, the TP gather, the EP all-to-all
  // and the engine's custom all-reduce (-1: none, or not used).
  std::vector<std::array<std::int16_t, 4>> stage_collectives_;
  std::vector<Op> ops_;  // reused every step
  // Step prices by (tokens, sampling, stage), direct-mapped: every op but
  // attention depends only on those (models/step_ops.hpp, StepSums), and
  // they repeat across steps and replicas. An entry keeps the sum of the
  // overhead and the ops before attention, then each later op's price, so
  // a step is summed in the same order as op by op: the same double. The
  // host work is composed with the sum afterwards (it depends on the
  // sequences, which the key leaves out).
  static constexpr std::size_t kMaxTailOps = 30;
  struct StepPrice {
    std::int64_t tokens = -1, sampling = -1;
    std::int64_t group_tokens = -1;  // lockstep DP ranks: the instance's tokens
    std::int32_t stage = -1;
    std::int32_t tail_count = 0;  // ops after attention
    double head_ns = 0;           // the ops before attention, in order
    std::array<double, kMaxTailOps> tail_ns{};
    StepMix head_mix, tail_mix;   // the head's and the tail's ops by binding roof
  };
  static constexpr std::size_t kPriceSlots = 2048;
  std::vector<StepPrice> prices_ = std::vector<StepPrice>(kPriceSlots);
  // Prices the step op by op (appending each op to `breakdown` when given);
  // fills `slot` when its ops fit one.
  double price_all(const StepSums& sums, std::int32_t stage, std::vector<OpCost>* breakdown, StepPrice* slot,
                   StepMix* mix);
  // Direct-mapped memo of curve lookups by (curve, x): op sizes depend
  // only on the batch's token counts, which repeat across steps and replicas.
  struct EfficiencyMemo {
    double x = -1;
    double y = -1;
    std::int32_t curve = -2;
    double efficiency = 0;
  };
  static constexpr std::size_t kMemoSize = 4096;
  mutable std::vector<EfficiencyMemo> memo_ = std::vector<EfficiencyMemo>(kMemoSize);
  // Curve `index` (-1: the GEMM curve capped at the compute efficiency) at
  // x (and y, for a curve with a y axis; 0 otherwise).
  // `memo`: through memo_. Attention's x moves with the context every step,
  // so it would miss anyway: looked up directly, it spares a cache miss.
  double curve_at(std::int32_t index, double x, double y, bool memo) const;
  double named_curve_at(std::int32_t index, const Op& op) const;
  double compute_efficiency_for(const Op& op) const;
  double dense_compute_efficiency(const Op& op) const;  // the curves by op kind, any format
  bool attention_priced_flat(const Op& op) const;
  double memory_efficiency_for(const Op& op) const;
  // ns of compute: the op's FLOPs at its peak and efficiency, plus a
  // weight-only kernel's dequantisation.
  double compute_ns(const Op& op, double efficiency) const;
  // ns of one TP all-reduce/gather or EP all-to-all call; names the curve
  // (or "link", the formula) in `curve`.
  double collective_ns(const Op& op, std::int32_t stage, std::string_view& curve) const;
  // Folds a mixed step's decode attention op in ops_ into its prefill
  // attention op when params_.mixed_attention_rows says the engine runs
  // them as one call.
  void merge_mixed_attention();
  // The share of a link's bandwidth a formula-priced collective gets:
  // kHostStagedShare over PCIe without peer-to-peer, else 1.
  double host_staged_share(PathLink link) const;
};

}  // namespace twin
