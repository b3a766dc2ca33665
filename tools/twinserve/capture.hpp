#pragma once
// A host program that runs a command through cli_app.hpp (the Python
// module) and wants its result as values rather than printed: it sets the
// calling thread's capture before parsing; the command then prints nothing,
// hands its RunOutputs to `prepare` (record listeners, a stop poll) and
// leaves its result and notes here. Null (the command line): print as ever.
#include <functional>
#include <string>
#include <vector>

#include "planner/planner.hpp"
#include "sim/run.hpp"

namespace twin::cli {

struct SimulateCapture {
  std::function<void(RunOutputs&)> prepare;
  RunResult result;
  bool done = false;
  std::vector<std::string> notes;  // what the command line prints on stderr
};

struct PlanCapture {
  PlanResult result;
  nlohmann::ordered_json json;  // plan.json's content
  bool done = false;
};

// The calling thread's captures (thread_local; null: none).
SimulateCapture*& simulate_capture();
PlanCapture*& plan_capture();

}  // namespace twin::cli
