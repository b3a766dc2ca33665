#pragma once
// A calibrated hardware profile: the engine's own ops timed on one machine
// (`twinserve calibrate`), keyed by the op names and shapes of
// models/step_ops so the simulator's calibrated cost model reads it without
// translation. One profile is for one model at one dtype on one backend.
//
// Tables (times are ns for ONE instance of the op, i.e. one layer):
//   gemm:        per op (qkv_proj, o_proj, gate_up_proj, down_proj, lm_head,
//                moe_router) a weight shape n x k and points over m (tokens;
//                lm_head: sampling seqs);
//   elementwise: per op (embed, rmsnorm, rotary, silu_mul, final_norm,
//                sample) a width n and points over tokens (sample: sampling seqs);
//   attention:   attn_prefill rows over new tokens per seq, attn_decode rows
//                over batch size, each row's points over context per seq.
// Every point keeps the median, the p10 and p90 of its repeats, and the op's
// FLOPs and bytes at that shape (from step_ops), which extrapolation uses.
// The file layout is fixed (tables in op order, keys in a fixed order), so
// the same profile writes the same bytes.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/forward_program.hpp"
#include "models/step_ops.hpp"

namespace twin {

inline constexpr const char* kCalibratedProfileFormat = "twinserve calibrated profile";
// Version 2 added step_overhead.op_scales and .fit and the samples'
// in_situ_ns and predicted_ns; version 1 files still read (scales 1).
inline constexpr std::int64_t kCalibratedProfileVersion = 2;

// The range of a step-overhead scale (op_scale, op_scales): a fitted factor on
// the op tables' times, near 1 in any real profile. The reader refuses values
// outside it (1e-300 would price every step at nothing); the fit clamps to it.
inline constexpr double kMinOpScale = 1e-3;
inline constexpr double kMaxOpScale = 1e3;

struct CalibratedPoint {
  double x = 0;        // m, tokens or context per seq (see the table kind)
  double time_ns = 0;  // median of the repeats, > 0
  double p10_ns = 0;
  double p90_ns = 0;
  double flops = 0;    // one instance at this shape
  double bytes = 0;
};

// GEMM (x = m) or elementwise (x = tokens) op: one varying dimension.
struct CurveTable {
  OpKind op = OpKind::embed;
  std::int64_t n = 0;  // GEMM: output features; elementwise: row width
  std::int64_t k = 0;  // GEMM: input features; elementwise: 0
  std::vector<CalibratedPoint> points;  // ascending x
};

// attn_prefill: key = new tokens per seq; attn_decode: key = seqs in the batch.
struct GridRow {
  double key = 0;
  std::vector<CalibratedPoint> points;  // x = context tokens per seq, ascending
};

struct GridTable {
  OpKind op = OpKind::attn_prefill;
  std::int64_t heads = 0;     // query heads (step_ops' n)
  std::int64_t head_dim = 0;  // step_ops' k
  std::vector<GridRow> rows;  // ascending key
};

// One kind of whole step measured through the engine's executor.
struct OverheadSample {
  std::string label;          // e.g. "decode x8"
  double num_seqs = 0;        // median over the kind's steps
  double new_tokens = 0;
  double measured_ns = 0;     // median step time (plan to completion)
  double ops_ns = 0;          // median sum of the op tables' predictions
  double in_situ_ns = 0;      // median sum of the ops' times inside the steps (0 in version 1)
  double predicted_ns = 0;    // the fitted step model at the medians (0 in version 1)
};

// A step started after the engine sat idle for gap_ns: its median time and
// what it took beyond the same step run back to back (gap 0).
struct IdleSample {
  double gap_ns = 0;
  double measured_ns = 0;
  double extra_ns = 0;
};

// How well the step model explains the calibration's own steps, over every
// measured step: relative error |predicted - measured| / measured, and the
// ratio of the tables' unscaled op sum (and of the in-situ op times) to the
// measured step.
struct StepFitQuality {
  std::int64_t steps = 0;  // 0: not computed (a version 1 profile)
  double mean_abs_error = 0;
  double max_abs_error = 0;
  double unscaled_ratio_mean = 0;
  double unscaled_ratio_min = 0;
  double unscaled_ratio_max = 0;
  double in_situ_ratio_mean = 0;
};

inline std::array<double, kNumOpKinds> unit_op_scales() {
  std::array<double, kNumOpKinds> a{};
  a.fill(1.0);
  return a;
}

// What a whole step costs beyond its ops priced one by one from the tables:
//   step = sum over ops of op_scale x op_scales[kind] x table time
//          + base_ns + per_seq_ns x scheduled seqs
//          + idle_ns x (1 - exp(-gap / idle_tau_ns))
// op_scales: each op kind runs slower (or faster) inside a full forward pass
// than alone, by its own factor (caches shared with the other ops; on a GPU,
// launches overlapping the previous kernel), fitted from the ops' in-situ
// times. op_scale: one factor for all ops, what version 1 fitted (1 when the
// per-kind scales are fitted). base and per_seq: scheduling, batch building,
// sampling bookkeeping, the loop. The idle term: a step after the engine sat
// idle for `gap` pays a warm-up (caches and clocks of a machine that went
// quiet); 0 when idle_tau_ns is 0.
struct StepOverhead {
  std::array<double, kNumOpKinds> op_scales = unit_op_scales();  // by OpKind
  // By the runner's timed op (models/forward_program): the fixed cost its
  // calls add to a step that runs it, beyond their scaled tables; zeros in
  // profiles written before it was fitted.
  OpTimes op_fixed_ns{};
  StepFitQuality fit;
  double op_scale = 1;
  double base_ns = 0;
  double per_seq_ns = 0;
  double idle_ns = 0;
  double idle_tau_ns = 0;
  std::vector<OverheadSample> samples;
  std::vector<IdleSample> idle_samples;
};

struct ProfileMetadata {
  std::string model;         // models/ name
  std::string dtype;         // weights, models/ dtype name (fp32, bf16)
  std::string kv_dtype;      // KV cache (fp32 on the CPU engine)
  // The engine's weight quantization (models/quantization names: int8 is
  // weight-only int8); empty: none. Absent from the file when empty.
  std::string quantization;
  std::string backend;       // cpu or cuda
  std::string device;        // DeviceInfo name
  // The bundled hardware profile of that device (hardware_for_device:
  // "cpu", "h200", ...); empty where none matched or in an older profile.
  std::string hardware;
  std::string cpu_model;     // /proc/cpuinfo "model name", or "unknown"
  std::string hostname;
  std::string date;          // UTC, ISO 8601
  std::string git_commit;    // at build time, or "unknown"
  std::string twinserve_version;
  std::int64_t threads = 0;  // CPU worker threads the ops ran with (0 on a GPU)
  std::int64_t tp = 1;
  std::int64_t block_size = 16;
  std::int64_t max_tokens = 0;  // the GEMM / elementwise grid's top
  std::int64_t repeats = 0;     // timed repeats per point (after warm-up), all rounds together
  std::int64_t rounds = 1;      // passes over the grid the repeats were spread over
  bool quick = false;
  double seconds = 0;           // calibration wall time
};

struct CalibratedProfile {
  ProfileMetadata metadata;
  StepOverhead overhead;
  std::vector<CurveTable> gemm;
  std::vector<CurveTable> elementwise;
  std::vector<GridTable> attention;
};

// Which section an op's table belongs to.
enum class TableKind { gemm, elementwise, attention, none };
TableKind table_kind(OpKind op);

nlohmann::ordered_json calibrated_profile_json(const CalibratedProfile& profile);
// Pretty-printed JSON with a trailing newline.
std::string calibrated_profile_text(const CalibratedProfile& profile);
// Throws twin::Error naming the path when it cannot be written.
void write_calibrated_profile(const std::string& path, const CalibratedProfile& profile);

// Strict: an unknown key, a missing key, a wrong type, a non-positive time,
// points out of order or an op in the wrong section is twin::Error naming
// `origin` and the key's path (e.g. "gemm[0].points[3].m").
CalibratedProfile parse_calibrated_profile(const nlohmann::json& json, const std::string& origin);
CalibratedProfile load_calibrated_profile(const std::string& path);

}  // namespace twin
