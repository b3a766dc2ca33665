#pragma once
// Helpers shared by the runtime tests: a runner over a written checkpoint and
// single-sequence steps with a scattered block table.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/runtime/model_runner.hpp"
#include "tests/runtime/reference_model.hpp"

namespace twin::test {

inline std::unique_ptr<ModelRunner> make_runner(const ModelConfig& config, const std::string& weights_dir,
                                                std::int32_t num_blocks = 64, std::int32_t block_size = 4,
                                                const std::string& dtype = "auto", std::int32_t host_blocks = 0,
                                                const std::string& quantization = "") {
  RunnerOptions o;
  o.threads = 2;
  o.weights_dir = weights_dir;
  o.num_blocks = num_blocks;
  o.block_size = block_size;
  o.weight_dtype = dtype;
  o.num_host_blocks = host_blocks;
  o.quantization = quantization;
  return std::make_unique<ModelRunner>(config, o);
}

// A runner whose projections the loader quantises ("int8", "fp8").
inline std::unique_ptr<ModelRunner> quantized_runner(const ModelConfig& config, const std::string& weights_dir,
                                                     const std::string& quantization) {
  return make_runner(config, weights_dir, 64, 4, "auto", 0, quantization);
}

// Block ids in a scrambled order, so a test would notice attention reading
// blocks as if contiguous.
inline std::vector<BlockId> scattered_blocks(std::int32_t count, std::int32_t num_blocks, std::uint32_t salt) {
  std::vector<BlockId> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  for (std::size_t i = ids.size(); i > 1; --i) {
    salt = salt * 1664525u + 1013904223u;
    std::swap(ids[i - 1], ids[salt % i]);
  }
  ids.resize(static_cast<std::size_t>(count));
  return ids;
}

inline std::vector<std::int32_t> some_tokens(std::size_t n, std::int32_t vocab, std::uint32_t salt) {
  std::vector<std::int32_t> t(n);
  for (auto& x : t) {
    salt = salt * 1664525u + 1013904223u;
    x = static_cast<std::int32_t>((salt >> 8) % static_cast<std::uint32_t>(vocab));
  }
  return t;
}

inline float max_abs_diff(const float* a, const float* b, std::size_t n) {
  float m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Appends one seq to `batch` that processes tokens[start, start + n) and samples.
inline void add_seq(ForwardBatch& batch, RequestId id, const std::vector<std::int32_t>& tokens, std::int32_t start,
                    std::int32_t n, const std::vector<BlockId>& table, bool samples = true) {
  BatchSeq s;
  s.id = id;
  s.start = start;
  s.num_new = n;
  s.block_table = table;
  s.samples = samples;
  batch.seqs.push_back(s);
  batch.tokens.insert(batch.tokens.end(), tokens.begin() + start, tokens.begin() + start + n);
  batch.return_logits = true;
}

}  // namespace twin::test
