// The engine's host work per step (sim/host_work.hpp): it grows with the
// batch as the engine's figures say, hides behind the GPU under async
// scheduling (max(gpu, host) + exposed) and adds to it otherwise, and a
// preset without an engine of its own keeps the profile's flat
// step_overhead_us, as every step was priced before.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>

#include "engine/core/scheduler_config.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "sim/host_work.hpp"
#include "sim/roofline_cost_model.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// The group's roofline with its host work replaced by `host`.
std::unique_ptr<RooflineCostModel> with_host(const Cluster& c, const HostWork& host) {
  const auto& r = dynamic_cast<const RooflineCostModel&>(*c.replicas.at(0).cost_model);
  RooflineParams p = r.params();
  p.host = host;
  const GroupPlan& g = c.groups.front();
  return std::make_unique<RooflineCostModel>(r.model(), r.layout(), g.precision, g.kv_dtype, p);
}

Time price_after_idle(CostModel& model, const BatchShape& shape, Time idle) {
  StepPlan plan;
  StepInput in{&plan, &shape, 0, 0};
  in.idle_ns = idle;
  return model.stage_time(in);
}

}  // namespace

TEST_CASE("an engine's host work grows with sequences, tokens and samples by its figures") {
  const HardwareDesc hw = resolve_hardware("h100-80gb");
  for (const char* preset : {"vllm", "vllm-v0", "sglang", "trtllm"}) {
    INFO(preset);
    const HostWork w = host_work_for(scheduler_preset(preset), hw);
    CHECK(w.engine == preset);
    CHECK(w.fixed_ns == hw.step_overhead_us * 1e3);  // the profile's fixed term
    CHECK(w.per_seq_ns + w.per_sample_ns > 0);
    CHECK(w.per_token_ns > 0);
    // Each preset turns its engine's overlap on; vLLM v0 had none.
    CHECK(w.overlap == (std::string(preset) != "vllm-v0"));
    const double base = host_cost(w, 4, 100, 2, 0).host_ns;
    CHECK(base == Approx(w.fixed_ns + 4 * w.per_seq_ns + 100 * w.per_token_ns + 2 * w.per_sample_ns));
    CHECK(host_cost(w, 12, 100, 2, 0).host_ns - base == Approx(8 * w.per_seq_ns));
    CHECK(host_cost(w, 4, 1100, 2, 0).host_ns - base == Approx(1000 * w.per_token_ns));
    CHECK(host_cost(w, 4, 100, 4, 0).host_ns - base == Approx(2 * w.per_sample_ns));
  }
  // Per sequence, vLLM v0 did far more host work than v1 (docs/op-costs.md).
  CHECK(host_work_for(scheduler_preset("vllm-v0"), hw).per_seq_ns >
        10 * host_work_for(scheduler_preset("vllm"), hw).per_seq_ns);

  SECTION("a faster host divides the engine's per-item figures; a profile's own replace them") {
    const HostWork base = host_work_for(scheduler_preset("vllm"), hw);
    HardwareDesc fast = hw;
    fast.host_speed = 2;
    const HostWork w = host_work_for(scheduler_preset("vllm"), fast);
    CHECK(w.per_seq_ns == Approx(base.per_seq_ns / 2));
    CHECK(w.per_sample_ns == Approx(base.per_sample_ns / 2));
    CHECK(w.fixed_ns == base.fixed_ns);
    fast.host_per_seq_us = 7;
    fast.host_exposed_us = 30;
    const HostWork own = host_work_for(scheduler_preset("vllm"), fast);
    CHECK(own.per_seq_ns == 7000);  // the fitted figure, not scaled again
    CHECK(own.exposed_ns == 30000);
  }
  SECTION("--no-async-scheduling turns the overlap off; a preset without an engine is flat") {
    SchedulerConfig sync = scheduler_preset("vllm");
    sync.async_scheduling = false;
    CHECK_FALSE(host_work_for(sync, hw).overlap);
    const HostWork flat = host_work_for(scheduler_preset("sarathi"), hw);
    CHECK(flat.engine == "flat");
    CHECK(flat.fixed_ns == hw.step_overhead_us * 1e3);
    CHECK(flat.per_seq_ns == 0);
    CHECK(flat.per_token_ns == 0);
    CHECK(flat.per_sample_ns == 0);
    CHECK_FALSE(flat.overlap);
  }
}

TEST_CASE("under async scheduling a step costs max(gpu, host) + exposed, without it the sum") {
  Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb"));
  auto bare = with_host(c, HostWork{});
  for (const int batch : {1, 64}) {
    INFO("batch " << batch);
    const BatchShape shape = decode_batch(batch, 512);
    const double gpu = static_cast<double>(price(*bare, shape));
    for (const double per_seq_ns : {1e3, 1e6}) {  // host below the GPU time, then far above it
      INFO("per sequence " << per_seq_ns << " ns");
      HostWork h;
      h.fixed_ns = 50e3;
      h.per_seq_ns = per_seq_ns;
      h.per_sample_ns = 500;
      h.exposed_ns = 7e3;
      const double host = h.fixed_ns + batch * (h.per_seq_ns + h.per_sample_ns) + batch * h.per_token_ns;
      h.overlap = false;
      CHECK(static_cast<double>(price(*with_host(c, h), shape)) == Approx(gpu + host + 7e3).margin(1));
      h.overlap = true;
      auto async = with_host(c, h);
      CHECK(static_cast<double>(price(*async, shape)) == Approx(std::max(gpu, host) + 7e3).margin(1));
      // After an idle gap there is no GPU step to hide the host work behind.
      CHECK(static_cast<double>(price_after_idle(*async, shape, 1000)) == Approx(gpu + host + 7e3).margin(1));
    }
  }
  // The bundled vllm preset: the whole host work hides behind a decode step's GPU time.
  const Time bundled = price(*c.replicas[0].cost_model, decode_batch(8, 512));
  CHECK(bundled == price(*bare, decode_batch(8, 512)));
}

TEST_CASE("a profile with only step_overhead_us prices a preset without an engine as before") {
  ClusterConfig cfg = one_group("llama-3.1-8b", "h100-80gb");
  cfg.scheduler_preset = "sarathi";
  Cluster c = build_cluster(cfg);
  const double overhead_ns = c.groups.front().hardware.step_overhead_us * 1e3;
  REQUIRE(overhead_ns > 0);
  auto bare = with_host(c, HostWork{});
  for (const int batch : {1, 8, 128}) {
    INFO("batch " << batch);
    const BatchShape shape = decode_batch(batch, 1024);
    // The flat overhead on top of the ops, whatever the batch, as rounds 1-2.
    CHECK(static_cast<double>(price(*c.replicas[0].cost_model, shape) - price(*bare, shape)) ==
          Approx(overhead_ns).margin(1));
  }
  // And the synchronous vllm preset adds its growing host work to the GPU time.
  ClusterConfig sync = one_group("llama-3.1-8b", "h100-80gb");
  sync.scheduler_options.emplace_back("async_scheduling", "false");
  Cluster s = build_cluster(sync);
  const HostWork& w = dynamic_cast<const RooflineCostModel&>(*s.replicas[0].cost_model).params().host;
  const BatchShape big = decode_batch(128, 1024);
  const double gap = static_cast<double>(price(*s.replicas[0].cost_model, big) - price(*with_host(s, HostWork{}), big));
  CHECK(gap == Approx(w.fixed_ns + 128 * (w.per_seq_ns + w.per_token_ns + w.per_sample_ns)).margin(1));
  CHECK(gap > overhead_ns);
}

TEST_CASE("a replica's first step has no earlier GPU step to hide its host work behind, even at t = 0") {
  // One request at t = 0 and one after an idle gap: under async scheduling
  // each prefill pays its host work on top, as without async scheduling.
  auto ttft_of = [](bool async) {
    ClusterConfig cfg = one_group("llama-3.1-8b", "h100-80gb");
    cfg.scheduler_options.emplace_back("async_scheduling", async ? "true" : "false");
    Request a, b;
    a.prompt_len = b.prompt_len = 512;
    a.output_len = b.output_len = 1;
    b.id = 1;
    b.arrival = 5 * kNsPerSec;
    VectorSource source({a, b});
    const RunResult run = run_simulation(cfg, source, RunOutputs{});
    REQUIRE(run.summary.completed == 2);
    return run.summary.ttft_ms.mean;
  };
  CHECK(ttft_of(true) == ttft_of(false));
}
