#pragma once
// Records of one run (engine or simulator) kept in memory for the
// comparison and written in the shared schema (requests.csv, steps.csv,
// summary.json) into the run's folder, as `twinserve run` / `simulate` do.
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/records.hpp"
#include "engine/runtime/forward_batch.hpp"
#include "metrics/collector.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/summary.hpp"

namespace twin {

struct RunRecords {
  std::vector<RequestRecord> requests;  // in end order, with their ITL gaps
  std::vector<StepRecord> steps;
  Summary summary;
  // An engine run with its ops timed: one entry per step, as `steps`; empty
  // otherwise (simulations, a GPU engine).
  std::vector<OpTimes> step_op_ns;
  bool interrupted = false;  // a stop ended the run: the records so far
};

class RunRecorder final : public RecordSink {
 public:
  // An empty dir writes nothing. Existing result files need overwrite
  // (UsageError naming the file otherwise).
  RunRecorder(const std::filesystem::path& dir, bool overwrite);
  RunRecorder(const RunRecorder&) = delete;  // its sink holds `this`
  RunRecorder& operator=(const RunRecorder&) = delete;
  void on_request(const RequestRecord& record) override;
  void on_step(const StepRecord& record) override;
  void on_step_tally(const StepTally& tally) override;
  // Summarises, writes summary.json and hands the records over.
  RunRecords finish(const SummaryContext& context);

 private:
  std::filesystem::path dir_;
  std::optional<OutputDir> out_;
  std::ofstream requests_file_, steps_file_;
  std::unique_ptr<RequestCsvWriter> request_writer_;
  std::unique_ptr<StepCsvWriter> step_writer_;
  // Exact whatever the size: the records are kept in memory anyway, and the
  // SLOs only come with finish().
  MetricsCollector collector_{CollectorOptions{CollectorOptions::kAlwaysExact, {}}};
  RunRecords records_;
  std::optional<ResultSink> sink_;  // over the writers above (null without a folder)
};

}  // namespace twin
