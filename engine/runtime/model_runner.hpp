#pragma once
// The transformer on a backend: weights, the paged KV cache (one buffer of
// blocks addressed by the core's block ids, plus a host swap space), and one
// batched forward pass per step over prefill chunks and decodes together.
// Free of backend and models/ headers so it can sit beside the core's.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "engine/backend/cuda/memory_plan.hpp"
#include "engine/backend/dtype.hpp"
#include "engine/core/kv_tiers.hpp"
#include "engine/runtime/forward_batch.hpp"
#include "engine/runtime/model_config.hpp"

namespace twin {

struct RunnerOptions {
  std::string backend = "cpu";  // cpu, auto or cuda (make_backend's names)
  std::int32_t threads = 0;     // CPU worker threads; <= 0: one per hardware thread
  std::string weights_dir;      // safetensors folder; empty: random weights from `seed`
  std::uint64_t seed = 0;
  std::string weight_dtype = "auto";  // auto, f32, bf16
  std::string quantization;           // "" or "int8" (WeightOptions::quantization)
  // KV cache element type, vLLM's --kv-cache-dtype: auto (the CPU backend:
  // f32; a GPU: bf16, as the activations' 16-bit type), f32, bf16.
  // fp8_e4m3 is refused by name until a backend stores it.
  std::string kv_cache_dtype = "auto";
  // KV cache size: num_blocks > 0 exactly; else kv_cache_memory_bytes > 0 of
  // blocks; else 1 GiB on the CPU, and on a GPU vLLM's plan: what is left of
  // gpu_memory_utilization x device memory once the weights and the scratch
  // are allocated, less the backend's lazily grown workspaces.
  std::int32_t num_blocks = 0;
  std::int64_t kv_cache_memory_bytes = 0;
  double gpu_memory_utilization = 0.9;
  std::int32_t block_size = 16;
  std::int32_t num_host_blocks = 0;   // swap space in blocks; 0: swap_space_bytes of blocks
  std::int64_t swap_space_bytes = 0;
  // The scheduler's limits: the activation scratch is sized for them once,
  // at construction (where a device runs out of memory, it does so before
  // serving, and a step never reallocates). 0: grown on demand.
  std::int32_t max_num_batched_tokens = 0;
  std::int32_t max_num_seqs = 0;
  // Replicas of one process that split a device's memory plan: this runner
  // takes 1/kv_cache_shares of the planned KV blocks, leaving the rest to
  // its siblings (make_sibling). No effect where the blocks are given or on
  // the CPU.
  std::int32_t kv_cache_shares = 1;
  // KV tiers below the device for evicted prefix blocks (kv_tier_store.hpp,
  // vLLM's and LMCache's CPU offload): host memory and a file, in bytes (0:
  // none), the file in kv_offload_ssd_dir (empty: the temporary directory).
  std::int64_t kv_offload_dram_bytes = 0;
  std::int64_t kv_offload_ssd_bytes = 0;
  std::string kv_offload_ssd_dir;
  // Decode steps through step graphs (CUDA graphs, engine/backend/
  // step_graph.hpp): a decode-only step of a dense model is padded to
  // vLLM's capture sizes (1, 2, 4, 8, 16, ... up to max_num_seqs, at most
  // 512) and replays a graph recorded per (rows, context bucket). A CUDA
  // backend only: UsageError with --backend cpu; `auto` on a machine
  // without a GPU runs eagerly.
  bool cuda_graphs = false;
  // Tests: pad decode steps as the graph path does, without graphs, so the
  // CPU checks that padding leaves the real rows' results alone.
  bool pad_decode_steps = false;
};

// What the step graphs did over a runner's life.
struct StepGraphStats {
  std::int64_t recorded = 0;  // graphs recorded (a key again after a workspace grew counts again)
  std::int64_t replays = 0;   // steps that replayed one
  std::int64_t failed = 0;    // keys that fell back to eager steps
  std::string first_failure;  // the first fallback's reason
};

class ModelRunner {
 public:
  // Throws UsageError for an unknown backend or dtype name, twin::Error when
  // weights do not match the config or memory cannot be allocated.
  ModelRunner(const ModelConfig& config, const RunnerOptions& options);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const ModelConfig& config() const;
  const RunnerOptions& options() const;
  std::string device_name() const;
  std::string backend_name() const;       // cpu or cuda (auto resolved)
  std::int64_t weight_bytes() const;      // parameter bytes as stored
  std::int64_t kv_block_bytes() const;    // K and V of one block over all layers
  std::string weight_dtype_name() const;  // f32 or bf16
  std::string kv_dtype_name() const;      // f32, bf16 or fp8_e4m3
  std::int64_t scratch_bytes() const;     // the activation scratch held now
  // The KV cache as allocated: device and host blocks, and the device memory
  // plan that sized it (none where the blocks were given or on the CPU).
  std::int32_t num_blocks() const;
  std::int32_t num_host_blocks() const;
  const std::optional<KvMemoryPlan>& memory_plan() const;

  // Runs one step. Throws twin::Error on an inconsistent batch (tokens out of
  // the vocabulary, a block table too short, block ids out of range).
  void forward(const ForwardBatch& batch, ForwardOutput& out);

  // Time every op of the forward pass into ForwardOutput::op_ns, from marks
  // the backend records between ops and the runner reads once at the end of
  // the pass (Backend::begin_op_timing): the host clock on the CPU, CUDA
  // events on a GPU, so no op waits for the one before it to be timed.
  void set_time_ops(bool on);
  bool times_ops() const;
  // The backend's worker threads: > 0 on the CPU backend, 0 on a GPU.
  std::int32_t device_threads() const;
  // Whether decode steps go through step graphs, and what they did.
  bool uses_step_graphs() const;
  const StepGraphStats& step_graph_stats() const;

  // Swap: device blocks -> host blocks, and back.
  void swap_out(std::span<const BlockCopy> moves);
  void swap_in(std::span<const BlockCopy> moves);

  // The KV tiers as allocated (dram, then ssd; empty without), for the
  // replica's KvCacheConfig::tiers, and one step's tier copies carried out
  // before the step (engine/core/kv_tiers.hpp, TierCopy).
  std::vector<KvTierConfig> kv_tier_configs() const;
  void apply_tier_copies(std::span<const TierCopy> copies);

  // A second replica of this model in the same process (prefill/decode
  // disaggregation): the same backend and weights (shared, not copied), its
  // own KV cache of as many device and host blocks, and its own scratch.
  // Its steps must not overlap this runner's (one thread drives both).
  std::unique_ptr<ModelRunner> make_sibling();
  // Copies device KV blocks (all layers, K and V) of `source`, a sibling,
  // into this runner's cache: pairs are source block -> this block. Through
  // the backend (a memcpy per layer and block on the CPU, device-to-device
  // cudaMemcpyAsync on a GPU); returns when the copies are done. Throws
  // twin::Error for a runner that is not a sibling or a block out of range.
  void copy_kv_from(const ModelRunner& source, std::span<const BlockCopy> pairs);

 private:
  explicit ModelRunner(ModelRunner& shared);  // make_sibling
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The KV cache element type RunnerOptions::kv_cache_dtype names: "f32",
// "bf16" or "fp8_e4m3" (from fp8 or fp8_e4m3; per-tensor scales of 1, as
// vLLM without calibrated scales); auto is the weights' dtype as loaded (f32
// or bf16), vLLM's rule and the simulator's. Throws UsageError naming
// --kv-cache-dtype for an unknown or unimplemented value (fp16, fp8_e5m2).
std::string resolve_kv_cache_dtype(const std::string& requested, const std::string& weight_dtype);

// The backend's element type of a resolved KV dtype.
ElemType kv_elem_type(const std::string& resolved);

// KV bytes per block (all layers, K and V) at a resolved KV dtype, for
// sizing the cache.
std::int64_t kv_block_bytes(const ModelConfig& config, std::int32_t block_size, const std::string& kv_dtype);

}  // namespace twin
