// The step op list: FLOPs against 2 x params x tokens plus attention, and the
// way TP, PP and MoE reshape it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/model_desc.hpp"
#include "models/model_math.hpp"
#include "models/step_ops.hpp"

using namespace twin;

namespace {

std::vector<Op> ops_for(const ModelDesc& m, const BatchShape& b, ParallelLayout layout = {},
                        int stage = 0, Dtype w = Dtype::fp16, Dtype kv = Dtype::fp16) {
  std::vector<Op> out;
  step_ops(m, b, layout, w, kv, stage, out);
  return out;
}

const Op* find(const std::vector<Op>& ops, OpKind kind) {
  for (const auto& op : ops)
    if (op.kind == kind) return &op;
  return nullptr;
}

double kind_flops(const std::vector<Op>& ops, OpKind kind) {
  double f = 0;
  for (const auto& op : ops)
    if (op.kind == kind) f += op.flops * op.repeat;
  return f;
}

// Independent estimate: every non-embedding weight does 2 flops per token,
// the LM head only for the sampling seqs; plus causal attention scores.
double expected_flops(const ModelDesc& m, double tokens, double sampling, double score_pairs) {
  const double vh = static_cast<double>(m.vocab_size * m.hidden_size);
  const double body = static_cast<double>(active_param_count(m)) - vh * (m.tie_word_embeddings ? 1 : 2);
  const double attn = 4.0 * score_pairs * static_cast<double>(m.head_dim * m.num_attention_heads *
                                                             m.num_hidden_layers);
  return 2.0 * tokens * body + 2.0 * sampling * vh + attn;
}

bool close(double got, double want, double rel) { return std::abs(got - want) <= rel * std::abs(want); }

}  // namespace

TEST_CASE("prefill of 1,024 tokens costs 2 x params x tokens plus causal attention") {
  auto m = resolve_model("llama-2-7b");
  const double t = 1024;
  auto ops = ops_for(m, {{{1024, 0, true}}});
  const double want = expected_flops(m, t, 1, t * (t + 1) / 2);
  CHECK(close(step_totals(ops).flops, want, 0.01));
  // About 14 TFLOP for Llama-2-7B, as the usual 2 * 6.5B * 1024 + attention.
  CHECK(step_totals(ops).flops > 13.5e12);
  CHECK(step_totals(ops).flops < 14.5e12);
  const Op* attn = find(ops, OpKind::attn_prefill);
  REQUIRE(attn);
  CHECK(attn->num_seqs == 1);
  CHECK(attn->tokens == 1024);
  CHECK(attn->repeat == 32);
  CHECK(find(ops, OpKind::attn_decode) == nullptr);
}

TEST_CASE("a decode batch reads the weights once and each sequence's KV") {
  auto m = resolve_model("llama-3.1-8b");
  BatchShape b;
  for (int i = 0; i < 64; ++i) b.seqs.push_back({1, 512, true});
  auto ops = ops_for(m, b, {}, 0, Dtype::bf16, Dtype::bf16);
  const auto tot = step_totals(ops);
  CHECK(close(tot.flops, expected_flops(m, 64, 64, 64 * 513), 0.01));
  const Op* dec = find(ops, OpKind::attn_decode);
  REQUIRE(dec);
  CHECK(dec->num_seqs == 64);
  CHECK(dec->context == 64 * 512);
  CHECK(find(ops, OpKind::attn_prefill) == nullptr);
  // Memory: the weights (less the embedding table, of which only rows are
  // gathered) plus the KV of 64 x 513 tokens, plus small activations.
  const double weights = static_cast<double>(weight_bytes(m, Dtype::bf16) -
                                             m.vocab_size * m.hidden_size * 2);
  const double kv = 64.0 * 513 * static_cast<double>(kv_bytes_per_token(m, Dtype::bf16));
  CHECK(tot.bytes > weights + kv);
  CHECK(tot.bytes < 1.05 * (weights + kv));
}

TEST_CASE("mixed batches split attention into one prefill op and one decode op") {
  auto m = resolve_model("tiny");
  BatchShape b{{{1, 10, true}, {1, 20, true}, {100, 0, false}, {50, 30, true}, {1, 0, true}, {0, 5, true}}};
  auto ops = ops_for(m, b);
  const Op* pre = find(ops, OpKind::attn_prefill);
  const Op* dec = find(ops, OpKind::attn_decode);
  REQUIRE(pre);
  REQUIRE(dec);
  CHECK(pre->num_seqs == 3);  // the 100-token prompt, the chunk, the 1-token prompt
  CHECK(pre->tokens == 151);
  CHECK(pre->context == 30);
  CHECK(dec->num_seqs == 2);
  CHECK(dec->context == 30);
  const Op* lm = find(ops, OpKind::lm_head);
  REQUIRE(lm);
  CHECK(lm->m == 4);  // the zero-token seq is ignored
  const Op* qkv = find(ops, OpKind::qkv_proj);
  REQUIRE(qkv);
  CHECK(qkv->m == 153);
}

TEST_CASE("a sliding window bounds the keys each query sees and the context read") {
  auto m = resolve_model("tiny");
  m.sliding_window = 64;
  // A decode deep past the window costs what a decode at context 63 costs
  // without one: it reads the last 64 keys, its own included.
  auto unwindowed = resolve_model("tiny");
  const auto far_ops = ops_for(m, {{{1, 10000, true}}});
  const Op* far = find(far_ops, OpKind::attn_decode);
  const auto near_ops = ops_for(unwindowed, {{{1, 63, true}}});
  const Op* near = find(near_ops, OpKind::attn_decode);
  REQUIRE(far);
  REQUIRE(near);
  CHECK(far->context == 63);
  CHECK(far->flops == near->flops);
  CHECK(far->bytes == near->bytes);
  // A chunk straddling the window's edge: score pairs counted by brute force.
  for (auto [n, c] : {std::pair<int64_t, int64_t>{100, 0}, {100, 30}, {10, 60}, {5, 500}, {64, 0}, {1, 0}}) {
    INFO("new " << n << " context " << c);
    const auto ops = ops_for(m, {{{n, c, true}}});
    const Op* attn = find(ops, n == 1 && c > 0 ? OpKind::attn_decode : OpKind::attn_prefill);
    REQUIRE(attn);
    double pairs = 0;
    for (int64_t i = 0; i < n; ++i) pairs += static_cast<double>(std::min<int64_t>(c + i + 1, 64));
    CHECK(attn->flops == Approx(4.0 * pairs * static_cast<double>(m.head_dim * m.num_attention_heads)));
    CHECK(attn->context == std::min<int64_t>(c, 63));
  }
}

TEST_CASE("steps without sampling seqs have no LM head - empty batches have no ops") {
  auto m = resolve_model("tiny");
  auto ops = ops_for(m, {{{64, 0, false}}});
  CHECK(find(ops, OpKind::lm_head) == nullptr);
  CHECK(find(ops, OpKind::sample) == nullptr);
  CHECK(find(ops, OpKind::final_norm) != nullptr);
  CHECK(ops_for(m, {}).empty());
}

TEST_CASE("TP=2 halves per-GPU GEMM flops and weight bytes and adds all-reduces") {
  auto m = resolve_model("llama-2-13b");
  BatchShape b{{{256, 0, true}, {1, 900, true}}};
  auto one = ops_for(m, b, {1, 1});
  auto two = ops_for(m, b, {2, 1});
  CHECK(find(one, OpKind::tp_allreduce) == nullptr);
  for (OpKind k : {OpKind::qkv_proj, OpKind::o_proj, OpKind::gate_up_proj, OpKind::down_proj,
                   OpKind::lm_head, OpKind::attn_prefill, OpKind::attn_decode}) {
    INFO(std::string(op_name(k)));
    CHECK(close(kind_flops(two, k), kind_flops(one, k) / 2, 1e-9));
  }
  const Op* qkv1 = find(one, OpKind::qkv_proj);
  const Op* qkv2 = find(two, OpKind::qkv_proj);
  CHECK(qkv2->n * 2 == qkv1->n);
  CHECK(qkv2->k == qkv1->k);
  const double w1 = static_cast<double>(qkv1->n * qkv1->k);
  const double w2 = static_cast<double>(qkv2->n * qkv2->k);
  CHECK(w2 * 2 == w1);
  const Op* ar = find(two, OpKind::tp_allreduce);
  REQUIRE(ar);
  CHECK(ar->repeat == 2 * 40 + 1);  // two per layer and one after the embedding
  CHECK(ar->group == 2);
  CHECK(ar->comm_bytes == 257.0 * 5120 * 2);
  CHECK(find(two, OpKind::tp_gather) != nullptr);
}

TEST_CASE("TP beyond the KV heads replicates them") {
  auto m = resolve_model("llama-3.1-70b");  // 8 KV heads
  BatchShape b{{{1, 1000, true}}};
  auto tp8 = ops_for(m, b, {8, 1});
  auto tp16 = ops_for(m, b, {16, 1});
  // Each GPU still holds one whole KV head, so KV reads per GPU do not halve.
  const Op* d8 = find(tp8, OpKind::attn_decode);
  const Op* d16 = find(tp16, OpKind::attn_decode);
  CHECK(d8->n == 8);
  CHECK(d16->n == 4);
  CHECK(d16->bytes > 0.9 * d8->bytes);
}

TEST_CASE("PP stages sum to the whole step") {
  auto m = resolve_model("llama-2-7b");
  BatchShape b{{{300, 100, true}, {1, 2000, true}, {1, 5, true}}};
  const auto whole = step_totals(ops_for(m, b));
  for (int pp : {2, 3, 4}) {
    StepTotals sum;
    int sends = 0;
    for (int s = 0; s < pp; ++s) {
      auto ops = ops_for(m, b, {1, pp}, s);
      auto t = step_totals(ops);
      sum.flops += t.flops;
      sum.bytes += t.bytes;
      sends += find(ops, OpKind::pp_send) ? 1 : 0;
      CHECK((find(ops, OpKind::embed) != nullptr) == (s == 0));
      CHECK((find(ops, OpKind::lm_head) != nullptr) == (s == pp - 1));
    }
    INFO("pp=" << pp);
    CHECK(close(sum.flops, whole.flops, 1e-12));
    CHECK(close(sum.bytes, whole.bytes, 1e-12));
    CHECK(sends == pp - 1);
  }
}

TEST_CASE("MoE steps read only the experts they touch") {
  auto m = resolve_model("mixtral-8x7b");
  auto one = ops_for(m, {{{1, 100, true}}});
  const Op* up = find(one, OpKind::moe_gate_up_proj);
  REQUIRE(up);
  CHECK(up->num_seqs == 2);  // top-2 of 8 for a single token
  CHECK(up->m == 2);
  CHECK(find(one, OpKind::moe_router) != nullptr);
  CHECK(find(one, OpKind::gate_up_proj) == nullptr);
  auto many = ops_for(m, {{{1024, 0, true}}});
  CHECK(find(many, OpKind::moe_gate_up_proj)->num_seqs == 8);
  // FLOPs follow the active parameters, not the total.
  CHECK(close(step_totals(many).flops, expected_flops(m, 1024, 1, 1024.0 * 1025 / 2), 0.01));
  // A one-token decode reads about the active weights.
  const double active_body =
      static_cast<double>(active_param_count(m) - m.vocab_size * m.hidden_size) * 2;
  CHECK(close(step_totals(one).bytes, active_body, 0.05));
}

TEST_CASE("op names are unique snake_case and parse back") {
  std::set<std::string> seen;
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto kind = static_cast<OpKind>(i);
    std::string name(op_name(kind));
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
    CHECK(seen.insert(name).second);
    CHECK(parse_op_kind(name) == kind);
  }
  CHECK_THROWS_WITH(parse_op_kind("matmul"), Catch::Contains("qkv_proj"));
}

TEST_CASE("step_ops reuses the caller's vector without growing it") {
  auto m = resolve_model("llama-3.1-70b");
  BatchShape b;
  for (int i = 0; i < 256; ++i) b.seqs.push_back({i % 8 == 0 ? 64 : 1, 300 + i, true});
  std::vector<Op> out;
  out.reserve(32);
  const auto* data = out.data();
  for (int tp : {1, 8})
    for (int stage = 0; stage < 2; ++stage) {
      out.clear();
      step_ops(m, b, {tp, 2}, Dtype::bf16, Dtype::fp8, stage, out);
      CHECK(out.size() <= 24);
      CHECK(out.data() == data);
    }
}

TEST_CASE("attention_ops are step_ops' attention ops, and the other ops depend only on tokens and sampling") {
  // The roofline caches a step's non-attention prices by (tokens, sampling,
  // stage) and prices attention_ops every step (sim/roofline_cost_model).
  auto window = resolve_model("llama-3.1-8b");
  window.sliding_window = 48;
  struct Case {
    ModelDesc m;
    ParallelLayout layout;
  };
  const std::vector<Case> cases = {
      {resolve_model("llama-3.1-8b"), {1, 1}},
      {window, {2, 1}},
      {resolve_model("llama-3.1-70b"), {2, 2}},
      {resolve_model("mixtral-8x7b"), {2, 1, 2}},
      {resolve_model("deepseek-v3"), {8, 2, 2, 0.5}},
      {resolve_model("deepseek-v3"), {8, 1}},
      {resolve_model("gpt-oss-20b"), {2, 2}},
  };
  const auto same = [](const Op& a, const Op& b) {
    return a.kind == b.kind && a.m == b.m && a.n == b.n && a.k == b.k && a.num_seqs == b.num_seqs &&
           a.tokens == b.tokens && a.context == b.context && a.flops == b.flops && a.bytes == b.bytes &&
           a.repeat == b.repeat && a.comm_bytes == b.comm_bytes && a.group == b.group;
  };
  const auto is_attention = [](const Op& op) { return op.kind == OpKind::attn_prefill || op.kind == OpKind::attn_decode; };
  std::uint64_t state = 7;
  const auto next = [&state](int n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % static_cast<std::uint64_t>(n));
  };
  for (const Case& c : cases) {
    for (int stage = 0; stage < c.layout.pp; ++stage) {
      // The non-attention ops of the first batch seen with each (tokens, sampling).
      std::map<std::pair<int64_t, int64_t>, std::vector<Op>> rest_by_key;
      for (int trial = 0; trial < 300; ++trial) {
        BatchShape b;
        const int seqs = 1 + next(5);
        for (int i = 0; i < seqs; ++i) {
          const int64_t n = next(3) == 0 ? 1 + next(4) : 1;
          b.seqs.push_back({n, next(4) == 0 ? 0 : next(200), next(3) != 0, next(5) == 0 ? next(3) : 0});
        }
        const StepSums sums = step_sums(c.m, b);
        std::vector<Op> all, attention, rest, from_sums;
        step_ops(c.m, b, c.layout, Dtype::bf16, Dtype::fp16, stage, all);
        step_ops(c.m, sums, c.layout, Dtype::bf16, Dtype::fp16, stage, from_sums);
        attention_ops(c.m, sums, c.layout, Dtype::bf16, Dtype::fp16, stage, attention);
        REQUIRE(from_sums.size() == all.size());
        std::size_t a = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
          CHECK(same(all[i], from_sums[i]));
          if (!is_attention(all[i])) {
            rest.push_back(all[i]);
            continue;
          }
          REQUIRE(a < attention.size());
          CHECK(same(all[i], attention[a++]));
        }
        CHECK(a == attention.size());
        auto [it, fresh] = rest_by_key.try_emplace({sums.tokens(), sums.sampling}, rest);
        if (!fresh) {
          REQUIRE(it->second.size() == rest.size());
          for (std::size_t i = 0; i < rest.size(); ++i) CHECK(same(it->second[i], rest[i]));
        }
      }
      CHECK(rest_by_key.size() < 200);  // the keys repeated
    }
  }
}
