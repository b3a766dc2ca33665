#pragma once
// The CSV files of a run's folder as the user asked for them: which steps
// steps.csv keeps (`--steps none|sample:N|all`) and whether the CSVs are
// compressed (`--compress none|gz|zst`: requests.csv.gz, steps.csv.zst).
// `simulate` and `run` open their files through it; summary.json is written
// beside them, uncompressed, and never depends on these choices: the
// collector sees every record whatever is written.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/csv_output_file.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/step_csv.hpp"

namespace twin {

// Which step records steps.csv gets: every one (1), one in `every` per
// replica (step_id a multiple of it), or none (0: no steps.csv at all).
struct StepSelection {
  std::int64_t every = 1;
  bool none() const { return every == 0; }
};

// "all", "none" or "sample:N" (N >= 1); else a twin::UsageError naming `flag`.
StepSelection parse_step_selection(std::string_view text, std::string_view flag);

struct ResultFileOptions {
  StepSelection steps;
  CsvCompression compression = CsvCompression::none;
};

// The CSV files a run with these options writes (requests.csv[.gz|.zst],
// steps.csv[...] unless none), for OutputDir's overwrite check.
std::vector<std::string> csv_result_names(const ResultFileOptions& options);

// What the files' columns depend on.
struct ResultColumns {
  bool transfer = false;            // requests.csv: the disaggregation columns
  bool speculative = false;         // steps.csv: the speculative columns
  std::vector<std::string> tiers;   // steps.csv: the KV tier columns
  bool energy = false;              // steps.csv and requests.csv: energy_j (the run's power is priced)
};

class ResultFiles {
 public:
  // Opens the files in `dir` and writes their headers; twin::Error naming a
  // file that cannot be opened.
  ResultFiles(const OutputDir& dir, const ResultFileOptions& options, const ResultColumns& columns);
  RequestCsvWriter* requests() { return requests_.get(); }
  StepCsvWriter* steps() { return steps_.get(); }  // null with --steps none
  // Finishes and closes every file; twin::Error naming one whose write failed.
  void close();
  // Bytes on disk of the CSV files (after close(), all of them).
  std::uint64_t bytes_written() const;

 private:
  std::unique_ptr<CsvOutputFile> requests_file_, steps_file_;
  std::unique_ptr<RequestCsvWriter> requests_;
  std::unique_ptr<StepCsvWriter> steps_;
};

}  // namespace twin
