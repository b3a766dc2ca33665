// Replay parity the way a user checks it: `twinserve run` serves a trace and
// writes steps.csv; `twinserve simulate --replay` on that log, with the same
// scheduler flags and KV blocks, must write the same requests.csv.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "metrics/request_csv.hpp"
#include "tests/parity/parity_support.hpp"
#include "tests/support/run_cli.hpp"
#include "traces/trace_writer.hpp"

namespace fs = std::filesystem;

namespace twin::test {
namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_parity_cli_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("run then simulate --replay reproduces requests.csv exactly") {
  const fs::path dir = fresh_dir("replay");
  const std::string trace = (dir / "trace.jsonl").string();
  {
    std::vector<Request> requests = bursty_trace(36, 25.0, 50, 10);
    add_shared_prefixes(requests, 16, 2);
    TraceWriter writer(trace);
    for (const Request& r : requests) writer.write(r);
    writer.close();
  }
  const std::string policy =
      " --model tiny --scheduler vllm --block-size 16 --max-num-batched-tokens 48 --max-model-len 256"
      " --num-gpu-blocks-override 40";
  const fs::path engine = dir / "engine", sim = dir / "sim";
  const auto run = run_twinserve("run --trace " + trace + policy + " --threads 1 --seed 3 --out " + engine.string(), true);
  INFO(run.out);
  REQUIRE(run.exit_code == 0);
  const auto replay = run_twinserve("simulate --trace " + trace + policy + " --hw cpu --no-progress --replay " +
                                        (engine / "steps.csv").string() + " --out " + sim.string(),
                                    true);
  INFO(replay.out);
  REQUIRE(replay.exit_code == 0);

  const auto measured = read_request_records(engine / "requests.csv");
  const auto replayed = read_request_records(sim / "requests.csv");
  CHECK(check_same_records(measured, replayed, false) == 0);
  std::int64_t cached = 0;
  for (const RequestRecord& r : measured) cached += r.cached_prompt_tokens;
  CHECK(cached > 0);
  // Same records in the same end order: the files are byte-identical.
  CHECK(slurp(engine / "requests.csv") == slurp(sim / "requests.csv"));
  fs::remove_all(dir);
}

TEST_CASE("simulate --replay stops with an error when the log does not match the run") {
  const fs::path dir = fresh_dir("diverged");
  const std::string trace = (dir / "trace.jsonl").string();
  {
    TraceWriter writer(trace);
    for (const Request& r : bursty_trace(10, 5.0, 30, 4)) writer.write(r);
    writer.close();
  }
  const fs::path engine = dir / "engine";
  REQUIRE(run_twinserve("run --trace " + trace + " --model tiny --threads 1 --max-num-batched-tokens 64 "
                        "--max-model-len 128 --num-gpu-blocks-override 40 --out " + engine.string())
              .exit_code == 0);
  // A different token budget plans different steps: the replay must say so.
  const auto replay = run_twinserve("simulate --trace " + trace + " --model tiny --hw cpu --no-progress "
                                    "--max-num-batched-tokens 16 --max-model-len 128 --num-gpu-blocks-override 40 "
                                    "--replay " + (engine / "steps.csv").string(),
                                    true);
  CHECK(replay.exit_code == 1);
  CHECK(replay.out.find("diverged") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("run with a prefill and a decode replica, then simulate --replay --replay-transfers, gives the same requests.csv") {
  const fs::path dir = fresh_dir("pools");
  const std::string trace = (dir / "trace.jsonl").string();
  {
    std::vector<Request> requests = bursty_trace(30, 25.0, 60, 10);
    add_shared_prefixes(requests, 16, 2);
    TraceWriter writer(trace);
    for (const Request& r : requests) writer.write(r);
    writer.close();
  }
  const std::string policy =
      " --model tiny --scheduler vllm --block-size 16 --max-num-batched-tokens 48 --max-model-len 256"
      " --num-gpu-blocks-override 24 --prefill-replicas 1 --decode-replicas 1";
  const fs::path engine = dir / "engine", sim = dir / "sim";
  const auto run = run_twinserve("run --trace " + trace + policy + " --threads 1 --seed 3 --out " + engine.string(), true);
  INFO(run.out);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("KV transfers: ") != std::string::npos);
  const auto replay = run_twinserve("simulate --trace " + trace + policy + " --hw cpu --no-progress --replay " +
                                        (engine / "steps.csv").string() + " --replay-transfers " +
                                        (engine / "requests.csv").string() + " --out " + sim.string(),
                                    true);
  INFO(replay.out);
  REQUIRE(replay.exit_code == 0);
  const std::string measured = slurp(engine / "requests.csv");
  CHECK(measured.find(",kv_transfer_bytes\n") != std::string::npos);
  CHECK(measured == slurp(sim / "requests.csv"));
  std::int64_t moved = 0;
  for (const RequestRecord& r : read_request_records(engine / "requests.csv")) moved += r.kv_arrived != kNoTime;
  CHECK(moved > 0);

  // The engine moves the KV whole; a pool flag needs pools.
  const auto layerwise = run_twinserve("run --trace " + trace + policy + " --kv-transfer layerwise", true);
  CHECK(layerwise.exit_code == 2);
  CHECK(layerwise.out.find("--kv-transfer layerwise") != std::string::npos);
  const auto no_pools = run_twinserve("run --trace " + trace + " --model tiny --disagg-mode conditional", true);
  CHECK(no_pools.exit_code == 2);
  CHECK(no_pools.out.find("--disagg-mode needs prefill and decode pools") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace twin::test
