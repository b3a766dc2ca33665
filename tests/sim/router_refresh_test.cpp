// Router refresh (docs/simulate.md, "Router refresh"): a refresh period of 0
// is the serial path's every byte; a period > 0 routes on stale figures,
// is deterministic, and gives the same bytes on any number of threads.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "sim/run.hpp"
#include "sim/sources.hpp"
#include "tests/sim/sim_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

GeneratorOptions workload(std::int64_t requests = 1200, double rate = 60) {
  GeneratorOptions gen;
  gen.max_requests = requests;
  gen.rate = rate;
  gen.prompt = "lognormal:median=700:sigma=0.8:max=6000";
  gen.output = "lognormal:median=120:sigma=0.8:max=800";
  gen.prefix_count = 6;
  gen.prefix_tokens = 512;
  gen.prefix_fraction = 0.6;
  gen.seed = 7;
  return gen;
}

ClusterConfig cluster(const std::string& router, double refresh_s, int replicas = 5) {
  ClusterConfig c = test::one_group("llama-3.1-8b", "h100-80gb", 1, 1, replicas);
  c.router = router;
  c.router_refresh_s = refresh_s;
  c.seed = 3;
  return c;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// summary.json without its wall time, the one figure a run may not repeat.
std::string summary_without_wall(const fs::path& dir) {
  std::istringstream in(read(dir / "summary.json"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("\"wall_time_s\"") == std::string::npos) out += line + "\n";
  }
  return out;
}

struct Files {
  std::string requests, steps, summary;
  bool operator==(const Files&) const = default;
};

Files simulate(const ClusterConfig& config, int jobs, const std::string& name, GeneratorOptions gen = workload()) {
  const fs::path dir = fs::temp_directory_path() / ("twin_router_refresh_" + name);
  fs::remove_all(dir);
  GeneratorSource source(gen);
  RunOutputs outputs;
  outputs.out_dir = dir.string();
  outputs.jobs = jobs;
  const RunResult r = run_simulation(config, source, outputs);
  REQUIRE(r.summary.completed + r.summary.rejected + r.summary.aborted == static_cast<std::uint64_t>(gen.max_requests));
  Files f{read(dir / "requests.csv"), read(dir / "steps.csv"), summary_without_wall(dir)};
  fs::remove_all(dir);
  REQUIRE(f.requests.size() > 100);
  return f;
}

// Requests per replica, from requests.csv's replica column.
std::map<int, int> per_replica(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  int column = 0;
  {
    std::istringstream header(line);
    std::string name;
    while (std::getline(header, name, ',') && name != "replica") ++column;
  }
  std::map<int, int> out;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    for (int i = 0; i <= column; ++i) std::getline(row, cell, ',');
    ++out[std::stoi(cell)];
  }
  return out;
}

}  // namespace

TEST_CASE("router refresh 0 is the serial path, byte for byte") {
  ClusterConfig plain = cluster("least_outstanding", 0);
  ClusterConfig zero = plain;
  zero.router_refresh_s = 0;
  const Files a = simulate(plain, 1, "plain");
  const Files b = simulate(zero, 1, "zero");
  CHECK(a == b);
  // The config echo leaves the key out at 0, so summaries stay as they were.
  CHECK(a.summary.find("router_refresh_s") == std::string::npos);
}

TEST_CASE("router refresh > 0: the same bytes on 1, 2 and 3 threads, for every router") {
  for (const char* router : {"round_robin", "least_outstanding", "least_kv", "prefix_affinity", "power_of_two"}) {
    INFO(router);
    const ClusterConfig config = cluster(router, 0.1);
    const Files one = simulate(config, 1, std::string(router) + "_j1");
    const Files two = simulate(config, 2, std::string(router) + "_j2");
    const Files three = simulate(config, 3, std::string(router) + "_j3");
    CHECK(one.requests == two.requests);
    CHECK(one.steps == two.steps);
    CHECK(one.summary == two.summary);
    CHECK(one == three);
    CHECK(one.summary.find("\"router_refresh_s\": 0.1") != std::string::npos);
  }
}

TEST_CASE("router refresh > 0 routes on stale figures, deterministically") {
  const Files live = simulate(cluster("least_outstanding", 0), 1, "live");
  const Files stale = simulate(cluster("least_outstanding", 0.5), 2, "stale");
  const Files again = simulate(cluster("least_outstanding", 0.5), 2, "stale_again");
  CHECK(stale == again);
  CHECK(stale.requests != live.requests);
  // A refresh longer than the whole trace: the router never sees a request
  // end, so least_outstanding spreads by its own count alone, evenly.
  const Files blind = simulate(cluster("least_outstanding", 10000), 2, "blind");
  const std::map<int, int> counts = per_replica(blind.requests);
  REQUIRE(counts.size() == 5);
  for (const auto& [replica, n] : counts) {
    INFO("replica " << replica);
    CHECK(n == 240);
  }
  // Round robin reads nothing of the replicas: a refresh period changes
  // where requests go not at all (only the same-instant order of records).
  const std::map<int, int> rr_live = per_replica(simulate(cluster("round_robin", 0), 1, "rr_live").requests);
  const std::map<int, int> rr_stale = per_replica(simulate(cluster("round_robin", 0.25), 2, "rr_stale").requests);
  CHECK(rr_live == rr_stale);
}

TEST_CASE("router refresh: what is refused, naming the key or flag") {
  GeneratorOptions gen = workload(20);
  auto error_of = [&](const ClusterConfig& config, int jobs) -> std::string {
    GeneratorSource source(gen);
    RunOutputs outputs;
    outputs.jobs = jobs;
    try {
      run_simulation(config, source, outputs);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error_of(cluster("round_robin", 0), 2), Catch::Contains("--router-refresh-s"));
  CHECK_THAT(error_of(cluster("round_robin", -1), 1), Catch::Contains("router_refresh_s"));
  ClusterConfig pools = cluster("round_robin", 0.1, 1);
  ReplicaGroupConfig decode = pools.groups.front();
  pools.groups.front().role = "prefill";
  decode.role = "decode";
  pools.groups.push_back(decode);
  CHECK_THAT(error_of(pools, 1), Catch::Contains("prefill/decode pools"));
  CHECK_THROWS_WITH(parse_cluster_config(nlohmann::json::parse(R"({"router_refresh_s": "fast"})"), "c.json"),
                    Catch::Contains("c.json: router_refresh_s: expected a number"));
  CHECK_THROWS_WITH(parse_cluster_config(nlohmann::json::parse(R"({"router_refresh_s": 1e9})"), "c.json"),
                    Catch::Contains("c.json: router_refresh_s: expected 0"));
}

TEST_CASE("simulate --jobs and --router-refresh-s on the command line") {
  const auto too_many = test::run_twinserve("simulate --trace x.jsonl --router-refresh-s 0.1 --jobs 100000", true);
  CHECK(too_many.exit_code == 2);
  CHECK_THAT(too_many.out, Catch::Contains("--jobs"));
  const auto negative = test::run_twinserve("simulate --trace x.jsonl --router-refresh-s -2", true);
  CHECK(negative.exit_code == 2);
  CHECK_THAT(negative.out, Catch::Contains("--router-refresh-s"));
  const auto help = test::run_twinserve("simulate --help", true);
  CHECK_THAT(help.out, Catch::Contains("--router-refresh-s"));
  CHECK_THAT(help.out, Catch::Contains("--jobs"));
}

TEST_CASE("simulate under mpirun -n 2 writes the one-process bytes") {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) TWIN_SKIP("mpirun not found: no MPI comparison");
  const char* bin = std::getenv("TWIN_BIN");
  REQUIRE(bin != nullptr);
  const fs::path root = fs::temp_directory_path() / "twin_router_refresh_mpi";
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string trace = (root / "chat.jsonl").string();
  REQUIRE(test::run_twinserve("trace generate --requests 1500 --rate 60 --prompt lognormal:median=700:sigma=0.8 "
                              "--output lognormal:median=120:sigma=0.8 --shared-prefix 6:512:0.6 --seed 2 '" + trace + "'")
              .exit_code == 0);
  for (const char* router : {"least_outstanding", "prefix_affinity"}) {
    INFO(router);
    const std::string args = "simulate --trace '" + trace + "' --replicas 5 --router " + router +
                             " --router-refresh-s 0.1 --quiet --overwrite --out '";
    const fs::path one = root / (std::string(router) + "_k1"), two = root / (std::string(router) + "_k2");
    REQUIRE(test::run_twinserve(args + one.string() + "'").exit_code == 0);
    // Open MPI's own allocations are never freed at exit: leak checks are
    // off for the ranks (make test-asan), as in the plan test.
    const fs::path log = root / "mpi.log";
    const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -n 2 '" +
                            std::string(bin) + "' " + args + two.string() + "' --jobs 1 > '" + log.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    INFO(read(log));
    REQUIRE(status == 0);
    CHECK(read(one / "requests.csv") == read(two / "requests.csv"));
    CHECK(read(one / "steps.csv") == read(two / "steps.csv"));
    CHECK(summary_without_wall(one) == summary_without_wall(two));
  }
  fs::remove_all(root);
}

}  // namespace twin
