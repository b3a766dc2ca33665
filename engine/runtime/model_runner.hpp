#pragma once
// The transformer on a backend: weights, the paged KV cache (one buffer of
// blocks addressed by the core's block ids, plus a host swap space), and one
// batched forward pass per step over prefill chunks and decodes together.
// Free of backend and models/ headers so it can sit beside the core's.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/runtime/forward_batch.hpp"
#include "engine/runtime/model_config.hpp"

namespace twin {

struct RunnerOptions {
  std::string backend = "cpu";  // cpu, auto or cuda (make_backend's names)
  std::int32_t threads = 0;     // CPU worker threads; <= 0: one per hardware thread
  std::string weights_dir;      // safetensors folder; empty: random weights from `seed`
  std::uint64_t seed = 0;
  std::string weight_dtype = "auto";  // auto, f32, bf16
  std::int32_t num_blocks = 0;        // device KV blocks (> 0)
  std::int32_t block_size = 16;
  std::int32_t num_host_blocks = 0;   // swap space
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
  std::int64_t weight_bytes() const;      // parameter bytes as stored
  std::int64_t kv_block_bytes() const;    // K and V of one block over all layers
  std::string weight_dtype_name() const;  // f32 or bf16

  // Runs one step. Throws twin::Error on an inconsistent batch (tokens out of
  // the vocabulary, a block table too short, block ids out of range).
  void forward(const ForwardBatch& batch, ForwardOutput& out);

  // Time every op of the forward pass into ForwardOutput::op_ns. The backend
  // is synchronised after each op: free on the CPU backend (its ops return
  // done), a stall per op on a GPU, so validate times ops on the CPU only.
  void set_time_ops(bool on);
  bool times_ops() const;
  // The backend's worker threads: > 0 on the CPU backend, 0 on a GPU.
  std::int32_t device_threads() const;

  // Swap: device blocks -> host blocks, and back.
  void swap_out(std::span<const BlockCopy> moves);
  void swap_in(std::span<const BlockCopy> moves);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// KV bytes per block (all layers, K and V, f32) for sizing the cache.
std::int64_t kv_block_bytes(const ModelConfig& config, std::int32_t block_size);

}  // namespace twin
