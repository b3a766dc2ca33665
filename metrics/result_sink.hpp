#pragma once
// The one sink that turns a run's records into its results, for the engine
// and the simulator alike: every request record and the run's step tally go
// to the metrics collector and, where a writer is given, records to its CSV
// file; a listener sees each request as
// it ends (a progress line, validate's in-memory copy). `run`, `simulate`
// and validate's recorder all write through it, so the three cannot differ
// in what a summary counts.
#include <functional>
#include <utility>

#include "engine/core/record_stream.hpp"
#include "metrics/collector.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/step_csv.hpp"

namespace twin {

class ResultSink final : public RecordSink {
 public:
  using RequestListener = std::function<void(const RequestRecord&)>;
  using StepListener = std::function<void(const StepRecord&)>;

  // The writers may be null (nothing written); they and the collector must
  // outlive the sink.
  ResultSink(MetricsCollector& collector, RequestCsvWriter* requests, StepCsvWriter* steps,
             RequestListener on_request = {}, StepListener on_step = {})
      : collector_(collector),
        requests_(requests),
        steps_(steps),
        on_request_(std::move(on_request)),
        on_step_(std::move(on_step)) {}

  void on_request(const RequestRecord& record) override {
    collector_.add(record);
    if (requests_) requests_->write(record);
    if (on_request_) on_request_(record);
  }
  // The collector counts steps from the loop's tally, not from records
  // (a run may pass on only some of them, or none).
  void on_step(const StepRecord& record) override {
    if (steps_) steps_->write(record);
    if (on_step_) on_step_(record);
  }
  void on_step_tally(const StepTally& tally) override { collector_.add(tally); }

 private:
  MetricsCollector& collector_;
  RequestCsvWriter* requests_;
  StepCsvWriter* steps_;
  RequestListener on_request_;
  StepListener on_step_;
};

}  // namespace twin
