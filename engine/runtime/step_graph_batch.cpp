#include "engine/runtime/step_graph_batch.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace twin {

bool graph_eligible(const ForwardBatch& batch) {
  if (batch.seqs.empty()) return false;
  for (const BatchSeq& s : batch.seqs) {
    if (s.num_new != 1 || !s.samples || s.num_sampled != 1) return false;
  }
  return true;
}

namespace {
std::int32_t bucket_at_or_above(std::int32_t rows) {
  if (rows <= 1) return 1;
  if (rows <= 2) return 2;
  if (rows <= 4) return 4;
  return (rows + 7) / 8 * 8;
}
std::int32_t bucket_at_or_below(std::int32_t rows) {
  if (rows >= 8) return rows / 8 * 8;
  if (rows >= 4) return 4;
  if (rows >= 2) return 2;
  return 1;
}
}  // namespace

std::int32_t graph_rows_bucket(std::int32_t rows, std::int32_t max_rows) {
  if (rows < 1 || max_rows < 1) return 0;
  const std::int32_t cap = bucket_at_or_below(max_rows);
  const std::int32_t bucket = bucket_at_or_above(rows);
  return bucket <= cap ? bucket : 0;
}

std::int32_t graph_context_bucket(std::int32_t max_context, std::int32_t model_context) {
  std::int64_t bucket = 1024;
  while (bucket < max_context) bucket *= 2;
  return static_cast<std::int32_t>(std::min<std::int64_t>(bucket, std::max(model_context, max_context)));
}

void pad_step_rows(StepRows& step, std::int32_t rows, std::span<const BlockId> pad_table) {
  const auto real = static_cast<std::int32_t>(step.positions.size());
  if (rows < real || pad_table.empty() || step.ids.size() != step.positions.size() ||
      step.slots.size() != step.positions.size()) {
    throw Error("step graph: cannot pad a step of " + std::to_string(real) + " rows to " + std::to_string(rows));
  }
  for (std::int32_t row = real; row < rows; ++row) {
    step.ids.push_back(0);
    step.positions.push_back(0);
    step.slots.push_back(-1);
    step.attention.push_back({row, 1, 1, pad_table.first(1)});
    step.sample_rows.push_back(row);
  }
}

}  // namespace twin
