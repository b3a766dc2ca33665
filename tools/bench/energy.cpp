// bench_energy: predicted joules per output token against published
// measurements (docs/energy.md, "Validation"). Each row is one configuration
// of the ML.ENERGY Leaderboard v3.0 (vLLM 0.11.1, H100 SXM, Llama 3.1
// Instruct bf16, the LMArena chat task, 1,024 requests submitted at once,
// batch size = vLLM's max_num_seqs, energy measured over the steady state
// where the batch is full). The bench plays the same workload through
// `twinserve simulate` with the vllm preset, async scheduling off as in
// vLLM 0.11.1 (on by default only in later releases), and prints predicted J/token,
// average power and output throughput beside the published ones, and the
// errors. Nothing in the power figures or the cost model is fitted to these
// rows; the errors are what they are.
//
// bench_energy [WORK_DIR]. Asserts nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"
#include "metrics/step_csv.hpp"

namespace fs = std::filesystem;

namespace {

// ML.ENERGY's output-length histogram of the model on the task (50 equal
// bins from 2 to 4096 tokens), public/data/models/meta-llama__Llama-3.1-
// {8B,70B}-Instruct__lm-arena-chat.json in github.com/ml-energy/leaderboard.
const std::vector<int> kOutput8b = {8607, 4310, 3518, 3645, 3626, 3541, 3242, 2563, 1856, 1269, 877, 641, 455,
                                    337,  268,  207,  141,  118,  101,  83,   53,   46,   51,   42,   38,  37,
                                    28,   21,   15,   22,   18,   13,   11,   11,   7,    13,   8,    7,   2,
                                    6,    0,    3,    3,    3,    1,    0,    2,    1,    1,    68};
const std::vector<int> kOutput70b = {8173, 3462, 2782, 2969, 2816, 2826, 2438, 1851, 1276, 906, 594, 414, 277,
                                     204,  157,  111,  79,   55,   51,   38,   31,   26,   27,   14,  19,  16,
                                     16,   8,    9,    0,    15,   7,    6,    6,    9,    7,    2,   0,   5,
                                     0,    2,    1,    1,    3,    0,    1,    2,    1,    1,    30};

struct Row {
  const char* model;
  const char* hw;
  int tp;
  int batch;                       // vLLM max_num_seqs
  double joules_per_token;         // published, per output token, all GPUs
  double power_w;                  // published average power, all GPUs
  double tokens_per_s;             // published output throughput
  const std::vector<int>* output;  // the model's output-length histogram
};

// energy_per_token_joules, avg_power_watts, output_throughput_tokens_per_sec
// of the H100 configurations in the files named above.
const Row kRows[] = {
    {"llama-3.1-8b", "h100-80gb", 1, 8, 0.4548, 486, 1070, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 16, 0.2627, 513, 1954, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 32, 0.1651, 560, 3391, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 64, 0.1186, 610, 5147, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 128, 0.0951, 669, 7037, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 256, 0.0766, 691, 9010, &kOutput8b},
    {"llama-3.1-8b", "h100-80gb", 1, 512, 0.0702, 688, 9806, &kOutput8b},
    {"llama-3.1-70b", "h100-80gb", 4, 8, 3.7587, 1765, 470, &kOutput70b},
    {"llama-3.1-70b", "h100-80gb", 4, 32, 1.2069, 1794, 1487, &kOutput70b},
    {"llama-3.1-70b", "h100-80gb", 4, 64, 0.7972, 2002, 2511, &kOutput70b},
    {"llama-3.1-70b", "h100-80gb", 4, 128, 0.5634, 2184, 3876, &kOutput70b},
    {"llama-3.1-70b", "h100-80gb", 4, 256, 0.4790, 2354, 4915, &kOutput70b},
    {"llama-3.1-70b", "h100-80gb", 4, 512, 0.4210, 2493, 5921, &kOutput70b},
};

constexpr int kRequests = 1024;  // as ML.ENERGY's runs

// Output lengths at evenly spaced quantiles of the histogram (linear inside
// a bin), shuffled with a fixed seed: the workload is the same every run.
std::vector<int> output_lengths(const std::vector<int>& counts) {
  const double lo = 2, hi = 4096, width = (hi - lo) / static_cast<double>(counts.size());
  double total = 0;
  for (const int c : counts) total += c;
  std::vector<int> out;
  for (int i = 0; i < kRequests; ++i) {
    double target = (i + 0.5) / kRequests * total;
    std::size_t b = 0;
    while (b + 1 < counts.size() && target >= counts[b]) target -= counts[b++];
    const double x = lo + width * (static_cast<double>(b) + target / std::max(1, counts[b]));
    out.push_back(std::max(1, static_cast<int>(std::lround(x))));
  }
  std::mt19937 rng(44);
  for (std::size_t i = out.size() - 1; i > 0; --i) std::swap(out[i], out[rng() % (i + 1)]);
  return out;
}

// Every request at time 0; prompts log-normal with mean 224 tokens (the
// task's mean prompt length, ML.ENERGY's v3.0 post).
void write_trace(const fs::path& path, const std::vector<int>& outputs) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> prompt(std::log(224.0) - 0.32, 0.8);
  std::ofstream t(path);
  t << "id,arrival_s,prompt_len,output_len\n";
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const int p = std::clamp(static_cast<int>(std::lround(prompt(rng))), 4, 4096);
    t << i << ",0," << p << ',' << outputs[i] << '\n';
  }
}

struct Steady {
  double joules = 0, seconds = 0, tokens = 0;
};

// The steady state as ML.ENERGY measures it: from the first step whose batch
// is full (at least 95% of the run's largest) to the last such step. Tokens:
// one per decode sequence and one per prefill that completes in the step.
Steady steady_state(const fs::path& steps_csv, double idle_w) {
  const std::vector<twin::StepRecord> steps = twin::read_step_records(steps_csv);
  int peak = 0;
  for (const auto& s : steps) peak = std::max(peak, s.batch_size);
  const int full = static_cast<int>(std::ceil(0.95 * peak));
  std::size_t first = steps.size(), last = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].batch_size < full) continue;
    first = std::min(first, i);
    last = i;
  }
  Steady st;
  if (first >= steps.size()) return st;
  double busy = 0;
  for (std::size_t i = first; i <= last; ++i) {
    st.joules += static_cast<double>(steps[i].energy_uj) * 1e-6;
    busy += twin::to_seconds(steps[i].duration);
    st.tokens += steps[i].num_decode_seqs + steps[i].num_prefill_seqs;
  }
  st.seconds = twin::to_seconds(steps[last].start + steps[last].duration - steps[first].start);
  st.joules += idle_w * std::max(0.0, st.seconds - busy);  // gaps between steps
  return st;
}

double err(double predicted, double published) { return (predicted / published - 1) * 100; }

}  // namespace

int main(int argc, char** argv) {
  const fs::path bin = fs::absolute(fs::path(argv[0])).parent_path() / "twinserve";
  const fs::path work = fs::absolute(argc > 1 ? fs::path(argv[1]) : fs::path("bench_energy_out"));
  fs::create_directories(work);
  std::printf("bench_energy: predicted vs published (ML.ENERGY Leaderboard v3.0, vLLM 0.11.1, H100 SXM,\n"
              "  LMArena chat, 1024 requests at once; steady state); errors are predicted / published - 1\n");
  std::printf("  %-14s %3s %5s | %8s %8s %6s | %7s %7s %6s | %7s %7s %6s\n", "model", "tp", "batch", "J/tok",
              "pub", "err%", "W", "pub", "err%", "tok/s", "pub", "err%");
  double sum_abs = 0, worst = 0;
  int n = 0, within = 0;
  for (const Row& r : kRows) {
    const std::string name = std::string(r.model) + "_tp" + std::to_string(r.tp) + "_b" + std::to_string(r.batch);
    const fs::path trace = work / (name + ".csv"), out = work / name;
    write_trace(trace, output_lengths(*r.output));
    std::ostringstream cmd;
    cmd << bin << " simulate --trace " << trace << " --model " << r.model << " --hw " << r.hw << " --tp " << r.tp
        << " --max-num-seqs " << r.batch << " --max-model-len 8192 --scheduler vllm --no-async-scheduling --quiet --overwrite --out "
        << out << " > /dev/null";
    if (std::system(cmd.str().c_str()) != 0) {
      std::printf("  %s: simulate failed: %s\n", name.c_str(), cmd.str().c_str());
      continue;
    }
    const double idle_w = twin::resolve_hardware(r.hw).power.idle_w * r.tp;
    const Steady st = steady_state(out / "steps.csv", idle_w);
    if (st.tokens <= 0 || st.seconds <= 0) {
      std::printf("  %s: no steady state\n", name.c_str());
      continue;
    }
    const double jpt = st.joules / st.tokens, watts = st.joules / st.seconds, tps = st.tokens / st.seconds;
    const double e = err(jpt, r.joules_per_token);
    std::printf("  %-14s %3d %5d | %8.4f %8.4f %+6.1f | %7.0f %7.0f %+6.1f | %7.0f %7.0f %+6.1f\n", r.model, r.tp,
                r.batch, jpt, r.joules_per_token, e, watts, r.power_w, err(watts, r.power_w), tps, r.tokens_per_s,
                err(tps, r.tokens_per_s));
    sum_abs += std::fabs(e);
    worst = std::max(worst, std::fabs(e));
    ++n;
    within += std::fabs(e) <= 15 ? 1 : 0;
  }
  if (n > 0) {
    std::printf("  J/token: mean |error| %.1f%%, worst %.1f%%, %d of %d rows within 15%% (target: all)\n",
                sum_abs / n, worst, within, n);
  }
  return 0;
}
