#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sim_test_util.hpp"
#include "tests/support/skip.hpp"

using namespace twin;
using namespace twin::test;

TEST_CASE("unknown model and hardware names list the known ones") {
  CHECK_THROWS_WITH(build_cluster(one_group("llama-9", "h100-80gb")),
                    Catch::Contains("llama-3.1-8b") && Catch::Contains("llama-9"));
  CHECK_THROWS_WITH(build_cluster(one_group("llama-3.1-8b", "tpu-v9")),
                    Catch::Contains("h100-80gb") && Catch::Contains("tpu-v9"));
  CHECK_THROWS_AS(build_cluster(one_group("llama-9", "h100-80gb")), UsageError);
}

TEST_CASE("a layout that does not divide the heads is rejected with the reason") {
  CHECK_THROWS_WITH(build_cluster(one_group("llama-2-7b", "a100-80gb", 3)),
                    Catch::Contains("tp=3") && Catch::Contains("num_attention_heads"));
  CHECK_THROWS_WITH(build_cluster(one_group("llama-2-7b", "a100-80gb", 1, 64)), Catch::Contains("pp=64"));
}

TEST_CASE("unknown router, preset and scheduler keys are named") {
  ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb");
  c.router = "fastest";
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("fastest") && Catch::Contains("round_robin"));
  c = one_group("llama-3.1-8b", "h100-80gb");
  c.scheduler_preset = "magic";
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("magic") && Catch::Contains("sarathi"));
  c = one_group("llama-3.1-8b", "h100-80gb");
  c.scheduler_options.emplace_back("max_num_seqz", "4");
  CHECK_THROWS_WITH(build_cluster(c), Catch::Contains("max_num_seqz"));
}

TEST_CASE("cluster config: every key is checked") {
  using nlohmann::json;
  const ClusterConfig ok = parse_cluster_config(
      json::parse(R"({"groups": [{"model": "llama-2-7b", "hardware": "a100-80gb", "tp": 2, "count": 3,
                      "scheduler": {"max_num_seqs": 64}}],
                      "scheduler": {"preset": "sarathi", "enable_prefix_caching": false},
                      "router": "least_kv", "slos": "ttft_p90<=1s", "seed": 5, "gpu_memory_utilization": 0.8})"),
      "c.json");
  REQUIRE(ok.groups.size() == 1);
  CHECK(ok.groups[0].tp == 2);
  CHECK(ok.groups[0].count == 3);
  CHECK(ok.scheduler_preset == "sarathi");
  CHECK(ok.scheduler_options == OptionList{{"enable_prefix_caching", "false"}});
  CHECK(ok.groups[0].scheduler_options == OptionList{{"max_num_seqs", "64"}});
  CHECK(ok.seed == 5);

  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"grups": []})"), "c.json"),
                    Catch::Contains("c.json") && Catch::Contains("grups") && Catch::Contains("unknown key"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"groups": [{"modle": "x"}]})"), "c.json"),
                    Catch::Contains("groups[0].modle"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"groups": [{"tp": "two"}]})"), "c.json"),
                    Catch::Contains("groups[0].tp") && Catch::Contains("integer"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"gpu_memory_utilization": 1.5})"), "c.json"),
                    Catch::Contains("gpu_memory_utilization"));
  CHECK_THROWS_WITH(load_cluster_config("/nonexistent/cluster.json"), Catch::Contains("/nonexistent/cluster.json"));
  CHECK_THROWS_WITH(load_cluster_config(std::filesystem::temp_directory_path().string()),
                    Catch::Contains("directory"));
}

TEST_CASE("cluster config: names are checked as the file is read, naming the file and key") {
  using nlohmann::json;
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"groups": [{"model": "llama-9"}]})"), "c.json"),
                    Catch::Contains("c.json: groups[0].model: unknown model 'llama-9'"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"groups": [{}, {"hardware": "tpu-v9"}]})"), "c.json"),
                    Catch::Contains("c.json: groups[1].hardware: unknown hardware 'tpu-v9'"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"groups": [{"kv_dtype": "fp65536"}]})"), "c.json"),
                    Catch::Contains("c.json: groups[0].kv_dtype: unknown dtype 'fp65536'"));
  CHECK_THROWS_WITH(parse_cluster_config(json::parse(R"({"slos": "ttft_p1e18<=1s"})"), "c.json"),
                    Catch::Contains("c.json: slos: SLO \"ttft_p1e18<=1s\": bad percentile"));
  // A megabyte-long name is quoted in a few hundred characters.
  const std::string long_name = std::string(100000, 'x');
  const std::string message = [&] {
    try {
      (void)parse_cluster_config(json{{"groups", json::array({json{{"model", long_name}}})}}, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK_THAT(message, Catch::Contains("groups[0].model"));
  CHECK(message.size() < 1000);
}

TEST_CASE("cluster config: errors found building a group name the file and the group") {
  using nlohmann::json;
  const ClusterConfig tight = parse_cluster_config(
      json::parse(R"({"groups": [{"model": "tiny", "hardware": "cpu"},
                                 {"model": "llama-3.1-8b", "hardware": "h100-80gb", "gpu_memory_utilization": 1e-9}]})"),
      "c.json");
  CHECK_THROWS_WITH(build_cluster(tight), Catch::StartsWith("c.json: groups[1]: ") && Catch::Contains("does not fit"));
  const ClusterConfig layout =
      parse_cluster_config(json::parse(R"({"groups": [{"model": "llama-2-7b", "hardware": "a100-80gb", "tp": 3}]})"), "c.json");
  CHECK_THROWS_WITH(build_cluster(layout), Catch::StartsWith("c.json: groups[0]: ") && Catch::Contains("tp=3"));
  CHECK_THROWS_AS(build_cluster(layout), UsageError);  // the type is kept: exit 2
  // No groups: the default one, named by the file alone.
  const ClusterConfig none = parse_cluster_config(json::parse(R"({"gpu_memory_utilization": 1e-9})"), "c.json");
  CHECK_THROWS_WITH(build_cluster(none), Catch::StartsWith("c.json: ") && Catch::Contains("does not fit"));
  // From flags (no file): the message as it was.
  CHECK_THROWS_WITH(build_cluster(one_group("llama-2-7b", "a100-80gb", 3)), Catch::StartsWith("model llama-2-7b"));
}

TEST_CASE("replica counts beyond a --config file's range are refused") {
  CHECK_THROWS_WITH(build_cluster(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 100'000'000)),
                    Catch::Contains("replica count") && Catch::Contains("100000000"));
  CHECK_THROWS_AS(build_cluster(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 0)), UsageError);
}

TEST_CASE("cluster config: at most kMaxReplicaGroups groups, and that many build with each group's routes local") {
  using nlohmann::json;
  // Before: no limit, and building cost grew faster than the groups (a
  // Dijkstra over the whole cluster graph per route): 4,000 groups 36.5 s.
  auto groups = [](std::size_t n, int tp) {
    json g = json::array();
    for (std::size_t i = 0; i < n; ++i) g.push_back({{"model", "llama-3.1-8b"}, {"hardware", "h100-80gb"}, {"tp", tp}});
    return json{{"groups", g}};
  };
  CHECK_THROWS_WITH(parse_cluster_config(groups(kMaxReplicaGroups + 1, 1), "c.json"),
                    Catch::StartsWith("c.json: groups") && Catch::Contains("1025 replica groups, more than the 1024 allowed"));
  // The most allowed builds: one node per group (tp 8 fills an h100 node),
  // and each group's ring and host path are the one-group cluster's.
  const Cluster one = build_cluster(parse_cluster_config(groups(1, 8), "c.json"));
  const Cluster all = build_cluster(parse_cluster_config(groups(kMaxReplicaGroups, 8), "c.json"));
  REQUIRE(all.groups.size() == kMaxReplicaGroups);
  CHECK(all.topology.num_nodes() == static_cast<std::int32_t>(kMaxReplicaGroups));
  const std::vector<GpuId>& first = one.groups.front().replica_gpus.front();
  const std::vector<GpuId>& last = all.groups.back().replica_gpus.front();
  CHECK(all.topology.ring(last).bandwidth == one.topology.ring(first).bandwidth);
  CHECK(all.topology.host_path(last.front()).latency == one.topology.host_path(first.front()).latency);
}

TEST_CASE("a hardware profile that prices steps past the clock is an error, not 1 ns steps") {
  namespace fs = std::filesystem;
  nlohmann::json hw;
  std::ifstream(std::string(TWIN_SOURCE_DIR) + "/hwprofiles/profiles/h100-80gb.json") >> hw;
  hw["memory_bandwidth_gbps"] = 1e-300;  // positive, so the loader takes it
  const fs::path path = fs::temp_directory_path() / "twin_sim_slow_hw.json";
  std::ofstream(path) << hw.dump();
  ListSource source;
  Request r;
  r.prompt_len = 100;
  r.output_len = 4;
  source.requests.push_back(r);
  CHECK_THROWS_WITH(run_simulation(one_group("llama-3.1-8b", path.string()), source, RunOutputs{}),
                    Catch::Contains("roofline cost model") && Catch::Contains("bandwidths"));
  fs::remove(path);
}

TEST_CASE("requests out of arrival order are an error naming the request, not clamped") {
  ListSource source;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.id = i;
    r.arrival = (i == 2 ? 1 : 5) * kNsPerMs;
    r.prompt_len = 100;
    r.output_len = 4;
    source.requests.push_back(r);
  }
  CHECK_THROWS_WITH(run_simulation(one_group("llama-3.1-8b", "h100-80gb"), source, RunOutputs{}),
                    Catch::Contains("request 2 arrives at 0.001000000 s") && Catch::Contains("arrival order"));
}

TEST_CASE("SLO strings that do not parse say which part failed") {
  ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb");
  c.slos = "ttft_p90<=2s,tpot_p99<=fast";
  ListSource none;
  CHECK_THROWS_WITH(run_simulation(c, none, RunOutputs{}), Catch::Contains("tpot_p99<=fast"));
}

namespace {
int run_cli(const std::string& args) {
  const char* bin = std::getenv("TWIN_BIN");
  if (!bin) return -1;
  const int status = std::system((std::string(bin) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}
}  // namespace

TEST_CASE("twinserve simulate exit codes") {
  if (!std::getenv("TWIN_BIN")) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  namespace fs = std::filesystem;
  const fs::path trace = fs::temp_directory_path() / "twin_sim_cli_trace.csv";
  {
    std::ofstream out(trace);
    out << "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.5,200,20\n";
  }
  const std::string t = " --trace " + trace.string() + " --no-progress";
  CHECK(run_cli("simulate" + t) == 0);
  CHECK(run_cli("simulate" + t + " --model nope") == 2);
  CHECK(run_cli("simulate" + t + " --hw nope") == 2);
  CHECK(run_cli("simulate" + t + " --tp 3") == 2);
  CHECK(run_cli("simulate" + t + " --slo 'ttft<=x'") == 2);
  CHECK(run_cli("simulate" + t + " --model llama-3.1-70b --hw a100-80gb") == 1);  // does not fit
  CHECK(run_cli("simulate --trace /nonexistent.csv") == 1);
  CHECK(run_cli("simulate" + t + " --seed -1") == 2);  // an unsigned seed, not wrapped around
  CHECK(run_cli("simulate" + t + " --max-requests -1") == 2);
  {
    std::ofstream out(trace);
    out << "arrived_at,num_prefill_tokens,num_decode_tokens\n";  // a header, no request
  }
  CHECK(run_cli("simulate" + t) == 1);
  fs::remove(trace);
}
