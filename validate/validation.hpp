#pragma once
// `twinserve validate`: close the loop between the engine and the simulator.
// The simulator with the calibrated cost model predicts one replica's
// capacity; for each load (a fraction of it) the trace is rescaled, served
// by the engine for real, and simulated three ways on the same requests:
// calibrated (the prediction), replay of the engine's step log (parity: must
// be exact, so any error left is the cost model's) and roofline (the
// uncalibrated baseline). docs/validate.md describes the outputs.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/engine_setup.hpp"
#include "sim/cluster_config.hpp"
#include "traces/trace_reader.hpp"
#include "validate/comparison.hpp"
#include "validate/run_recorder.hpp"
#include "validate/step_pricing.hpp"

namespace twin {

struct ValidateOptions {
  std::string trace;
  TraceReadOptions read;         // format (default: detected) and bad-row policy
  std::string profile;           // calibrated hardware profile (twinserve calibrate); required
  // Hardware profile pricing the roofline column; empty: the bundled
  // profile of the device the engine runs on (hardware_for_device).
  std::string roofline_hardware;
  std::vector<double> loads = {0.3, 0.6, 0.9};
  std::int64_t max_requests = 0;  // 0: the whole trace
  // The engine as `twinserve run` would be set up (engine_settings): model,
  // scheduler preset and flags (max_model_len unset: the model's context),
  // backend, threads, seed (weights, prompts, sampling), KV memory
  // (num_blocks 0: the memory plan). Dtypes "auto" or empty: the profile's;
  // another is a UsageError: the prediction would be for another engine.
  // Likewise runner.quantization: empty takes the profile's; "none" or
  // "int8" must match it.
  EngineSetup engine;
  std::filesystem::path out_dir;
  bool overwrite = false;
  bool plots = true;                   // run gnuplot when it is installed
  // Engine runs per load (1 to 10): the models are compared with each
  // metric's median over the runs; runs 2.. against run 1 are the machine's
  // own run-to-run noise, the floor under which no prediction error is
  // measurable.
  std::int32_t engine_repeats = 1;
  std::function<void(const std::string&)> progress;  // one line per stage
  // Asked between the engine's steps and before each load: true (Ctrl-C in
  // `twinserve validate`) stops the validation. The engine run in progress
  // ends as `twinserve run` does on an interrupt (requests in flight aborted
  // as "interrupted", its records written, summary.json marked); that load
  // is left out of the result, the loads finished before it are kept.
  std::function<bool()> stop;
};

// Loads must be positive and finite; throws UsageError naming the bad value.
std::vector<double> parse_loads(const std::string& text);

struct ModelResult {  // one simulated prediction of a load
  std::string name;   // calibrated, roofline
  RunRecords run;
  std::vector<MetricComparison> metrics;
  std::vector<RequestErrorStats> request_errors;
  std::vector<CompositionError> step_errors;
  std::vector<OpTimeError> op_errors;  // per op inside the engine's steps (CPU engine: ops timed)
};

struct LoadResult {
  double load = 0;
  double rate_rps = 0;
  std::string folder;  // relative to the output folder
  RunRecords engine;
  // Runs 2.. of the engine (--engine-repeats) against run 1 (`engine`):
  // measured = run 1, predicted = the repeat.
  std::vector<std::vector<MetricComparison>> engine_repeats;
  RunRecords replay;
  ParityResult parity;
  std::string parity_error;  // the replay failed (diverged): why
  std::vector<ModelResult> models;  // calibrated first, then roofline
  std::vector<PricedStep> priced_steps;  // per engine step: measured, then each model's price
};

struct ValidationResult {
  std::string model, profile, trace;
  std::int64_t requests = 0;
  double trace_rate_rps = 0;
  double capacity_rps = 0;  // predicted, saturated run, calibrated model
  std::string engine_description;
  std::string roofline_hardware;  // the hardware profile that priced the roofline column
  std::vector<LoadResult> loads;
  // Set when ValidateOptions::stop ended the validation: the folder of the
  // load whose engine run it stopped, or "" if it stopped between loads.
  std::optional<std::string> interrupted;
  bool parity_exact() const;
  // Why the roofline column is no prediction here, or "" when it is one:
  // the bundled `cpu` profile holds nominal peaks of no particular machine.
  std::string roofline_caveat() const;
};

// Runs everything and writes the per-load folders (not the report).
ValidationResult run_validation(const ValidateOptions& options);

}  // namespace twin
