#pragma once
// The engine's setup from the flag groups `run`, `serve` and `validate`
// share (the model, the scheduler's, the engine's and the memory plan's
// flags, the seed), so the three cannot build it differently. Each command
// adds what is its own (weights, sampling, pools, speculation).
#include <cstdint>
#include <string>

#include "engine/runtime/engine_setup.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/scheduler_flags.hpp"

namespace twin::cli {

EngineSetup engine_setup_from_flags(const std::string& model, const SchedulerFlags& sched, const EngineFlags& engine,
                                    const EngineMemoryFlags& memory, std::uint64_t seed);

}  // namespace twin::cli
