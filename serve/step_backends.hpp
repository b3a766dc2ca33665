#pragma once
// What runs a live server's steps, behind one interface so the same serving
// core, loop and HTTP front end serve either:
//   - the engine: the plan runs on the model (engine/runtime's Executor) and
//     ends when it has ended on the wall clock;
//   - the simulator's cost model: the plan is priced by the VirtualClock
//     (sim/virtual_clock.hpp, the roofline or calibrated model of
//     `simulate`) and ends that long after it started, on the wall clock:
//     a mocker whose tokens come out at the pace of hardware that may not
//     exist. Its tokens are letters and spaces drawn from (seed, request,
//     index).
#include <cstdint>
#include <memory>

#include "engine/core/replica.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/core/step_plan.hpp"
#include "engine/runtime/executor.hpp"
#include "serve/byte_tokenizer.hpp"
#include "serve/request_inbox.hpp"
#include "sim/virtual_clock.hpp"

namespace twin {

class LiveStepBackend {
 public:
  virtual ~LiveStepBackend() = default;
  // A request the core takes in, with its own sampling.
  virtual void admit(RequestId, const RequestExtras&) {}
  // Runs or prices replica `index`'s plan started at `now` (ns on the
  // inbox's clock); when it is done, on that clock.
  virtual StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                              StepResult& result) = 0;
  // Output token `index` (0-based) of a request, once the step that made it has run.
  virtual TokenId token(RequestId id, std::int32_t index) const = 0;
  virtual void forget(RequestId) {}
  // Steps' waits for KV tier loads so far, in seconds (the simulated
  // pricing's; the engine's loads run inside its steps: 0).
  virtual double tier_load_stall_s() const { return 0.0; }
};

class EngineStepBackend final : public LiveStepBackend {
 public:
  // `defaults` is the seed a request without one samples with.
  EngineStepBackend(Executor& executor, const RequestInbox& clock, std::uint64_t default_seed)
      : executor_(executor), clock_(clock), default_seed_(default_seed) {}
  void admit(RequestId id, const RequestExtras& extras) override;
  StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                      StepResult& result) override;
  TokenId token(RequestId id, std::int32_t index) const override;
  void forget(RequestId id) override { executor_.forget(id); }

 private:
  Executor& executor_;
  const RequestInbox& clock_;
  std::uint64_t default_seed_;
};

class PacedStepBackend final : public LiveStepBackend {
 public:
  PacedStepBackend(std::unique_ptr<VirtualClock> pricing, const ByteTokenizer& tokenizer, std::uint64_t seed)
      : pricing_(std::move(pricing)), tokenizer_(tokenizer), seed_(seed) {}
  StepTiming run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                      StepResult& result) override;
  TokenId token(RequestId id, std::int32_t index) const override;
  double tier_load_stall_s() const override { return to_seconds(pricing_->tier_load_stall()); }

 private:
  std::unique_ptr<VirtualClock> pricing_;
  ByteTokenizer tokenizer_;
  std::uint64_t seed_;
};

}  // namespace twin
