// CUDA backend: GEMMs on cuBLAS, paged KV and attention, block copies on
// their own stream, MoE and sampling.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/backend/cuda/cuda_attention_decode.hpp"
#include "engine/backend/cuda/cuda_backend_impl.hpp"
#include "engine/backend/cuda/cuda_kernels.hpp"
#include "engine/backend/cuda/decode_attention.hpp"
#include "engine/backend/op_checks.hpp"
#include "engine/backend/paged_index.hpp"
#include "engine/backend/sampling.hpp"

namespace twin {

namespace {

int code(ElemType t) { return static_cast<int>(t); }
static_assert(static_cast<int>(ElemType::f8e4m3) == cuda::kF8E4M3 && static_cast<int>(ElemType::bf16) == cuda::kBf16 &&
              static_cast<int>(ElemType::f16) == cuda::kF16 && static_cast<int>(ElemType::f32) == cuda::kF32);

void check_cuda_kv_dtype(const char* op, const KvCacheView& cache) {
  if (cache.dtype != ElemType::f32 && cache.dtype != ElemType::bf16 && cache.dtype != ElemType::f16 &&
      cache.dtype != ElemType::f8e4m3) {
    throw Error(std::string(op) + ": the cuda backend keeps the KV cache in f32, bf16, f16 or fp8_e4m3, got " +
                std::string(elem_type_name(cache.dtype)));
  }
}

// Split-K partials of one attention launch at most; more rows take more launches.
constexpr std::size_t kAttnWorkspaceBytes = std::size_t{256} << 20;
// gridDim.y and gridDim.z are at most 65535 on every CUDA device.
constexpr std::int32_t kMaxGridZ = 65535;

int blas_int(std::int64_t v, const char* what) {
  if (v > INT_MAX) throw Error(std::string("gemm: ") + what + " " + std::to_string(v) + " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void CudaBackend::gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) {
  check_gemm(a, w, c, options);
  if (replaying()) return;
  gemm_unchecked(a, w, c, options);
}

// Row-major C[m,n] = A[m,k] · W[n,k]^T is, read column-major, C^T = W^T-op
// applied: cuBLAS computes C' (n x m, ldc) = op(W') (n x k) · A' (k x m) with
// W' = W read column-major (k x n, ldw) transposed.
void CudaBackend::gemm_unchecked(const TensorView& a, const TensorView& w, const TensorView& c,
                                 const GemmOptions& options) {
  const std::int64_t m = a.rows, n = w.rows, k = a.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!options.accumulate) fill(c, 0.0f);
  } else {
    const float alpha = 1.0f, beta = options.accumulate ? 1.0f : 0.0f;
    const int bm = blas_int(n, "n"), bn = blas_int(m, "m"), bk = blas_int(k, "k");
    const int ldw = blas_int(w.row_stride, "W row stride"), ldc = blas_int(c.row_stride, "C row stride");
    if (w.dtype == ElemType::f32) {
      cublas_check(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, bm, bn, bk, &alpha, static_cast<const float*>(w.data),
                               ldw, static_cast<const float*>(a.data), blas_int(a.row_stride, "A row stride"), &beta,
                               static_cast<float*>(c.data), ldc),
                   "gemm (f32 W, cublasSgemm)");
    } else if (w.dtype == ElemType::bf16) {
      // The interface keeps activations f32: round A to bf16 (as the tensor
      // cores consume it), accumulate in fp32, write f32.
      void* abf = gemm_a_.ensure(static_cast<std::size_t>(m * k) * 2, stream_, "gemm");
      cuda::launch_convert_2d(a.data, cuda::kF32, a.row_stride, abf, cuda::kBf16, k, m, k, stream_);
      after_launch("gemm (A to bf16)");
      cublas_check(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, bm, bn, bk, &alpha, w.data, CUDA_R_16BF, ldw, abf,
                                CUDA_R_16BF, bk, &beta, c.data, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "gemm (bf16 W, cublasGemmEx)");
    } else if (w.dtype == ElemType::f8e4m3) {
      gemm_fp8(a, w, c, options);  // C (+)= A · (W x scales)^T; the bias below
    } else {
      throw Error("gemm: W dtype " + std::string(elem_type_name(w.dtype)) + " is not supported by the cuda backend");
    }
  }
  if (options.bias != nullptr) {
    cuda::launch_add_bias(static_cast<float*>(c.data), c.row_stride, m, n, options.bias->data,
                          code(options.bias->dtype), stream_);
    after_launch("gemm (bias)");
  }
}

void CudaBackend::kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                           std::span<const std::int64_t> slots) {
  check_kv_write(k, v, cache, slots);
  check_cuda_kv_dtype("kv_write", cache);
  const std::int64_t width = cache.slot_elems();
  if (slots.empty()) return;
  stage_reserve(staged_size(slots.size_bytes()));
  const std::int64_t* d_slots = stage(slots);
  if (replaying()) return;
  cuda::launch_kv_write(static_cast<const float*>(k.data), k.row_stride, static_cast<const float*>(v.data),
                        v.row_stride, d_slots, static_cast<std::int64_t>(slots.size()), cache.k, cache.v,
                        code(cache.dtype), width, 1.0f / cache.k_scale, 1.0f / cache.v_scale, stream_);
  after_launch("kv_write");
}

// Over 80 lines for now: the launcher stages the rows, tables and
// partition plan for each kernel it picks (decode, prefill, mixed), and its
// tests run only on a GPU; it is split when a GPU session can run them
// before and after (issue 42).
void CudaBackend::paged_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                                  const AttentionShape& shape, const TensorView& out) {
  check_attention(q, cache, seqs, shape, out);
  check_cuda_kv_dtype("paged_attention", cache);
  // Resolve the work on the host. Prefill chunks go in tiles of consecutive
  // rows that share each K/V read; decodes and short chunks go as single
  // rows to the split-K kernel, which spreads a long context over blocks.
  // The block tables are concatenated into one staged array.
  const bool tiled = cuda::attention_tiles_supported(shape.head_dim);
  // Where it handles the shape (and K/V are 16-byte aligned for its vector
  // loads), prefill chunks take the tensor-core kernel instead, in tiles of
  // packed (query, group head) rows; TWIN_CUDA_ATTENTION=reference keeps the
  // f32 tiled kernel.
  const bool mma = attention_mma_ && cuda::attention_mma_supported(shape.head_dim, code(cache.dtype)) &&
                   reinterpret_cast<std::uintptr_t>(cache.k) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(cache.v) % 16 == 0;
  const std::int32_t group = shape.num_heads / cache.kv_heads;
  // In a step graph pass, the key's layout: decodes only, each sequence's
  // block table at a fixed stride (the key's context, zero-padded), so the
  // staged sizes and the launches' shapes hold for any step of the key.
  const bool graph_layout = in_graph_pass_;
  const std::int32_t table_stride = graph_layout ? paged::blocks_for(graph_key_.max_context, cache.block_size) : 0;
  std::vector<cuda::AttnMmaTile> mma_tiles;
  std::vector<cuda::AttnRow> rows;
  std::vector<cuda::AttnTile> tiles;
  std::vector<std::int32_t> tables;
  for (const SeqAttention& s : seqs) {
    if (s.num_query == 0) continue;
    const auto offset = static_cast<std::int32_t>(tables.size());
    const std::int32_t blocks = paged::blocks_for(s.context_len, cache.block_size);
    if (graph_layout && (s.num_query != 1 || blocks > table_stride)) {
      throw Error("paged_attention: a step graph takes one query a sequence within " +
                  std::to_string(graph_key_.max_context) + " keys; got " + std::to_string(s.num_query) +
                  " queries over " + std::to_string(s.context_len) + " keys");
    }
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.begin() + blocks);
    if (graph_layout) tables.resize(static_cast<std::size_t>(offset) + static_cast<std::size_t>(table_stride), 0);
    if (mma && s.num_query >= cuda::kAttnTileMinRows) {
      const std::int32_t pos = paged::query_position(s.context_len, s.num_query, 0);
      for (std::int32_t t = 0; t < paged::packed_tiles(s.num_query, group, cuda::kAttnMmaRows); ++t) {
        mma_tiles.push_back({s.query_start, pos, s.num_query, t * cuda::kAttnMmaRows, offset});
      }
      continue;
    }
    if (tiled && s.num_query >= cuda::kAttnTileMinRows) {
      for (std::int32_t i = 0; i < s.num_query; i += cuda::kAttnTileRows) {
        const std::int32_t pos = paged::query_position(s.context_len, s.num_query, i);
        tiles.push_back({s.query_start + i, pos, std::min(cuda::kAttnTileRows, s.num_query - i), offset});
      }
      continue;
    }
    for (std::int32_t i = 0; i < s.num_query; ++i) {
      const std::int32_t pos = paged::query_position(s.context_len, s.num_query, i);
      const std::int32_t first = paged::first_key(pos, shape.sliding_window);
      rows.push_back({s.query_start + i, pos, first, offset});
    }
  }
  if (rows.empty() && tiles.empty() && mma_tiles.empty()) return;
  if (rows.size() > static_cast<std::size_t>(INT_MAX) || tiles.size() > static_cast<std::size_t>(INT_MAX) ||
      mma_tiles.size() > static_cast<std::size_t>(INT_MAX)) {
    throw Error("paged_attention: too many query rows");
  }

  cuda::AttnParams p{};
  p.q = static_cast<const float*>(q.data);
  p.q_stride = q.row_stride;
  p.out = static_cast<float*>(out.data);
  p.out_stride = out.row_stride;
  p.k_cache = cache.k;
  p.v_cache = cache.v;
  p.cache_dtype = code(cache.dtype);
  p.block_size = cache.block_size;
  p.kv_heads = cache.kv_heads;
  p.head_dim = shape.head_dim;
  p.num_heads = shape.num_heads;
  p.scale = shape.scale > 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  p.k_scale = cache.k_scale;
  p.v_scale = cache.v_scale;
  // Rows take the GQA decode kernel (one K/V read per KV head, partitions
  // sized to fill the SMs) where it handles the shape, else the per-head
  // fallback with its fixed partitions.
  const bool gqa_decode = cuda::attention_decode_supported(shape.head_dim, cache.k, cache.v);
  if (gqa_decode && !rows.empty()) {
    std::int32_t max_keys = graph_layout ? graph_key_.max_context : 0;
    for (const cuda::AttnRow& r : rows) max_keys = std::max(max_keys, r.position - r.first_key + 1);
    const std::int64_t units = static_cast<std::int64_t>(rows.size()) *
                               cuda::attention_decode_units_per_row(shape.num_heads, cache.kv_heads);
    p.partition_size = decode::partition_size(max_keys, units, sm_count_);
  } else {
    p.partition_size = cuda::kAttnPartitionSize;
  }
  // Rows go in launches whose split-K partials fit a bounded workspace
  // (rows x their widest partition count, per head), so a long prefill does
  // not need rows x context memory.
  const std::size_t slot_bytes = static_cast<std::size_t>(shape.num_heads) * (shape.head_dim + 2) * sizeof(float);
  const std::size_t limit_slots = std::max<std::size_t>(1, kAttnWorkspaceBytes / slot_bytes);
  struct Launch {
    std::size_t first, count;
    std::int32_t parts;
  };
  std::vector<Launch> launches;
  std::size_t need_slots = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    // A graph's launches are those of rows at the key's context: the
    // kernels skip a row's partitions past its own keys.
    const std::int32_t keys = graph_layout ? graph_key_.max_context : rows[i].position - rows[i].first_key + 1;
    const std::int32_t parts = paged::num_partitions(keys, p.partition_size);
    if (parts > kMaxGridZ) {  // the partitions are the grid's z dimension
      throw Error("paged_attention: a query over " + std::to_string(keys) +
                  " keys needs " + std::to_string(parts) + " partitions of " +
                  std::to_string(p.partition_size) + ", more than CUDA's grid allows (" +
                  std::to_string(kMaxGridZ) + ")");
    }
    if (!launches.empty()) {
      Launch& last = launches.back();
      const std::int32_t widest = std::max(last.parts, parts);
      if ((last.count + 1) * static_cast<std::size_t>(widest) <= limit_slots) {
        last.count += 1;
        last.parts = widest;
        continue;
      }
    }
    launches.push_back({i, 1, parts});
  }
  for (const Launch& l : launches) {
    if (l.parts > 1) need_slots = std::max(need_slots, l.count * static_cast<std::size_t>(l.parts));
  }
  if (need_slots > 0) {
    const std::size_t acc_bytes = need_slots * static_cast<std::size_t>(shape.num_heads) * shape.head_dim * sizeof(float);
    char* ws = static_cast<char*>(attention_.ensure(slot_bytes * need_slots, stream_, "paged_attention"));
    p.part_acc = reinterpret_cast<float*>(ws);
    p.part_ml = reinterpret_cast<float*>(ws + acc_bytes);
  }
  // Tensor-core tiles with the most keys first (the diagonal's end of long
  // chunks), so the short ones fill the last wave.
  auto key_count = [&](const cuda::AttnMmaTile& t) {
    const std::int32_t total = t.num_query * group;
    const std::int32_t last = std::min(t.packed_begin + cuda::kAttnMmaRows, total) - 1;
    const std::int32_t lo = paged::packed_position(t.position, t.packed_begin, total, group);
    const paged::KeyRange k = paged::tile_keys(lo, paged::packed_position(t.position, last, total, group) - lo + 1,
                                               shape.sliding_window);
    return k.end - k.begin;
  };
  std::stable_sort(mma_tiles.begin(), mma_tiles.end(),
                   [&](const cuda::AttnMmaTile& a, const cuda::AttnMmaTile& b) { return key_count(a) > key_count(b); });
  stage_reserve(staged_size(rows.size() * sizeof(cuda::AttnRow)) + staged_size(tiles.size() * sizeof(cuda::AttnTile)) +
                staged_size(mma_tiles.size() * sizeof(cuda::AttnMmaTile)) +
                staged_size(tables.size() * sizeof(std::int32_t)));
  const cuda::AttnRow* d_rows = stage(std::span<const cuda::AttnRow>(rows));
  const cuda::AttnTile* d_tiles = stage(std::span<const cuda::AttnTile>(tiles));
  const cuda::AttnMmaTile* d_mma_tiles = stage(std::span<const cuda::AttnMmaTile>(mma_tiles));
  p.tables = stage(std::span<const std::int32_t>(tables));
  if (replaying()) return;
  if (!mma_tiles.empty()) {
    cuda::launch_paged_attention_mma(p, d_mma_tiles, static_cast<int>(mma_tiles.size()), shape.sliding_window,
                                     stream_);
    after_launch("paged_attention");
  }
  if (!tiles.empty()) {
    cuda::launch_paged_attention_tiles(p, d_tiles, static_cast<int>(tiles.size()), shape.sliding_window, stream_);
    after_launch("paged_attention");
  }
  for (const Launch& l : launches) {
    p.rows = d_rows + l.first;
    p.num_rows = static_cast<int>(l.count);
    p.max_partitions = l.parts;
    if (gqa_decode) {
      cuda::launch_paged_attention_decode(p, stream_);
    } else {
      cuda::launch_paged_attention(p, stream_);
    }
    after_launch("paged_attention");
  }
}

void CudaBackend::copy_blocks(const KvCacheView& src, const KvCacheView& dst, std::span<const BlockCopy> pairs) {
  refuse_in_graph("copy_blocks");
  check_copy_blocks(src, dst, pairs);
  if (pairs.empty()) return;
  // The copies wait for the ops enqueued so far and the ops enqueued later
  // wait for the copies; in between they run on their own stream.
  const std::size_t block_bytes = static_cast<std::size_t>(src.block_elems()) * elem_bytes(src.dtype);
  cuda_check(cudaEventRecord(ops_done_, stream_), "copy_blocks");
  cuda_check(cudaStreamWaitEvent(copy_stream_, ops_done_, 0), "copy_blocks");
  for (const BlockCopy& p : pairs) {
    if (src.k == dst.k && p.src == p.dst) continue;
    for (auto [s, d] : {std::pair{src.k, dst.k}, std::pair{src.v, dst.v}}) {
      cuda_check(cudaMemcpyAsync(static_cast<char*>(d) + p.dst * block_bytes,
                                 static_cast<const char*>(s) + p.src * block_bytes, block_bytes, cudaMemcpyDefault,
                                 copy_stream_),
                 "copy_blocks");
    }
  }
  cuda_check(cudaEventRecord(copies_done_, copy_stream_), "copy_blocks");
  cuda_check(cudaStreamWaitEvent(stream_, copies_done_, 0), "copy_blocks");
}

void CudaBackend::moe_topk(const TensorView& router_logits, std::int32_t top_k, bool renormalize,
                           const TensorView& topk_ids, const TensorView& topk_weights) {
  check_moe_topk(router_logits, top_k, topk_ids, topk_weights);
  refuse_in_graph("moe_topk");
  const std::int64_t experts = router_logits.cols;
  cuda::launch_moe_topk(static_cast<const float*>(router_logits.data), router_logits.row_stride, router_logits.rows,
                        static_cast<int>(experts), top_k, renormalize, static_cast<std::int32_t*>(topk_ids.data),
                        topk_ids.row_stride, static_cast<float*>(topk_weights.data), topk_weights.row_stride, stream_);
  after_launch("moe_topk");
}

// A simple, correct MoE: the expert ids come to the host (one sync), pairs
// are grouped by expert in token order, and each expert runs as gather ->
// GEMM -> SiLU-and-mul -> GEMM -> scatter into its pairs' rows; every token
// then sums its rows in slot order, as the CPU backend does.
void CudaBackend::moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                              const ExpertWeights& experts, const TensorView& out) {
  constexpr const char* op = "moe_experts";
  check_moe_experts(x, topk_ids, topk_weights, experts, out);
  refuse_in_graph(op);
  if (!experts.gate_up_scales.empty()) {
    throw Error("cuda backend: moe_experts: int8 experts run on the cpu backend only");
  }
  const std::span<const TensorView> gate_up = experts.gate_up, down = experts.down;
  const std::int64_t tokens = x.rows, hidden = x.cols, top_k = topk_ids.cols;
  const std::int64_t inter = gate_up[0].rows / 2;
  if (tokens == 0) return;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * top_k));
  cuda_check(cudaMemcpy2DAsync(ids.data(), static_cast<std::size_t>(top_k) * 4, topk_ids.data,
                               static_cast<std::size_t>(topk_ids.row_stride) * 4, static_cast<std::size_t>(top_k) * 4,
                               static_cast<std::size_t>(tokens), cudaMemcpyDeviceToHost, stream_),
             op);
  synchronize();
  check_moe_expert_ids(make_view(ids.data(), ElemType::i32, tokens, top_k), gate_up.size());
  std::map<std::int32_t, std::vector<std::int32_t>> by_expert;  // expert -> pair index t * top_k + j
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t j = 0; j < top_k; ++j) {
      by_expert[ids[static_cast<std::size_t>(t * top_k + j)]].push_back(static_cast<std::int32_t>(t * top_k + j));
    }
  }
  std::size_t max_rows = 0;
  for (const auto& [e, pairs] : by_expert) max_rows = std::max(max_rows, pairs.size());
  const std::size_t pairs_total = static_cast<std::size_t>(tokens * top_k);
  // Workspace: pair outputs [pairs, H], then per expert xs [rows, H], h2 [rows, 2I], h [rows, I], y [rows, H].
  const std::size_t f = sizeof(float);
  const std::size_t pair_bytes = pairs_total * hidden * f;
  const std::size_t xs_bytes = max_rows * hidden * f, h2_bytes = max_rows * 2 * inter * f, h_bytes = max_rows * inter * f;
  char* ws = static_cast<char*>(moe_.ensure(pair_bytes + 2 * xs_bytes + h2_bytes + h_bytes, stream_, op));
  float* pair_out = reinterpret_cast<float*>(ws);
  float* xs = reinterpret_cast<float*>(ws + pair_bytes);
  float* h2 = reinterpret_cast<float*>(ws + pair_bytes + xs_bytes);
  float* h = reinterpret_cast<float*>(ws + pair_bytes + xs_bytes + h2_bytes);
  float* ys = reinterpret_cast<float*>(ws + pair_bytes + xs_bytes + h2_bytes + h_bytes);

  std::size_t stage_total = 0;
  for (const auto& [e, pairs] : by_expert) stage_total += 2 * staged_size(pairs.size() * sizeof(std::int32_t));
  stage_reserve(stage_total);
  for (const auto& [expert, pairs] : by_expert) {
    const auto rows = static_cast<std::int64_t>(pairs.size());
    std::vector<std::int32_t> token_rows(pairs.size());
    for (std::size_t r = 0; r < pairs.size(); ++r) token_rows[r] = static_cast<std::int32_t>(pairs[r] / top_k);
    const std::int32_t* d_tokens = stage(std::span<const std::int32_t>(token_rows));
    const std::int32_t* d_pairs = stage(std::span<const std::int32_t>(pairs));
    cuda::launch_gather_rows(static_cast<const float*>(x.data), x.row_stride, d_tokens, rows, xs, hidden, hidden,
                             stream_);
    after_launch(op);
    const TensorView xv = make_view(xs, ElemType::f32, rows, hidden);
    const TensorView h2v = make_view(h2, ElemType::f32, rows, 2 * inter);
    const TensorView hv = make_view(h, ElemType::f32, rows, inter);
    const TensorView yv = make_view(ys, ElemType::f32, rows, hidden);
    gemm_unchecked(xv, gate_up[static_cast<std::size_t>(expert)], h2v, {});
    silu_and_mul(h2v, hv);
    gemm_unchecked(hv, down[static_cast<std::size_t>(expert)], yv, {});
    cuda::launch_scatter_rows(ys, hidden, d_pairs, rows, pair_out, hidden, hidden, stream_);
    after_launch(op);
  }
  cuda::launch_moe_combine(pair_out, static_cast<const float*>(topk_weights.data), topk_weights.row_stride,
                           static_cast<int>(top_k), static_cast<float*>(out.data), out.row_stride, tokens, hidden,
                           stream_);
  after_launch(op);
}

// Every row's token is picked on the device and only the tokens cross the
// bus (a batch of 256 at Llama 3's 128k vocabulary would otherwise download
// 128 MB of logits per step). Greedy rows (temperature <= 0 or top_k == 1)
// take a block-per-row argmax, exactly sample_reference's pick. Sampled rows
// repeat sample_reference on the device (cuda_sampling.cu), drawing with the
// same sampling_uniform computed here: the same token unless the device's
// double exp differs from the host's in the last ulp and the draw lands
// within that ulp of a boundary (about 1e-16 per draw). Their cost is a full
// segmented radix sort of each sampled row's vocabulary.
void CudaBackend::sample(const TensorView& logits, std::span<const SamplingParams> params,
                         std::span<TokenId> out_tokens) {
  check_sample(logits, params, out_tokens);
  refuse_in_graph("sample");
  if (logits.rows == 0) return;
  std::vector<std::int32_t> greedy;
  std::vector<cuda::SampleRow> sampled;
  for (std::int64_t r = 0; r < logits.rows; ++r) {
    const SamplingParams& p = params[static_cast<std::size_t>(r)];
    // An empty vocabulary is sample_reference's token 0: the argmax kernel
    // gives it, while launch_sample_rows would leave the token unwritten.
    if (p.temperature <= 0.0f || p.top_k == 1 || logits.cols <= 0) {
      greedy.push_back(static_cast<std::int32_t>(r));
    } else {
      sampled.push_back({sampling_uniform(p.seed, p.request, p.token_index), p.temperature, p.top_p, p.top_k,
                         static_cast<std::int32_t>(r)});
    }
  }
  stage_reserve(staged_size(greedy.size() * sizeof(std::int32_t)) +
                staged_size(sampled.size() * sizeof(cuda::SampleRow)));
  const std::int32_t* d_greedy = stage(std::span<const std::int32_t>(greedy));
  const cuda::SampleRow* d_sampled = stage(std::span<const cuda::SampleRow>(sampled));
  const auto n_greedy = static_cast<std::int64_t>(greedy.size());
  const auto n_sampled = static_cast<std::int64_t>(sampled.size());
  std::size_t ws_bytes = 0;
  void* ws = nullptr;
  if (n_sampled > 0) {
    ws_bytes = cuda::sample_rows_workspace(logits.cols, n_sampled);
    ws = sampling_.ensure(ws_bytes, stream_, "sample");
  }
  // Tokens in staging order: the greedy rows', then the sampled rows'.
  const auto rows = static_cast<std::size_t>(logits.rows);
  // Then the greedy argmax's per-chunk partials.
  const std::size_t tokens_bytes = staged_size(rows * sizeof(std::int32_t));
  char* sampled_ws = static_cast<char*>(
      sampled_.ensure(tokens_bytes + cuda::argmax_rows_workspace(logits.cols, n_greedy), stream_, "sample"));
  auto* d_out = reinterpret_cast<std::int32_t*>(sampled_ws);
  const auto* x = static_cast<const float*>(logits.data);
  if (n_greedy > 0) {
    cuda::launch_argmax_rows(x, logits.row_stride, logits.cols, d_greedy, n_greedy, d_out, sampled_ws + tokens_bytes,
                             stream_);
    after_launch("sample");
  }
  if (n_sampled > 0) {
    cuda_check(cuda::launch_sample_rows(x, logits.row_stride, logits.cols, d_sampled, n_sampled, ws, ws_bytes,
                                        d_out + n_greedy, stream_),
               "sample");
  }
  std::vector<std::int32_t> tokens(rows);
  cuda_check(cudaMemcpyAsync(tokens.data(), d_out, rows * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_),
             "sample");
  synchronize();
  for (std::size_t g = 0; g < greedy.size(); ++g) out_tokens[static_cast<std::size_t>(greedy[g])] = tokens[g];
  for (std::size_t s = 0; s < sampled.size(); ++s) {
    out_tokens[static_cast<std::size_t>(sampled[s].row)] = tokens[greedy.size() + s];
  }
}

}  // namespace twin
