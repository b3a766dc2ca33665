#pragma once
// `twinserve calibrate` as a library call: times the engine's ops for one
// model over a grid covering what it will run (GEMMs and elementwise ops over
// token counts, attention over (new tokens, context) and (batch, context),
// sampling over seqs), then whole engine steps for the per-step overhead, and
// returns the calibrated profile (hwprofiles/calibrated_profile.hpp).
#include <cstdint>
#include <ostream>
#include <string>

#include "hwprofiles/calibrated_profile.hpp"
#include "models/model_desc.hpp"

namespace twin {

struct CalibrateOptions {
  std::string backend = "cpu";  // cpu, cuda or auto
  std::int32_t threads = 0;     // CPU worker threads; <= 0: the backend's default (one per hardware thread)
  std::string weights_dir;      // empty: random weights from seed
  std::string dtype = "auto";   // weight storage: auto, f32, bf16
  std::string kv_cache_dtype = "auto";  // KV cache: auto (the weights' dtype), f32, bf16
  std::uint64_t seed = 0;
  std::int32_t tp = 1;          // only 1: the engine runs one device
  std::int64_t max_tokens = 0;  // top of the token grids; 0: 4096 (quick: 256), at most the model's context
  bool quick = false;           // a coarse grid and few repeats (tests)
  std::int32_t rounds = 3;      // passes over the grid and the step scenarios, repeats pooled (1 to 100)
  std::ostream* progress = nullptr;  // one line per round and per phase
};

// Throws UsageError for options the engine cannot run (tp > 1, MoE models,
// unknown backend) and what the runtime throws.
CalibratedProfile calibrate(const ModelDesc& model, const CalibrateOptions& options);

}  // namespace twin
