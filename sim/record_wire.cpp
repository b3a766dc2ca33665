#include "sim/record_wire.hpp"

#include "base/error.hpp"

namespace twin {

void WireWriter::put_record(const RequestRecord& r) {
  put(r.id);
  put(r.replica);
  put(r.outcome);
  put_string(r.reason);
  put(r.arrival);
  put(r.first_token);
  put(r.first_scheduled);
  put(r.finish);
  put(r.prompt_tokens);
  put(r.output_tokens);
  put(r.cached_prompt_tokens);
  put(r.preemptions);
  put(r.energy_uj);
  put_vector(r.itl);
  put(r.prefill_replica);
  put(r.kv_reserved);
  put(r.kv_arrived);
  put(r.kv_transfer_bytes);
}

void WireWriter::put_record(const StepRecord& s) {
  put(s.step_id);
  put(s.replica);
  put(s.start);
  put(s.duration);
  put(s.batch_size);
  put(s.num_prefill_seqs);
  put(s.num_decode_seqs);
  put(s.new_tokens);
  put(s.context_tokens);
  put(s.kv_blocks_used);
  put(s.preempted);
  put(s.waiting);
  put(s.swapped_out_blocks);
  put(s.swapped_in_blocks);
  put(s.proposed_tokens);
  put(s.accepted_tokens);
  put(s.energy_uj);
  put_vector(s.lookahead);
  put_vector(s.accepted);
  put_vector(s.tier_loads);
  put_vector(s.tier_stores);
}

void WireReader::need(std::uint64_t n) const {
  if (n > bytes_.size() - pos_) {
    throw Error("rank exchange: a message ends early (" + std::to_string(bytes_.size()) + " bytes, " +
                std::to_string(n) + " more wanted at " + std::to_string(pos_) + ")");
  }
}

std::string WireReader::get_string() {
  const auto n = get<std::uint64_t>();
  need(n);
  std::string out = bytes_.substr(pos_, n);
  pos_ += n;
  return out;
}

void WireReader::get_record(RequestRecord& r) {
  r.id = get<RequestId>();
  r.replica = get<std::int32_t>();
  r.outcome = get<Outcome>();
  r.reason = get_string();
  r.arrival = get<Time>();
  r.first_token = get<Time>();
  r.first_scheduled = get<Time>();
  r.finish = get<Time>();
  r.prompt_tokens = get<std::int32_t>();
  r.output_tokens = get<std::int32_t>();
  r.cached_prompt_tokens = get<std::int32_t>();
  r.preemptions = get<std::int32_t>();
  r.energy_uj = get<std::int64_t>();
  get_vector(r.itl);
  r.prefill_replica = get<std::int32_t>();
  r.kv_reserved = get<Time>();
  r.kv_arrived = get<Time>();
  r.kv_transfer_bytes = get<std::int64_t>();
}

void WireReader::get_record(StepRecord& s) {
  s.step_id = get<std::uint64_t>();
  s.replica = get<std::int32_t>();
  s.start = get<Time>();
  s.duration = get<Time>();
  s.batch_size = get<std::int32_t>();
  s.num_prefill_seqs = get<std::int32_t>();
  s.num_decode_seqs = get<std::int32_t>();
  s.new_tokens = get<std::int64_t>();
  s.context_tokens = get<std::int64_t>();
  s.kv_blocks_used = get<std::int32_t>();
  s.preempted = get<std::int32_t>();
  s.waiting = get<std::int32_t>();
  s.swapped_out_blocks = get<std::int32_t>();
  s.swapped_in_blocks = get<std::int32_t>();
  s.proposed_tokens = get<std::int64_t>();
  s.accepted_tokens = get<std::int64_t>();
  s.energy_uj = get<std::int64_t>();
  get_vector(s.lookahead);
  get_vector(s.accepted);
  get_vector(s.tier_loads);
  get_vector(s.tier_stores);
}

}  // namespace twin
