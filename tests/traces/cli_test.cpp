#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/traces/test_util.hpp"
#include "tests/support/skip.hpp"

using namespace twin::test;

namespace {

// Runs the twinserve binary (TWIN_BIN, set by ctest); returns the exit code.
int run_cli(const std::string& args, const std::string& stdout_path = "/dev/null") {
  const char* bin = std::getenv("TWIN_BIN");
  const std::string cmd = std::string(bin) + " " + args + " >" + stdout_path + " 2>/dev/null";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("CLI: trace stats --json, convert, generate and their exit codes", "[traces][cli]") {
  if (!std::getenv("TWIN_BIN")) TWIN_SKIP("TWIN_BIN is not set (run through ctest)");
  TempFile json(".json");
  REQUIRE(run_cli("trace stats --json " + fixture("mooncake.jsonl"), json.path) == 0);
  const auto j = nlohmann::json::parse(read_file(json.path));
  CHECK(j.at("num_requests") == 3);
  CHECK(j.at("prompt_tokens").at("p50") == 700);
  CHECK(j.contains("prefix_cache_share"));
  CHECK(j.at("span_s").get<double>() == Approx(0.0115));

  CHECK(run_cli("trace stats " + fixture("bad_azure.csv")) == 1);
  CHECK(run_cli("trace stats --on-bad-row skip " + fixture("bad_azure.csv")) == 0);
  CHECK(run_cli("trace stats --format nope " + fixture("azure.csv")) == 2);
  CHECK(run_cli("trace stats /nonexistent.csv") == 1);

  TempFile out(".csv");
  CHECK(run_cli("trace convert " + fixture("azure.csv") + " " + out.path + " --max-requests 2") == 0);
  CHECK(read_all(out.path).size() == 2);
  CHECK(run_cli("trace convert " + fixture("azure.csv") + " " + out.path) == 2);  // exists, no --force
  CHECK(run_cli("trace convert " + fixture("azure.csv") + " " + out.path + " --force") == 0);
  CHECK(read_all(out.path).size() == 3);

  TempFile g1(".jsonl"), g2(".jsonl");
  const std::string gen = " --requests 200 --rate 3 --shared-prefix 2:64:0.5 --sessions uniform:1:3 --seed 4";
  REQUIRE(run_cli("trace generate " + g1.path + gen) == 0);
  REQUIRE(run_cli("trace generate " + g2.path + gen) == 0);
  CHECK(read_file(g1.path) == read_file(g2.path));
  CHECK(run_cli("trace generate " + g1.path + " --prompt bogus:1 --force") == 2);
}
