#include "metrics/result_files.hpp"

#include <charconv>

#include "base/error.hpp"

namespace twin {

StepSelection parse_step_selection(std::string_view text, std::string_view flag) {
  if (text == "all") return {1};
  if (text == "none") return {0};
  constexpr std::string_view kSample = "sample:";
  if (text.substr(0, kSample.size()) == kSample) {
    const std::string_view digits = text.substr(kSample.size());
    std::int64_t every = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), every);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && every >= 1) return {every};
  }
  throw UsageError(std::string(flag) + ": '" + std::string(text.substr(0, 40)) +
                   "' is not a step selection; expected none, all or sample:N (every N-th step per replica, N >= 1)");
}

std::vector<std::string> csv_result_names(const ResultFileOptions& options) {
  std::vector<std::string> names = {csv_file_name("requests.csv", options.compression)};
  if (!options.steps.none()) names.push_back(csv_file_name("steps.csv", options.compression));
  return names;
}

ResultFiles::ResultFiles(const OutputDir& dir, const ResultFileOptions& options, const ResultColumns& columns) {
  requests_file_ = std::make_unique<CsvOutputFile>(dir.path() / csv_file_name("requests.csv", options.compression),
                                                   options.compression);
  requests_ = std::make_unique<RequestCsvWriter>(requests_file_->stream(), columns.transfer, columns.energy);
  if (!options.steps.none()) {
    steps_file_ = std::make_unique<CsvOutputFile>(dir.path() / csv_file_name("steps.csv", options.compression),
                                                  options.compression);
    steps_ = std::make_unique<StepCsvWriter>(steps_file_->stream(), columns.speculative, columns.tiers,
                                             options.steps.every, columns.energy);
  }
}

void ResultFiles::close() {
  requests_file_->close();
  if (steps_file_) steps_file_->close();
}

std::uint64_t ResultFiles::bytes_written() const {
  return requests_file_->bytes_written() + (steps_file_ ? steps_file_->bytes_written() : 0);
}

}  // namespace twin
