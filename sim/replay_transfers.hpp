#pragma once
// The replay of an engine run's KV transfers (prefill/decode disaggregation,
// docs/disaggregation.md), as sim/replay_cost_model.hpp replays its steps:
// each transfer lasts what the engine measured for it (its request's
// kv_reserved to kv_arrived) and moves the bytes it moved. Given the
// engine's steps.csv and requests.csv, the simulator reproduces a
// disaggregated engine run exactly (replay parity).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/disaggregation.hpp"
#include "engine/core/records.hpp"

namespace twin {

class ReplayTransfers {
 public:
  // The records' transfers: those with both kv_reserved and kv_arrived.
  // `origin` names them in errors (e.g. the requests.csv path).
  ReplayTransfers(const std::vector<RequestRecord>& records, std::string origin);
  static ReplayTransfers from_file(const std::string& requests_csv);

  // The recorded transfer of t.id, from t.start. Throws twin::Error when
  // the log has none (the replay diverged from the recorded run).
  TransferTiming price(const InboundTransfer& t) const;
  std::size_t size() const { return by_request_.size(); }

 private:
  struct Recorded {
    Time duration = 0;
    std::int64_t bytes = 0;
  };
  std::string origin_;
  std::unordered_map<RequestId, Recorded> by_request_;
};

}  // namespace twin
