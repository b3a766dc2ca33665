#include "models/timed_ops.hpp"

namespace twin {

int timed_op_of(OpKind kind, bool moe) {
  auto t = [](TimedOp op) { return static_cast<int>(op); };
  switch (kind) {
    case OpKind::embed: return t(TimedOp::embed);
    case OpKind::rmsnorm: return t(TimedOp::rmsnorm);
    case OpKind::qkv_proj: return t(TimedOp::qkv_proj);
    case OpKind::rotary: return t(TimedOp::rotary);
    case OpKind::attn_prefill:
    case OpKind::attn_decode: return t(TimedOp::attention);  // one paged_attention call serves both
    case OpKind::o_proj: return t(TimedOp::o_proj);
    case OpKind::gate_up_proj: return t(TimedOp::gate_up_proj);
    case OpKind::silu_mul: return t(moe ? TimedOp::moe_experts : TimedOp::silu_mul);
    case OpKind::down_proj: return t(TimedOp::down_proj);
    case OpKind::moe_router: return t(TimedOp::moe_router);
    case OpKind::moe_gate_up_proj:
    case OpKind::moe_down_proj: return t(TimedOp::moe_experts);
    case OpKind::final_norm: return t(TimedOp::final_norm);
    case OpKind::lm_head: return t(TimedOp::lm_head);
    case OpKind::sample: return t(TimedOp::sample);
    case OpKind::tp_allreduce:
    case OpKind::tp_gather:
    case OpKind::pp_send: return -1;
  }
  return -1;
}

}  // namespace twin
