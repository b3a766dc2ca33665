// bench_published: the simulator against published throughput tables of
// engines it was never fitted to (tools/bench/data/published_throughput.csv,
// each row naming its source). A row is a benchmark tool's offline run:
// `requests` requests of `isl` prompt and `osl` output tokens, all sent at
// once, the figure the output tokens over the run's length. The bench
// generates that workload, simulates it with the engine's preset and the
// settings the engine's benchmark tool would pick (for trtllm-bench, its
// max_batch_size / max_num_tokens heuristic and KV memory fraction, below),
// and prints each row's error, then the median absolute error and the
// share of optimistic predictions, overall and per engine, GPU and model:
// issue 38's target is a median within 7% with between a third and two
// thirds optimistic. Nothing is fitted to these rows.
//
// bench_published [CSV] [WORK_DIR]. Asserts nothing; exits 1 when a row
// cannot be read or simulated.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwprofiles/hardware_desc.hpp"
#include "models/model_desc.hpp"
#include "models/model_math.hpp"

namespace fs = std::filesystem;

namespace {

struct Row {
  std::string source, engine, model, hw, quantization, kv_cache_dtype;
  int tp = 1;
  long isl = 0, osl = 0, requests = 0;
  double published = 0;
};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) out.push_back(field);
  return out;
}

// Rows after the header; '#' lines are comments. A bad row names its line.
std::vector<Row> read_rows(const fs::path& csv) {
  std::ifstream in(csv);
  if (!in) throw std::runtime_error(csv.string() + ": cannot read");
  std::vector<Row> rows;
  std::string line;
  int n = 0;
  bool header = true;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    const auto f = split(line);
    if (f.size() != 11) throw std::runtime_error(csv.string() + ":" + std::to_string(n) + ": expected 11 fields");
    try {
      rows.push_back({f[0], f[1], f[2], f[3], f[5], f[6], std::stoi(f[4]), std::stol(f[7]), std::stol(f[8]),
                      std::stol(f[9]), std::stod(f[10])});
    } catch (const std::exception&) {
      throw std::runtime_error(csv.string() + ":" + std::to_string(n) + ": a number field does not parse");
    }
  }
  return rows;
}

struct EngineSettings {
  long max_batch_size = 0, max_num_tokens = 0;
  double gpu_memory_utilization = 0.9;
};

// trtllm-bench's throughput settings (tensorrt_llm/bench/build/tuning.py,
// calc_engine_setting and finetune_setting): the requests of isl + osl
// tokens its KV memory holds, from the device memory less the weights (one
// byte a parameter in FP8) times the KV fraction (0.95, perf-overview.md's
// "in many cases"); the batch that many, at most 4096, rounded up (to 32
// under 256, 128 under 1024, else 256; at least 64); the token budget the
// batch times 1 + isl / osl, at most 32768, rounded up (to 256 under 4096,
// at least 2048; 512 under 8192; else 1024). The KV fraction is of the
// memory left after the weights; as vLLM's fraction of the whole device it
// is 1 - 0.05 x (memory - weights) / memory.
EngineSettings trtllm_bench_settings(const Row& r) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0, kFraction = 0.95;
  const twin::ModelDesc m = twin::resolve_model(r.model);
  const twin::HardwareDesc hw = twin::resolve_hardware(r.hw);
  const double elem = r.quantization == "fp8" ? 1.0 : 2.0, kv_elem = r.kv_cache_dtype == "fp8" ? 1.0 : 2.0;
  const double kv_heads = std::max<double>(r.tp, static_cast<double>(m.num_key_value_heads));
  const double per_token = 2.0 * static_cast<double>(m.num_hidden_layers) * kv_heads *
                           static_cast<double>(m.head_dim) * kv_elem / kGiB;
  const double memory = twin::memory_bytes(hw) / kGiB * r.tp;
  const double weights = static_cast<double>(twin::param_count(m)) * elem / kGiB;
  const double max_requests = (memory - weights) * kFraction / (per_token * static_cast<double>(r.isl + r.osl));
  const double raw_bs = std::min(max_requests, 4096.0);
  const double raw_tokens = std::min(raw_bs * (1.0 + static_cast<double>(r.isl) / static_cast<double>(r.osl)), 32768.0);
  const auto up = [](double x, double step) { return static_cast<long>(step * std::ceil(x / step)); };
  EngineSettings s;
  s.max_batch_size = raw_bs < 256 ? std::max(64L, up(raw_bs, 32)) : raw_bs < 1024 ? up(raw_bs, 128) : up(raw_bs, 256);
  s.max_num_tokens = raw_tokens < 4096   ? std::max(2048L, up(raw_tokens, 256))
                     : raw_tokens < 8192 ? up(raw_tokens, 512)
                                         : up(raw_tokens, 1024);
  s.gpu_memory_utilization = 1.0 - (1.0 - kFraction) * (memory - weights) / memory;
  return s;
}

// Output tokens per second of the row's workload simulated; NAN on failure.
double simulate_row(const fs::path& bin, const Row& r, const EngineSettings& s, const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path trace = dir / "trace.jsonl";
  std::ostringstream gen, sim;
  gen << bin << " trace generate --requests " << r.requests << " --arrivals burst --prompt fixed:" << r.isl
      << " --output fixed:" << r.osl << " --seed 1 --force " << trace << " > /dev/null 2>&1";
  sim << bin << " simulate --trace " << trace << " --model " << r.model << " --hw " << r.hw << " --tp " << r.tp
      << " --scheduler " << r.engine << " --quantization " << r.quantization << " --kv-cache-dtype "
      << r.kv_cache_dtype << " --max-num-seqs " << s.max_batch_size << " --max-num-batched-tokens "
      << s.max_num_tokens << " --gpu-memory-utilization " << s.gpu_memory_utilization << " --out " << dir
      << " --overwrite --quiet > /dev/null";
  if (std::system(gen.str().c_str()) != 0 || std::system(sim.str().c_str()) != 0) return NAN;
  std::ifstream summary(dir / "summary.json");
  return nlohmann::json::parse(summary).at("output_throughput").get<double>();
}

struct Tally {
  std::vector<double> errors;  // percent, predicted over published
  void print(const std::string& label) const {
    std::vector<double> abs;
    int optimistic = 0;
    for (const double e : errors) {
      abs.push_back(std::fabs(e));
      optimistic += e > 0;
    }
    std::sort(abs.begin(), abs.end());
    const size_t n = abs.size();
    const double median = n == 0 ? NAN : n % 2 ? abs[n / 2] : (abs[n / 2 - 1] + abs[n / 2]) / 2;
    std::printf("  %-44s rows %3zu  median |error| %5.1f%%  optimistic %3d of %zu\n", label.c_str(), n, median,
                optimistic, n);
  }
};

}  // namespace

int main(int argc, char** argv) {
  const fs::path bin = fs::absolute(fs::path(argv[0])).parent_path() / "twinserve";
  const fs::path csv = argc > 1 ? fs::path(argv[1]) : fs::path(TWIN_SOURCE_DIR) / "tools/bench/data/published_throughput.csv";
  const fs::path work = fs::absolute(argc > 2 ? fs::path(argv[2]) : fs::path("bench_published_out"));
  std::vector<Row> rows;
  try {
    rows = read_rows(csv);
  } catch (const std::exception& e) {
    std::printf("bench_published: %s\n", e.what());
    return 1;
  }
  std::printf("%-7s %-14s %-10s %2s %6s %6s %6s %10s %10s %7s  %s\n", "engine", "model", "gpu", "tp", "isl", "osl",
              "batch", "published", "predicted", "error", "max_num_tokens");
  std::map<std::string, Tally> tallies;
  int failed = 0, i = 0;
  for (const Row& r : rows) {
    const EngineSettings s = trtllm_bench_settings(r);
    const double predicted = simulate_row(bin, r, s, work / std::to_string(i++));
    if (std::isnan(predicted)) {
      std::printf("%-7s %-14s %-10s %2d %6ld %6ld: simulate failed\n", r.engine.c_str(), r.model.c_str(), r.hw.c_str(),
                  r.tp, r.isl, r.osl);
      ++failed;
      continue;
    }
    const double error = 100.0 * (predicted - r.published) / r.published;
    std::printf("%-7s %-14s %-10s %2d %6ld %6ld %6ld %10.0f %10.0f %+6.1f%%  %ld\n", r.engine.c_str(), r.model.c_str(),
                r.hw.c_str(), r.tp, r.isl, r.osl, s.max_batch_size, r.published, predicted, error, s.max_num_tokens);
    tallies["all rows"].errors.push_back(error);
    tallies[r.engine + " " + r.model + " " + r.hw + " tp" + std::to_string(r.tp)].errors.push_back(error);
  }
  std::printf("summary (target: median |error| <= 7%%, a third to two thirds optimistic):\n");
  for (const auto& [label, t] : tallies) t.print(label);
  return failed > 0 ? 1 : 0;
}
