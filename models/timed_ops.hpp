#pragma once
// The engine runner's op calls as it times them (ModelRunner::set_time_ops),
// and which of step_ops' op kinds each one runs: the one place that maps the
// runner's timed ops to the cost models' ops, used by calibrate's per-kind
// fit and by validate's per-op table.
#include <array>
#include <cstdint>
#include <string_view>

#include "models/step_ops.hpp"

namespace twin {

// The timed ops are step_ops' op kinds, except `attention` (kv_write + paged_attention:
// one call serves a step's prefills and decodes, step_ops' attn_prefill +
// attn_decode) and `moe_experts` (one call: moe_gate_up_proj + silu_mul +
// moe_down_proj).
enum class TimedOp : std::uint8_t {
  embed,
  rmsnorm,
  qkv_proj,
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
    "embed",     "rmsnorm",    "qkv_proj",    "rotary",     "attention", "o_proj",  "gate_up_proj",
    "silu_mul",  "down_proj",  "moe_router",  "moe_experts", "final_norm", "lm_head", "sample"};
using OpTimes = std::array<double, kNumTimedOps>;  // ns per timed op

// The runner's timed op a step_ops op kind runs in; -1 for kinds the
// one-device engine has none of (TP/PP traffic).
int timed_op_of(OpKind kind, bool moe);

}  // namespace twin
