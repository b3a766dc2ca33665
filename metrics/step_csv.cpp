#include "metrics/step_csv.hpp"

#include <ostream>
#include <string>

#include "base/error.hpp"
#include "metrics/csv_fields.hpp"

namespace twin {
namespace {

enum Column {
  kStepId, kReplica, kStart, kDuration, kBatchSize, kNumPrefillSeqs, kNumDecodeSeqs, kNewTokens,
  kContextTokens, kKvBlocksUsed, kPreempted, kWaiting, kProposedTokens, kAcceptedTokens, kLookaheadAccepted, kEnergyJ
};
const std::vector<std::string> kColumns = {
    "step_id", "replica", "start_s", "duration_ms", "batch_size", "num_prefill_seqs", "num_decode_seqs",
    "new_tokens", "context_tokens", "kv_blocks_used", "preempted", "waiting",
    "proposed_tokens", "accepted_tokens", "lookahead_accepted", "energy_j"};
constexpr std::size_t kRequiredColumns = kProposedTokens;

// "3:1 3:3 1:0" -> lookahead and accepted per seq.
void parse_lookahead_accepted(const csv::Reader& reader, std::string_view text, StepRecord& s) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(at, end - at);
    const std::size_t colon = item.find(':');
    auto number = [&](std::string_view digits) {
      std::int32_t v = 0;
      if (digits.empty() || digits.size() > 4) reader.fail(kLookaheadAccepted, "expected 'L:a' pairs, e.g. 3:1 3:3");
      for (const char c : digits) {
        if (c < '0' || c > '9') reader.fail(kLookaheadAccepted, "expected 'L:a' pairs, e.g. 3:1 3:3");
        v = v * 10 + (c - '0');
      }
      return v;
    };
    if (colon == std::string_view::npos) reader.fail(kLookaheadAccepted, "expected 'L:a' pairs, e.g. 3:1 3:3");
    const std::int32_t lookahead = number(item.substr(0, colon));
    const std::int32_t accepted = number(item.substr(colon + 1));
    if (accepted > lookahead) reader.fail(kLookaheadAccepted, "more accepted than proposed");
    s.lookahead.push_back(lookahead);
    s.accepted.push_back(accepted);
    at = end + 1;
  }
}

}  // namespace

StepCsvWriter::StepCsvWriter(std::ostream& out, bool speculative, std::vector<std::string> tiers, std::int64_t every,
                             bool energy)
    : out_(out), speculative_(speculative), energy_(energy), num_tiers_(tiers.size()),
      every_(every > 1 ? static_cast<std::uint64_t>(every) : 1) {
  std::string header;
  const std::size_t columns = speculative ? static_cast<std::size_t>(kEnergyJ) : kRequiredColumns;
  for (std::size_t c = 0; c < columns; ++c) header += (header.empty() ? "" : ",") + kColumns[c];
  if (energy) header += "," + kColumns[kEnergyJ];
  for (const std::string& name : tiers) header += "," + name + "_load_blocks," + name + "_store_blocks";
  out_ << header << '\n';
}

void StepCsvWriter::write(const StepRecord& s) {
  if (!keeps_step(s.step_id, every_)) return;
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
  if (speculative_) {
    row += ',';
    csv::append_int(row, s.proposed_tokens);
    row += ',';
    csv::append_int(row, s.accepted_tokens);
    row += ',';
    for (std::size_t i = 0; i < s.accepted.size(); ++i) {
      if (i > 0) row += ' ';
      csv::append_int(row, i < s.lookahead.size() ? s.lookahead[i] : 0);
      row += ':';
      csv::append_int(row, s.accepted[i]);
    }
  }
  if (energy_) {
    row += ',';
    if (s.energy_uj >= 0) csv::append_fixed(row, static_cast<double>(s.energy_uj) * 1e-6, 6);
  }
  for (std::size_t t = 0; t < num_tiers_; ++t) {
    row += ',';
    csv::append_int(row, t < s.tier_loads.size() ? s.tier_loads[t] : 0);
    row += ',';
    csv::append_int(row, t < s.tier_stores.size() ? s.tier_stores[t] : 0);
  }
  row += '\n';
  out_ << row;
}

void for_each_step_record(const std::filesystem::path& path, const std::function<void(const StepRecord&)>& fn) {
  csv::Reader reader(path, kColumns, kRequiredColumns);
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
    if (reader.has(kProposedTokens)) s.proposed_tokens = reader.integer(kProposedTokens);
    if (reader.has(kAcceptedTokens)) s.accepted_tokens = reader.integer(kAcceptedTokens);
    if (reader.has(kLookaheadAccepted)) parse_lookahead_accepted(reader, reader.text(kLookaheadAccepted), s);
    if (reader.has(kEnergyJ)) {
      // J with 6 decimals to integer uJ: the exact decimal scaling the
      // millis reader does (ms to ns); empty: not known (-1).
      s.energy_uj = reader.millis(kEnergyJ, true);
      if (s.energy_uj < -1) reader.fail(kEnergyJ, "negative");
    }
    if (s.proposed_tokens < 0 || s.accepted_tokens < 0 || s.accepted_tokens > s.proposed_tokens) {
      reader.fail(kAcceptedTokens, "accepted_tokens must be in [0, proposed_tokens]");
    }
    fn(s);
  }
}

std::vector<StepRecord> read_step_records(const std::filesystem::path& path) {
  std::vector<StepRecord> records;
  for_each_step_record(path, [&](const StepRecord& s) { records.push_back(s); });
  return records;
}

}  // namespace twin
