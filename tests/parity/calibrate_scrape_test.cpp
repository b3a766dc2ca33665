// calibrate --measured on /metrics scrapes: the scrapes read into totals
// and intervals (vLLM's and SGLang's names, a folder in name order, short
// intervals merged), the residuals matched to the simulated requests by
// count, and bad input refused by name: a counter that goes backwards,
// scrapes of another model, no trace, more requests than the trace has,
// another tokenizer; fewer requests than the trace a warning.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "tests/support/run_cli.hpp"
#include "validate/fit_replay.hpp"
#include "validate/fit_scrape.hpp"
#include "validate/measured_fit.hpp"
#include "validate/scrape_run.hpp"

namespace fs = std::filesystem;
using namespace twin;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_scrape_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// What a server's histograms and counters hold at one scrape: `n`
// requests observed, each with the given TTFT, E2E and TPOT (seconds).
struct State {
  double n = 0, ttft_sum = 0, e2e_sum = 0, tpot_sum = 0, prompt = 0, gen = 0, running = 0;
};

std::string histogram(const std::string& name, const std::string& labels, double n, double sum) {
  return name + "_bucket{" + labels + ",le=\"0.1\"} 0\n" + name + "_bucket{" + labels + ",le=\"1.0\"} " + std::to_string(n) +
         "\n" + name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(n) + "\n" + name + "_sum{" + labels + "} " +
         std::to_string(sum) + "\n" + name + "_count{" + labels + "} " + std::to_string(n) + "\n";
}

std::string vllm_scrape(const State& s, const std::string& model = "llama-3.1-8b") {
  const std::string l = "model_name=\"" + model + "\"";
  return "# HELP vllm:num_requests_running Number of requests.\n# TYPE vllm:num_requests_running gauge\n"
         "vllm:num_requests_running{" + l + "} " + std::to_string(s.running) + "\n" +
         "vllm:prompt_tokens_total{" + l + "} " + std::to_string(s.prompt) + "\n" +
         "vllm:generation_tokens_total{" + l + "} " + std::to_string(s.gen) + "\n" +
         histogram("vllm:time_to_first_token_seconds", l, s.n, s.ttft_sum) +
         histogram("vllm:e2e_request_latency_seconds", l, s.n, s.e2e_sum) +
         histogram("vllm:request_time_per_output_token_seconds", l, s.n, s.tpot_sum);
}

std::string sglang_scrape(const State& s) {
  const std::string l = "model_name=\"meta-llama/Llama-3.1-8B-Instruct\"";
  return "sglang:num_running_reqs{" + l + "} 0\nsglang:prompt_tokens_total{" + l + "} " + std::to_string(s.prompt) + "\n" +
         histogram("sglang:time_to_first_token_seconds", l, s.n, s.ttft_sum) +
         histogram("sglang:e2e_request_latency_seconds", l, s.n, s.e2e_sum) +
         histogram("sglang:inter_token_latency_seconds", l, s.n * 10, s.tpot_sum * 10);
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// 20 requests, 100 prompt and 11 output tokens each, one a second.
fs::path write_trace(const fs::path& dir, int n = 20) {
  const fs::path p = dir / "t.jsonl";
  std::ofstream out(p);
  for (int i = 0; i < n; ++i)
    out << "{\"id\":" << i << ",\"arrival_s\":" << i << ",\"prompt_len\":100,\"output_len\":11}\n";
  return p;
}

// The state after `n` requests of TTFT 0.1 s, E2E 0.2 s, TPOT 10 ms.
State after(double n) { return State{n, 0.1 * n, 0.2 * n, 0.01 * n, 100 * n, 11 * n, 0}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("scrapes: totals, intervals and the engine's names", "[scrape]") {
  const fs::path dir = fresh_dir("read");
  write(dir / "one.prom", vllm_scrape(State{}) + vllm_scrape(after(20)));
  const ScrapeRun run = read_scrape_run(dir / "one.prom");
  CHECK(run.engine == "vllm");
  CHECK(run.model_name == "llama-3.1-8b");
  CHECK(run.model_where == (dir / "one.prom").string() + ":3");
  CHECK(run.tpot_basis == "request");
  CHECK(run.finished() == 20);
  REQUIRE(run.intervals() == 1);
  const ScrapeHistogram d = histogram_delta(run.scrapes[1].e2e, run.scrapes[0].e2e);
  CHECK(d.sum == Approx(4.0));
  CHECK(histogram_quantile(d, 0.5) == Approx(0.55));  // the middle of (0.1, 1.0]
  CHECK(run.warnings.empty());

  // A folder, in name order; intervals of fewer than 10 requests merged.
  const fs::path folder = dir / "scrapes";
  fs::create_directories(folder);
  const double counts[] = {0, 5, 12, 30, 33};
  for (int i = 0; i < 5; ++i) write(folder / std::string("2026-12-03T10:0").append(std::to_string(i)).append(".prom"), vllm_scrape(after(counts[i])));
  write(folder / "README", "not a scrape\n");
  CHECK(is_scrape_path(folder));
  const ScrapeRun many = read_scrape_run(folder);
  CHECK(many.bounds == std::vector<std::size_t>{0, 2, 4});

  write(dir / "sglang.prom", sglang_scrape(State{}) + sglang_scrape(after(20)));
  const ScrapeRun sg = read_scrape_run(dir / "sglang.prom");
  CHECK(sg.engine == "sglang");
  CHECK(sg.tpot_basis == "token");
  CHECK(sg.model_name == "meta-llama/Llama-3.1-8B-Instruct");
  fs::remove_all(dir);
}

TEST_CASE("scrapes: bad input is an error naming the file and line", "[scrape]") {
  const fs::path dir = fresh_dir("bad");
  write(dir / "restart.prom", vllm_scrape(after(20)) + vllm_scrape(after(3)));
  const std::string restart = error_of([&] { read_scrape_run(dir / "restart.prom"); });
  CHECK_THAT(restart, Catch::Contains("restart.prom:") && Catch::Contains("goes backwards") &&
                          Catch::Contains("vllm:time_to_first_token_seconds"));
  // The second scrape holds two models' series (no series repeats).
  write(dir / "two.prom", vllm_scrape(State{}) + vllm_scrape(after(20)) + vllm_scrape(after(20), "other"));
  CHECK_THAT(error_of([&] { read_scrape_run(dir / "two.prom"); }), Catch::Contains("several models"));
  write(dir / "one.prom", vllm_scrape(State{}));
  CHECK_THAT(error_of([&] { read_scrape_run(dir / "one.prom"); }), Catch::Contains("1 scrape(s)"));
  write(dir / "idle.prom", vllm_scrape(after(5)) + vllm_scrape(after(5)));
  CHECK_THAT(error_of([&] { read_scrape_run(dir / "idle.prom"); }), Catch::Contains("no request finished"));
  write(dir / "other.prom", "process_cpu_seconds_total 3\nprocess_cpu_seconds_total 4\n");
  CHECK_THAT(error_of([&] { read_scrape_run(dir / "other.prom"); }), Catch::Contains("not the /metrics of vLLM"));
  State running = after(20);
  running.running = 4;
  write(dir / "busy.prom", vllm_scrape(State{}) + vllm_scrape(running));
  const ScrapeRun busy = read_scrape_run(dir / "busy.prom");
  REQUIRE(busy.warnings.size() == 1);
  CHECK_THAT(busy.warnings[0], Catch::Contains("4 running"));
  fs::remove_all(dir);
}

TEST_CASE("scrapes as a calibrate run: the trace, the model and the counts checked", "[scrape]") {
  const fs::path dir = fresh_dir("run");
  const std::string trace = write_trace(dir).string();
  const std::string path = (dir / "m.prom").string();
  write(path, vllm_scrape(State{}) + vllm_scrape(after(20)));
  CHECK_THAT(error_of([&] { load_fit_run(path, "", {}, 0); }),
             Catch::Contains("--trace") && Catch::Contains("20 finished requests") && Catch::Contains("100 prompt and 11 output"));
  const FitRun run = load_fit_run(path, trace, {}, 0);
  CHECK(run.format == "prometheus");
  CHECK(run.requests.size() == 20);
  CHECK(run.warnings.empty());
  CHECK(split_run_trace(path + "=" + trace) == std::make_pair(path, trace));
  CHECK(split_run_trace(path) == std::make_pair(path, std::string()));

  ClusterConfig c;
  c.groups.emplace_back();
  c.groups.front().model = "qwen3-8b";
  c.groups.front().hardware = "h100-80gb";
  CHECK_THAT(error_of([&] { check_fit_runs({run}, c); }),
             Catch::Contains("label model_name (" + path + ":3)") && Catch::Contains("another model"));
  c.groups.front().model = "llama-3.1-8b";
  CHECK_NOTHROW(check_fit_runs({run}, c));

  // More finished requests than the trace has: another client, or a late first scrape.
  CHECK_THAT(error_of([&] { load_fit_run(path, write_trace(dir, 12).string(), {}, 0); }),
             Catch::Contains("counted 20 finished requests") && Catch::Contains("has 12"));
  // Fewer: a warning.
  const FitRun part = load_fit_run(path, write_trace(dir, 25).string(), {}, 0);
  REQUIRE(part.warnings.size() == 1);
  CHECK_THAT(part.warnings[0], Catch::Contains("20 of the trace's 25"));
  // Prompt tokens another tokenizer's.
  State wrong = after(20);
  wrong.prompt *= 1.3;
  write(path, vllm_scrape(State{}) + vllm_scrape(wrong));
  CHECK_THAT(error_of([&] { load_fit_run(path, write_trace(dir).string(), {}, 0); }),
             Catch::Contains("vllm:prompt_tokens_total") && Catch::Contains("another model or tokenizer"));
  fs::remove_all(dir);
}

TEST_CASE("scrapes: residuals compare each interval's mean with the requests the simulation finished then", "[scrape]") {
  const fs::path dir = fresh_dir("slots");
  const std::string trace = write_trace(dir).string();
  const std::string path = (dir / "m.prom").string();
  // Two intervals of 10 requests; the second's TTFT twice the first's.
  State mid = after(10), end = after(20);
  end.ttft_sum = mid.ttft_sum + 10 * 0.2;
  write(path, vllm_scrape(State{}) + vllm_scrape(mid) + vllm_scrape(end));
  FitRun run = load_fit_run(path, trace, {}, 0);
  const std::vector<ResidualSlot> slots = residual_slots({run});
  REQUIRE(slots.size() == 6);  // 3 metrics x 2 intervals
  CHECK(slots[0].ranked);
  CHECK(slots[0].rank_lo == 0);
  CHECK(slots[1].rank_lo == 10);
  CHECK(slots[1].rank_hi == 20);
  CHECK(slots[1].measured_ms == Approx(200));

  // A simulation where every request has TTFT 0.1 s, TPOT 10 ms, E2E 0.2 s.
  std::vector<RequestRecord> predicted(20);
  for (std::size_t i = 0; i < predicted.size(); ++i) {
    RequestRecord& r = predicted[i];
    r.id = static_cast<RequestId>(i);
    r.outcome = Outcome::finished;
    r.arrival = from_seconds(static_cast<double>(i));
    r.first_token = r.arrival + from_seconds(0.1);
    r.finish = r.first_token + from_seconds(0.1);
    r.output_tokens = 11;
  }
  const std::vector<double> z = relative_residuals(slots, {predicted});
  CHECK(z[0] == Approx(0).margin(1e-9));
  CHECK(z[1] == Approx(-0.5));  // predicted 100 ms against 200 measured
  for (std::size_t s = 2; s < z.size(); ++s) CHECK(z[s] == Approx(0).margin(1e-9));
  // Requests the simulation did not finish count as twice the measurement.
  predicted[19].outcome = Outcome::rejected;
  CHECK(relative_residuals(slots, {predicted})[5] == Approx(0.1));

  const RunScore score = score_scrape_run(run, predicted, false);
  REQUIRE(score.metrics.size() == 3);
  CHECK(score.metrics[0].count == 20);
  CHECK(score.metrics[0].measured.mean == Approx(150));
  CHECK(score.metrics[0].predicted.mean == Approx(100));
  score_scrape_half(run, true);
  CHECK(run.scored == std::vector<char>{1, 0});
  CHECK(score_scrape_run(run, predicted, true).metrics[0].measured.mean == Approx(200));
  fs::remove_all(dir);
}

TEST_CASE("twinserve calibrate and validate take scrapes, bad ones exit 1 or 2 naming what", "[scrape]") {
  using twin::test::run_twinserve;
  const fs::path dir = fresh_dir("cli");
  const std::string trace = write_trace(dir).string();
  const std::string good = (dir / "good.prom").string();
  write(good, vllm_scrape(State{}) + vllm_scrape(after(20)));
  const std::string deploy = " --model llama-3.1-8b --hw h100-80gb --num-gpu-blocks-override 2000 --quiet ";

  auto r = run_twinserve("validate --measured " + good + " --trace " + trace + deploy + "--out " + (dir / "val").string(), true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("/metrics scrapes of vllm, 20 requests finished") != std::string::npos);
  const nlohmann::json report = nlohmann::json::parse(std::ifstream(dir / "val" / "report.json"));
  CHECK(report.at("format") == "prometheus");
  CHECK(report.at("metrics").at("ttft_ms").at("mean").at("measured").get<double>() == Approx(100));

  const std::string calibrate = "calibrate --fit-params compute_scale --max-evals 8 --out " + (dir / "f.json").string() + deploy;
  r = run_twinserve(calibrate + "--measured " + good, true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("give the trace the clients played with --trace") != std::string::npos);
  write(dir / "other.prom", vllm_scrape(State{}, "Qwen/Qwen3-8B") + vllm_scrape(after(20), "Qwen/Qwen3-8B"));
  r = run_twinserve(calibrate + "--measured " + (dir / "other.prom").string() + "=" + trace, true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("label model_name") != std::string::npos);
  write(dir / "restart.prom", vllm_scrape(after(20)) + vllm_scrape(after(3)));
  r = run_twinserve(calibrate + "--measured " + (dir / "restart.prom").string() + "=" + trace, true);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("goes backwards") != std::string::npos);
  write(dir / "broken.prom", vllm_scrape(State{}) + "vllm:x{a=\"b} 1\n");
  r = run_twinserve("validate --measured " + (dir / "broken.prom").string() + " --trace " + trace + deploy + "--out " +
                    (dir / "val2").string(), true);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("broken.prom:21:") != std::string::npos);
  fs::remove_all(dir);
}
