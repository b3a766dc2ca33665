#include "metrics/step_csv.hpp"

#include <ostream>
#include <string>

#include "base/error.hpp"
#include "metrics/csv_fields.hpp"

namespace twin {
namespace {

enum Column {
  kStepId, kReplica, kStart, kDuration, kBatchSize, kNumPrefillSeqs, kNumDecodeSeqs, kNewTokens,
  kContextTokens, kKvBlocksUsed, kPreempted, kWaiting
};
const std::vector<std::string> kColumns = {
    "step_id", "replica", "start_s", "duration_ms", "batch_size", "num_prefill_seqs", "num_decode_seqs",
    "new_tokens", "context_tokens", "kv_blocks_used", "preempted", "waiting"};

}  // namespace

StepCsvWriter::StepCsvWriter(std::ostream& out) : out_(out) {
  std::string header;
  for (const auto& name : kColumns) header += (header.empty() ? "" : ",") + name;
  out_ << header << '\n';
}

void StepCsvWriter::write(const StepRecord& s) {
  std::string row;
  row.reserve(120);
  csv::append_int(row, static_cast<std::int64_t>(s.step_id));
  row += ',';
  csv::append_int(row, s.replica);
  row += ',';
  csv::append_seconds(row, s.start);
  row += ',';
  csv::append_millis(row, s.duration);
  for (const std::int64_t value : {std::int64_t{s.batch_size}, std::int64_t{s.num_prefill_seqs},
                                   std::int64_t{s.num_decode_seqs}, s.new_tokens, s.context_tokens,
                                   std::int64_t{s.kv_blocks_used}, std::int64_t{s.preempted},
                                   std::int64_t{s.waiting}}) {
    row += ',';
    csv::append_int(row, value);
  }
  row += '\n';
  out_ << row;
}

void for_each_step_record(const std::filesystem::path& path, const std::function<void(const StepRecord&)>& fn) {
  csv::Reader reader(path, kColumns);
  while (reader.next()) {
    StepRecord s;
    const std::int64_t step_id = reader.integer(kStepId);
    if (step_id < 0) reader.fail(kStepId, "negative");
    s.step_id = static_cast<std::uint64_t>(step_id);
    s.replica = reader.int32(kReplica);
    s.start = reader.seconds(kStart);
    s.duration = reader.millis(kDuration);
    if (s.duration < 0) reader.fail(kDuration, "negative");
    s.batch_size = reader.int32(kBatchSize);
    s.num_prefill_seqs = reader.int32(kNumPrefillSeqs);
    s.num_decode_seqs = reader.int32(kNumDecodeSeqs);
    s.new_tokens = reader.integer(kNewTokens);
    s.context_tokens = reader.integer(kContextTokens);
    s.kv_blocks_used = reader.int32(kKvBlocksUsed);
    s.preempted = reader.int32(kPreempted);
    s.waiting = reader.int32(kWaiting);
    fn(s);
  }
}

std::vector<StepRecord> read_step_records(const std::filesystem::path& path) {
  std::vector<StepRecord> records;
  for_each_step_record(path, [&](const StepRecord& s) { records.push_back(s); });
  return records;
}

}  // namespace twin
