#include "tools/twinserve/engine_setup_flags.hpp"

namespace twin::cli {

EngineSetup engine_setup_from_flags(const std::string& model, const SchedulerFlags& sched, const EngineFlags& engine,
                                    const EngineMemoryFlags& memory, std::uint64_t seed) {
  EngineSetup setup;
  setup.model = model;
  setup.scheduler_preset = sched.preset.value_or("vllm");
  setup.overrides = scheduler_overrides(sched);
  setup.overrides.max_model_len = max_model_len_number(memory.max_model_len);
  setup.max_model_len_auto = max_model_len_is_auto(memory.max_model_len);
  setup.runner = runner_options(engine, &memory, seed);
  return setup;
}

}  // namespace twin::cli
