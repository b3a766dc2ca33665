// Fuzz targets over the binary and tabular files the program reads besides
// traces: safetensors checkpoints (`run --weights`), an engine run's
// steps.csv (`simulate --replay`) and a vLLM benchmark result
// (`validate --measured`), and scrapes of a server's /metrics (`calibrate
// --measured`).
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/records.hpp"
#include "engine/runtime/safetensors.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/vllm_detailed.hpp"
#include "sim/replay_cost_model.hpp"
#include "tools/fuzz/fuzz_target.hpp"
#include "validate/scrape_run.hpp"

namespace twin::fuzz {
namespace {

// --- safetensors ---

// Where the bytes read go, so the reads are not optimised away.
volatile unsigned checksum = 0;

std::string safetensors_bytes(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i * 37));
  return out;
}

std::vector<std::string> safetensors_seeds() {
  return {
      safetensors_bytes(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                        R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})",
                        22),
      safetensors_bytes(R"({"model.embed_tokens.weight":{"dtype":"F16","shape":[4,2],"data_offsets":[0,16]},)"
                        R"("lm_head.weight":{"dtype":"F32","shape":[],"data_offsets":[16,20]},)"
                        R"("x":{"dtype":"I64","shape":[0,5],"data_offsets":[20,20]}}    )",
                        20),
  };
}

void run_safetensors(const std::string& input, const Scratch& scratch) {
  SafetensorsFile file(scratch.write("model.safetensors", input));
  // Every byte the header promises must be inside the mapping: read them all
  // (a promise past the end faults here, or is an ASan report).
  unsigned sum = 0;
  for (const auto& [name, t] : file.tensors()) {
    for (std::size_t i = 0; i < t.bytes; ++i) sum += static_cast<unsigned>(t.data[i]);
    (void)file.find(name);
  }
  checksum = sum;
}

// --- steps.csv ---

std::vector<std::string> steps_seeds() {
  std::ostringstream out;
  StepCsvWriter writer(out);
  StepRecord r;
  for (int i = 0; i < 4; ++i) {
    r.step_id = static_cast<std::uint64_t>(i);
    r.replica = i % 2;
    r.start = 1'000'000LL * i + 17;
    r.duration = 900'000 + 1000 * i;
    r.batch_size = 1 + i;
    r.num_prefill_seqs = i == 0 ? 1 : 0;
    r.num_decode_seqs = r.batch_size - r.num_prefill_seqs;
    r.new_tokens = i == 0 ? 100 : r.batch_size;
    r.context_tokens = 100 * i;
    r.kv_blocks_used = 7 + i;
    r.waiting = 3 - i;
    writer.write(r);
  }
  return {out.str()};
}

void run_steps(const std::string& input, const Scratch& scratch) {
  const std::string path = scratch.write("steps.csv", input);
  const std::vector<StepRecord> steps = read_step_records(path);
  (void)ReplayCostModel(steps, path);
}

// --- vllm bench serve --save-detailed result ---

std::vector<std::string> vllm_result_seeds() {
  return {R"({"duration": 2.0, "completed": 2, "failed": 1, "input_lens": [8, 9, 8], "output_lens": [3, 3, 0],)"
          R"( "ttfts": [0.1, 0.2, 0.0], "itls": [[0.01, 0.02], [0.03], []], "start_times": [100.0, 100.5, 101.25],)"
          R"( "latencies": [0.13, 0.23, 0.0], "generated_texts": ["abc", "def", ""], "errors": ["", "", "boom"]})"};
}

void run_vllm_result(const std::string& input, const Scratch& scratch) {
  const VllmDetailedResult r = read_vllm_detailed(scratch.write("vllm.json", input));
  unsigned gaps = 0;
  for (const VllmRequestEntry& e : r.requests) gaps += static_cast<unsigned>(e.itl_s.size());
  checksum = gaps;
}

// --- /metrics scrapes ---

std::vector<std::string> scrape_seeds() {
  const auto scrape = [](int n, const char* engine, const char* tpot) {
    const std::string e(engine), l = "{model_name=\"m\",engine=\"0\"";
    std::string out = "# HELP " + e + ":num_requests_running x\n# TYPE " + e + ":num_requests_running gauge\n" + e +
                      ":num_requests_running" + l + "} 1\n" + e + ":prompt_tokens_total" + l + "} " + std::to_string(100 * n) + "\n";
    for (const std::string& h : {e + ":time_to_first_token_seconds", e + ":e2e_request_latency_seconds", e + tpot}) {
      out += h + "_bucket" + l + ",le=\"0.5\"} " + std::to_string(n / 2) + "\n" + h + "_bucket" + l + ",le=\"+Inf\"} " +
             std::to_string(n) + "\n" + h + "_sum" + l + "} " + std::to_string(0.4 * n) + "\n" + h + "_count" + l + "} " +
             std::to_string(n) + "\n";
    }
    return out;
  };
  return {scrape(0, "vllm", ":request_time_per_output_token_seconds") + scrape(30, "vllm", ":request_time_per_output_token_seconds") +
              "# EOF\n" + scrape(45, "vllm", ":request_time_per_output_token_seconds"),
          scrape(2, "sglang", ":inter_token_latency_seconds") + scrape(40, "sglang", ":inter_token_latency_seconds")};
}

void run_scrape(const std::string& input, const Scratch& scratch) {
  const ScrapeRun run = read_scrape_run(scratch.write("m.prom", input));
  checksum = static_cast<unsigned>(run.intervals());
}

}  // namespace

std::vector<FuzzTarget> binary_targets() {
  return {
      file_target("safetensors", "safetensors header and data offsets (SafetensorsFile, every tensor byte read)",
                  safetensors_seeds, run_safetensors, "model.safetensors", 1 << 14),
      file_target("steps-csv", "an engine run's steps.csv (read_step_records, then the replay cost model)", steps_seeds,
                  run_steps, "steps.csv"),
      file_target("vllm-result", "a vllm bench serve --save-detailed result JSON (read_vllm_detailed, validate --measured)",
                  vllm_result_seeds, run_vllm_result, "vllm.json"),
      file_target("metrics-scrape", "scrapes of a server's Prometheus /metrics (read_scrape_run: calibrate/validate --measured)",
                  scrape_seeds, run_scrape, "m.prom"),
  };
}

}  // namespace twin::fuzz
