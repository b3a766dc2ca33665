#pragma once
// `twinserve calibrate` as a library call: times the engine's ops for one
// model over a grid covering what it will run (GEMMs and elementwise ops over
// token counts, attention over (new tokens, context) and (batch, context),
// sampling over seqs), then whole engine steps for the per-step overhead, and
// returns the calibrated profile (hwprofiles/calibrated_profile.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "base/error.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "engine/runtime/model_runner.hpp"
#include "models/model_desc.hpp"

namespace twin {

struct CalibrateOptions {
  // The engine measured: backend, threads, weights (or seed), dtypes; the
  // step scenarios size its KV cache themselves.
  RunnerOptions engine;
  std::int32_t tp = 1;          // only 1: the engine runs one device
  std::int64_t max_tokens = 0;  // top of the token grids; 0: 4096 (quick: 256), at most the model's context
  bool quick = false;           // a coarse grid and few repeats (tests)
  std::int32_t rounds = 3;      // passes over the grid and the step scenarios, repeats pooled (1 to 100)
  std::ostream* progress = nullptr;  // one line per round and per phase
  // Called as the timing goes, for a progress line: the phase ("round 1/3":
  // the op grid's points; "steps": the whole-step scenario runs) and how
  // many of its `total` items are done; each phase ends with done == total,
  // before its line on `progress`. Given, it replaces the step scenarios'
  // line at each tenth on `progress`.
  std::function<void(const std::string& phase, std::size_t done, std::size_t total)> on_progress;
  // Asked before each grid point and after each step scenario run
  // (calibrate's Ctrl-C): true ends the calibration with CalibrationStopped.
  // Part of the grid or no step fit is no profile, so none is returned.
  std::function<bool()> stop;
};

// What calibrate throws once `stop` said so: where the timing stood.
struct CalibrationStopped : Error {
  using Error::Error;
};

// Throws UsageError for options the engine cannot run (tp > 1, MoE models,
// unknown backend) and what the runtime throws.
CalibratedProfile calibrate(const ModelDesc& model, const CalibrateOptions& options);

}  // namespace twin
