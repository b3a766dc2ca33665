#pragma once
// steps.csv: one row per step record. Times are exact as in requests.csv:
// reading back gives the same integer nanoseconds, which the replay cost
// model relies on. Columns and units: docs/outputs.md.
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

class StepCsvWriter {
 public:
  explicit StepCsvWriter(std::ostream& out);  // writes the header
  void write(const StepRecord& record);

 private:
  std::ostream& out_;
};

// Errors (twin::Error) name file:line and the column.
void for_each_step_record(const std::filesystem::path& path,
                          const std::function<void(const StepRecord&)>& fn);
std::vector<StepRecord> read_step_records(const std::filesystem::path& path);

}  // namespace twin
