#pragma once
// The engine's clock for the serving loop (engine/core/serving_loop.hpp):
// time is steady_clock's since the run began. The loop waits for each
// instant (an arrival, a replica's wakeup) in real time, and a step is run
// for real on the executor: it ends when it has ended, at the measured time.
// Host work between steps and the lateness of a wake-up therefore count in
// the next step's measured duration, as they do for a client.
#include <chrono>
#include <cstdint>
#include <functional>

#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/runtime/executor.hpp"

namespace twin {

class WallClock {
 public:
  // Starts the clock. `stop`, if set, is asked between steps and every 50 ms
  // while idle; once it returns true the run stops.
  WallClock(Executor& executor, std::uint64_t token_seed, std::function<bool()> stop);

  bool stop_requested();
  bool wait_until(Time t);
  Time read(Time now) const;
  // Prompt tokens only for a request the core will take: one it rejects from
  // its numbers (prompt + output beyond max_model_len, more KV than the
  // cache) may claim 2^31 prompt tokens, and add() records its rejection
  // from the numbers alone, exactly as the simulator's replica does.
  void admit(Request& request, const Replica& replica);
  // Strictly after the plan's instant, as a simulated step lasts >= 1 ns.
  StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now, StepResult& result);
  void on_ended(const RequestRecord& record);

  Time elapsed() const;             // ns since the start
  Time last_end() const { return last_end_; }  // when the last request ended

 private:
  using Steady = std::chrono::steady_clock;
  Executor& executor_;
  std::int64_t vocab_;
  std::uint64_t token_seed_;
  std::function<bool()> stop_;
  bool stopped_ = false;
  Steady::time_point t0_;
  Time last_end_ = 0;
};

static_assert(ServingClock<WallClock>);

}  // namespace twin
