// calibrate --measured on a calibrated base (--profile): runs the simulator
// made on a calibrated profile of `tiny` with a hidden step model (every op
// x1.4, a fixed and a per-seq host term), seen by a noisy client, fitted from
// the unscaled profile: the hidden values recovered and a fourth load
// predicted; roofline parameters refused on a calibrated base and the
// reverse, by name; the fitted profile is a calibrated profile simulate
// takes. No timing: the profile's tables are made-up numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/tiny_calibrated_profile.hpp"
#include "tests/support/poisson_workload.hpp"
#include "validate/fit_params.hpp"
#include "validate/fit_replay.hpp"
#include "validate/measured_fit.hpp"

namespace fs = std::filesystem;
using namespace twin;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_calprof_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Poisson arrivals at `rate` req/s, prompts 32..192, outputs 8..48 (the
// real-engine bench's shapes): prefill-heavy and decode steps, batches of
// one to a few dozen.
std::vector<Request> workload(double rate, int n, std::uint32_t seed) {
  return test::poisson_workload(rate, n, seed, {32, 192}, {8, 48});
}

std::vector<const FitParam*> hidden_params() {
  return {&fit_param("op_scale"), &fit_param("step_base_us"), &fit_param("step_per_seq_us")};
}
// Ops 40% slower than the tables, 150 us per step, 12 us per seq: each
// term a fair share of a step (a tiny step's ops are tens of us here).
const std::vector<double> kHidden = {1.4, 400.0, 40.0};

struct Base {
  fs::path dir;
  std::string profile;  // the unscaled calibrated profile's file
  FitOptions options;
};

Base base(const std::string& name) {
  Base b;
  b.dir = fresh_dir(name);
  b.profile = (b.dir / "tiny-profile.json").string();
  write_calibrated_profile(b.profile, test::tiny_profile());
  FitOptions& o = b.options;
  o.base = resolve_hardware("cpu");
  o.base.calibrated = test::tiny_profile();
  o.base.calibrated_path = b.profile;
  o.cluster.groups.emplace_back();
  o.cluster.groups.front().model = "tiny";
  o.cluster.groups.front().hardware = "cpu";
  o.cluster.groups.front().profile = b.profile;
  o.cluster.num_gpu_blocks_override = 4096;
  o.scratch = b.dir;
  o.max_evals = 300;
  return b;
}

// As the roofline recovery test's client: send times +-0.2 ms off from
// when the server took each request, +-1% on each time it measures.
FitRun measured_run(const std::string& label, double rate, std::uint32_t seed, const FitOptions& o,
                    const std::vector<const FitParam*>& hidden = hidden_params(),
                    const std::vector<double>& values = kHidden) {
  FitRun run;
  run.path = label;
  run.format = "synthetic";
  run.requests = workload(rate, 120, seed);
  run.scored.assign(run.requests.size(), 1);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> net(-0.2e6, 0.2e6), jitter(-0.01, 0.01);
  FitRun server = run;
  for (Request& r : server.requests) r.arrival = std::max<Time>(0, r.arrival + static_cast<Time>(net(rng)));
  // The server takes them in as they came (the noise can swap neighbours).
  std::stable_sort(server.requests.begin(), server.requests.end(),
                   [](const Request& x, const Request& y) { return x.arrival < y.arrival; });
  run.measured = replay_run(server, apply_fit_params(o.base, hidden, values), o);
  for (std::size_t i = 0; i < run.measured.size(); ++i) {
    RequestRecord& r = run.measured[i];
    REQUIRE(r.outcome == Outcome::finished);
    const Time ttft = r.first_token - run.requests[i].arrival, rest = r.finish - r.first_token;
    r.arrival = run.requests[i].arrival;
    r.first_token = r.arrival + static_cast<Time>(static_cast<double>(ttft) * (1 + jitter(rng)));
    r.finish = r.first_token + static_cast<Time>(static_cast<double>(rest) * (1 + jitter(rng)));
    r.itl.clear();
  }
  return run;
}

double mean_error_pct(const MetricScore& m) { return 100 * (m.predicted.mean - m.measured.mean) / m.measured.mean; }

}  // namespace

TEST_CASE("calibrate --measured --profile recovers a hidden step model and predicts a fourth load",
          "[calibrate_profile]") {
  Base b = base("recover");
  const FitOptions& o = b.options;
  std::vector<FitRun> runs;
  runs.push_back(measured_run("load-low", 200.0, 11, o));
  runs.push_back(measured_run("load-mid", 500.0, 12, o));
  runs.push_back(measured_run("load-high", 900.0, 13, o));
  const FitOutcome fit = fit_runs(runs, o);
  CAPTURE(fit.loss, fit.base_loss, fit.evaluations, fit.warnings);
  // Only the calibrated base's parameters are listed: the three fitted,
  // then the per-kind scales, not asked for.
  REQUIRE(fit.params.size() == hidden_params().size() + 2);
  for (std::size_t i = hidden_params().size(); i < fit.params.size(); ++i) CHECK(fit.params[i].note == "not asked for");
  for (std::size_t i = 0; i < hidden_params().size(); ++i) {
    const ParamEstimate& e = fit.params[i];
    CAPTURE(e.name, e.value, e.ci_low, e.ci_high, e.note);
    CHECK(e.name == hidden_params()[i]->name);
    CHECK(e.identified);
    CHECK(std::abs(e.value - kHidden[i]) / kHidden[i] <= 0.05);
  }
  REQUIRE(fit.fitted.calibrated);
  CHECK(fit.fitted.calibrated->overhead.op_scale == Approx(fit.params[0].value));
  CHECK(fit.fitted.calibrated->overhead.base_ns == Approx(fit.params[1].value * 1e3));

  const RunScore score = score_run(measured_run("load-4", 700.0, 14, o), fit.fitted, o);
  for (const MetricScore& m : score.metrics) {
    CAPTURE(m.metric, m.measured.mean, m.predicted.mean);
    CHECK(std::abs(mean_error_pct(m)) <= 3.0);
  }
  // Same inputs, same fit: the profile's bytes do not change.
  CHECK(calibrated_profile_text(*fit_runs(runs, o).fitted.calibrated) == calibrated_profile_text(*fit.fitted.calibrated));
  fs::remove_all(b.dir);
}

TEST_CASE("calibrate --measured --profile recovers the GEMMs' and attention's own scales", "[calibrate_profile]") {
  // Another engine's GEMMs 30% faster than the tables, its attention 80%
  // slower: GEMM time follows a step's tokens, attention's its contexts, so
  // runs with long and short requests tell them apart.
  Base b = base("kinds-scales");
  FitOptions o = b.options;
  o.params = {"gemm_op_scale", "attention_op_scale"};
  const std::vector<const FitParam*> hidden = {&fit_param("gemm_op_scale"), &fit_param("attention_op_scale")};
  const std::vector<double> values = {0.7, 1.8};
  std::vector<FitRun> runs;
  runs.push_back(measured_run("load-low", 200.0, 31, o, hidden, values));
  runs.push_back(measured_run("load-mid", 500.0, 33, o, hidden, values));
  runs.push_back(measured_run("load-high", 900.0, 32, o, hidden, values));
  const FitOutcome fit = fit_runs(runs, o);
  CAPTURE(fit.loss, fit.base_loss, fit.evaluations, fit.warnings);
  std::vector<const ParamEstimate*> found;
  for (const FitParam* h : hidden)
    for (const ParamEstimate& e : fit.params)
      if (e.name == h->name) found.push_back(&e);
  REQUIRE(found.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const ParamEstimate& e = *found[i];
    CAPTURE(e.name, e.value, e.ci_low, e.ci_high, e.note);
    CHECK(e.identified);
    // 0.742 and 1.71 when written: the two trade a little against each
    // other (a prefill's attention grows with its tokens too), so 10%, not
    // the 5% of the step model's terms.
    CHECK(std::abs(e.value - values[i]) / values[i] <= 0.10);
  }
  REQUIRE(fit.fitted.calibrated);
  const auto& scales = fit.fitted.calibrated->overhead.op_scales;
  const auto& was = test::tiny_profile().overhead.op_scales;
  const auto at = [](OpKind k) { return static_cast<std::size_t>(k); };
  CHECK(scales[at(OpKind::gate_up_proj)] == Approx(was[at(OpKind::gate_up_proj)] * found[0]->value));
  CHECK(scales[at(OpKind::attn_decode)] == Approx(was[at(OpKind::attn_decode)] * found[1]->value));
  CHECK(scales[at(OpKind::rmsnorm)] == Approx(was[at(OpKind::rmsnorm)]));  // the rest as they were
  // Not in the default set: op_scale already moves them all.
  for (const FitParam* p : default_fit_params(o.base, false)) CHECK(std::string(p->name) != "gemm_op_scale");
  fs::remove_all(b.dir);
}

TEST_CASE("calibrate --measured refuses a roofline parameter on a calibrated base and the reverse",
          "[calibrate_profile]") {
  Base b = base("kinds");
  FitOptions o = b.options;
  const FitRun run = measured_run("a", 300.0, 21, o);
  o.params = {"op_scale", "compute_scale"};
  CHECK_THROWS_WITH(fit_runs({run}, o), Catch::Contains("compute_scale") && Catch::Contains("roofline") &&
                                            Catch::Contains("tiny-profile.json") && Catch::Contains("step_base_us"));
  FitOptions roofline = o;
  roofline.base = resolve_hardware("cpu");
  roofline.params = {"op_scale"};
  CHECK_THROWS_WITH(fit_runs({run}, roofline), Catch::Contains("op_scale") && Catch::Contains("--profile") &&
                                                   Catch::Contains("compute_scale"));
  fs::remove_all(b.dir);
}

TEST_CASE("twinserve calibrate --measured --profile writes a calibrated profile simulate and validate take",
          "[calibrate_profile]") {
  using twin::test::run_twinserve;
  Base b = base("cli");
  const fs::path& dir = b.dir;
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 60 --rate 400 --prompt uniform:32:192 --output uniform:8:48 --seed 5 " +
                        trace).exit_code == 0);
  const std::string deploy = " --model tiny --hw cpu --num-gpu-blocks-override 4096 ";
  auto r = run_twinserve("simulate --trace " + trace + deploy + "--profile " + b.profile + " --no-progress --out " +
                             (dir / "sim").string(),
                         true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  const std::string fitted = (dir / "fitted.json").string();
  const std::string calibrate = "calibrate --measured " + (dir / "sim").string() + " --trace " + trace + deploy +
                                "--profile " + b.profile + " --max-evals 30 --no-cross-validate --quiet --out " + fitted;
  r = run_twinserve(calibrate, true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("step_per_seq_us") != std::string::npos);
  CHECK(r.out.find("compute_scale") == std::string::npos);  // a roofline parameter is not listed
  CHECK(r.out.find("--profile " + fitted) != std::string::npos);
  {
    // A calibrated profile with its provenance; the simulator's own run on
    // the base: op_scale stays at 1.
    const nlohmann::json profile = nlohmann::json::parse(std::ifstream(fitted));
    CHECK(profile.at("format") == "twinserve calibrated profile");
    CHECK(profile.at("fitted_from").at("base_profile").at("path") == b.profile);
    const nlohmann::json& p = profile.at("fitted_from").at("parameters").at(0);
    CHECK(p.at("name") == "op_scale");
    CHECK(p.at("value").get<double>() == Approx(1.0).epsilon(0.02));
  }
  r = run_twinserve("simulate --trace " + trace + deploy + "--profile " + fitted + " --no-progress --out " +
                        (dir / "again").string(),
                    true);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  r = run_twinserve("validate --measured " + (dir / "sim" / "requests.csv").string() + " --trace " + trace + deploy + "--profile " +
                        fitted + " --out " + (dir / "val").string(),
                    true);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  // A run too short to fit alone (one request: three residuals for three
  // parameters): the leave-one-out fit on it identifies nothing, so the other run has no held-out prediction and a warning
  // says why; the fit on both still writes its profile.
  const std::string few = (dir / "few.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 1 --rate 400 --prompt uniform:32:192 --output uniform:8:48 --seed 6 " +
                        few).exit_code == 0);
  REQUIRE(run_twinserve("simulate --trace " + few + deploy + "--profile " + b.profile + " --no-progress --out " +
                        (dir / "few").string()).exit_code == 0);
  r = run_twinserve("calibrate --measured " + (dir / "sim").string() + "=" + trace + " " + (dir / "few").string() + "=" +
                        few + deploy + "--profile " + b.profile + " --max-evals 12 --out " +
                        (dir / "cv.json").string(),
                    true);
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("cross-validation: the fit without " + (dir / "sim").string() + " failed") != std::string::npos);
  CHECK(r.out.find("no prediction") != std::string::npos);
  // Refused by name: a roofline parameter on the calibrated base, a
  // profile of another model, --profile without --measured, no hardware.
  const std::string base_cmd = "calibrate --measured " + (dir / "sim").string() + " --trace " + trace +
                               " --num-gpu-blocks-override 4096 --out " + (dir / "x.json").string();
  r = run_twinserve(base_cmd + " --model tiny --hw cpu --profile " + b.profile + " --fit-params memory_scale", true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("memory_scale") != std::string::npos);
  r = run_twinserve(base_cmd + " --model small --hw cpu --profile " + b.profile, true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("tiny-profile.json") != std::string::npos);
  r = run_twinserve(base_cmd + " --model tiny --profile " + b.profile, true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("metadata.hardware") != std::string::npos);
  r = run_twinserve("calibrate --model tiny --profile " + b.profile + " --out " + (dir / "y.json").string(), true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--profile") != std::string::npos);
  fs::remove_all(dir);
}
