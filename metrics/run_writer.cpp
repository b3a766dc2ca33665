#include "metrics/run_writer.hpp"

#include <algorithm>
#include <fstream>

#include "base/error.hpp"
#include "metrics/summary_json.hpp"

namespace twin {

RunWriter::RunWriter(RunFileOptions options) : options_(std::move(options)) {
  if (options_.out_dir.empty()) return;
  std::vector<std::string> files = csv_result_names(options_.files);
  files.push_back("summary.json");
  if (options_.vllm_result) files.push_back("vllm_result.json");
  dir_.emplace(options_.out_dir, options_.overwrite, files);
}

void RunWriter::open(const ResultColumns& columns) {
  if (dir_ && !csv_) csv_.emplace(*dir_, options_.files, columns);
}

void RunWriter::flush_requests() {
  if (RequestCsvWriter* w = requests()) w->flush();
}

void RunWriter::keep(const RequestRecord& record) {
  if (keeps_requests()) detailed_.emplace_back(record.arrival, vllm_request_entry(record));
}

std::uint64_t RunWriter::finish(const Summary& summary, const VllmResultContext& vllm) {
  if (!dir_) return 0;
  std::uint64_t bytes = 0;
  if (csv_) {
    csv_->close();
    bytes = csv_->bytes_written();
  }
  std::ofstream summary_file = dir_->open("summary.json");
  write_summary_json(summary_file, summary);
  if (!summary_file) throw Error(options_.out_dir + "/summary.json: write failed");
  if (options_.vllm_result) {
    // vLLM's per-request lists are in the order the requests were sent
    // (arrival); records end in another order.
    std::stable_sort(detailed_.begin(), detailed_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<VllmRequestEntry> entries;
    entries.reserve(detailed_.size());
    for (auto& [arrival, entry] : detailed_) entries.push_back(std::move(entry));
    nlohmann::ordered_json result = vllm_result_json(summary, vllm);
    add_vllm_detailed(result, entries);
    std::ofstream file = dir_->open("vllm_result.json");
    file << result.dump(2) << '\n';
    if (!file) throw Error(options_.out_dir + "/vllm_result.json: write failed");
  }
  return bytes;
}

}  // namespace twin
