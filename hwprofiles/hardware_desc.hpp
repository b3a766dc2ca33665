#pragma once
// One device kind (a GPU, or a CPU socket for the CPU engine) and the node it
// sits in. Units: TFLOP/s, GB/s = 1e9 bytes/s per direction, microseconds.
// Memory is stated as the device reports it (memory_mib as nvidia-smi prints
// it, or memory_bytes / memory_gib), since the KV plan is a difference of
// large numbers; the decimal memory_gb is still read for older files.
// Every number in a profile file carries a source note in its
// "sources" object, keyed by the field's dotted path ("peak_tflops.bf16").
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/dtype.hpp"
#include "models/quantization.hpp"

namespace twin {

enum class DeviceKind { gpu, cpu };

// Dense (not sparse) peaks; 0 where the device has no such path.
struct PeakTflops {
  double fp32 = 0, tf32 = 0, bf16 = 0, fp16 = 0, fp8 = 0, int8 = 0;
  // --- issue 41 (hw helper): low-bit formats ---
  // FP4 (e2m1) tensor cores with both operands in 4 bits (NVFP4 / MXFP4
  // block-scaled MMA: Blackwell, CDNA4); 0 where the device has none, and
  // fp4 weights then run weight-only (docs/quantization.md).
  double fp4 = 0;
};

struct GemmCurvePoint {
  double flops = 0;       // FLOPs of one GEMM
  double efficiency = 0;  // achieved fraction of the dense peak
};

// A measured efficiency curve: [x, efficiency] points, interpolated linearly
// in log(x) and held flat beyond its ends, that scales one roof of the op
// kinds it lists. x is the op's FLOPs, its bytes moved, its arithmetic
// intensity (FLOPs per byte), its token rows (elementwise kernels run a
// thread block per token), or its context share (below). A curve with a y
// axis holds rows of such points, each at a y: between two rows the time
// per unit of work (1 / efficiency) is interpolated linearly in y, so an op
// that is part one kind of work and part another is priced as the sum of
// the two (held at the end rows beyond them). context_share is, for
// attention, the share of the (query, key) pairs that are against cached
// context rather than the new tokens' causal square: context / (context +
// tokens / 2), 0 without context. Ops no curve lists keep the defaults: the
// compute roof at gemm_curve (capped at `compute`), the memory roof at the
// constant `memory` efficiency. The profile's "sources" entry
// "efficiency.curves.NAME" says where the points came from.
enum class CurveRoof { compute, memory };
enum class CurveAxis { flops, bytes, intensity, tokens, context_share };

struct EfficiencyCurveDesc {
  std::string name;
  CurveRoof roof = CurveRoof::compute;
  CurveAxis axis = CurveAxis::flops;
  std::vector<std::pair<double, double>> points;  // ascending x, efficiency in (0, 1]; empty with a y axis
  bool has_y = false;                             // rows, not points
  CurveAxis y_axis = CurveAxis::context_share;
  struct Row {
    double y = 0;
    std::vector<std::pair<double, double>> points;  // as `points`
  };
  std::vector<Row> rows;                          // ascending y
  std::vector<std::string> ops;                   // op kind names (models/step_ops.hpp)
  // Compute-roof curves only: "" prices the ops at any dtype; "fp8" or
  // "int8" prices the W8A8 quantised linear layers whose GEMMs run in that
  // format (their own kernels' curve), taking precedence over the dtype-less
  // curve for those ops.
  std::string dtype;
};

// ---- Measured collectives (optional; docs/hardware.md "Collectives") ----
// A collective's time per call as a function of its message size, for one
// kind, one link type and one group size, as nccl-tests (or a framework's
// own benchmark) measured it. The roofline prices a TP all-reduce or gather
// or an EP all-to-all from the curve matching its group (kind, link, GPUs)
// and from the ring formula where none does.
// custom_all_reduce: an engine's own all-reduce kernel over peer memory
// (vLLM's and SGLang's custom all-reduce, TensorRT-LLM's one- and two-shot
// kernels), which the engines run instead of NCCL for small messages on
// NVLink (sim/custom_all_reduce.hpp says when).
enum class CollectiveKind { all_reduce, all_gather, all_to_all, custom_all_reduce };
// nvswitch: every GPU on an NVSwitch; nvlink_bridge: a bridged NVLink pair;
// pcie_p2p: PCIe peer-to-peer; pcie_host: PCIe through host memory (no P2P).
enum class CollectiveLink { nvswitch, nvlink_bridge, pcie_p2p, pcie_host };

struct CollectiveCurveDesc {
  std::string name;
  CollectiveKind kind = CollectiveKind::all_reduce;
  CollectiveLink link = CollectiveLink::nvswitch;
  int gpus = 2;
  // [bytes, microseconds per call], bytes ascending; bytes as nccl-tests'
  // "size" column: the buffer each rank reduces (all-reduce), the gathered
  // output (all-gather), each rank's whole send buffer (all-to-all).
  std::vector<std::pair<double, double>> points;
};

const char* collective_kind_name(CollectiveKind k);
const char* collective_link_name(CollectiveLink l);

// ---- power (issue 44) -------------------------------------------------
// Board power of one device, for the energy of a run (docs/hardware.md,
// "Power"). A step's ops are priced as compute- or memory-bound; each part
// of the step draws that roof's figure, the rest of the step (host
// overhead, swaps) and every gap between steps the idle figure. Optional:
// a profile without a "power" object has known = false and a run reports
// its energy as not known, never as 0.
struct PowerDesc {
  bool known = false;
  double idle_w = 0;     // in a serving process, no kernel running
  double memory_w = 0;   // streaming HBM (decode: weights and KV read)
  double compute_w = 0;  // tensor cores saturated (large prefill GEMMs)
  double max_w = 0;      // TDP / max board power: the cap of the others
};

const char* curve_roof_name(CurveRoof r);
const char* curve_axis_name(CurveAxis a);

struct HardwareDesc {
  std::string name;
  DeviceKind kind = DeviceKind::gpu;
  PeakTflops peak_tflops;
  double memory_capacity_bytes = 0;  // as the device reports it
  std::string memory_reported;       // the profile's own figure, e.g. "81920 MiB"
  double memory_bandwidth_gbps = 0;  // peak DRAM/HBM bandwidth
  double nvlink_bandwidth_gbps = 0;  // GPU-to-GPU link in a node, per direction (PCIe where no NVLink)
  double nvlink_latency_us = 0;      // fixed cost of one collective in a node
  int gpus_per_node = 1;
  // How the node's GPUs are joined: "nvswitch" (HGX/DGX boards, the
  // default), "nvlink_pairs" (NVLink bridges two by two, PCIe between
  // pairs), "pcie" (no NVLink; nvlink_* then unused) or "xgmi_mesh" (AMD
  // Infinity Fabric: a direct link between every pair; nvlink_* are one
  // link's).
  std::string interconnect = "nvswitch";
  double pcie_bandwidth_gbps = 0;  // host link, per direction
  double pcie_latency_us = 0;
  double nic_bandwidth_gbps = 0;  // network per node, per direction
  double nic_latency_us = 0;
  double kernel_launch_us = 0;   // per op
  double step_overhead_us = 0;   // per step, host side
  double compute_efficiency = 0;    // large GEMM fraction of dense peak
  double memory_efficiency = 0;     // triad fraction of peak bandwidth
  double allreduce_efficiency = 0;  // large-message NCCL bus bandwidth / link bandwidth
  double pcie_efficiency = 0;       // measured host copy / link peak
  std::vector<GemmCurvePoint> gemm_curve;  // ascending flops, at least one point
  std::vector<EfficiencyCurveDesc> curves; // named curves, by name; optional
  // ---- Per-format GEMMs and measured collectives (optional) ----
  // W8A8 GEMMs in a format with no curve of its own ("dtype" above) run at
  // the dtype-less curve's efficiency times this ratio (measured fp8 or int8
  // efficiency over bf16 at the same shapes), keyed "fp8" / "int8"; absent:
  // 1. Key in the profile: efficiency.dtype_ratio.
  std::map<std::string, double> gemm_dtype_ratio;
  // Whether the node's GPUs do PCIe peer-to-peer: collectives over PCIe are
  // then priced on pcie_p2p curves, else on pcie_host ones. Key: pcie_p2p.
  bool pcie_p2p = false;
  // CUDA compute capability (8.9 for Ada, 9.0 for Hopper, 12.0 for the RTX
  // Blackwell cards): which kernels an engine picks on the device (vLLM's
  // attention backend, sim/mixed_attention.hpp). 0: not known or not CUDA.
  // Key: compute_capability.
  double compute_capability = 0;
  // GPU time per grid block of a mixed step's one varlen attention call
  // (sim/mixed_attention.hpp), over the whole device: each decode takes a
  // block per query head and per tile of the longest chunk, one of which
  // works and the rest exit at once. 0: not known, not priced.
  // Key: mixed_attention_block_ns.
  double mixed_attention_block_ns = 0;
  std::vector<CollectiveCurveDesc> collectives;  // key: collectives
  // Memory the serving process holds outside the weights, activations and
  // KV cache, per GPU: the CUDA context and library workspaces (vLLM's
  // "non_torch_memory" at TP 1), and the collective buffers (NCCL, custom
  // all-reduce) a GPU adds when it shares a replica with others.
  double runtime_reserve_bytes = 1024.0 * 1024 * 1024;
  double collective_reserve_bytes = 512.0 * 1024 * 1024;
  double price_per_gpu_hour = 0;  // editable: per GPU (per socket for a CPU)
  // --- Host work per step (sim/host_work.hpp; docs/op-costs.md, "Host
  // work per step"). The serving engine's host work per step is the
  // scheduler preset's figures (from that engine's published profiles)
  // divided by host_speed, with step_overhead_us as its fixed term. A
  // profile fitted to a deployment may replace the engine's per-item
  // figures: -1 (the default; the key absent) keeps the engine's.
  double host_speed = 1.0;          // host CPU speed relative to the engines' profiled hosts
  double host_per_seq_us = -1;      // per scheduled sequence (scheduling, block tables)
  double host_per_token_us = -1;    // per scheduled token (input preparation)
  double host_per_sample_us = -1;   // per sampling sequence (sampling, output processing)
  double host_exposed_us = -1;      // per step, never overlapped with the GPU
  // --- end host work
  // --- issue 41 (hw helper): vendor ---
  // "nvidia" (CUDA: the default) or "amd" (ROCm). Which engine kernels exist
  // depends on it (NVFP4's CUTLASS and Marlin kernels are CUDA-only); an AMD
  // GPU's fp8 is e4m3fnuz on MI300/MI325 (same size and peak: the simulator
  // does not tell them apart).
  std::string vendor = "nvidia";
  PowerDesc power;                // issue 44: optional "power" object
  std::map<std::string, std::string> sources;  // dotted field path -> note
};

// Names of the bundled profiles, sorted.
std::vector<std::string> hardware_names();

// A path to an existing file loads it; else a bundled name; else UsageError
// listing the bundled names.
HardwareDesc resolve_hardware(const std::string& name_or_path);

// The bundled profile of the device an engine ran on: "cpu" for the CPU
// backend; for a GPU, the profile whose name's every '-'-separated part
// occurs in the device name (case-insensitive; "NVIDIA H200" -> h200,
// "NVIDIA A100-SXM4-80GB" -> a100-80gb; whole words only, so "NVIDIA H200"
// is not h20), the most specific match first; "NVIDIA GB200" / "GB300" are
// the NVL72 racks' profiles.
// UsageError naming the device, to be overridden with --hw, when none fits.
std::string hardware_for_device(const std::string& backend, const std::string& device_name);

// Strict: unknown keys, missing or negative fields, efficiencies outside
// (0, 1], a numeric field without a source note are twin::Error naming the
// file and the field.
HardwareDesc load_hardware_file(const std::string& path);
HardwareDesc parse_hardware_json(const std::string& text, const std::string& origin,
                                 const std::string& default_name);

// Dense peak in FLOP/s for a dtype; UsageError when the device lacks it.
double peak_flops(const HardwareDesc& hw, Dtype d);
bool supports(const HardwareDesc& hw, Dtype d);

// GEMM efficiency at a size, interpolated linearly in log(flops) between the
// curve's points and held flat beyond its ends.
double gemm_efficiency(const HardwareDesc& hw, double flops);

double memory_bytes(const HardwareDesc& hw);  // memory_capacity_bytes

// What a quantization method can run with on this device (its tensor-core
// formats and vendor), for quant_scheme (models/quantization.hpp).
QuantHardware quant_hardware(const HardwareDesc& hw);

}  // namespace twin
