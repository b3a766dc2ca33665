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

#include "engine/core/disaggregation.hpp"
#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/runtime/executor.hpp"

namespace twin {

class WallClock {
 public:
  // A request's generated tokens as it ends (before they are forgotten).
  using OutputObserver = std::function<void(const RequestRecord&, const std::vector<TokenId>&)>;

  // Starts the clock. executors[i] runs replica i's steps (replicas[i]);
  // they all serve one model. `stop`, if set, is asked between steps and
  // every 50 ms while idle; once it returns true the run stops.
  WallClock(std::span<Executor* const> executors, std::span<const Replica> replicas, std::uint64_t token_seed,
            std::function<bool()> stop, OutputObserver on_output = nullptr);

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
  // Copies the transfer's blocks (those the decode side does not cache) from
  // the prefill replica's runner to the decode replica's, hands the tokens
  // over, and reports the measured end and the bytes copied.
  TransferTiming kv_transfer(const InboundTransfer& transfer);

  Time elapsed() const;             // ns since the start
  Time last_end() const { return last_end_; }  // when the last request ended
  // KV transfers: blocks copied and the time the copies took (a transfer's
  // own time, kv_reserved to kv_arrived, also counts the loop's lag behind
  // the wall clock when the replicas' steps queue on the one thread).
  std::int64_t copied_blocks() const { return copied_blocks_; }
  Time copy_ns() const { return copy_ns_; }

 private:
  using Steady = std::chrono::steady_clock;
  std::vector<Executor*> executors_;
  std::span<const Replica> replicas_;
  std::int64_t vocab_;
  std::uint64_t token_seed_;
  std::function<bool()> stop_;
  OutputObserver on_output_;
  std::vector<BlockCopy> copies_;  // reused per transfer
  bool stopped_ = false;
  Steady::time_point t0_;
  Time last_end_ = 0;
  std::int64_t copied_blocks_ = 0;
  Time copy_ns_ = 0;
};

static_assert(ServingClock<WallClock>);
static_assert(TransferClock<WallClock>);

}  // namespace twin
