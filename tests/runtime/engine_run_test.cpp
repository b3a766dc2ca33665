// The engine run as a library (engine/runtime/engine_run.hpp): the folder
// written through the one writer with the one config echo, the client
// options laid over the timeline, and a stop kept in the files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "engine/runtime/engine_run.hpp"
#include "metrics/request_csv.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

EngineSetup tiny_setup() {
  EngineSetup s;
  s.model = "tiny";
  s.overrides.max_model_len = 256;
  s.runner.threads = 1;
  s.runner.seed = 3;
  s.runner.num_blocks = 512;
  return s;
}

std::vector<Request> requests(int n) {
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * kNsPerMs;
    r.prompt_len = 8 + (i * 7) % 30;
    r.output_len = 2 + i % 5;
    out.push_back(r);
  }
  return out;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("twin_engine_run_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

nlohmann::ordered_json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::ordered_json::parse(in);
}

}  // namespace

TEST_CASE("run_engine writes the run's folder with the caller's echo first, then the engine's settings") {
  const fs::path dir = fresh_dir("folder");
  VectorSource source(requests(12));
  EngineRunOptions o;
  o.asap = true;
  o.files.out_dir = dir.string();
  o.files.vllm_result = true;
  nlohmann::ordered_json echo;
  echo["trace"] = "twelve";
  std::int64_t seen = 0;
  o.on_request = [&](const RequestRecord&) { ++seen; };
  std::string described;
  const EngineRunResult r =
      run_engine(engine_settings(tiny_setup()), source, o, echo, [&](const Engine& e) { described = e.description(); });
  CHECK(described.find("tiny") != std::string::npos);
  CHECK(seen == 12);
  CHECK(r.summary.completed == 12);
  CHECK_FALSE(r.stats.stopped);
  const nlohmann::ordered_json summary = read_json(dir / "summary.json");
  const nlohmann::ordered_json& config = summary.at("config");
  CHECK(config.begin().key() == "trace");
  CHECK(config.at("mode") == "engine");
  CHECK(config.at("num_gpu_blocks") == 512);
  CHECK(config.at("unserved") == 0);
  CHECK_FALSE(config.contains("interrupted"));
  CHECK(read_request_records((dir / "requests.csv").string()).size() == 12);
  CHECK(fs::exists(dir / "steps.csv"));
  CHECK(read_json(dir / "vllm_result.json").at("input_lens").size() == 12);
  // The folder is claimed before the weights load: a second run without
  // overwrite is refused, naming the file.
  VectorSource again(requests(2));
  CHECK_THROWS_AS(run_engine(engine_settings(tiny_setup()), again, o), UsageError);
  fs::remove_all(dir);
}

TEST_CASE("run_engine sends the requests through simulate's clients: --max-concurrency bounds what is in flight") {
  VectorSource source(requests(20));
  EngineRunOptions o;
  o.asap = true;
  o.clients.max_concurrency = 3;
  std::int32_t largest_batch = 0;
  std::int64_t late_arrivals = 0;
  o.on_step = [&](const StepRecord& s) { largest_batch = std::max(largest_batch, s.batch_size); };
  o.on_request = [&](const RequestRecord& r) { late_arrivals += r.arrival > 0 ? 1 : 0; };
  const EngineRunResult r = run_engine(engine_settings(tiny_setup()), source, o);
  CHECK(r.summary.completed == 20);
  CHECK(largest_batch == 3);
  // Every request past the first three is sent when one ends, not at t = 0.
  CHECK(late_arrivals == 17);
}

TEST_CASE("a stopped engine run is written whole and marked interrupted") {
  const fs::path dir = fresh_dir("stop");
  VectorSource source(requests(30));
  EngineRunOptions o;
  o.asap = true;
  o.files.out_dir = dir.string();
  std::int64_t ended = 0;
  o.on_request = [&](const RequestRecord&) { ++ended; };
  o.stop = [&] { return ended >= 1; };  // the first request's end stops the run
  const EngineRunResult r = run_engine(engine_settings(tiny_setup()), source, o);
  CHECK(r.stats.stopped);
  CHECK(r.stats.interrupted > 0);
  const nlohmann::ordered_json config = read_json(dir / "summary.json").at("config");
  CHECK(config.at("interrupted") == true);
  CHECK(config.at("interrupted_requests") == r.stats.interrupted);
  std::int64_t interrupted = 0;
  for (const RequestRecord& rec : read_request_records((dir / "requests.csv").string())) {
    interrupted += rec.reason == "interrupted" ? 1 : 0;
  }
  CHECK(interrupted == r.stats.interrupted);
  fs::remove_all(dir);
}

TEST_CASE("the wall-clock driver refuses a time scale under a client source (the clients own the timeline)") {
  Engine engine(engine_settings(tiny_setup()));
  VectorSource trace(requests(2));
  ClientOptions co;
  co.max_concurrency = 1;
  Clients clients(trace, co);
  struct Nothing final : RecordSink {
    void on_request(const RequestRecord&) override {}
    void on_step(const StepRecord&) override {}
  } sink;
  DriveOptions d;
  d.asap = true;
  CHECK_THROWS_WITH(engine.serve(clients.source(), sink, d), Catch::Contains("client source"));
}

}  // namespace twin::test
