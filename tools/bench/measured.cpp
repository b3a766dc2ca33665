// bench_measured: the simulator against measured runs of real engines.
// For each run folder under MEASURED_DIR (default ../shared/measured, the
// development data; absent on a user's machine: the bench says so and exits
// 0) holding meta.json (the engine's arguments, its KV block count, the GPU),
// workload.jsonl (the trace it played) and requests.jsonl (per-request server
// timestamps), it simulates the same workload with the engine's arguments on
// the bundled hardware profile and prints TTFT, TPOT and E2E mean and p90
// errors against the measurement, the preemptions and the prompt tokens the
// simulation recomputed, and the queue time (first scheduled - arrival,
// vLLM's scheduled_ts - queued_ts). It runs the full vllm preset and, beside it, the
// preset with each vLLM v1 mechanism turned off in turn, so each one's share
// of the error shows. Nothing here is fitted to the runs (docs/engines.md).
//
// bench_measured [MEASURED_DIR] [WORK_DIR]. Asserts nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/percentile.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/step_csv.hpp"

#include "tools/bench/measured_meta.hpp"
#include "tools/bench/measured_runs.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Stats {
  double mean = NAN, p90 = NAN;
};

// p90 linear between closest ranks (numpy's default), as the source's summary.
Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (const double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p90 = twin::percentile_linear(v, 90);
  return s;
}

struct Metrics {
  Stats ttft, tpot, e2e, queue;
  long preemptions = -1;
  double recomputed_tokens = NAN;
};

// The measured side: TTFT = first_token_ts - queued_ts, TPOT = (last -
// first) / (output - 1), latency = last - queued (the folder's README).
Metrics measured_metrics(const fs::path& requests) {
  std::ifstream in(requests);
  std::vector<double> ttft, tpot, e2e, queue;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json r = json::parse(line);
    const double queued = r.at("queued_ts").get<double>();
    const double first = r.at("first_token_ts").get<double>();
    const double last = r.at("last_token_ts").get<double>();
    const long out = r.at("output_toks").get<long>();
    ttft.push_back((first - queued) * 1e3);
    e2e.push_back((last - queued) * 1e3);
    if (r.contains("scheduled_ts")) queue.push_back((r.at("scheduled_ts").get<double>() - queued) * 1e3);
    if (out > 1) tpot.push_back((last - first) * 1e3 / static_cast<double>(out - 1));
  }
  return {stats_of(ttft), stats_of(tpot), stats_of(e2e), stats_of(queue)};
}

// Prompt tokens computed by prefill work beyond each prompt's first
// computation: what preemptions cost.
double recomputed_tokens(const std::vector<twin::StepRecord>& steps, const std::vector<twin::RequestRecord>& requests) {
  double prefill = 0;
  for (const auto& s : steps) prefill += static_cast<double>(s.new_tokens - s.num_decode_seqs);
  for (const auto& r : requests) prefill -= r.prompt_tokens - r.cached_prompt_tokens;
  return prefill;
}

double ms(twin::Time ns) { return static_cast<double>(ns) / 1e6; }

// The simulated side, through the result files' own readers.
Metrics simulated_metrics(const fs::path& out) {
  const auto requests = twin::read_request_records(out / "requests.csv");
  std::vector<double> ttft, tpot, e2e, queue;
  for (const auto& r : requests) {
    if (r.outcome != twin::Outcome::finished) continue;
    ttft.push_back(ms(r.first_token - r.arrival));
    e2e.push_back(ms(r.finish - r.arrival));
    if (r.output_tokens > 1) tpot.push_back(ms(r.finish - r.first_token) / (r.output_tokens - 1));
    if (r.first_scheduled != twin::kNoTime) queue.push_back(ms(r.first_scheduled - r.arrival));
  }
  Metrics m{stats_of(ttft), stats_of(tpot), stats_of(e2e), stats_of(queue)};
  std::ifstream summary(out / "summary.json");
  m.preemptions = json::parse(summary).value("preemptions", -1L);
  m.recomputed_tokens = recomputed_tokens(twin::read_step_records(out / "steps.csv"), requests);
  return m;
}

double err(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

void print_row(const char* label, const Metrics& p, const Metrics& m) {
  std::printf("  %-34s TTFT %+6.1f%% / %+6.1f%%  TPOT %+6.1f%% / %+6.1f%%  E2E %+6.1f%% / %+6.1f%%  queue %+6.1f%%"
              "  preempt %4ld  recomputed %8.0f\n",
              label, err(p.ttft.mean, m.ttft.mean), err(p.ttft.p90, m.ttft.p90), err(p.tpot.mean, m.tpot.mean),
              err(p.tpot.p90, m.tpot.p90), err(p.e2e.mean, m.e2e.mean), err(p.e2e.p90, m.e2e.p90),
              err(p.queue.mean, m.queue.mean), p.preemptions, p.recomputed_tokens);
}

struct Variant {
  const char* label;
  const char* flags;
};

void bench_run(const fs::path& bin, const fs::path& dir, const fs::path& work) {
  const twin::bench::MeasuredRunMeta meta = twin::bench::read_measured_meta(dir);
  std::ostringstream base;
  base << bin << " simulate --trace " << (dir / "workload.jsonl") << meta.flags() << " --quiet --overwrite";
  const Metrics m = measured_metrics(dir / "requests.jsonl");
  std::printf("== %s (%s on %s; vLLM's KV: %ld blocks)\n", dir.filename().c_str(), meta.model.c_str(),
              meta.hw.c_str(), meta.num_gpu_blocks);
  std::printf("  measured: TTFT mean %.1f p90 %.1f ms, TPOT mean %.2f p90 %.2f ms, E2E mean %.1f p90 %.1f ms,"
              " queue mean %.1f ms\n",
              m.ttft.mean, m.ttft.p90, m.tpot.mean, m.tpot.p90, m.e2e.mean, m.e2e.p90, m.queue.mean);
  std::printf("  errors as mean / p90:\n");
  // Runs that did not record vLLM's block count compare on our memory plan.
  const long blocks_known = meta.num_gpu_blocks;
  const std::string vllm_blocks = blocks_known > 0 ? " --num-gpu-blocks " + std::to_string(blocks_known) : "";
  const Variant variants[] = {
      {"vllm preset, our memory plan", ""},
      {"vllm preset, vLLM's KV blocks", vllm_blocks.c_str()},
      {"  without async scheduling", " --no-async-scheduling"},
      {"  without own-block caching", " --set cache_generated_blocks=false"},
      {"  without full-prompt admission", " --set admission_reserve=chunk"},
      {"  without CUDA-graph padding", " --enforce-eager"},
      {"  without one-call mixed attention", " --set mixed_attention_rows=0"},
      {"  none of the five (rounds 1-2)",
       " --no-async-scheduling --set cache_generated_blocks=false --set admission_reserve=chunk --enforce-eager"
       " --set mixed_attention_rows=0"},
  };
  int i = 0;
  for (const Variant& v : variants) {
    const fs::path out = work / dir.filename() / std::to_string(i++);
    // The later variants start from vLLM's block count: they isolate a
    // scheduling mechanism, not the memory plan.
    const std::string blocks = i > 2 ? vllm_blocks : "";
    const std::string cmd = base.str() + v.flags + blocks + " --out " + out.string() + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      std::printf("  %-34s simulate failed: %s\n", v.label, cmd.c_str());
      continue;
    }
    print_row(v.label, simulated_metrics(out), m);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return twin::bench::for_each_measured_run(
      "bench_measured", argc, argv, "workload.jsonl",
      [](const fs::path& bin, const fs::path& run, const fs::path& work) { bench_run(bin, run, work); });
}
