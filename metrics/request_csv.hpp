#pragma once
// requests.csv: one row per request record, written as records stream in.
// Times are exact: seconds with 9 decimals and milliseconds with 6 decimals
// printed from the integer nanoseconds, so reading back gives the same Time.
// Columns and units: docs/outputs.md. The ITL gaps are not written.
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

class RequestCsvWriter {
 public:
  // Writes the header. `transfer_columns` adds the disaggregation columns
  // (prefill_replica, kv_reserved_s, kv_arrived_s, kv_wait_ms,
  // kv_transfer_ms, kv_transfer_bytes) after the others; `energy` adds
  // energy_j (the run's energy is priced) last.
  explicit RequestCsvWriter(std::ostream& out, bool transfer_columns = false, bool energy = false);
  void write(const RequestRecord& record);
  void flush() { out_.flush(); }

 private:
  std::ostream& out_;
  bool transfer_columns_;
  bool energy_;
};

// Errors (twin::Error) name file:line and the column. The disaggregation
// columns are read where the file has them (prefill_replica, kv_reserved_s,
// kv_arrived_s, kv_transfer_bytes; the derived ms columns are not).
void for_each_request_record(const std::filesystem::path& path,
                             const std::function<void(const RequestRecord&)>& fn);
std::vector<RequestRecord> read_request_records(const std::filesystem::path& path);

}  // namespace twin
