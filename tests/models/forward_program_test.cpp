// The forward program (the engine's calls in order) and step_ops (the cost
// models' ops) describe the same pass: every kind step_ops prices for a
// one-device step is run by exactly one call of the program, and every call
// of the program is priced by step_ops. A new op added to one and not the
// other fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/forward_program.hpp"
#include "models/model_desc.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

std::set<OpKind> priced_kinds(const ModelDesc& m) {
  std::vector<Op> ops;
  // A prefill and a decode that both sample: every op of one device appears.
  step_ops(m, BatchShape{{{8, 0, true}, {1, 20, true}}}, ParallelLayout{}, Dtype::fp16, Dtype::fp16, 0, ops);
  std::set<OpKind> kinds;
  for (const Op& op : ops) kinds.insert(op.kind);
  return kinds;
}

std::set<OpKind> program_kinds(bool moe, bool qk_norm) {
  std::set<OpKind> kinds;
  for (ForwardCall c : forward_program(moe, qk_norm))
    for (OpKind k : call_info(c).priced_as()) kinds.insert(k);
  return kinds;
}

}  // namespace

TEST_CASE("the forward program runs exactly the op kinds step_ops prices, dense and MoE") {
  for (const std::string name : {"tiny", "llama-3.1-8b", "mixtral-8x7b", "qwen3-8b", "qwen3-30b-a3b"}) {
    CAPTURE(name);
    const ModelDesc m = resolve_model(name);
    CHECK(priced_kinds(m) == program_kinds(m.is_moe(), m.has_qk_norm()));
    CHECK(priced_kinds(m).count(OpKind::qk_norm) == (m.has_qk_norm() ? 1u : 0u));
    for (OpKind k : priced_kinds(m)) {
      CAPTURE(op_name(k));
      const int c = call_of(k, m.is_moe());
      REQUIRE(c >= 0);
      // The call runs the kind, and its time bucket is the kind's.
      const ForwardCallInfo& info = call_info(static_cast<ForwardCall>(c));
      bool found = false;
      for (OpKind p : info.priced_as()) found = found || p == k;
      CHECK(found);
      CHECK(timed_op_of(k, m.is_moe()) == static_cast<int>(info.timed));
    }
  }
}

TEST_CASE("the program is a prologue, a layer and an epilogue, each call once, sampling calls last") {
  for (const auto& [moe, qk_norm] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    CAPTURE(moe, qk_norm);
    const auto program = forward_program(moe, qk_norm);
    std::set<ForwardCall> seen;
    int part = 0;
    for (ForwardCall c : program) {
      const ForwardCallInfo& info = call_info(c);
      CHECK(info.call == c);
      CHECK(seen.insert(c).second);
      CHECK(static_cast<int>(info.part) >= part);  // parts in order
      part = static_cast<int>(info.part);
      CHECK(kTimedOpNames[static_cast<int>(info.timed)].size() > 0);
    }
    CHECK(call_info(program.front()).part == CallPart::prologue);
    CHECK(call_info(program.back()).rows == CallRows::sampling);
    CHECK(seen.count(ForwardCall::moe_experts) == (moe ? 1u : 0u));
    CHECK(seen.count(ForwardCall::gate_up_proj) == (moe ? 0u : 1u));
    // The q/k norm runs between the QKV projection and the rotary embedding.
    const auto at = [&](ForwardCall c) { return std::find(program.begin(), program.end(), c) - program.begin(); };
    CHECK(seen.count(ForwardCall::qk_norm) == (qk_norm ? 1u : 0u));
    if (qk_norm) CHECK(at(ForwardCall::qk_norm) == at(ForwardCall::qkv_proj) + 1);
    CHECK(at(ForwardCall::rotary) == at(ForwardCall::qkv_proj) + (qk_norm ? 2 : 1));
  }
  CHECK(timed_op_of(OpKind::qk_norm, false) == static_cast<int>(TimedOp::qk_norm));
  // Both norms of a layer share the rmsnorm bucket; collectives have no call.
  CHECK(call_info(ForwardCall::input_norm).timed == TimedOp::rmsnorm);
  CHECK(call_info(ForwardCall::post_norm).timed == TimedOp::rmsnorm);
  CHECK(call_of(OpKind::rmsnorm, false) == static_cast<int>(ForwardCall::input_norm));
  CHECK(call_of(OpKind::tp_allreduce, false) == -1);
  CHECK(call_of(OpKind::pp_send, true) == -1);
  CHECK(timed_op_of(OpKind::silu_mul, true) == static_cast<int>(TimedOp::moe_experts));
  CHECK(timed_op_of(OpKind::gate_up_proj, true) == -1);
}

TEST_CASE("step_ops prices the program's calls in the program's order, collectives after the calls they follow") {
  for (const std::string name : {"tiny", "llama-3.1-8b", "mixtral-8x7b", "qwen3-32b", "qwen3-235b-a22b"}) {
    CAPTURE(name);
    const ModelDesc m = resolve_model(name);
    const auto program = forward_program(m.is_moe(), m.has_qk_norm());
    std::vector<Op> ops;
    step_ops(m, BatchShape{{{8, 0, true}, {1, 20, true}}}, ParallelLayout{2, 1}, Dtype::bf16, Dtype::bf16, 0, ops);
    int last_position = -1;
    std::int64_t allreduces = 0;
    for (const Op& op : ops) {
      CAPTURE(op_name(op.kind));
      if (op.kind == OpKind::tp_allreduce) {
        allreduces = op.repeat;
        continue;
      }
      if (op.kind == OpKind::tp_gather) continue;
      const int call = call_of(op.kind, m.is_moe());
      REQUIRE(call >= 0);
      const auto at = std::find(program.begin(), program.end(), static_cast<ForwardCall>(call));
      const int position = static_cast<int>(at - program.begin());
      CHECK(position >= last_position);
      last_position = position;
    }
    // One all-reduce per instance of each call the program marks: the
    // embedding once, two (attention out, MLP out) per layer.
    CHECK(allreduces == 2 * m.num_hidden_layers + 1);
    // Both norms of a layer are one op of 2 x layers instances.
    for (const Op& op : ops)
      if (op.kind == OpKind::rmsnorm) CHECK(op.repeat == 2 * m.num_hidden_layers);
  }
}
