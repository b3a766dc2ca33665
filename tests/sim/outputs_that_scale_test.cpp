// simulate's outputs for big runs: --steps none|sample:N|all and --compress
// change what is written, never the summary.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string without_wall_time(const std::string& json) {
  std::string out;
  std::istringstream in(json);
  for (std::string line; std::getline(in, line);) {
    if (line.find("wall_time_s") == std::string::npos) out += line + "\n";
  }
  return out;
}

RunResult simulate_into(const std::filesystem::path& dir, const std::string& steps, CsvCompression compression,
                        double router_refresh_s = 0, int jobs = 1) {
  ClusterConfig config = one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2);
  config.router_refresh_s = router_refresh_s;
  config.slos = "ttft_p90<=300ms,tpot_p99<=30ms";
  GeneratorOptions gen;
  gen.max_requests = 400;
  gen.rate = 40;
  gen.seed = 5;
  GeneratorSource src(gen);
  RunOutputs out;
  out.out_dir = dir.string();
  out.files.steps = parse_step_selection(steps, "--steps");
  out.files.compression = compression;
  out.jobs = jobs;
  return run_simulation(config, src, out);
}

}  // namespace

TEST_CASE("the summary is the same bytes whatever steps.csv keeps or how the CSVs are compressed") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("twin_sim_outputs_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const RunResult all = simulate_into(base / "all", "all", CsvCompression::none);
  const std::string summary = without_wall_time(slurp(base / "all" / "summary.json"));
  const std::string requests = slurp(base / "all" / "requests.csv"), steps = slurp(base / "all" / "steps.csv");
  CHECK(all.csv_bytes == requests.size() + steps.size());
  CHECK(all.summary.num_steps > 100);

  simulate_into(base / "none", "none", CsvCompression::none);
  CHECK_FALSE(fs::exists(base / "none" / "steps.csv"));
  CHECK(slurp(base / "none" / "requests.csv") == requests);
  CHECK(without_wall_time(slurp(base / "none" / "summary.json")) == summary);

  simulate_into(base / "sample", "sample:10", CsvCompression::none);
  CHECK(without_wall_time(slurp(base / "sample" / "summary.json")) == summary);
  // The sampled file is the full one's rows with step_id % 10 == 0.
  std::istringstream full(steps);
  std::string expected, line;
  std::getline(full, line);
  expected = line + "\n";
  while (std::getline(full, line)) {
    if (std::stoull(line.substr(0, line.find(','))) % 10 == 0) expected += line + "\n";
  }
  CHECK(slurp(base / "sample" / "steps.csv") == expected);
  // The replicas keep only the sampled records (records.hpp, keeps_step):
  // the same rows when they advance apart between router refreshes, on two
  // threads.
  simulate_into(base / "refresh_all", "all", CsvCompression::none, 0.05, 2);
  simulate_into(base / "refresh_sample", "sample:10", CsvCompression::none, 0.05, 2);
  std::istringstream refreshed(slurp(base / "refresh_all" / "steps.csv"));
  std::getline(refreshed, line);
  expected = line + "\n";
  while (std::getline(refreshed, line)) {
    if (std::stoull(line.substr(0, line.find(','))) % 10 == 0) expected += line + "\n";
  }
  CHECK(expected.size() > 1000);
  CHECK(slurp(base / "refresh_sample" / "steps.csv") == expected);
  CHECK(without_wall_time(slurp(base / "refresh_sample" / "summary.json")) ==
        without_wall_time(slurp(base / "refresh_all" / "summary.json")));

  const RunResult zst = simulate_into(base / "zst", "all", CsvCompression::zstd);
  CHECK(fs::exists(base / "zst" / "requests.csv.zst"));
  CHECK(fs::exists(base / "zst" / "steps.csv.zst"));
  CHECK_FALSE(fs::exists(base / "zst" / "requests.csv"));
  CHECK(zst.csv_bytes * 2 < all.csv_bytes);
  CHECK(without_wall_time(slurp(base / "zst" / "summary.json")) == summary);
  fs::remove_all(base);
}
