// Energy in every result (docs/outputs.md, "Energy"; issue 44): the parts
// add up, a compute-bound step draws more than a memory-bound one, a
// profile without power figures gives an energy that is not known.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/replica.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/summary_json.hpp"
#include "sim/replica_pricing.hpp"
#include "sim/virtual_clock.hpp"
#include "sim_test_util.hpp"
#include "traces/generator.hpp"

using namespace twin;
using namespace twin::test;

namespace {

GeneratorOptions light_trace() {
  GeneratorOptions g;
  g.max_requests = 120;
  g.rate = 3;  // gaps between steps: the idle part is not empty
  g.prompt = "lognormal:median=600:sigma=0.6:max=4000";
  g.output = "lognormal:median=120:sigma=0.5:max=500";
  g.seed = 11;
  return g;
}

struct Run {
  RunResult result;
  std::vector<StepRecord> steps;
};

Run simulate(const ClusterConfig& config, const GeneratorOptions& trace = light_trace()) {
  GeneratorSource source(trace);
  Run run;
  RunOutputs outputs;
  outputs.on_step = [&](const StepRecord& s) { run.steps.push_back(s); };
  run.result = run_simulation(config, source, outputs);
  return run;
}

// A copy of the bundled H100 profile without its power figures.
std::string profile_without_power(const std::filesystem::path& dir) {
  nlohmann::ordered_json hw;
  std::ifstream(std::string(TWIN_SOURCE_DIR) + "/hwprofiles/profiles/h100-80gb.json") >> hw;
  hw.erase("power");
  for (const char* key : {"power.idle_w", "power.memory_w", "power.compute_w", "power.max_w"}) hw["sources"].erase(key);
  const std::string path = (dir / "h100-no-power.json").string();
  std::ofstream(path) << hw.dump(2);
  return path;
}

}  // namespace

TEST_CASE("energy is conserved: the steps' energy plus the idle draw is the total", "[sim][energy]") {
  for (const auto& [tp, pp] : {std::pair{1, 1}, std::pair{2, 2}}) {
    INFO("tp " << tp << " pp " << pp);
    const Run run = simulate(one_group("llama-3.1-8b", "h100-80gb", tp, pp, 2));
    const EnergySummary& e = run.result.summary.energy;
    REQUIRE(e.known);
    REQUIRE(!run.steps.empty());
    std::int64_t steps_uj = 0;
    for (const StepRecord& s : run.steps) {
      REQUIRE(s.energy_uj > 0);
      steps_uj += s.energy_uj;
    }
    CHECK(steps_uj == e.steps_uj);            // every step record's energy, exactly
    CHECK(e.steps_uj + e.idle_uj == e.total_uj);
    CHECK(e.idle_uj > 0);                     // the GPUs wait between arrivals
    // The average lies between every GPU idle and every GPU at its cap.
    const double gpus = 2.0 * tp * pp;
    CHECK(e.average_power_w > gpus * 70);
    CHECK(e.average_power_w < gpus * 700);
    const double joules = static_cast<double>(e.total_uj) * 1e-6;
    CHECK(e.joules_per_output_token == Approx(joules / static_cast<double>(run.result.summary.total_output_tokens)));
    CHECK(e.joules_per_request == Approx(joules / static_cast<double>(run.result.summary.completed)));
    CHECK(e.cost_per_m_output_tokens > 0);  // the profile's price over the same window
  }
}

TEST_CASE("steps back to back leave no idle energy and never a negative one", "[sim][energy]") {
  GeneratorOptions burst = light_trace();
  burst.arrivals = ArrivalKind::burst;  // every request at 0: one step after another
  burst.prompt = "fixed:128";            // (this shape's per-step rounding summed to -2 uJ)
  burst.output = "fixed:128";
  const Run run = simulate(one_group("llama-3.1-8b", "h100-80gb"), burst);
  const EnergySummary& e = run.result.summary.energy;
  REQUIRE(e.known);
  CHECK(e.idle_uj >= 0);  // the per-step rounding once left a few uJ below zero, printed "-0.0"
  CHECK(static_cast<double>(e.idle_uj) < 1e-6 * static_cast<double>(e.total_uj));
  CHECK(e.steps_uj + e.idle_uj == e.total_uj);
}

TEST_CASE("a compute-bound step draws more power than a memory-bound one", "[sim][energy]") {
  Cluster cluster = build_cluster(one_group("llama-3.1-8b", "h100-80gb"));
  const PowerDesc power = cluster.groups.front().hardware.power;
  REQUIRE(power.known);
  VirtualClock clock(pricing_of(cluster.replicas));
  Replica replica(cluster.replicas.front().config, 0);
  auto watts = [&](const StepPlan& plan, Time now) {
    StepResult result;
    const StepTiming t = clock.run_step(0, plan, replica, now, result);
    REQUIRE(result.energy_uj > 0);
    return static_cast<double>(result.energy_uj) * 1e-6 / to_seconds(t.done - now);
  };
  StepPlan prefill;  // one 4096-token prompt: large GEMMs
  prefill.seqs.push_back(ScheduledSeq{1, 0, 4096, true, true, 0});
  StepPlan decode;   // 8 decodes against 2048 cached tokens: weights and KV read
  for (RequestId id = 2; id < 10; ++id) decode.seqs.push_back(ScheduledSeq{id, 2048, 1, true, false, 0});
  const double compute_w = watts(prefill, 0);
  const double memory_w = watts(decode, from_seconds(10));
  INFO("prefill " << compute_w << " W, decode " << memory_w << " W");
  CHECK(compute_w > memory_w);
  CHECK(compute_w <= power.max_w);
  CHECK(memory_w >= power.idle_w);
  CHECK(compute_w > 0.8 * power.compute_w);  // mostly compute-bound time
}

TEST_CASE("a profile without power figures gives an energy that is not known, never 0", "[sim][energy]") {
  const auto dir = std::filesystem::temp_directory_path() / "twin_energy_test";
  std::filesystem::create_directories(dir);
  const Run run = simulate(one_group("llama-3.1-8b", profile_without_power(dir)));
  const EnergySummary& e = run.result.summary.energy;
  CHECK_FALSE(e.known);
  CHECK_THAT(e.unknown_reason, Catch::Contains("no power figures"));
  for (const StepRecord& s : run.steps) REQUIRE(s.energy_uj == -1);
  const nlohmann::ordered_json j = summary_to_json(run.result.summary);
  CHECK(j["energy"]["known"] == false);
  CHECK(j["energy"].contains("reason"));
  CHECK_FALSE(j["energy"].contains("energy_j"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("power figures outside idle..max are refused, naming the field", "[sim][energy]") {
  nlohmann::ordered_json hw;
  std::ifstream(std::string(TWIN_SOURCE_DIR) + "/hwprofiles/profiles/h100-80gb.json") >> hw;
  hw["power"]["compute_w"] = 900;  // over max_w 700
  CHECK_THROWS_WITH(parse_hardware_json(hw.dump(), "h100.json", "h100"), Catch::Contains("power.compute_w"));
  hw["power"].erase("idle_w");
  CHECK_THROWS_WITH(parse_hardware_json(hw.dump(), "h100.json", "h100"), Catch::Contains("power.idle_w"));
}

TEST_CASE("requests.csv's energy is each request's token share of its steps, adding up to the steps' energy",
          "[sim][energy]") {
  const auto dir = std::filesystem::temp_directory_path() / "twin_energy_requests";
  std::filesystem::remove_all(dir);
  GeneratorSource source(light_trace());
  RunOutputs outputs;
  outputs.out_dir = dir.string();
  outputs.energy_price_per_kwh = 0.2;
  outputs.carbon_g_per_kwh = 400;
  const RunResult result = run_simulation(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2), source, outputs);
  const EnergySummary& e = result.summary.energy;
  REQUIRE(e.known);
  std::int64_t requests_uj = 0;
  for (const RequestRecord& r : read_request_records(dir / "requests.csv")) {
    REQUIRE(r.energy_uj > 0);
    requests_uj += r.energy_uj;
  }
  // Every step's energy is split whole among its requests (none aborted here).
  CHECK(requests_uj == e.steps_uj);
  // The price and the intensity follow from the kWh.
  CHECK(e.energy_cost == Approx(e.kwh * 0.2));
  CHECK(e.co2_g == Approx(e.kwh * 400));
  CHECK(e.co2_g_per_m_output_tokens == Approx(e.co2_g / static_cast<double>(result.summary.total_output_tokens) * 1e6));
  nlohmann::json summary;
  std::ifstream(dir / "summary.json") >> summary;
  CHECK(summary["energy"]["energy_price_per_kwh"].get<double>() == 0.2);
  CHECK(summary["energy"].contains("co2_g"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("without a price or an intensity the summary leaves those figures out", "[sim][energy]") {
  const Run run = simulate(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 1));
  const nlohmann::ordered_json j = summary_to_json(run.result.summary);
  REQUIRE(j["energy"]["known"].get<bool>());
  CHECK_FALSE(j["energy"].contains("energy_cost"));
  CHECK_FALSE(j["energy"].contains("co2_g"));
  CHECK_FALSE(j.contains("measured_energy"));  // a simulation measures nothing
}
