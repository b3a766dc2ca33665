#include "engine/runtime/wall_clock.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "engine/runtime/prompt_tokens.hpp"
#include "engine/runtime/wait_until.hpp"

namespace twin {

WallClock::WallClock(Executor& executor, std::uint64_t token_seed, std::function<bool()> stop)
    : executor_(executor),
      vocab_(executor.runner().config().vocab_size),
      token_seed_(token_seed),
      stop_(std::move(stop)),
      t0_(Steady::now()) {}

Time WallClock::elapsed() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - t0_).count();
}

bool WallClock::stop_requested() {
  if (!stopped_ && stop_) stopped_ = stop_();
  return stopped_;
}

bool WallClock::wait_until(Time t) {
  const Steady::time_point until = t0_ + std::chrono::nanoseconds(t);
  // In slices while a stop can be asked for, so an interrupt during a long
  // idle gap is seen within kStopPoll.
  constexpr auto kStopPoll = std::chrono::milliseconds(50);
  if (stop_) {
    while (until - Steady::now() > kStopPoll) {
      if (stop_requested()) return false;
      std::this_thread::sleep_for(kStopPoll);
    }
  }
  twin::wait_until(until);
  return !stop_requested();
}

Time WallClock::read(Time now) const { return std::max(now, elapsed()); }

void WallClock::admit(Request& request, const Replica& replica) {
  if (!replica.rejection_reason(request)) materialize_prompt_tokens(request, vocab_, token_seed_);
}

StepTiming WallClock::run_step(std::int32_t, const StepPlan& plan, const Replica& replica, Time now,
                               StepResult& result) {
  result = executor_.execute(plan, replica);
  const Time done = std::max(elapsed(), now + 1);
  return StepTiming{done, done};
}

void WallClock::on_ended(const RequestRecord& record) {
  executor_.forget(record.id);
  last_end_ = std::max(last_end_, record.finish);
}

}  // namespace twin
