// The pieces of a validation that are plain arithmetic: load parsing, trace
// rate scaling, % errors, the parity comparison and step pricing.
#include <catch2/catch.hpp>

#include <algorithm>

#include <cmath>
#include <memory>

#include "base/error.hpp"
#include "validate/comparison.hpp"
#include "validate/load_scaling.hpp"
#include "validate/step_pricing.hpp"
#include "validate/validation.hpp"

namespace twin::test {
namespace {

std::vector<Request> three_requests() {
  std::vector<Request> t(3);
  for (int i = 0; i < 3; ++i) {
    t[i].id = i;
    t[i].prompt_len = 8;
    t[i].output_len = 2;
  }
  t[0].arrival = 5 * kNsPerSec;
  t[1].arrival = 6 * kNsPerSec;
  t[2].arrival = 9 * kNsPerSec;
  return t;
}

RequestRecord record(RequestId id, Time arrival, Time first, Time finish) {
  RequestRecord r;
  r.id = id;
  r.arrival = arrival;
  r.first_token = first;
  r.finish = finish;
  r.output_tokens = 3;
  r.itl = {finish - first - 10, 10};
  return r;
}

class FixedModel final : public CostModel {
 public:
  explicit FixedModel(Time t) : t_(t) {}
  Time stage_time(const StepInput&, std::vector<OpCost>* breakdown) override {
    if (breakdown) breakdown->push_back(OpCost{OpKind::qkv_proj, static_cast<double>(t_)});
    return t_;
  }
  Time swap_time(std::int64_t) override { return 0; }

 private:
  Time t_;
};

}  // namespace

TEST_CASE("loads parse as positive fractions and anything else is a usage error") {
  CHECK(parse_loads("0.3,0.6,0.9") == std::vector<double>{0.3, 0.6, 0.9});
  CHECK(parse_loads("1.5") == std::vector<double>{1.5});
  for (const char* bad : {"", "0", "-0.5", "0.3,x", "0.3,", "nan", "inf", "0.3 0.6"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_loads(bad), UsageError);
  }
}

TEST_CASE("a trace is rescaled to a target rate keeping its shape") {
  const auto t = three_requests();
  CHECK(trace_rate(t) == Approx(2.0 / 4.0));  // 2 gaps over 4 s
  const auto fast = scale_to_rate(t, 2.0);     // 4x faster
  CHECK(fast[0].arrival == 0);
  CHECK(fast[1].arrival == 250 * kNsPerMs);
  CHECK(fast[2].arrival == kNsPerSec);
  CHECK(trace_rate(fast) == Approx(2.0));
  // All at once: evenly spaced at the rate instead.
  const auto burst = all_at_once(t);
  CHECK(burst[2].arrival == 0);
  const auto spread = scale_to_rate(burst, 4.0);
  CHECK(spread[1].arrival == 250 * kNsPerMs);
  CHECK(spread[2].arrival == 500 * kNsPerMs);
  CHECK_THROWS_AS(scale_to_rate(t, 0.0), Error);
}

TEST_CASE("errors are signed percentages of the measured value") {
  CHECK(error_pct(100, 110) == Approx(10));
  CHECK(error_pct(100, 80) == Approx(-20));
  CHECK(std::isnan(error_pct(0, 1)));
  Summary m, p;
  m.ttft_ms.count = p.ttft_ms.count = 3;
  m.ttft_ms.p50 = 10;
  p.ttft_ms.p50 = 12;
  m.output_throughput = 200;
  p.output_throughput = 190;
  const auto rows = compare_summaries(m, p);
  REQUIRE(rows.size() == 13);
  CHECK(rows[0].metric == "ttft_ms");
  CHECK(rows[0].stat == "p50");
  CHECK(rows[0].error_pct == Approx(20));
  CHECK(std::isnan(rows[3].measured));  // TPOT without data
  CHECK(rows[12].metric == "output_throughput");
  CHECK(rows[12].error_pct == Approx(-5));
}

TEST_CASE("against several engine runs the measured figure is each metric's median") {
  Summary predicted, a, b, c;
  predicted.ttft_ms.count = a.ttft_ms.count = b.ttft_ms.count = c.ttft_ms.count = 3;
  predicted.ttft_ms.p50 = 12;
  a.ttft_ms.p50 = 10;
  b.ttft_ms.p50 = 30;  // a run the machine slowed
  c.ttft_ms.p50 = 11;
  a.tpot_ms.count = 2;  // only run a has TPOT
  a.tpot_ms.p50 = 5;
  predicted.output_throughput = 100;
  a.output_throughput = 100;
  b.output_throughput = 50;
  c.output_throughput = 90;
  const auto rows = compare_to_runs({&a, &b, &c}, predicted);
  REQUIRE(rows.size() == 13);
  CHECK(rows[0].measured == 11);  // ttft p50: the median, not the slow run
  CHECK(rows[0].error_pct == Approx(100.0 / 11));
  CHECK(rows[3].measured == 5);  // runs without the metric are left out
  CHECK(rows[12].measured == 90);
  CHECK(compare_to_runs({&a, &b}, predicted)[0].measured == 20);  // two runs: the mean
  const auto one = compare_to_runs({&a}, predicted), plain = compare_summaries(a, predicted);
  CHECK(one[0].measured == plain[0].measured);
  CHECK(one[12].error_pct == plain[12].error_pct);
}

TEST_CASE("parity is exact only when every time and gap is equal") {
  const std::vector<RequestRecord> a = {record(1, 0, 100, 300), record(2, 50, 200, 500)};
  CHECK(compare_parity(a, a).exact());
  auto b = a;
  b[1].itl[1] += 3;
  const ParityResult off = compare_parity(a, b);
  CHECK_FALSE(off.exact());
  CHECK(off.max_abs_ns == 3);
  CHECK(off.mismatched == 1);
  CHECK(off.first_mismatch.find("request 2") != std::string::npos);
  b = a;
  b[0].cached_prompt_tokens = 16;
  CHECK(compare_parity(a, b).mismatched == 1);
  CHECK(compare_parity(a, {a[0]}).mismatched == 1);
  const auto errors = request_errors(a, b);
  CHECK(errors[0].metric == "ttft");
  CHECK(errors[0].count == 2);
  CHECK(errors[0].p50 == Approx(0));
}

TEST_CASE("the pricing model returns the timing model's step and prices it with the others") {
  auto timing = std::make_shared<FixedModel>(1000);
  PricingCostModel pricing(timing, {std::make_shared<FixedModel>(1100), std::make_shared<FixedModel>(500)});
  StepPlan decode, mixed;
  decode.seqs = {ScheduledSeq{1, 10, 1, true, false}, ScheduledSeq{2, 20, 1, true, false}};
  mixed.seqs = {ScheduledSeq{1, 11, 1, true, false}, ScheduledSeq{3, 0, 16, true, true}};
  CHECK(pricing.stage_time(StepInput{&decode, nullptr, 0, 0}) == 1000);
  CHECK(pricing.stage_time(StepInput{&mixed, nullptr, 0, 0}) == 1000);
  REQUIRE(pricing.steps().size() == 2);
  CHECK(pricing.steps()[0].composition == Composition::decode_only);
  CHECK(pricing.steps()[1].composition == Composition::mixed);
  CHECK(pricing.steps()[1].new_tokens == 17);
  CHECK(pricing.steps()[1].context_tokens == 11);
  const auto over = composition_errors(pricing.steps(), 0);
  REQUIRE(over.size() == 2);
  CHECK(over[0].composition == Composition::decode_only);
  CHECK(over[0].error_pct_of_total == Approx(10));
  CHECK(over[0].op_ms_mean[static_cast<int>(OpKind::qkv_proj)] == Approx(0.0011));
  const auto under = composition_errors(pricing.steps(), 1);
  CHECK(under[1].composition == Composition::mixed);
  CHECK(under[1].mean_abs_error_pct == Approx(50));
}

TEST_CASE("per op, the engine's own op times against each model's price of the same steps") {
  // Two steps of 10 ms; the engine spent 4 ms in attention, 2 in qkv_proj
  // and 1 in silu_mul per step, the rest outside its ops.
  PricedStep a, b;
  a.measured = b.measured = 10'000'000;
  a.predicted_ns = b.predicted_ns = {9'000'000};
  std::array<double, kNumOpKinds> ops{};
  ops[static_cast<int>(OpKind::attn_prefill)] = 1'000'000;
  ops[static_cast<int>(OpKind::attn_decode)] = 2'000'000;  // both are the engine's one attention call
  ops[static_cast<int>(OpKind::qkv_proj)] = 3'000'000;
  ops[static_cast<int>(OpKind::silu_mul)] = 500'000;
  a.op_ns = b.op_ns = {ops};
  OpTimes measured{};
  measured[static_cast<int>(TimedOp::attention)] = 4'000'000;
  measured[static_cast<int>(TimedOp::qkv_proj)] = 2'000'000;
  measured[static_cast<int>(TimedOp::silu_mul)] = 1'000'000;
  const std::vector<PricedStep> steps{a, b};
  const auto rows = op_time_errors(steps, {measured, measured}, 0, false);
  REQUIRE(rows.size() == 4);  // qkv_proj, attention, silu_mul in op order, then outside
  CHECK(rows[0].op == "qkv_proj");
  CHECK(rows[0].measured_ms == Approx(2));
  CHECK(rows[0].predicted_ms == Approx(3));
  CHECK(rows[0].error_pct == Approx(50));
  CHECK(rows[1].op == "attention");
  CHECK(rows[1].predicted_ms == Approx(3));
  CHECK(rows[1].error_pct == Approx(-25));
  CHECK(rows[2].op == "silu_mul");
  CHECK(rows[3].op == "outside the ops");
  CHECK(rows[3].measured_ms == Approx(3));     // 10 - 7
  CHECK(rows[3].predicted_ms == Approx(2.5));  // 9 - 6.5
  // In a mixture of experts silu_mul runs inside the experts' call.
  const auto moe = op_time_errors(steps, {measured, measured}, 0, true);
  CHECK(std::any_of(moe.begin(), moe.end(), [](const OpTimeError& e) { return e.op == "moe_experts" && e.predicted_ms > 0; }));
  CHECK(timed_op_of(OpKind::tp_allreduce, false) == -1);
  // No op table without one measurement per step, or for a model not priced.
  CHECK(op_time_errors(steps, {measured}, 0, false).empty());
  CHECK(op_time_errors(steps, {measured, measured}, 1, false).empty());
}

}  // namespace twin::test
