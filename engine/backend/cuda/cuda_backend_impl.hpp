#pragma once
// The CUDA backend's class, shared by its host source files
// (cuda_backend.cpp: memory, staging, element-wise ops; cuda_ops.cpp: GEMM,
// attention, KV, MoE, sampling; cuda_gemm_fp8.cpp: fp8 GEMMs). One in-order stream for the ops, a second
// one for block copies (swap), ordered with events.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/backend/step_graph.hpp"

namespace twin {

// Throws twin::Error "cuda backend: <what>: <runtime message>" on failure.
void cuda_check(cudaError_t err, const char* what);
void cublas_check(cublasStatus_t status, const char* what);

// Grow-only device memory for an op's temporaries. Growing waits for the
// stream first, since an earlier op may still read the old memory, and
// bumps `generation`: a step graph recorded before points at the old
// memory, so it is stale from then on. Growing while a step graph is being
// recorded throws (the warm pass grows every workspace first).
class DeviceScratch {
 public:
  explicit DeviceScratch(std::uint64_t& generation) : generation_(&generation) {}
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch();
  void* ensure(std::size_t bytes, cudaStream_t stream, const char* what);
  std::size_t capacity() const { return bytes_; }

 private:
  std::uint64_t* generation_;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  DeviceInfo device_info() const override;

  Buffer allocate(std::size_t bytes, MemoryKind kind) override;
  void upload(void* dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(const TensorView& src, const TensorView& dst) override;
  void fill(const TensorView& dst, float value) override;
  void synchronize() override;
  // Timing events recorded on the op stream between ops, read once.
  void begin_op_timing(std::size_t marks) override;
  void mark_op(std::size_t index) override;
  void read_op_marks(std::span<double> ns) override;

  void gemm(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options) override;
  void embedding(std::span<const TokenId> ids, const TensorView& table, const TensorView& out) override;
  void gather_rows(const TensorView& src, std::span<const std::int32_t> rows, const TensorView& dst) override;
  void add(const TensorView& x, const TensorView& y) override;
  void rmsnorm(const TensorView& x, const TensorView& weight, float eps, const TensorView& out) override;
  void add_rmsnorm(const TensorView& residual, const TensorView& delta, const TensorView& weight, float eps,
                   const TensorView& out) override;
  void rotary(const TensorView& q, const TensorView& k, std::span<const std::int32_t> positions,
              const RopeConfig& rope) override;
  void silu_and_mul(const TensorView& gate_up, const TensorView& out) override;

  void kv_write(const TensorView& k, const TensorView& v, const KvCacheView& cache,
                std::span<const std::int64_t> slots) override;
  void paged_attention(const TensorView& q, const KvCacheView& cache, std::span<const SeqAttention> seqs,
                       const AttentionShape& shape, const TensorView& out) override;
  void copy_blocks(const KvCacheView& src, const KvCacheView& dst, std::span<const BlockCopy> pairs) override;

  void moe_topk(const TensorView& router_logits, std::int32_t top_k, bool renormalize, const TensorView& topk_ids,
                const TensorView& topk_weights) override;
  void moe_experts(const TensorView& x, const TensorView& topk_ids, const TensorView& topk_weights,
                   const ExpertWeights& experts, const TensorView& out) override;

  void sample(const TensorView& logits, std::span<const SamplingParams> params,
              std::span<TokenId> out_tokens) override;

  // Step graphs (cuda_step_graph.cpp): CUDA graphs of a decode step.
  bool supports_step_graphs() const override { return true; }
  bool has_step_graph(const StepGraphKey& key) override;
  void begin_step_graph(const StepGraphKey& key, StepGraphPass pass) override;
  void end_step_graph() override;
  void abort_step_graph() noexcept override;
  void clear_step_graphs(const void* owner) noexcept override;

 protected:
  void release(void* data, std::size_t bytes, MemoryKind kind) noexcept override;

 private:
  // Per-op host metadata (ids, positions, slots, block tables) goes through
  // a pinned staging area into device memory at the same offset. An op first
  // reserves the total it will stage (so nothing it staged is overwritten by
  // a wrap-around), then stages each span.
  void stage_reserve(std::size_t bytes);
  const void* stage_bytes(const void* host, std::size_t bytes);
  template <typename T>
  const T* stage(std::span<const T> host) {
    return static_cast<const T*>(stage_bytes(host.data(), host.size_bytes()));
  }
  static std::size_t staged_size(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

  // Inside a step graph pass: a replay stages and launches nothing else;
  // attention takes the key's layout in every pass; ops that wait for the
  // device or copy outside the stream refuse a record or replay pass.
  bool replaying() const { return in_graph_pass_ && graph_pass_ == StepGraphPass::replay; }
  bool graph_staging() const { return in_graph_pass_ && graph_pass_ != StepGraphPass::warm; }
  void refuse_in_graph(const char* op) const;

  void gemm_unchecked(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);
  // W8A8 fp8 through cuBLASLt (cuda_gemm_fp8.cpp): W f8e4m3 with per-channel scales.
  void gemm_fp8(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);
  void after_launch(const char* op);  // checks the launch error

  int device_;
  int sm_count_ = 1;  // multiprocessors: the decode attention kernel's split-K partitions fill them
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t ops_done_ = nullptr;
  cudaEvent_t copies_done_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // Op timing: events kept from pass to pass (grown, never shrunk) and which
  // of them this pass recorded.
  std::vector<cudaEvent_t> timing_events_;
  std::vector<bool> timing_marked_;

  char* staging_host_ = nullptr;  // pinned
  char* staging_device_ = nullptr;
  std::size_t staging_capacity_ = 0;
  std::size_t staging_offset_ = 0;

  // Step graphs, per key: the instantiated graph and its own staging area
  // (pinned host + device, the kernels' arguments point into it), whose
  // bytes every pass under the key stages at the same offsets.
  struct StepGraph {
    cudaGraphExec_t exec = nullptr;
    char* host = nullptr;
    char* device = nullptr;
    std::size_t bytes = 0;         // staged by one pass
    std::uint64_t generation = 0;  // workspace_generation_ when recorded
  };
  void destroy_graph(StepGraph& g) noexcept;
  std::map<StepGraphKey, StepGraph> graphs_;
  bool in_graph_pass_ = false;
  StepGraphPass graph_pass_ = StepGraphPass::warm;
  StepGraphKey graph_key_{};
  StepGraph* graph_ = nullptr;       // the record or replay pass's graph
  std::size_t graph_staged_ = 0;     // bytes this pass has staged (its offset)
  std::size_t warm_staged_ = 0;      // the last warm pass's bytes, sizing the record's area
  StepGraphKey warm_key_{};
  bool capturing_ = false;
  cudaEvent_t graph_uploaded_ = nullptr;  // the last replay's staged bytes are on the device
  void* cublas_workspace_ = nullptr;      // cuBLAS's own, fixed: allocating under capture is not allowed

  std::uint64_t workspace_generation_ = 0;  // bumped by every DeviceScratch a graph may use that grows
  std::uint64_t eager_generation_ = 0;      // the same for those only eager ops use (sampling, MoE)
  DeviceScratch gemm_a_{workspace_generation_};  // A converted to bf16
  // fp8 GEMMs: made on the first one. The algorithm cuBLASLt's heuristic
  // picked is kept per shape (a step has a handful).
  struct Fp8GemmShape {
    std::int64_t m, n, k, ldw;
    auto operator<=>(const Fp8GemmShape&) const = default;
  };
  cublasLtHandle_t cublas_lt_ = nullptr;
  int fp8_capability_ = -1;  // compute capability x 10, read on the first fp8 GEMM
  std::map<Fp8GemmShape, cublasLtMatmulAlgo_t> fp8_algos_;
  DeviceScratch fp8_a_{workspace_generation_};        // A in E4M3 and its row scales
  DeviceScratch fp8_product_{workspace_generation_};  // the unscaled f32 product
  DeviceScratch lt_workspace_{workspace_generation_};
  DeviceScratch attention_{workspace_generation_};   // split-K partials
  // Prefill chunks on the tensor-core kernel (bf16 mma); false with
  // TWIN_CUDA_ATTENTION=reference: the f32 tiled kernel (docs/cuda.md).
  bool attention_mma_ = true;
  DeviceScratch moe_{eager_generation_};         // gathered rows and expert outputs
  DeviceScratch sampled_{eager_generation_};     // tokens picked on the device
  DeviceScratch sampling_{eager_generation_};    // sampled rows' probabilities, ids and sort space
};

}  // namespace twin
