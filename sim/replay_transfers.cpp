#include "sim/replay_transfers.hpp"

#include <utility>

#include "base/error.hpp"
#include "metrics/request_csv.hpp"

namespace twin {

ReplayTransfers::ReplayTransfers(const std::vector<RequestRecord>& records, std::string origin)
    : origin_(std::move(origin)) {
  for (const RequestRecord& r : records) {
    if (r.kv_reserved == kNoTime || r.kv_arrived == kNoTime) continue;
    if (r.kv_arrived < r.kv_reserved) {
      throw Error(origin_ + ": request " + std::to_string(r.id) + "'s KV arrived before its blocks were reserved");
    }
    by_request_[r.id] = Recorded{r.kv_arrived - r.kv_reserved, r.kv_transfer_bytes};
  }
}

ReplayTransfers ReplayTransfers::from_file(const std::string& requests_csv) {
  return ReplayTransfers(read_request_records(requests_csv), requests_csv);
}

TransferTiming ReplayTransfers::price(const InboundTransfer& t) const {
  const auto it = by_request_.find(t.id);
  if (it == by_request_.end()) {
    throw Error(origin_ + ": the simulation moved request " + std::to_string(t.id) +
                "'s KV, but the log has no transfer of it (no kv_reserved_s / kv_arrived_s): the replay diverged "
                "from the recorded run");
  }
  return TransferTiming{t.start + it->second.duration, it->second.bytes};
}

}  // namespace twin
