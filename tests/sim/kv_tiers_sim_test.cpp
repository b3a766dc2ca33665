// KV tiers below HBM in the simulator (docs/simulate.md, "KV tiers"): on a
// trace with heavy prefix sharing a DRAM tier of 8x the HBM cache brings the
// prefix hit rate within a point of an infinite cache; the moves are priced
// and reported; without tiers nothing changes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "sim_test_util.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"
#include "traces/generator.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// 1500 requests: 40 system prompts of 1500 tokens shared by 90% of the
// sessions, 2-6 turns each (every turn's prompt extends the last one's).
GeneratorOptions shared_trace() {
  GeneratorOptions g;
  g.max_requests = 1500;
  g.rate = 4;
  parse_shared_prefix("40:1500:0.9", g);
  g.session_turns = "uniform:2:6";
  g.think_time_s = 10;
  g.prompt = "lognormal:median=300:sigma=0.8:max=4000";
  g.output = "lognormal:median=100:sigma=0.7:max=600";
  g.seed = 3;
  return g;
}

constexpr std::int32_t kHbmBlocks = 3000;

ClusterConfig config_with(std::int32_t hbm_blocks, std::vector<KvTierSpec> tiers = {}, bool overlap = false) {
  ClusterConfig c = one_group("llama-3.1-8b", "h100-80gb");
  c.num_gpu_blocks_override = hbm_blocks;
  c.kv_tiers = std::move(tiers);
  c.kv_tier_load_overlap = overlap;
  return c;
}

KvTierSpec tier_blocks(const std::string& name, std::int64_t blocks) {
  KvTierSpec t;
  t.name = name;
  t.capacity_blocks = blocks;
  return t;
}

RunResult simulate(const ClusterConfig& config) {
  GeneratorSource source(shared_trace());
  return run_simulation(config, source, RunOutputs{});
}

}  // namespace

TEST_CASE("a DRAM tier of 8x HBM comes within a point of an infinite cache", "[sim][tiers]") {
  const RunResult none = simulate(config_with(kHbmBlocks));
  const RunResult infinite = simulate(config_with(1'000'000));
  const RunResult tiered = simulate(config_with(kHbmBlocks, {tier_blocks("dram", 8 * kHbmBlocks)}));
  const double h_none = none.summary.prefix_cache_hit_rate;
  const double h_inf = infinite.summary.prefix_cache_hit_rate;
  const double h_tier = tiered.summary.prefix_cache_hit_rate;
  INFO("hit rate: HBM only " << h_none << ", infinite " << h_inf << ", with DRAM " << h_tier);
  CHECK(h_inf > 0.8);
  CHECK(h_none < h_inf - 0.3);  // the HBM cache alone is far too small
  CHECK(std::abs(h_inf - h_tier) <= 0.01);

  // Without tiers the summary has none of it.
  CHECK(none.summary.kv_tiers.empty());
  CHECK(none.summary.kv_tier_bytes_moved == 0);

  const Summary& s = tiered.summary;
  REQUIRE(s.kv_tiers.size() == 2);
  CHECK(s.kv_tiers[0].name == "hbm");
  CHECK(s.kv_tiers[1].name == "dram");
  CHECK(s.kv_tiers[1].capacity_blocks == 8 * kHbmBlocks);
  CHECK(s.kv_tiers[1].hit_tokens > 0);
  CHECK(s.kv_tiers[1].loaded_bytes > 0);
  CHECK(s.kv_tiers[1].stored_bytes > 0);
  CHECK(s.kv_tier_bytes_moved == s.kv_tiers[1].loaded_bytes + s.kv_tiers[1].stored_bytes);
  CHECK(s.kv_tier_hit_rate == Approx(s.kv_tiers[0].hit_rate + s.kv_tiers[1].hit_rate));
  CHECK(s.kv_tier_load_stall_s > 0);
  // llama-3.1-8b bf16: 128 KiB of KV per token, 2 MiB per 16-token block.
  CHECK(s.kv_tiers[1].loaded_bytes == static_cast<std::uint64_t>(s.kv_tiers[1].hit_tokens / 16) * 2 * 1024 * 1024);

  // Same inputs, same figures.
  const RunResult again = simulate(config_with(kHbmBlocks, {tier_blocks("dram", 8 * kHbmBlocks)}));
  CHECK(again.summary.kv_tier_bytes_moved == s.kv_tier_bytes_moved);
  CHECK(again.summary.kv_tier_load_stall_s == s.kv_tier_load_stall_s);
  CHECK(again.summary.ttft_ms.p99 == s.ttft_ms.p99);
  CHECK(again.stats.steps == tiered.stats.steps);
}

TEST_CASE("tiers: an SSD below a small DRAM catches its demotions, and overlap hides load time", "[sim][tiers]") {
  const RunResult two = simulate(config_with(kHbmBlocks, {tier_blocks("dram", 2000), tier_blocks("ssd", 30000)}));
  const Summary& s = two.summary;
  REQUIRE(s.kv_tiers.size() == 3);
  CHECK(s.kv_tiers[2].name == "ssd");
  CHECK(s.kv_tiers[1].demoted_blocks > 0);
  CHECK(s.kv_tiers[2].stored_bytes > 0);
  CHECK(s.kv_tiers[2].hit_tokens > 0);
  const RunResult infinite = simulate(config_with(1'000'000));
  CHECK(std::abs(s.prefix_cache_hit_rate - infinite.summary.prefix_cache_hit_rate) <= 0.01);

  const RunResult serial = simulate(config_with(kHbmBlocks, {tier_blocks("dram", 24000)}));
  const RunResult overlapped = simulate(config_with(kHbmBlocks, {tier_blocks("dram", 24000)}, true));
  CHECK(overlapped.summary.kv_tier_load_overlap);
  CHECK(overlapped.summary.kv_tier_load_stall_s < serial.summary.kv_tier_load_stall_s);
}

TEST_CASE("tiers: configuration errors name the key", "[sim][tiers]") {
  auto parse = [](const std::string& text) { return parse_cluster_config(nlohmann::json::parse(text), "c.json"); };
  const ClusterConfig ok = parse(R"({"kv_tiers": [{"name": "dram", "capacity_gib": 64, "read_gbps": 25},
                                                  {"name": "ssd", "capacity_blocks": 100000}],
                                     "kv_tier_load_overlap": true})");
  REQUIRE(ok.kv_tiers.size() == 2);
  CHECK(ok.kv_tiers[0].read_gbps == 25);
  CHECK(ok.kv_tier_load_overlap);
  CHECK(cluster_config_json(ok).contains("kv_tiers"));
  CHECK_FALSE(cluster_config_json(ClusterConfig{}).contains("kv_tiers"));
  CHECK_THROWS_WITH(parse(R"({"kv_tiers": [{"name": "dram"}]})"),
                    Catch::Contains("c.json") && Catch::Contains("kv_tiers[0]") && Catch::Contains("capacity"));
  CHECK_THROWS_WITH(parse(R"({"kv_tiers": [{"name": "dram", "capacity_gib": 1, "speed": 3}]})"),
                    Catch::Contains("kv_tiers[0].speed"));
  CHECK_THROWS_WITH(parse(R"({"kv_tiers": [{"name": "dram", "capacity_gib": 1}, {"name": "dram", "capacity_gib": 2}]})"),
                    Catch::Contains("listed twice"));
  CHECK_THROWS_WITH(parse(R"({"kv_tiers": [{"name": "dram", "capacity_gib": -1}]})"),
                    Catch::Contains("kv_tiers[0].capacity_gib"));
  // A tier of its own name has no default bandwidth.
  ClusterConfig cxl = config_with(kHbmBlocks, {tier_blocks("cxl", 100)});
  CHECK_THROWS_WITH(build_cluster(cxl), Catch::Contains("cxl") && Catch::Contains("read_gbps"));
  cxl.kv_tiers[0].read_gbps = 64;
  cxl.kv_tiers[0].write_gbps = 64;
  CHECK_NOTHROW(build_cluster(cxl));
  // Tiers keep prefix-cached blocks: prefix caching off is refused.
  ClusterConfig off = config_with(kHbmBlocks, {tier_blocks("dram", 100)});
  off.scheduler_options = {{"enable_prefix_caching", "false"}};
  CHECK_THROWS_WITH(build_cluster(off), Catch::Contains("prefix caching") || Catch::Contains("enable_prefix_caching"));
}

TEST_CASE("simulate --kv-offload-*: tiers in the outputs only when asked for", "[sim][tiers][cli]") {
  if (!std::getenv("TWIN_BIN")) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "twin_kv_tiers_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 300 --rate 4 --shared-prefix 20:1500:0.9 --sessions uniform:2:4 "
                        "--think-time-s 5 --seed 1 " + trace).exit_code == 0);
  const std::string base = "simulate --trace " + trace + " --num-gpu-blocks 600 --quiet --out ";
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  auto header = [&](const fs::path& p) {
    const std::string all = read(p);
    return all.substr(0, all.find('\n'));
  };
  REQUIRE(run_twinserve(base + (dir / "off").string()).exit_code == 0);
  REQUIRE(run_twinserve(base + (dir / "on").string() + " --kv-offload-dram-gib 10 --kv-offload-ssd-gib 40").exit_code == 0);
  CHECK(read(dir / "off" / "summary.json").find("\"kv_tiers\"") == std::string::npos);
  CHECK(header(dir / "off" / "steps.csv").find("load_blocks") == std::string::npos);
  const std::string on = read(dir / "on" / "summary.json");
  CHECK(on.find("\"bytes_moved\"") != std::string::npos);
  CHECK(on.find("\"name\": \"ssd\"") != std::string::npos);
  CHECK(header(dir / "on" / "steps.csv").find(",dram_load_blocks,dram_store_blocks,ssd_load_blocks,ssd_store_blocks") !=
        std::string::npos);
  // Usage errors name the flag.
  const CliRun overlap = run_twinserve(base + (dir / "bad").string() + " --kv-offload-overlap", true);
  CHECK(overlap.exit_code == 2);
  CHECK(overlap.out.find("--kv-offload-overlap") != std::string::npos);
  CHECK(run_twinserve(base + (dir / "bad").string() + " --kv-offload-dram-gib -1").exit_code == 2);
  fs::remove_all(dir);
}
