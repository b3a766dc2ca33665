// `twinserve run` as a user runs it: a generated trace through the engine on
// the tiny model, the result files it writes, and its errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_run_cli_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

TEST_CASE("run: every request of a small trace finishes and the result files match the simulator's schema") {
  const fs::path dir = fresh_dir("ok");
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 6 --rate 200 --prompt uniform:8:40 --output uniform:2:6 "
                        "--shared-prefix 1:16:0.5 --seed 5 " + trace).exit_code == 0);

  for (const char* preset : {"vllm", "orca", "static"}) {
    INFO(preset);
    const fs::path out = dir / preset;
    auto r = run_twinserve("run --trace " + trace + " --model tiny --asap --threads 1 --scheduler " + preset +
                           " --out " + out.string());
    REQUIRE(r.exit_code == 0);
    std::ifstream in(out / "summary.json");
    const auto summary = nlohmann::json::parse(in);
    CHECK(summary["num_requests"] == 6);
    CHECK(summary["completed"] == 6);
    CHECK(summary["rejected"] == 0);
    // The engine's measured energy: RAPL where readable, else why not (issue 44).
    REQUIRE(summary.contains("measured_energy"));
    const auto& measured = summary["measured_energy"];
    if (measured["known"].get<bool>()) {
      CHECK(measured["energy_j"].get<double>() >= 0);
    } else {
      CHECK_FALSE(measured["reason"].get<std::string>().empty());
    }
  }

  const fs::path sim = dir / "sim";
  REQUIRE(run_twinserve("simulate --trace " + trace + " --model tiny --hw cpu --no-progress --out " + sim.string())
              .exit_code == 0);
  CHECK(first_line(dir / "vllm" / "requests.csv") == first_line(sim / "requests.csv"));
  CHECK(first_line(dir / "vllm" / "steps.csv") == first_line(sim / "steps.csv"));

  // Results already there are not overwritten without asking.
  auto again = run_twinserve("run --trace " + trace + " --model tiny --asap --out " + (dir / "vllm").string(), true);
  CHECK(again.exit_code == 2);
  CHECK(again.out.find("--overwrite") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("run: bad input exits non-zero with a message") {
  const fs::path dir = fresh_dir("bad");
  auto missing = run_twinserve("run --trace " + (dir / "none.jsonl").string() + " --model tiny --asap", true);
  CHECK(missing.exit_code == 1);
  CHECK(missing.out.find("none.jsonl") != std::string::npos);

  auto unknown = run_twinserve("run --trace x.jsonl --model no-such-model --asap", true);
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.out.find("llama-3.1-8b") != std::string::npos);  // lists the known names
  fs::remove_all(dir);
}
