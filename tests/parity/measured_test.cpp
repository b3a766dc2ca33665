// `validate --measured`: a run measured elsewhere read as records (vLLM's
// --save-detailed JSON by order, our requests.csv by id), bad files refused
// naming the file and key, and the simulator's own output predicted exactly
// when validate simulates the same deployment.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "tests/support/run_cli.hpp"
#include "validate/measured_run.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_measured_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<twin::Request> three_requests() {
  std::vector<twin::Request> trace(3);
  for (int i = 0; i < 3; ++i) {
    trace[i].id = static_cast<twin::RequestId>(10 + i);
    trace[i].arrival = i * 500'000'000;  // 0, 0.5, 1 s
    trace[i].prompt_len = 8;
    trace[i].output_len = 3;
  }
  return trace;
}

// A --save-detailed file: request 0 streams one token per chunk, request 1
// two tokens in its last chunk, request 2 failed.
const char* kVllmResult = R"({
  "duration": 2.0, "completed": 2, "failed": 1,
  "input_lens": [8, 9, 8],
  "output_lens": [3, 3, 0],
  "ttfts": [0.1, 0.2, 0.0],
  "itls": [[0.01, 0.02], [0.03], []],
  "start_times": [100.0, 100.5, 101.25],
  "generated_texts": ["abc", "def", ""],
  "errors": ["", "", "Traceback (most recent call last):\nConnectionError"]
})";

std::string error_of(const fs::path& file, const std::vector<twin::Request>& trace) {
  try {
    (void)twin::read_measured_run(file, trace);
  } catch (const twin::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("vLLM --save-detailed JSON: entries matched to the trace by order, send times as arrivals") {
  const fs::path dir = fresh_dir("vllm");
  write(dir / "r.json", kVllmResult);
  const twin::MeasuredRun run = twin::read_measured_run(dir / "r.json", three_requests());
  CHECK(run.format == "vllm");
  CHECK(run.send_times);
  REQUIRE(run.records.size() == 3);
  const auto& a = run.records[0];
  CHECK(a.id == 10);
  CHECK(a.outcome == twin::Outcome::finished);
  CHECK(a.arrival == 0);
  CHECK(a.first_token == 100'000'000);
  CHECK(a.itl == std::vector<twin::Time>{10'000'000, 20'000'000});
  CHECK(a.finish == 130'000'000);
  CHECK(a.output_tokens == 3);
  // Two tokens in one chunk: no gaps kept, the finish from the chunks.
  const auto& b = run.records[1];
  CHECK(b.arrival == 500'000'000);
  CHECK(b.itl.empty());
  CHECK(b.finish == 500'000'000 + 200'000'000 + 30'000'000);
  CHECK(run.gaps_left_out == 1);
  CHECK(run.prompt_mismatches == 1);
  CHECK(run.first_prompt_mismatch.find("input_lens 9, trace prompt 8") != std::string::npos);
  // The failure: aborted with the error's first line, sent at 1.25 s.
  const auto& c = run.records[2];
  CHECK(c.id == 12);
  CHECK(c.outcome == twin::Outcome::aborted);
  CHECK(c.arrival == 1'250'000'000);
  CHECK(c.reason == "client error: Traceback (most recent call last):");
}

TEST_CASE("vLLM JSON without start_times: arrivals are the trace's") {
  const fs::path dir = fresh_dir("nostart");
  nlohmann::json j = nlohmann::json::parse(kVllmResult);
  j.erase("start_times");
  write(dir / "r.json", j.dump());
  const twin::MeasuredRun run = twin::read_measured_run(dir / "r.json", three_requests());
  CHECK_FALSE(run.send_times);
  CHECK(run.records[1].arrival == 500'000'000);
  CHECK(run.records[2].arrival == 1'000'000'000);
}

TEST_CASE("bad measured files are refused naming the file and the key") {
  const fs::path dir = fresh_dir("bad");
  const auto trace = three_requests();
  auto variant = [&](const std::string& name, auto&& edit) {
    nlohmann::json j = nlohmann::json::parse(kVllmResult);
    edit(j);
    write(dir / name, j.dump());
    return error_of(dir / name, trace);
  };
  std::string e = variant("no_ttfts.json", [](nlohmann::json& j) { j.erase("ttfts"); });
  CHECK(e.find("no_ttfts.json") != std::string::npos);
  CHECK(e.find("\"ttfts\"") != std::string::npos);
  CHECK(e.find("--save-detailed") != std::string::npos);
  e = variant("bad_itl.json", [](nlohmann::json& j) { j["itls"][1] = "fast"; });
  CHECK(e.find("\"itls\": entry 1") != std::string::npos);
  e = variant("neg.json", [](nlohmann::json& j) { j["ttfts"][0] = -1.0; });
  CHECK(e.find("\"ttfts\": entry 0") != std::string::npos);
  e = variant("short.json", [](nlohmann::json& j) { j["output_lens"].erase(1); });
  CHECK(e.find("\"output_lens\": 2 entries, but input_lens has 3") != std::string::npos);
  e = variant("more.json", [](nlohmann::json& j) {
    for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "start_times", "errors"}) j[k].push_back(j[k][0]);
  });
  CHECK(e.find("4 requests, but the trace has 3") != std::string::npos);
  write(dir / "broken.json", "{\"input_lens\": [1,");
  CHECK(error_of(dir / "broken.json", trace).find("broken.json: not JSON") != std::string::npos);
  write(dir / "r.txt", "x");
  CHECK(error_of(dir / "r.txt", trace).find("expected a requests.csv") != std::string::npos);
  // requests.csv: matched by id, every trace request needs its row.
  write(dir / "requests.csv",
        "id,replica,outcome,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens,cached_prompt_tokens,"
        "preemptions,ttft_ms,tpot_ms,e2el_ms,reason\n"
        "10,0,finished,0.000000000,0.100000000,0.200000000,8,3,0,0,,,,\n"
        "99,0,finished,0.000000000,0.100000000,0.200000000,8,3,0,0,,,,\n");
  e = error_of(dir / "requests.csv", trace);
  CHECK(e.find("request id 99 is not in the trace") != std::string::npos);
}

TEST_CASE("validate --measured on the simulator's own requests.csv predicts it exactly") {
  const fs::path dir = fresh_dir("cli");
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 40 --rate 20 --prompt uniform:8:48 --output uniform:4:24 --seed 5 " +
                        trace).exit_code == 0);
  const std::string deploy = " --model tiny --hw cpu --num-gpu-blocks-override 64 --max-model-len 256 ";
  auto r = run_twinserve("simulate --trace " + trace + deploy + "--no-progress --out " + (dir / "sim").string(), true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  r = run_twinserve("validate --measured " + (dir / "sim" / "requests.csv").string() + " --trace " + trace + deploy +
                        "--out " + (dir / "val").string(),
                    true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir / "val" / "report.json");
  const auto report = nlohmann::json::parse(in);
  CHECK(report["format"] == "requests.csv");
  CHECK(report["cost_model"] == "roofline");
  CHECK(report["arrivals"] == "send_times");
  CHECK(report["requests"] == 40);
  CHECK(report["measured_completed"] == report["predicted_completed"]);
  for (const char* metric : {"ttft_ms", "tpot_ms", "e2el_ms"}) {
    for (const char* stat : {"p50", "p90", "p99"}) {
      INFO(metric << " " << stat);
      CHECK(report[metric]["error_pct"][stat] == 0);
    }
  }
  CHECK(report["output_throughput"]["error_pct"] == 0);
  CHECK(report["itl_ms"]["measured"]["p50"].is_null());  // requests.csv has no gaps
  CHECK(fs::exists(dir / "val" / "report.md"));
  CHECK(fs::exists(dir / "val" / "measured" / "summary.json"));
  CHECK(fs::exists(dir / "val" / "predicted" / "requests.csv"));

  // Usage errors: engine-only flags, no hardware.
  r = run_twinserve("validate --measured " + (dir / "sim" / "requests.csv").string() + " --trace " + trace + deploy +
                        "--loads 0.5 --out " + (dir / "val2").string(),
                    true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("--loads is for validating the engine") != std::string::npos);
  r = run_twinserve("validate --measured " + (dir / "sim" / "requests.csv").string() + " --trace " + trace +
                        " --model tiny --out " + (dir / "val3").string(),
                    true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("needs --hw") != std::string::npos);
}
