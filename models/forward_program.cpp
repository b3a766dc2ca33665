#include "models/forward_program.hpp"

namespace twin {
namespace {

using K = OpKind;
using C = ForwardCall;
using T = TimedOp;
using P = CallPart;
using R = CallRows;

// Indexed by ForwardCall.
constexpr ForwardCallInfo kCalls[kNumForwardCalls] = {
    {C::embed, "embed", T::embed, P::prologue, R::tokens, {K::embed}, 1, true},
    {C::input_norm, "input_norm", T::rmsnorm, P::layer, R::tokens, {K::rmsnorm}, 1, false},
    {C::qkv_proj, "qkv_proj", T::qkv_proj, P::layer, R::tokens, {K::qkv_proj}, 1, false},
    {C::qk_norm, "qk_norm", T::qk_norm, P::layer, R::tokens, {K::qk_norm}, 1, false},
    {C::rotary, "rotary", T::rotary, P::layer, R::tokens, {K::rotary}, 1, false},
    {C::attention, "attention", T::attention, P::layer, R::attention, {K::attn_prefill, K::attn_decode}, 2, false},
    {C::o_proj, "o_proj", T::o_proj, P::layer, R::tokens, {K::o_proj}, 1, true},
    {C::post_norm, "post_norm", T::rmsnorm, P::layer, R::tokens, {K::rmsnorm}, 1, false},
    {C::gate_up_proj, "gate_up_proj", T::gate_up_proj, P::layer, R::tokens, {K::gate_up_proj}, 1, false},
    {C::silu_mul, "silu_mul", T::silu_mul, P::layer, R::tokens, {K::silu_mul}, 1, false},
    {C::down_proj, "down_proj", T::down_proj, P::layer, R::tokens, {K::down_proj}, 1, true},
    {C::moe_router, "moe_router", T::moe_router, P::layer, R::tokens, {K::moe_router}, 1, false},
    {C::moe_experts, "moe_experts", T::moe_experts, P::layer, R::tokens,
     {K::moe_gate_up_proj, K::silu_mul, K::moe_down_proj}, 3, true},
    {C::final_norm, "final_norm", T::final_norm, P::epilogue, R::tokens, {K::final_norm}, 1, false},
    {C::lm_head, "lm_head", T::lm_head, P::epilogue, R::sampling, {K::lm_head}, 1, false},
    {C::sample, "sample", T::sample, P::epilogue, R::sampling, {K::sample}, 1, false},
};

constexpr ForwardCall kDense[] = {C::embed,     C::input_norm,   C::qkv_proj, C::rotary,    C::attention,
                                  C::o_proj,    C::post_norm,    C::gate_up_proj, C::silu_mul, C::down_proj,
                                  C::final_norm, C::lm_head,     C::sample};
constexpr ForwardCall kMoe[] = {C::embed,     C::input_norm, C::qkv_proj,  C::rotary,     C::attention,
                                C::o_proj,    C::post_norm,  C::moe_router, C::moe_experts, C::final_norm,
                                C::lm_head,   C::sample};
// The same with the q/k norm between the QKV projection and the rotary embedding.
constexpr ForwardCall kDenseQkNorm[] = {C::embed,       C::input_norm, C::qkv_proj,  C::qk_norm,  C::rotary,
                                        C::attention,   C::o_proj,     C::post_norm, C::gate_up_proj,
                                        C::silu_mul,    C::down_proj,  C::final_norm, C::lm_head, C::sample};
constexpr ForwardCall kMoeQkNorm[] = {C::embed,     C::input_norm, C::qkv_proj,   C::qk_norm,     C::rotary,
                                      C::attention, C::o_proj,     C::post_norm,  C::moe_router,  C::moe_experts,
                                      C::final_norm, C::lm_head,   C::sample};

constexpr bool table_in_order() {
  for (int i = 0; i < kNumForwardCalls; ++i)
    if (static_cast<int>(kCalls[i].call) != i) return false;
  return true;
}
static_assert(table_in_order(), "kCalls must be indexed by ForwardCall");

}  // namespace

const ForwardCallInfo& call_info(ForwardCall call) { return kCalls[static_cast<int>(call)]; }

std::span<const ForwardCall> forward_program(bool moe, bool qk_norm) {
  if (moe) return qk_norm ? std::span<const ForwardCall>(kMoeQkNorm) : std::span<const ForwardCall>(kMoe);
  return qk_norm ? std::span<const ForwardCall>(kDenseQkNorm) : std::span<const ForwardCall>(kDense);
}

int call_of(OpKind kind, bool moe) {
  // The program with the q/k norm: it adds only its own kind.
  for (ForwardCall c : forward_program(moe, true))
    for (OpKind k : call_info(c).priced_as())
      if (k == kind) return static_cast<int>(c);
  return -1;
}

int timed_op_of(OpKind kind, bool moe) {
  const int c = call_of(kind, moe);
  return c < 0 ? -1 : static_cast<int>(call_info(static_cast<ForwardCall>(c)).timed);
}

}  // namespace twin
