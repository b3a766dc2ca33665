// calibrate --measured from /metrics scrapes, end to end: `serve --simulate`
// on a hidden profile (l40s with compute x0.8, memory x0.9), three `bench`
// runs at 2, 5 and 10 req/s, each leaving the server's /metrics before and
// after it in metrics.prom; the fit on those scrapes (and the traces the
// runs played) recovers the hidden parameters, and the fitted profile
// predicts a fourth run, at 7 req/s, from its scrapes.
//
// Nothing here compares a wall-clock duration with a bound: both sides are
// records of the same runs. The server paces each simulated step on the
// wall clock, so a step that wakes late shifts what it measured; its steps
// are long here (tens of ms: an 8B model on an L40S, prompts of 256-2048
// tokens), so a wake-up late by 0.1-1 ms moves a mean by well under the
// issue's 5% (parameters) and 3% (a prediction's means), and the target
// runs alone (SERIAL) so that other tests do not load the machine.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "hwprofiles/hardware_writer.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/twin_server.hpp"
#include "validate/fit_params.hpp"
#include "validate/measured_calibration.hpp"

namespace fs = std::filesystem;
using namespace twin;
using twin::test::run_twinserve;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_scrape_serve_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const std::vector<std::string> kHiddenNames = {"compute_scale", "memory_scale"};
const std::vector<double> kHidden = {0.8, 0.9};
constexpr int kBlocks = 3000;

// A bench run of a fresh trace at `rate` against the server; "RUN=TRACE".
std::string bench_run(const fs::path& dir, const std::string& url, int rate) {
  const std::string name = "r" + std::to_string(rate);
  const std::string trace = (dir / (name + ".jsonl")).string();
  REQUIRE(run_twinserve("trace generate --requests 30 --rate " + std::to_string(rate) +
                        " --prompt uniform:256:2048 --output uniform:16:96 --seed " + std::to_string(rate) + " " + trace)
              .exit_code == 0);
  const fs::path out = dir / name;
  // A seed of its own: bench draws the prompts' token ids from it, and
  // runs with one seed would share prompt prefixes across runs, which the
  // server's prefix cache would hit and a replay of one trace would not.
  const auto r = run_twinserve("bench --trace " + trace + " --base-url " + url + " --seed " + std::to_string(rate) +
                                   " --quiet --out " + out.string(),
                               true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  REQUIRE(fs::is_regular_file(out / "metrics.prom"));
  return (out / "metrics.prom").string() + "=" + trace;
}

}  // namespace

TEST_CASE("calibrate --measured recovers serve's hidden profile from its /metrics scrapes", "[calibrate_scrape]") {
  // The server paces its steps on the wall clock: on a loaded machine a late
  // wake-up moves the means, so this runs under `make bench`, not `make test`.
  if (std::getenv("TWIN_TIMING_TESTS") == nullptr)
    TWIN_SKIP("paced on the wall clock: run by make bench (TWIN_TIMING_TESTS=1)");
  const fs::path dir = fresh_dir("recover");
  std::vector<const FitParam*> params;
  for (const std::string& n : kHiddenNames) params.push_back(&fit_param(n));
  const HardwareDesc hidden = apply_fit_params(resolve_hardware("l40s"), params, kHidden).hw;
  const fs::path hidden_file = dir / "hidden.json";
  std::ofstream(hidden_file) << hardware_json(hidden).dump(2) << "\n";

  std::vector<std::string> runs;
  std::string predict;
  {
    twin::test::TwinServer server(dir, {"--simulate", "--model", "llama-3.1-8b", "--hw", hidden_file.string(),
                                        "--num-gpu-blocks-override", std::to_string(kBlocks)});
    for (const int rate : {2, 5, 10}) runs.push_back(bench_run(dir, server.url(), rate));
    predict = bench_run(dir, server.url(), 7);
  }

  MeasuredCalibrationOptions o;
  o.runs = runs;
  o.base_hardware = "l40s";
  o.cluster.groups.emplace_back();
  o.cluster.groups.front().model = "llama-3.1-8b";
  o.cluster.groups.front().hardware = "l40s";
  o.cluster.num_gpu_blocks_override = kBlocks;
  o.params = kHiddenNames;
  o.max_evals = 120;
  o.cross_validate = false;
  const MeasuredCalibration cal = run_measured_calibration(o);
  for (std::size_t i = 0; i < kHiddenNames.size(); ++i) {
    const ParamEstimate& e = cal.fit.params[i];
    CAPTURE(e.name, e.value, e.note);
    REQUIRE(e.name == kHiddenNames[i]);
    CHECK(e.identified);
    CHECK(std::abs(e.value - kHidden[i]) / kHidden[i] <= 0.05);
  }
  const nlohmann::ordered_json& from = cal.profile.at("fitted_from");
  CHECK(from.at("runs").at(0).at("format") == "prometheus");
  CHECK(from.at("runs").at(0).at("scrape").at("finished_requests").get<double>() == 30);

  // The fourth load, predicted from the fitted profile, against its scrapes.
  const auto [path, trace] = split_run_trace(predict);
  const FitRun fourth = load_fit_run(path, trace, {}, 0);
  FitOptions fo;
  fo.base = cal.fit.fitted;
  fo.cluster = o.cluster;
  fo.scratch = dir;
  const RunScore score = score_run(fourth, cal.fit.fitted, fo);
  for (const MetricScore& m : score.metrics) {
    CAPTURE(m.metric, m.measured.mean, m.predicted.mean);
    CHECK(m.count == 30);
    CHECK(std::abs(m.predicted.mean - m.measured.mean) / m.measured.mean <= 0.03);
  }
  fs::remove_all(dir);
}
