#pragma once
// The engine side of a validation: one Engine (engine/runtime/engine.hpp,
// weights loaded once) serving each scaled trace through the engine's run
// (engine/runtime/engine_run.hpp, what `twinserve run` calls), its records
// kept in memory for the comparison.
#include <filesystem>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/request.hpp"
#include "engine/runtime/engine.hpp"
#include "validate/run_recorder.hpp"

namespace twin {

// Serves `trace` (arrival order; arrivals are the wall-clock offsets, ns)
// and writes dir/{requests,steps}.csv and summary.json, with `echo` and the
// engine's own settings in its config echo. With the engine's ops timed,
// the records carry each step's op times. `stop` (may be empty) is asked
// between steps as DriveOptions::stop; a stopped run is still written, its
// summary.json config marked "interrupted" as `twinserve run` marks it, and
// *stopped set.
RunRecords serve_on_engine(Engine& engine, const std::vector<Request>& trace, const std::filesystem::path& dir,
                           bool overwrite, const nlohmann::ordered_json& echo,
                           const std::function<bool()>& stop = {}, bool* stopped = nullptr);

}  // namespace twin
