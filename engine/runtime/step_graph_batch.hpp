#pragma once
// Which steps a step graph (CUDA graph, engine/backend/step_graph.hpp)
// serves, and the padded step it runs. Pure arithmetic on the step's shape,
// so the CPU tests check what the GPU path pads.
#include <cstdint>
#include <vector>

#include "engine/backend/op_args.hpp"
#include "engine/runtime/forward_batch.hpp"

namespace twin {

// A decode-only step: every sequence has one new token and samples one
// token from it (no prefill chunk, no speculative verification).
bool graph_eligible(const ForwardBatch& batch);

// The padded row count a graph is recorded for: vLLM's capture sizes 1, 2,
// 4, then multiples of 8, up to max_rows (itself rounded down to one of
// them). 0: more rows than max_rows (the step runs eagerly).
std::int32_t graph_rows_bucket(std::int32_t rows, std::int32_t max_rows);

// The context a graph's attention is laid out for: the power of two at or
// above the step's longest context, at least 1024 and at most the model's
// context. Steps of shorter contexts share a graph; a longer one takes the
// next graph, so attention keeps a split fitted to its length.
std::int32_t graph_context_bucket(std::int32_t max_context, std::int32_t model_context);

// The per-row metadata of one step, as the runner hands it to the ops.
struct StepRows {
  std::vector<TokenId> ids;
  std::vector<std::int32_t> positions;
  std::vector<std::int64_t> slots;  // < 0: the row writes no KV
  std::vector<SeqAttention> attention;
  std::vector<std::int32_t> sample_rows;
};

// Pads a decode-only step's rows to `rows`: each padding row reads token 0
// at position 0, writes no KV (slot -1), attends to the first slot of
// `pad_table`'s block (a valid block; its output row is never sampled) and
// is gathered for the LM head after the real rows. The real rows keep
// their order and values, so their logits are the unpadded step's.
void pad_step_rows(StepRows& step, std::int32_t rows, std::span<const BlockId> pad_table);

}  // namespace twin
