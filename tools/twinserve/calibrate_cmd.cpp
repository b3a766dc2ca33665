// twinserve calibrate: times the engine's own ops for one model on this
// machine and writes a calibrated profile for `simulate --profile`
// (docs/calibrate.md).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "engine/profiler/calibrate.hpp"
#include "engine/runtime/model_weights.hpp"
#include "hwprofiles/calibrated_profile.hpp"
#include "metrics/output_dir.hpp"
#include "models/model_desc.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/progress_line.hpp"

namespace twin::cli {
namespace {

struct CalibrateArgs {
  std::optional<std::string> model, weights;
  EngineFlags engine;
  std::string out;
  std::int32_t tp = 1, rounds = CalibrateOptions{}.rounds;
  std::int64_t max_tokens = 0;
  std::uint64_t seed = 0;
  bool quick = false, overwrite = false, quiet = false;
};

void run(const CalibrateArgs& a) {
  if (!a.model && !a.weights) throw UsageError("calibrate needs --model NAME (or --weights DIR holding a config.json)");
  if (a.max_tokens < 0) throw UsageError("--max-tokens must be positive");
  // The profile's folder is created and found writable now, not after
  // minutes of timing.
  const std::filesystem::path out_path(a.out);
  const std::filesystem::path out_folder = out_path.has_parent_path() ? out_path.parent_path() : ".";
  const OutputDir out_dir(out_folder, a.overwrite, {out_path.filename().string()});
  const ModelDesc model = resolve_model(a.model.value_or(a.weights.value_or("")));
  CalibrateOptions o;
  o.engine = runner_options(a.engine, nullptr, a.seed);
  o.engine.weights_dir = a.weights.value_or("");
  o.tp = a.tp;
  o.max_tokens = a.max_tokens;
  o.quick = a.quick;
  o.rounds = a.rounds;
  o.progress = a.quiet ? nullptr : &std::cerr;
  // On a terminal, a line per phase (each round over the op grid, then the
  // step scenarios): done of its total, rate and ETA; cleared as the phase
  // ends, before the phase's own line.
  std::unique_ptr<ProgressLine> line;
  std::string line_phase;
  if (progress_line_shown(!a.quiet)) {
    o.on_progress = [&line, &line_phase](const std::string& phase, std::size_t done, std::size_t total) {
      if (!line || phase != line_phase) {
        line = std::make_unique<ProgressLine>("calibrate " + phase, phase == "steps" ? "runs" : "points", true);
        line_phase = phase;
      }
      line->update(static_cast<std::int64_t>(done), static_cast<std::int64_t>(total));
      if (done >= total) line->finish();
    };
  }
  const CalibratedProfile profile = calibrate(model, o);
  write_calibrated_profile(a.out, profile);
  const StepOverhead& fit = profile.overhead;
  const std::string& quantization = profile.metadata.quantization;
  std::cout << "Calibrated " << profile.metadata.model << " (" << profile.metadata.dtype << " weights, "
            << (quantization.empty() ? "" : quantization_label(quantization) + ", ") << profile.metadata.kv_dtype
            << " KV) on " << profile.metadata.device << " in "
            << profile.metadata.seconds << " s; a step is its ops, each kind scaled to its in-situ time, + "
            << fit.base_ns / 1e3 << " us + " << fit.per_seq_ns / 1e3 << " us per seq, + up to " << fit.idle_ns / 1e3
            << " us after idling\n";
  if (fit.fit.steps > 0) {
    std::cout << "Step fit over " << fit.fit.steps << " engine steps: mean |error| " << fit.fit.mean_abs_error * 100
              << "%, max " << fit.fit.max_abs_error * 100 << "%; the ops timed alone sum to "
              << fit.fit.unscaled_ratio_mean << " x the step (" << fit.fit.unscaled_ratio_min << " to "
              << fit.fit.unscaled_ratio_max << "), timed in the steps to " << fit.fit.in_situ_ratio_mean << " x\n";
  }
  std::cout << "Wrote " << a.out << "\n";
}

const RegisterCommand registration{"calibrate", [](CLI::App& root) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub = root.add_subcommand("calibrate", "Time the engine's ops on this machine: a calibrated profile for simulate --profile");
  auto& a = *args;
  add_flag(*sub, FlagId::model, a.model, "default: --weights' config.json");
  add_flag(*sub, FlagId::weights, a.weights);
  add_engine_flags(*sub, a.engine);
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "the profile's (the engine runs 1)");
  sub->add_option("--max-tokens", a.max_tokens, "Top of the token grids (default 4096, quick 256; at most the model's context)")->check(int_range(0, kMaxInt32));
  add_flag(*sub, FlagId::seed, a.seed, "here random weights and prompt tokens");
  sub->add_flag("--quick", a.quick, "Coarse grid, few repeats (seconds for tiny; for tests)");
  sub->add_option("--rounds", a.rounds,
                  "Passes over the grid and the step scenarios, each point's repeats pooled (default 3): "
                  "machine noise then spreads over the tables instead of bending one")
      ->check(CLI::Range(1, 100));
  sub->add_option("--out", a.out, "Profile to write (JSON)")->required()->check(non_empty());
  sub->add_flag("--overwrite", a.overwrite, "Replace --out if it exists");
  add_switch(*sub, FlagId::quiet, a.quiet, "nor the phase lines: nothing on stderr while timing");
  sub->callback([args] { run(*args); });
}};

}  // namespace
}  // namespace twin::cli
