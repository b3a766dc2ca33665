#pragma once
// The backend op interface: everything the transformer runtime asks of a
// device. Two implementations: cpu/ (OpenBLAS + threads, the reference) and
// cuda/ (cuBLAS + own kernels).
//
// The model follows ggml's split of device, buffer and stream:
// - a Backend allocates Buffers (RAII, device or pinned-host memory);
// - tensors are TensorViews into those buffers (no ownership, no shapes
//   beyond 2-D row-major with a row stride);
// - ops are enqueued on the backend's single in-order stream and may run
//   asynchronously; synchronize() waits for all of them. The CPU backend runs
//   each op to completion before returning, but callers must not rely on it.
// - host memory passed to an op (spans of ids, slots, block tables, sampling
//   parameters) may be reused as soon as the call returns: the backend copies
//   what it needs.
//
// Dtypes: activations and logits are f32 on the CPU. Weights (gemm W,
// embedding tables, norm weights, biases) may be f32 or bf16 (f16 too where a
// backend says so). A backend throws twin::Error naming the op and dtype for a
// combination it does not support, and for mismatched shapes.
//
// Determinism: for fixed inputs an op gives the same bits whatever the
// backend's thread count or the batch layout of other sequences (work is
// split by rows, sequences and heads, never across a reduction).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/backend/buffer.hpp"
#include "engine/backend/dtype.hpp"
#include "engine/backend/op_args.hpp"
#include "engine/backend/step_graph.hpp"
#include "engine/backend/tensor.hpp"

namespace twin {

struct DeviceInfo {
  std::string name;             // e.g. "cpu (16 threads)" or "NVIDIA H200"
  std::int64_t total_bytes = 0; // memory the backend allocates from
  std::int64_t free_bytes = 0;  // at the time of the call
  std::int32_t threads = 0;     // CPU worker threads (0 on a GPU)
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;  // "cpu" or "cuda"
  virtual DeviceInfo device_info() const = 0;

  // ---- memory -------------------------------------------------------------
  // Memory is aligned to 64 bytes at least and NOT zeroed. Throws twin::Error
  // naming the size when the allocation fails.
  virtual Buffer allocate(std::size_t bytes, MemoryKind kind = MemoryKind::device) = 0;
  // Copy host memory into a buffer (dst is a pointer inside a Buffer of this
  // backend). The host memory may be reused when the call returns.
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  // Waits for the enqueued ops, then copies buffer memory to the host.
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Row-wise copy between views of equal shape, converting dtype if they differ.
  virtual void copy(const TensorView& src, const TensorView& dst) = 0;
  // Sets every element of a f32 view to value.
  virtual void fill(const TensorView& dst, float value) = 0;
  // Waits until every enqueued op has finished.
  virtual void synchronize() = 0;

  // ---- op timing ----------------------------------------------------------
  // Times the ops of one forward pass where they run, without waiting after
  // each (a synchronisation per op would stall a GPU's queue and time ops
  // that no longer overlap the host's launches as they do in a real step).
  // begin_op_timing(n) makes room for marks 0 .. n-1; mark_op(i), called
  // with i = 0, 1, 2, ... in order, records mark i on the stream after every
  // op enqueued so far (it does not wait);
  // read_op_marks(ns) waits for the marks recorded and writes, for marks
  // 0 .. ns.size()-1, each one's time in ns after mark 0 (non-decreasing,
  // ns[0] = 0). An op's time is the gap between the marks around it. CPU:
  // the host clock (its ops return done); CUDA: events on the op stream,
  // read with cudaEventElapsedTime once at the end of the pass. Throws
  // twin::Error for a mark outside the room made or never recorded.
  virtual void begin_op_timing(std::size_t marks) = 0;
  virtual void mark_op(std::size_t index) = 0;
  virtual void read_op_marks(std::span<double> ns) = 0;

  // ---- dense ops ----------------------------------------------------------
  // C[m,n] = A[m,k] · W[n,k]^T (+ bias[n]) (+ C if accumulate).
  // A, C: f32. W: f32 or bf16 (the layout of a PyTorch nn.Linear weight).
  virtual void gemm(const TensorView& a, const TensorView& w, const TensorView& c,
                    const GemmOptions& options = {}) = 0;
  // out[i] = table[ids[i]] as f32. table f32 or bf16; ids must be < table.rows.
  virtual void embedding(std::span<const TokenId> ids, const TensorView& table,
                         const TensorView& out) = 0;
  // dst[i] = src[rows[i]] (f32 -> f32); used to pick the rows that sample.
  virtual void gather_rows(const TensorView& src, std::span<const std::int32_t> rows,
                           const TensorView& dst) = 0;
  // x += y, element-wise, equal shapes, f32.
  virtual void add(const TensorView& x, const TensorView& y) = 0;
  // out = x / rms(x) * weight, per row; weight is [1, cols] f32 or bf16.
  virtual void rmsnorm(const TensorView& x, const TensorView& weight, float eps,
                       const TensorView& out) = 0;
  // The fused residual step of a pre-norm block:
  // residual += delta; out = rmsnorm(residual) * weight.
  virtual void add_rmsnorm(const TensorView& residual, const TensorView& delta,
                           const TensorView& weight, float eps, const TensorView& out) = 0;
  // In-place rotary embedding of q [T, num_heads*head_dim] and
  // k [T, num_kv_heads*head_dim]; positions[t] is token t's absolute position.
  virtual void rotary(const TensorView& q, const TensorView& k,
                      std::span<const std::int32_t> positions, const RopeConfig& rope) = 0;
  // gate_up [T, 2I] = [gate | up]; out [T, I] = silu(gate) * up.
  virtual void silu_and_mul(const TensorView& gate_up, const TensorView& out) = 0;

  // ---- paged KV and attention --------------------------------------------
  // Writes row t of k and v [T, kv_heads*head_dim] into slot slots[t] of the
  // layer's cache (slot = block_id * block_size + offset); slot < 0 skips the
  // row (padding).
  virtual void kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                        std::span<const std::int64_t> slots) = 0;
  // Causal attention of each sequence's new queries over its paged context
  // (see SeqAttention): prefill chunks and decodes in one call. q and out are
  // [T, num_heads*head_dim] f32; rows of q not covered by any sequence leave
  // out untouched.
  virtual void paged_attention(const TensorView& q, const KvCacheView& cache,
                               std::span<const SeqAttention> seqs, const AttentionShape& shape,
                               const TensorView& out) = 0;
  // Copies whole blocks src -> dst for each pair. src and dst caches have the
  // same geometry; they may be the same cache (copy-on-write), or one device
  // and one host cache (swap out / swap in).
  virtual void copy_blocks(const KvCacheView& src, const KvCacheView& dst,
                           std::span<const BlockCopy> pairs) = 0;

  // ---- mixture of experts -------------------------------------------------
  // Mixtral routing: softmax over router_logits [T, E], keep the top_k
  // experts (ties: lower id first), renormalise their weights to sum to 1 when
  // renormalize. Writes topk_ids [T, top_k] (i32) and topk_weights [T, top_k] (f32).
  virtual void moe_topk(const TensorView& router_logits, std::int32_t top_k, bool renormalize,
                        const TensorView& topk_ids, const TensorView& topk_weights) = 0;
  // out[t] = sum_j topk_weights[t,j] * down[e] · silu_and_mul(gate_up[e] · x[t]),
  // e = topk_ids[t,j] (ExpertWeights: shapes, dtypes, int8 scales).
  // x, out: [T, H] f32; out is overwritten.
  virtual void moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                           const ExpertWeights& experts, const TensorView& out) = 0;

  // ---- step graphs (engine/backend/step_graph.hpp) -------------------------
  // A backend that can record the ops of a pass and replay them as one
  // launch says so here (CUDA; the CPU cannot). The runner brackets a
  // decode step's ops, up to the logits, with begin_step_graph(key, pass)
  // and end_step_graph():
  //  - warm: the ops run as usual, but attention in the key's layout, so
  //    every workspace the graph will use is grown now;
  //  - record: the ops are captured, nothing runs; their host data goes to
  //    the graph's own staging area, at offsets fixed by the op sequence;
  //  - replay: the ops stage their host data at the recorded offsets and
  //    launch nothing; end_step_graph uploads it and launches the graph.
  // has_step_graph is false for a key never recorded, or whose graph a
  // workspace grown since has made stale (it is dropped then). A failure
  // inside a pass throws twin::Error; the caller then calls
  // abort_step_graph(), which ends any capture and discards the key's
  // graph, and runs the step eagerly (a replay launched nothing).
  // clear_step_graphs(owner) drops an owner's graphs (its activations moved).
  // Sampling, MoE experts, block copies and op timing are not allowed
  // inside a pass. The defaults: no support.
  virtual bool supports_step_graphs() const { return false; }
  virtual bool has_step_graph(const StepGraphKey&) { return false; }
  virtual void begin_step_graph(const StepGraphKey& key, StepGraphPass pass);
  virtual void end_step_graph();
  virtual void abort_step_graph() noexcept {}
  virtual void clear_step_graphs(const void* /*owner*/) noexcept {}

  // ---- sampling -----------------------------------------------------------
  // One token per row of logits [S, V] f32, with params[i] for row i. Waits for
  // the enqueued ops; writes the tokens to host memory.
  virtual void sample(const TensorView& logits, std::span<const SamplingParams> params,
                      std::span<TokenId> out_tokens) = 0;

 protected:
  friend class Buffer;
  // Frees memory returned by allocate(); called by Buffer.
  virtual void release(void* data, std::size_t bytes, MemoryKind kind) noexcept = 0;
};

// Builds a backend by name: "cpu", "cuda" (where built and a device is
// present) or "auto" (cuda when available, else cpu). threads <= 0 means one
// per hardware thread (CPU only). Throws UsageError listing the known names,
// or twin::Error saying why a known backend is unavailable here.
struct BackendOptions {
  std::int32_t threads = 0;
};
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});

}  // namespace twin
