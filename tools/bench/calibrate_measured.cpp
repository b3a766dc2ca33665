// bench_calibrate_measured: `twinserve calibrate --measured` on measured
// runs of real engines, leave one half out: for each run folder under
// MEASURED_DIR (default ../shared/measured, the development data; absent on
// a user's machine: the bench says so and exits 0) the per-request server
// timestamps (requests.jsonl) are written as a vLLM `bench serve
// --save-detailed` result, the deployment's profile is fitted on the
// requests sent in the first half of the run's time span (--holdout-split
// time), and the TTFT, TPOT and E2E mean errors of the second half, which
// the fit did not see, are printed beside the in-sample ones. This fits a
// user's deployment from its own runs, which is calibrate's purpose; no
// bundled profile is changed (docs/calibrate.md).
//
// bench_calibrate_measured [MEASURED_DIR] [WORK_DIR]. Asserts nothing.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench/measured_meta.hpp"
#include "tools/bench/measured_runs.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The server's timestamps as vLLM's client would list them: TTFT from
// queued_ts, the decode span spread evenly over the gaps (TTFT, TPOT and
// E2E are then exactly the folder README's), send times = queued_ts.
void write_vllm_result(const fs::path& requests, const std::string& model, const fs::path& out) {
  json r{{"model_id", model}, {"input_lens", json::array()}, {"output_lens", json::array()}, {"ttfts", json::array()},
         {"itls", json::array()}, {"errors", json::array()}, {"start_times", json::array()}};
  std::ifstream in(requests);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json q = json::parse(line);
    const long n = q.at("output_toks").get<long>();
    const double queued = q.at("queued_ts").get<double>(), first = q.at("first_token_ts").get<double>();
    const double last = q.at("last_token_ts").get<double>();
    r["input_lens"].push_back(q.at("input_toks"));
    r["output_lens"].push_back(n);
    r["ttfts"].push_back(first - queued);
    r["itls"].push_back(std::vector<double>(static_cast<std::size_t>(std::max(0L, n - 1)), n > 1 ? (last - first) / static_cast<double>(n - 1) : 0.0));
    r["errors"].push_back("");
    r["start_times"].push_back(queued);
  }
  std::ofstream(out) << r.dump();
}

double mean_error(const json& score, const char* metric) {
  const json& e = score.at("metrics").at(metric).at("error_pct").at("mean");
  return e.is_number() ? e.get<double>() : NAN;
}

void bench_run(const fs::path& bin, const fs::path& dir, const fs::path& work) {
  const twin::bench::MeasuredRunMeta meta = twin::bench::read_measured_meta(dir);
  std::printf("== %s (%s on %s, base profile %s)\n", dir.filename().c_str(), meta.model.c_str(), meta.hw.c_str(),
              meta.hw.c_str());
  fs::create_directories(work);
  write_vllm_result(dir / "requests.jsonl", meta.model_id, work / "vllm_result.json");
  std::ostringstream cmd;
  cmd << bin << " calibrate --measured " << (work / "vllm_result.json") << " --trace " << (dir / "workload.jsonl")
      << meta.flags()
      << (meta.num_gpu_blocks > 0 ? " --num-gpu-blocks-override " + std::to_string(meta.num_gpu_blocks) : "")
      // The first half's 155 requests (24 binned residuals) tell compute
      // and memory efficiency apart, not attention and host overhead as
      // well: with all four the fit identifies none (docs/calibrate.md).
      << " --fit-params compute_scale,memory_scale --holdout-split time --out " << (work / "fitted.json")
      << " --overwrite --quiet > " << (work / "report.txt") << " 2>&1";
  if (std::system(cmd.str().c_str()) != 0) {
    std::printf("  calibrate failed: %s (see %s)\n", cmd.str().c_str(), (work / "report.txt").c_str());
    return;
  }
  const json from = json::parse(std::ifstream(work / "fitted.json")).at("fitted_from");
  for (const json& p : from.at("parameters")) {
    if (p.at("identified").get<bool>()) {
      std::printf("  %-25s %.4g (95%% %.4g to %.4g)\n", p.at("name").get<std::string>().c_str(), p.at("value").get<double>(),
                  p.at("ci95")[0].get<double>(), p.at("ci95")[1].get<double>());
    } else {
      std::printf("  %-25s not identified (%s)\n", p.at("name").get<std::string>().c_str(),
                  p.value("note", std::string()).c_str());
    }
  }
  const json& in = from.at("in_sample").at(0);
  const json& out = from.at("held_out").at(0);
  std::printf("  mean error, fitted on the first half / predicting the second half (target: TPOT, E2E within 5%%):\n");
  for (const char* m : {"ttft", "tpot", "e2e"})
    std::printf("    %-4s %+6.1f%% / %+6.1f%%\n", m, mean_error(in, m), mean_error(out, m));
}

}  // namespace

int main(int argc, char** argv) {
  return twin::bench::for_each_measured_run(
      "bench_calibrate_measured", argc, argv, "requests.jsonl",
      [](const fs::path& bin, const fs::path& run, const fs::path& work) { bench_run(bin, run, work / run.filename()); });
}
