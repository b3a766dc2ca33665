#pragma once
// steps.csv: one row per step record. Times are exact as in requests.csv:
// reading back gives the same integer nanoseconds, which the replay cost
// model relies on. Columns and units: docs/outputs.md.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

class StepCsvWriter {
 public:
  // Writes the header. With `speculative` (speculative decoding on), three
  // more columns: proposed_tokens, accepted_tokens and lookahead_accepted
  // ("L:a" per seq that had lookahead, space-separated, in plan order).
  // With `tiers` (KV tiers below HBM, their names nearest first), two more
  // per tier, last: <name>_load_blocks and <name>_store_blocks (written
  // only: a replay reads no tiered run's steps). `every` > 1 keeps one row
  // in `every` per replica: the steps whose step_id is a multiple of it
  // (`--steps sample:N`; step ids start at 1, so steps N, 2N, ...).
  // With `energy` (the run's power is priced: docs/outputs.md, "Energy"),
  // energy_j after the speculative columns: the step's GPUs over its busy time.
  explicit StepCsvWriter(std::ostream& out, bool speculative = false, std::vector<std::string> tiers = {},
                         std::int64_t every = 1, bool energy = false);
  void write(const StepRecord& record);

 private:
  std::ostream& out_;
  bool speculative_ = false;
  bool energy_ = false;
  std::size_t num_tiers_ = 0;
  std::uint64_t every_ = 1;
};

// Errors (twin::Error) name file:line and the column. The speculative
// columns and energy_j are optional (a run without speculation, or without
// power figures, has none).
void for_each_step_record(const std::filesystem::path& path,
                          const std::function<void(const StepRecord&)>& fn);
std::vector<StepRecord> read_step_records(const std::filesystem::path& path);

}  // namespace twin
