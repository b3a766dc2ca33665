// Results do not depend on the thread count; bad arguments are clear errors.
#include <catch2/catch.hpp>

#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/op_checks.hpp"
#include "tests/backend/backend_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// A small layer-like pipeline through every multi-threaded op; returns the
// bytes of every output.
std::vector<float> pipeline(Backend& be) {
  const std::int64_t t = 21, hidden = 64, heads = 4, kv_heads = 2, hd = 16, inter = 48, vocab = 300;
  const std::int32_t bs = 4;
  std::vector<float> all;
  auto append = [&](const TensorView& v) {
    const auto h = to_host(be, v);
    all.insert(all.end(), h.begin(), h.end());
  };
  auto table = to_device(be, to_bf16(random_floats(vocab * hidden, 80)), ElemType::bf16, vocab, hidden);
  std::vector<TokenId> ids(t);
  for (std::int64_t i = 0; i < t; ++i) ids[i] = static_cast<TokenId>((i * 37) % vocab);
  auto x = zeros(be, t, hidden), normed = zeros(be, t, hidden);
  be.embedding(ids, table.view, x.view);
  auto norm_w = to_device(be, random_floats(hidden, 81), 1, hidden);
  be.rmsnorm(x.view, norm_w.view, 1e-5f, normed.view);
  const std::int64_t qkv_cols = (heads + 2 * kv_heads) * hd;
  auto wqkv = to_device(be, to_bf16(random_floats(qkv_cols * hidden, 82, 0.2f)), ElemType::bf16, qkv_cols, hidden);
  auto qkv = zeros(be, t, qkv_cols);
  be.gemm(normed.view, wqkv.view, qkv.view);
  const TensorView q = qkv.view.slice_cols(0, heads * hd), k = qkv.view.slice_cols(heads * hd, kv_heads * hd),
                   v = qkv.view.slice_cols((heads + kv_heads) * hd, kv_heads * hd);
  std::vector<std::int32_t> pos(t);
  for (std::int64_t i = 0; i < t; ++i) pos[i] = static_cast<std::int32_t>(i < 16 ? i : i - 16 + 40);
  be.rotary(q, k, pos, {.head_dim = hd});
  auto kc = zeros(be, 32 * bs, kv_heads * hd), vc = zeros(be, 32 * bs, kv_heads * hd);
  const KvCacheView cache{kc.view.data, vc.view.data, ElemType::f32, 32, bs, kv_heads, hd};
  // Sequence A: 16 prefill tokens in blocks 3,1,7,0; sequence B: 5 tokens at positions 40..44 in blocks 10..21.
  std::vector<BlockId> ta{3, 1, 7, 0}, tb;
  for (BlockId b = 10; b < 22; ++b) tb.push_back(b);
  std::vector<std::int64_t> slots;
  for (std::int64_t i = 0; i < t; ++i) {
    const auto& tab = i < 16 ? ta : tb;
    slots.push_back(static_cast<std::int64_t>(tab[pos[i] / bs]) * bs + pos[i] % bs);
  }
  be.kv_write(k, v, cache, slots);
  const std::vector<SeqAttention> seqs{{0, 16, 16, ta}, {16, 5, 45, tb}};
  auto attn = zeros(be, t, heads * hd);
  be.paged_attention(q, cache, seqs, {.num_heads = 4, .num_kv_heads = 2, .head_dim = 16}, attn.view);
  append(attn.view);
  auto wgu = to_device(be, random_floats(2 * inter * hidden, 83, 0.2f), 2 * inter, hidden);
  auto gu = zeros(be, t, 2 * inter), h = zeros(be, t, inter);
  be.gemm(normed.view, wgu.view, gu.view);
  be.silu_and_mul(gu.view, h.view);
  append(h.view);
  auto logits = zeros(be, t, vocab);
  be.gemm(normed.view, table.view, logits.view);  // tied embeddings, bf16
  append(logits.view);
  std::vector<SamplingParams> params(t, SamplingParams{.temperature = 0.9f, .top_k = 50, .top_p = 0.9f, .seed = 4});
  for (std::int64_t i = 0; i < t; ++i) params[i].request = i;
  std::vector<TokenId> tokens(t);
  be.sample(logits.view, params, tokens);
  for (TokenId tok : tokens) all.push_back(static_cast<float>(tok));
  return all;
}

}  // namespace

TEST_CASE("every op gives identical bits with 1 and 2 threads") {
  auto one = make_cpu_backend(1);
  auto two = make_cpu_backend(2);
  const auto a = pipeline(*one);
  const auto b = pipeline(*two);
  REQUIRE(a.size() == b.size());
  std::size_t first_diff = 0;
  while (first_diff < a.size() && a[first_diff] == b[first_diff]) ++first_diff;
  CAPTURE(first_diff);  // attention output, then FFN hidden, then logits, then tokens
  CHECK(first_diff == a.size());
  CHECK(pipeline(*one) == a);  // and run to run
}

TEST_CASE("bad arguments throw twin::Error naming the op and shapes") {
  auto be = make_cpu_backend(2);
  auto a = zeros(*be, 2, 8), w = zeros(*be, 3, 7), c = zeros(*be, 2, 3);
  try {
    be->gemm(a.view, w.view, c.view);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("gemm") != std::string::npos);
    CHECK(msg.find("[2, 8]") != std::string::npos);
    CHECK(msg.find("[3, 7]") != std::string::npos);
  }
  auto ids = zeros(*be, 2, 2, ElemType::i32);
  CHECK_THROWS_AS(be->gemm(a.view, ids.view, c.view), Error);

  auto kc = zeros(*be, 8, 4), vc = zeros(*be, 8, 4);
  const KvCacheView cache{kc.view.data, vc.view.data, ElemType::f32, 2, 4, 1, 4};
  auto q = zeros(*be, 1, 8), out = zeros(*be, 1, 8);
  const std::vector<BlockId> short_table{0};
  const std::vector<SeqAttention> seqs{{0, 1, 5, short_table}};  // 5 tokens need 2 blocks
  CHECK_THROWS_WITH(be->paged_attention(q.view, cache, seqs, {.num_heads = 2, .num_kv_heads = 1, .head_dim = 4}, out.view),
                    Catch::Contains("block table"));
  const std::vector<BlockId> bad_table{0, 5};
  const std::vector<SeqAttention> seqs2{{0, 1, 5, bad_table}};
  CHECK_THROWS_WITH(be->paged_attention(q.view, cache, seqs2, {.num_heads = 2, .num_kv_heads = 1, .head_dim = 4}, out.view),
                    Catch::Contains("outside"));
  CHECK_THROWS_WITH(be->paged_attention(q.view, cache, seqs, {.num_heads = 3, .num_kv_heads = 2, .head_dim = 4}, out.view),
                    Catch::Contains("multiple"));
  const std::vector<std::int64_t> slots{8};
  auto k1 = zeros(*be, 1, 4);
  CHECK_THROWS_WITH(be->kv_write(k1.view, k1.view, cache, slots), Catch::Contains("slot 8"));
  CHECK_THROWS_AS(a.buffer.view(ElemType::f32, 5, 8), Error);
}

TEST_CASE("views_overlap tells strided slices of one buffer apart") {
  std::vector<float> buf(10 * 12);
  const TensorView whole = make_view(buf.data(), ElemType::f32, 10, 12);
  // q | k | v column slices of a fused qkv: disjoint, though their byte ranges interleave.
  const TensorView q = whole.slice_cols(0, 8), k = whole.slice_cols(8, 2), v = whole.slice_cols(10, 2);
  CHECK_FALSE(views_overlap(q, k));
  CHECK_FALSE(views_overlap(k, v));
  CHECK_FALSE(views_overlap(v, q));
  CHECK(views_overlap(whole, k));
  CHECK(views_overlap(q, whole.slice_cols(7, 2)));
  // Row slices: adjacent ones are disjoint, overlapping ones are not.
  CHECK_FALSE(views_overlap(whole.slice_rows(0, 5), whole.slice_rows(5, 5)));
  CHECK(views_overlap(whole.slice_rows(0, 5), whole.slice_rows(4, 2)));
  // A view 4 wide from column 10 of a 12-wide buffer: each of its rows runs
  // on into the next buffer row, (2,10) (2,11) (3,0) (3,1), then (3,10) ...
  const TensorView tail{whole.at(2, 10), ElemType::f32, 2, 4, 12};
  CHECK(views_overlap(tail, whole.slice_cols(0, 1).slice_rows(3, 1)));
  CHECK_FALSE(views_overlap(tail, whole.slice_cols(2, 6)));
  // Different strides over the same bytes count as sharing; separate buffers never do.
  std::vector<float> other(16);
  CHECK(views_overlap(whole, make_view(buf.data() + 5, ElemType::f32, 2, 3)));
  CHECK_FALSE(views_overlap(whole, make_view(other.data(), ElemType::f32, 4, 4)));
  CHECK_FALSE(views_overlap(whole, make_view(buf.data(), ElemType::f32, 0, 4)));
}

TEST_CASE("an output that shares memory with an input it reads is refused") {
  auto be = make_cpu_backend(1);
  auto buf = zeros(*be, 8, 32);
  const TensorView all = buf.view;
  auto w = zeros(*be, 16, 16);
  // gemm writing into its own input: C overlaps A.
  CHECK_THROWS_WITH(be->gemm(all.slice_cols(0, 16), w.view, all.slice_cols(8, 16), {}),
                    Catch::Contains("gemm: C") && Catch::Contains("shares memory with A"));
  // Disjoint column slices of one buffer are fine.
  CHECK_NOTHROW(be->gemm(all.slice_cols(0, 16), w.view, all.slice_cols(16, 16), {}));
  // silu_and_mul into the gate half it reads.
  CHECK_THROWS_WITH(be->silu_and_mul(all, all.slice_cols(0, 16)), Catch::Contains("silu_and_mul: out"));
  // In place is allowed where the op says so (add, rmsnorm), a shifted overlap is not.
  CHECK_NOTHROW(be->add(all, all));
  CHECK_THROWS_WITH(be->add(all.slice_rows(0, 4), all.slice_rows(2, 4)), Catch::Contains("in place"));
  CHECK_THROWS_WITH(be->copy(all.slice_rows(0, 4), all.slice_rows(3, 4)), Catch::Contains("copy: dst"));
}

TEST_CASE("make_backend knows cpu and auto, and unknown names list the known ones") {
  auto be = make_backend("cpu", {.threads = 2});
  CHECK(be->name() == "cpu");
  CHECK(be->device_info().threads == 2);
  CHECK(make_backend("auto")->name() == "cpu");
  CHECK_THROWS_WITH(make_backend("tpu"), Catch::Contains("known: auto, cpu, cuda"));
  CHECK_THROWS_AS(make_backend("tpu"), UsageError);
}
