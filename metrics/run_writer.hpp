#pragma once
// The result files of one run, the simulator's or the engine's: the folder
// claimed before the run's costly set-up, requests.csv and steps.csv written
// as the records come (ResultFiles: --steps, --compress), then summary.json
// and vllm_result.json from the summary. `simulate`, `run`, `serve` and
// `validate`'s engine runs all write through it, so a run's folder is the
// same whichever side made it (docs/outputs.md).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/records.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/result_files.hpp"
#include "metrics/summary.hpp"
#include "metrics/vllm_detailed.hpp"
#include "metrics/vllm_result.hpp"

namespace twin {

struct RunFileOptions {
  std::string out_dir;     // empty: no files at all
  bool overwrite = false;  // replace result files already there
  ResultFileOptions files;
  bool vllm_result = false;  // also vllm_result.json, with vLLM's per-request lists
};

class RunWriter {
 public:
  // Claims the folder (OutputDir: a result file already there needs
  // overwrite); writes nothing yet.
  explicit RunWriter(RunFileOptions options);
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;

  bool writes() const { return dir_.has_value(); }
  // Opens the CSVs once the run knows their columns. Without a folder the
  // writers below stay null.
  void open(const ResultColumns& columns);
  RequestCsvWriter* requests() { return csv_ ? csv_->requests() : nullptr; }
  StepCsvWriter* steps() { return csv_ ? csv_->steps() : nullptr; }
  // Hands the rows written so far to the file (a live server's reader sees
  // each request as it ends).
  void flush_requests();
  // Keeps a request's entry for vllm_result.json's per-request lists (only
  // when that file is asked for; the lists are in memory until the end).
  void keep(const RequestRecord& record);
  bool keeps_requests() const { return options_.vllm_result && writes(); }
  // Closes the CSVs and writes summary.json (and vllm_result.json, its
  // requests in arrival order); twin::Error naming a file whose write
  // failed. Returns the CSVs' bytes on disk.
  std::uint64_t finish(const Summary& summary, const VllmResultContext& vllm);

 private:
  RunFileOptions options_;
  std::optional<OutputDir> dir_;
  std::optional<ResultFiles> csv_;
  std::vector<std::pair<Time, VllmRequestEntry>> detailed_;
};

}  // namespace twin
