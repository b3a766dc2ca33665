#pragma once
// The CPU backend's class, shared by its source files (one per op family:
// cpu_backend.cpp memory and elementwise, cpu_gemm.cpp GEMMs and MoE,
// cpu_attention.cpp KV and attention, cpu_sampling.cpp sampling).
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.hpp"
#include "engine/backend/cpu/cpu_backend.hpp"
#include "engine/backend/cpu/thread_pool.hpp"

namespace twin {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);

  std::string name() const override { return "cpu"; }
  DeviceInfo device_info() const override;

  Buffer allocate(std::size_t bytes, MemoryKind kind) override;
  void upload(void* dst, const void* host_src, std::size_t bytes) override;
  void download(void* host_dst, const void* src, std::size_t bytes) override;
  void copy(const TensorView& src, const TensorView& dst) override;
  void fill(const TensorView& dst, float value) override;
  void synchronize() override {}
  // The host clock: every op has finished when its call returns.
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

 protected:
  void release(void* data, std::size_t bytes, MemoryKind kind) noexcept override;

 private:
  void gemm_unchecked(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);
  // W8A8 fp8 (W in f8e4m3 with per-channel scales; cpu_gemm_fp8.cpp).
  void gemm_fp8(const TensorView& a, const TensorView& w, const TensorView& c, const GemmOptions& options);

  ThreadPool pool_;
  int threads_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
  std::vector<bool> marked_;
};

}  // namespace twin
