#include "metrics/request_csv.hpp"

#include <ostream>
#include <string>

#include "base/error.hpp"
#include "metrics/csv_fields.hpp"

namespace twin {
namespace {

enum Column {
  kId, kReplica, kOutcome, kArrival, kFirstToken, kFinish, kPromptTokens, kOutputTokens,
  kCachedPromptTokens, kPreemptions, kTtft, kTpot, kE2el, kReason,
  // Always written; optional when read (files of earlier versions lack it).
  kScheduled,
  // Optional: only a run with prefill/decode pools writes them.
  kPrefillReplica, kKvReserved, kKvArrived, kKvWait, kKvTransferMs, kKvTransferBytes,
  // Optional: only a run whose energy is priced writes it (issue 44).
  kEnergyJ
};
constexpr std::size_t kRequiredColumns = kScheduled;
constexpr std::size_t kWrittenColumns = kPrefillReplica;
const std::vector<std::string> kColumns = {
    "id", "replica", "outcome", "arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens",
    "cached_prompt_tokens", "preemptions", "ttft_ms", "tpot_ms", "e2el_ms", "reason", "scheduled_s",
    "prefill_replica", "kv_reserved_s", "kv_arrived_s", "kv_wait_ms", "kv_transfer_ms", "kv_transfer_bytes", "energy_j"};

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::finished: return "finished";
    case Outcome::aborted: return "aborted";
    case Outcome::rejected: return "rejected";
  }
  return "?";
}

}  // namespace

RequestCsvWriter::RequestCsvWriter(std::ostream& out, bool transfer_columns, bool energy)
    : out_(out), transfer_columns_(transfer_columns), energy_(energy) {
  std::string header;
  const std::size_t columns = transfer_columns_ ? static_cast<std::size_t>(kEnergyJ) : kWrittenColumns;
  for (std::size_t c = 0; c < columns; ++c) header += (header.empty() ? "" : ",") + kColumns[c];
  if (energy_) header += "," + kColumns[kEnergyJ];
  out_ << header << '\n';
}

void RequestCsvWriter::write(const RequestRecord& r) {
  std::string row;
  row.reserve(160);
  csv::append_int(row, r.id);
  row += ',';
  csv::append_int(row, r.replica);
  row += ',';
  row += outcome_name(r.outcome);
  row += ',';
  csv::append_seconds(row, r.arrival);
  row += ',';
  csv::append_seconds(row, r.first_token);
  row += ',';
  csv::append_seconds(row, r.finish);
  row += ',';
  csv::append_int(row, r.prompt_tokens);
  row += ',';
  csv::append_int(row, r.output_tokens);
  row += ',';
  csv::append_int(row, r.cached_prompt_tokens);
  row += ',';
  csv::append_int(row, r.preemptions);
  row += ',';
  const bool finished = r.outcome == Outcome::finished;
  if (r.first_token != kNoTime) csv::append_millis(row, r.first_token - r.arrival);
  row += ',';
  if (finished && r.output_tokens >= 2 && r.first_token != kNoTime && r.finish != kNoTime) {
    csv::append_fixed(row, to_millis(r.finish - r.first_token) / (r.output_tokens - 1), 6);
  }
  row += ',';
  if (finished && r.finish != kNoTime) csv::append_millis(row, r.finish - r.arrival);
  row += ',';
  csv::append_text(row, r.reason);
  row += ',';
  csv::append_seconds(row, r.first_scheduled);
  if (transfer_columns_) {
    row += ',';
    if (r.prefill_replica >= 0) csv::append_int(row, r.prefill_replica);
    row += ',';
    csv::append_seconds(row, r.kv_reserved);
    row += ',';
    csv::append_seconds(row, r.kv_arrived);
    row += ',';
    if (r.kv_reserved != kNoTime && r.first_token != kNoTime) csv::append_millis(row, r.kv_reserved - r.first_token);
    row += ',';
    if (r.kv_arrived != kNoTime && r.kv_reserved != kNoTime) csv::append_millis(row, r.kv_arrived - r.kv_reserved);
    row += ',';
    if (r.kv_arrived != kNoTime) csv::append_int(row, r.kv_transfer_bytes);
  }
  if (energy_) {
    row += ',';
    if (r.energy_uj >= 0) csv::append_fixed(row, static_cast<double>(r.energy_uj) * 1e-6, 6);
  }
  row += '\n';
  out_ << row;
}

void for_each_request_record(const std::filesystem::path& path,
                             const std::function<void(const RequestRecord&)>& fn) {
  csv::Reader reader(path, kColumns, kRequiredColumns);
  while (reader.next()) {
    RequestRecord r;
    r.id = reader.integer(kId);
    r.replica = reader.int32(kReplica);
    const std::string_view outcome = reader.text(kOutcome);
    if (outcome == "finished") {
      r.outcome = Outcome::finished;
    } else if (outcome == "aborted") {
      r.outcome = Outcome::aborted;
    } else if (outcome == "rejected") {
      r.outcome = Outcome::rejected;
    } else {
      reader.fail(kOutcome, csv::quoted(outcome) + "; expected finished, aborted or rejected");
    }
    r.arrival = reader.seconds(kArrival);
    r.first_token = reader.seconds(kFirstToken, true);
    r.finish = reader.seconds(kFinish, true);
    r.prompt_tokens = reader.int32(kPromptTokens);
    r.output_tokens = reader.int32(kOutputTokens);
    r.cached_prompt_tokens = reader.int32(kCachedPromptTokens);
    r.preemptions = reader.int32(kPreemptions);
    r.reason = std::string(reader.text(kReason));
    if (reader.has(kScheduled)) r.first_scheduled = reader.seconds(kScheduled, true);
    if (reader.has(kPrefillReplica) && !reader.text(kPrefillReplica).empty()) r.prefill_replica = reader.int32(kPrefillReplica);
    if (reader.has(kKvReserved)) r.kv_reserved = reader.seconds(kKvReserved, true);
    if (reader.has(kKvArrived)) r.kv_arrived = reader.seconds(kKvArrived, true);
    if (reader.has(kKvTransferBytes) && !reader.text(kKvTransferBytes).empty()) {
      r.kv_transfer_bytes = reader.integer(kKvTransferBytes);
    }
    if (reader.has(kEnergyJ)) {
      // Six decimals of joules are whole microjoules: millis() reads the
      // same digits at the same scale (1e-3 x 1e-3).
      r.energy_uj = reader.millis(kEnergyJ, true);
      if (r.energy_uj < -1) reader.fail(kEnergyJ, "negative");
    }
    if (r.outcome == Outcome::finished && (r.first_token == kNoTime || r.finish == kNoTime)) {
      reader.fail(r.first_token == kNoTime ? kFirstToken : kFinish, "empty for a finished request");
    }
    if ((r.first_token != kNoTime && r.first_token < r.arrival) ||
        (r.finish != kNoTime && r.finish < r.arrival)) {
      reader.fail(r.finish < r.arrival ? kFinish : kFirstToken, "before arrival_s");
    }
    fn(r);
  }
}

std::vector<RequestRecord> read_request_records(const std::filesystem::path& path) {
  std::vector<RequestRecord> records;
  for_each_request_record(path, [&](const RequestRecord& r) { records.push_back(r); });
  return records;
}

}  // namespace twin
