#include "validate/run_recorder.hpp"

#include "base/error.hpp"
#include "metrics/summary_json.hpp"

namespace twin {

RunRecorder::RunRecorder(const std::filesystem::path& dir, bool overwrite) : dir_(dir) {
  if (!dir.empty()) {
    out_.emplace(dir, overwrite, kResultFiles);
    requests_file_ = out_->open("requests.csv");
    request_writer_ = std::make_unique<RequestCsvWriter>(requests_file_);
    steps_file_ = out_->open("steps.csv");
    step_writer_ = std::make_unique<StepCsvWriter>(steps_file_);
  }
  sink_.emplace(collector_, request_writer_.get(), step_writer_.get(),
                [this](const RequestRecord& r) { records_.requests.push_back(r); },
                [this](const StepRecord& s) { records_.steps.push_back(s); });
}

void RunRecorder::on_request(const RequestRecord& record) { sink_->on_request(record); }

void RunRecorder::on_step(const StepRecord& record) { sink_->on_step(record); }

void RunRecorder::on_step_tally(const StepTally& tally) { sink_->on_step_tally(tally); }

RunRecords RunRecorder::finish(const SummaryContext& context) {
  records_.summary = collector_.summarize(context);
  if (out_) {
    requests_file_.flush();
    steps_file_.flush();
    if (!requests_file_ || !steps_file_) throw Error(dir_.string() + ": writing requests.csv / steps.csv failed");
    std::ofstream summary = out_->open("summary.json");
    write_summary_json(summary, records_.summary);
    if (!summary) throw Error((dir_ / "summary.json").string() + ": write failed");
  }
  return std::move(records_);
}

}  // namespace twin
