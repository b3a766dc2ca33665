#pragma once
// Streams records in, summarises at the end. Memory: a few 8-byte values per
// request (TTFT, TPOT, E2E, max ITL, ...) and fixed-size histograms; never
// every inter-token gap. Records may come in any order; the summary depends
// only on the multiset of records.
#include <cstdint>
#include <map>
#include <vector>

#include "engine/core/records.hpp"
#include "metrics/log_histogram.hpp"
#include "metrics/summary.hpp"

namespace twin {

class MetricsCollector {
 public:
  // Records with impossible times (finish before arrival, negative gaps)
  // throw twin::Error naming the request or step.
  void add(const RequestRecord& record);
  void add(const StepRecord& record);
  Summary summarize(const SummaryContext& context) const;

 private:
  struct ReplicaTally {
    std::uint64_t requests = 0, tokens = 0;
  };
  std::uint64_t num_requests_ = 0, completed_ = 0, rejected_ = 0, aborted_ = 0;
  // Per completed request, in ns (TPOT in ns as a double; -1 when undefined).
  std::vector<Time> ttft_ns_, e2el_ns_, max_itl_ns_, arrival_ns_;
  std::vector<double> tpot_ns_;
  LogHistogram itl_ns_;
  Time first_arrival_ = kNoTime, last_arrival_ = kNoTime, last_finish_ = kNoTime;
  std::uint64_t input_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;
  std::uint64_t preemptions_ = 0;
  std::uint64_t handed_off_ = 0, transfer_bytes_ = 0;
  std::vector<Time> kv_wait_ns_, kv_transfer_ns_;  // per transfer
  std::map<std::int32_t, ReplicaTally> replicas_;
  std::uint64_t steps_ = 0;
  std::uint64_t spec_proposed_ = 0, spec_accepted_ = 0, spec_verifications_ = 0;
  long double kv_blocks_sum_ = 0, batch_size_sum_ = 0;
  std::int64_t kv_blocks_max_ = 0, batch_size_max_ = 0;
};

}  // namespace twin
