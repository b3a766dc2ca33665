#include "engine/runtime/wall_clock_driver.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "base/error.hpp"
#include "engine/core/timeline.hpp"
#include "engine/runtime/prompt_tokens.hpp"
#include "engine/runtime/wait_until.hpp"

namespace twin {

DriveStats drive_wall_clock(Replica& replica, Executor& executor, RequestSource& source, RecordSink& sink,
                            const DriveOptions& options) {
  if (!(options.time_scale > 0)) throw UsageError("time scale must be positive");
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  auto clock = [&]() -> Time { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); };
  const std::int64_t vocab = executor.runner().config().vocab_size;

  DriveStats stats;
  replica.set_record_steps(true);
  auto drain = [&] {
    for (const StepRecord& s : replica.take_steps()) {
      ++stats.steps;
      sink.on_step(s);
    }
    for (const RequestRecord& r : replica.take_finished()) {
      executor.forget(r.id);
      stats.end_time = std::max(stats.end_time, r.finish);
      sink.on_request(r);
    }
  };

  // The engine's timeline: a request is due when the client sends it, its
  // arrival (and its patience) replayed time_scale times faster, or at once.
  auto next = [&](Request& r) {
    if (!source.next(r)) return false;
    if (options.asap) {
      arrive_at_once(r);
    } else {
      replay_faster(r, 0, options.time_scale);
    }
    return true;
  };
  Request pending;
  bool have = next(pending);
  auto due = [](const Request& r) -> Time { return r.arrival; };
  Time last_due = 0;
  // The engine's timeline, chosen so the simulator can replay it exactly: a
  // busy engine plans its next step at the instant the previous one
  // completed, an idle one at the instant it was woken for (an arrival or the
  // replica's wakeup), taking in every arrival due by then. Host work between
  // steps and the lateness of a wake-up therefore count in the next step's
  // measured duration, as they do for a client.
  Time now = 0;
  // Ends every live request with `reason`; returns how many.
  auto end_all = [&](const std::string& reason) {
    std::vector<RequestId> ids;
    for (const SeqView& s : replica.live_seqs()) ids.push_back(s.request->id);
    for (RequestId id : ids) replica.abort(id, now, reason);
    drain();
    return static_cast<std::int64_t>(ids.size());
  };
  const auto stop_requested = [&] { return options.stop && options.stop(); };
  // A wait for the next instant in slices while a stop can be asked for, so
  // an interrupt during a long idle gap is seen within kStopPoll.
  const auto wait_for = [&](Time wake) {
    const Clock::time_point until = t0 + std::chrono::nanoseconds(wake);
    constexpr auto kStopPoll = std::chrono::milliseconds(50);
    if (options.stop) {
      while (until - Clock::now() > kStopPoll) {
        if (options.stop()) return;
        std::this_thread::sleep_for(kStopPoll);
      }
    }
    wait_until(until);
  };
  while (true) {
    if (stop_requested()) {
      // Stop admitting (requests not yet due never arrived), and end what is
      // in flight with a reason the records keep.
      now = std::max(now, clock());
      stats.interrupted = end_all("interrupted");
      stats.stopped = true;
      break;
    }
    while (have && due(pending) <= now) {
      const Time at = due(pending);
      if (at < last_due) throw Error("request " + std::to_string(pending.id) + " arrives before the one read before it");
      last_due = at;
      // Tokens only for a request the core will take: one it rejects from its
      // numbers (prompt + output beyond max_model_len, more KV than the cache)
      // may claim 2^31 prompt tokens, and add() records its rejection from
      // the numbers alone, exactly as the simulator's replica does.
      if (!replica.rejection_reason(pending)) materialize_prompt_tokens(pending, vocab, options.token_seed);
      // Queued as of its arrival, not of when the loop took it in (after the
      // step in flight): rejections and the dynamic batcher's timeout count
      // from there, as in the simulator, which adds at the arrival instant.
      replica.add(std::move(pending), at);
      ++stats.submitted;
      pending = Request{};
      have = next(pending);
    }
    drain();
    if (replica.has_work() && replica.can_plan()) {
      const StepPlan plan = replica.plan(now);
      drain();  // a plan may abort cancelled requests
      if (!plan.empty()) {
        const StepResult result = executor.execute(plan, replica);
        // Strictly after the plan's instant, as a simulated step lasts >= 1 ns.
        now = std::max(clock(), now + 1);
        replica.complete(plan, result, now);
        drain();
        continue;
      }
    }
    if (!have && !replica.has_work()) break;
    Time wake = have ? due(pending) : std::numeric_limits<Time>::max();
    if (const std::optional<Time> w = replica.next_wakeup(); w && *w > now) wake = std::min(wake, *w);
    if (wake == std::numeric_limits<Time>::max()) {
      // Work remains but nothing can ever make progress: the policy cannot
      // serve these requests. End them rather than hang.
      stats.unserved += end_all("aborted");
      break;
    }
    wait_for(wake);
    if (stop_requested()) continue;  // stopped mid-wait: the clock has not reached `wake`
    now = std::max(now, wake);
  }
  stats.wall_time_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return stats;
}

}  // namespace twin
