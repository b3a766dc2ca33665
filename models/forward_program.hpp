#pragma once
// The forward pass as the engine runs it: its calls in order, and for each
// the time bucket it is charged to and the op kinds of models/step_ops it is
// priced as. The one description of a layer's ops: the model runner executes
// this list (engine/runtime/forward_calls), the profiler times its calls
// (engine/profiler/op_bench), calibrate chooses its tables from it, and
// validate's per-op table and calibrate's per-kind fit map step_ops' kinds to
// the engine's time buckets through it, and step_ops prices the calls of
// this list in this order (one price per call). Adding an op means a
// ForwardCall here (its place in the pass, time bucket, priced kinds, rows,
// collective); the compiler then asks for its kernel (the switch in
// forward_calls.cpp) and its price (the switch in step_ops.cpp), and a test
// checks that the kinds agree.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "models/step_ops.hpp"

namespace twin {

// The time buckets of ForwardOutput::op_ns (ModelRunner::set_time_ops): one
// per call, except that both RMSNorms of a layer share `rmsnorm`. Their names
// are the columns of validate's per-op table and the rows of calibrate's fit.
enum class TimedOp : std::uint8_t {
  embed,
  rmsnorm,
  qkv_proj,
  qk_norm,
  rotary,
  attention,
  o_proj,
  gate_up_proj,
  silu_mul,
  down_proj,
  moe_router,
  moe_experts,
  final_norm,
  lm_head,
  sample,
};
inline constexpr int kNumTimedOps = static_cast<int>(TimedOp::sample) + 1;
inline constexpr std::array<std::string_view, kNumTimedOps> kTimedOpNames = {
    "embed",     "rmsnorm",   "qkv_proj",    "qk_norm",    "rotary",  "attention", "o_proj", "gate_up_proj",
    "silu_mul",  "down_proj", "moe_router",  "moe_experts", "final_norm", "lm_head", "sample"};
using OpTimes = std::array<double, kNumTimedOps>;  // ns per timed op

// One kernel call (or fused group) of the engine's forward pass.
enum class ForwardCall : std::uint8_t {
  embed,         // token ids -> rows of the embedding table
  input_norm,    // the layer's input RMSNorm; after layer 0, fused with the residual add
  qkv_proj,      // one GEMM for Q, K and V (plus the bias where the model has one)
  qk_norm,       // RMSNorm of Q and K (Qwen3, MiniMax-M2: ModelDesc::qk_norm); only in such models' programs
  rotary,        // RoPE on Q and K
  attention,     // writes the new K and V to the paged cache, attends over it
  o_proj,        // attention output GEMM
  post_norm,     // residual add + the post-attention RMSNorm, fused
  gate_up_proj,  // dense MLP: one GEMM for gate and up
  silu_mul,      // dense MLP: silu(gate) * up
  down_proj,     // dense MLP: down GEMM
  moe_router,    // MoE: router GEMM + top-k of the experts
  moe_experts,   // MoE: each expert's gate/up GEMM, silu * up and down GEMM, weighted sum
  final_norm,    // the last residual add over all tokens; gather of the sampling rows and their final RMSNorm
  lm_head,       // logits of the sampling rows
  sample,        // a token per sampling row
};
inline constexpr int kNumForwardCalls = static_cast<int>(ForwardCall::sample) + 1;

// Which part of the pass a call belongs to, and what its rows are.
enum class CallPart : std::uint8_t { prologue, layer, epilogue };
enum class CallRows : std::uint8_t {
  tokens,     // one row per new token of the step
  attention,  // the step's sequences over their KV (rows are not the key)
  sampling,   // one row per sampling sequence; skipped in a step that samples nothing
};

struct ForwardCallInfo {
  ForwardCall call;
  std::string_view name;
  TimedOp timed;
  CallPart part;
  CallRows rows;
  // step_ops' kinds this call is priced as, in step_ops' order; unused
  // entries are OpKind::embed past `num_priced`.
  std::array<OpKind, 3> priced;
  std::int32_t num_priced;
  // Under tensor parallelism the call's output is a partial sum that is
  // all-reduced across the TP group after it (the row-parallel GEMMs, the
  // vocab-parallel embedding): step_ops prices one tp_allreduce per instance.
  bool tp_allreduce_after = false;
  std::span<const OpKind> priced_as() const { return {priced.data(), static_cast<std::size_t>(num_priced)}; }
};

const ForwardCallInfo& call_info(ForwardCall call);

// The calls of a forward pass in execution order: the prologue, one layer
// (executed once per layer), the epilogue. `moe`: a mixture-of-experts layer
// (router + experts) in place of the dense MLP; `qk_norm`: the layer
// normalises Q and K after the QKV projection (ModelDesc::has_qk_norm).
std::span<const ForwardCall> forward_program(bool moe, bool qk_norm);

// The call that runs one instance of step_ops' op `kind` in a model of this
// kind (`moe`; qk_norm's call for its kind, which only models with it
// price), or nullopt-like -1 for kinds the one-device engine has no
// call for (TP/PP traffic). For kinds priced inside a fused call
// (moe_gate_up_proj, moe_down_proj, a MoE silu_mul) it is that fused call.
int call_of(OpKind kind, bool moe);
// The time bucket of step_ops' op `kind`, or -1 (call_of's rule).
int timed_op_of(OpKind kind, bool moe);

}  // namespace twin
