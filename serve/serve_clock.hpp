#pragma once
// ServeClock: the clock `twinserve serve` runs the core's serving loop on
// (ServingLoop::run_live): the wall clock since the inbox's origin. It takes
// requests from HTTP threads through the inbox, has each plan run or priced
// by a LiveStepBackend, and streams every request's tokens, as text, to its
// TokenStream once the step that made them has completed. It also applies
// each request's stop rules (EOS unless ignore_eos, stop strings on the
// text: the core then finishes the request at that token) and keeps
// /metrics' gauges and counters.
//
// Shutdown: once `signalled` returns true the inbox closes (new requests
// are refused, those queued are still served); `grace` later the loop is
// asked to stop, and what is still in flight ends as "interrupted".
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/core/records.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/serving_loop.hpp"
#include "serve/byte_tokenizer.hpp"
#include "serve/request_inbox.hpp"
#include "serve/serve_metrics.hpp"
#include "serve/step_backends.hpp"

namespace twin {

struct ServeClockOptions {
  TokenId eos_token = -1;  // >= 0: a request stops when it samples it (unless ignore_eos)
  std::function<bool()> signalled;  // a shutdown was asked for (SIGTERM, SIGINT)
  std::chrono::nanoseconds grace{0};  // how long in-flight requests may finish after it
};

class ServeClock {
 public:
  ServeClock(RequestInbox& inbox, LiveStepBackend& backend, ServeMetrics& metrics, const ByteTokenizer& tokenizer,
            ServeClockOptions options);

  bool stop_requested();
  bool wait_until(Time t);
  bool wait_for_input(Time t);
  Time read(Time now) const;
  void admit(Request& request, const Replica& replica);
  StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now, StepResult& result);
  void on_completed(std::int32_t index, const StepPlan& plan, const StepResult& result, const Replica& replica);
  void on_ended(const RequestRecord& record);

  // Whether a shutdown has begun (the inbox is closed).
  bool shutting_down() const { return signalled_at_.has_value(); }

 private:
  using Steady = std::chrono::steady_clock;
  struct Live {
    RequestExtras extras;
    Detokenizer detok;
    std::string text;           // the output so far (cut at a stop string)
    std::size_t released = 0;   // bytes of text handed to pieces
    std::size_t hold = 0;       // bytes held back: the longest stop string - 1
    std::int32_t generated = 0; // tokens sampled (the core may drop the last of a cancelled one)
    std::int32_t published = 0; // pieces handed to the stream
    std::deque<std::string> pending;  // one per sampled token not yet published
    bool stop_hit = false;
  };
  void take_token(Live& live, TokenId token, RequestId id, StepResult& result);
  void snapshot(const Replica& replica);
  Steady::time_point at(Time t) const;

  RequestInbox& inbox_;
  LiveStepBackend& backend_;
  ServeMetrics& metrics_;
  ByteTokenizer tokenizer_;
  ServeClockOptions options_;
  std::unordered_map<RequestId, Live> live_;
  std::optional<Steady::time_point> signalled_at_;
  bool stopped_ = false;
};

static_assert(ServingClock<ServeClock>);
static_assert(LiveClock<ServeClock>);
static_assert(StepObserver<ServeClock>);

}  // namespace twin
