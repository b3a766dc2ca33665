#include "validate/run_recorder.hpp"

#include "base/error.hpp"
#include "metrics/summary_json.hpp"

namespace twin {

RunRecorder::RunRecorder(const std::filesystem::path& dir, bool overwrite) : dir_(dir) {
  if (dir.empty()) return;
  out_.emplace(dir, overwrite, kResultFiles);
  requests_file_ = out_->open("requests.csv");
  request_writer_ = std::make_unique<RequestCsvWriter>(requests_file_);
  steps_file_ = out_->open("steps.csv");
  step_writer_ = std::make_unique<StepCsvWriter>(steps_file_);
}

void RunRecorder::on_request(const RequestRecord& record) {
  collector_.add(record);
  if (request_writer_) request_writer_->write(record);
  records_.requests.push_back(record);
}

void RunRecorder::on_step(const StepRecord& record) {
  collector_.add(record);
  if (step_writer_) step_writer_->write(record);
  records_.steps.push_back(record);
}

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
