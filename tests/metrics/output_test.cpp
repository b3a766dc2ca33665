#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "metrics/collector.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/step_csv.hpp"
#include "metrics/summary_json.hpp"
#include "metrics/summary_table.hpp"
#include "records_fixture.hpp"
#include "temp_dir.hpp"

using namespace twin;
using Catch::Matchers::Contains;

namespace {

struct RunOutput {
  std::string requests_csv, steps_csv, summary_json, table;
};

RunOutput write_hand_run() {
  MetricsCollector collector;
  std::ostringstream requests, steps, json, table;
  RequestCsvWriter request_writer(requests);
  StepCsvWriter step_writer(steps);
  for (const auto& r : test::hand_requests()) {
    collector.add(r);
    request_writer.write(r);
  }
  for (const auto& s : test::hand_steps()) {
    collector.add(s);
    step_writer.write(s);
  }
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s,tpot_p99<=200ms,itl<=500ms");
  context.num_replicas = 3;
  context.kv_blocks_capacity = 100;
  context.simulated_time_s = 4.25;
  context.wall_time_s = 0.5;
  context.config = {{"model", "llama-3.1-8b"}, {"replicas", 3}};
  const Summary summary = collector.summarize(context);
  write_summary_json(json, summary);
  print_summary_table(table, summary);
  return {requests.str(), steps.str(), json.str(), table.str()};
}

}  // namespace

TEST_CASE("summary.json has the keys the simulate command promises") {
  const auto j = nlohmann::json::parse(write_hand_run().summary_json);
  for (const char* key : {"num_requests", "completed", "rejected", "aborted", "request_throughput",
                          "input_throughput", "output_throughput", "total_token_throughput", "goodput",
                          "slo_attainment", "prefix_cache_hit_rate", "preemptions", "replica_load",
                          "mean_kv_blocks_used", "max_kv_blocks_used", "mean_batch_size", "energy",
                          "simulated_time_s", "wall_time_s", "config"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
    for (const char* stat : {"mean", "std", "p50", "p90", "p99", "max"}) {
      INFO(metric << "." << stat);
      CHECK(j[metric][stat].is_number());
    }
  }
  CHECK(j["num_requests"] == 5);
  CHECK(j["ttft_ms"]["p90"] == 420.0);
  CHECK(j["goodput"] == 0.5);
  CHECK(j["slos"] == "ttft_p90<=1000ms,tpot_p99<=200ms,itl<=500ms");
  CHECK(j["slo_attainment"][0]["percentile_met"] == true);
  CHECK(j["slo_attainment"][1]["percentile_met"] == false);
  CHECK(j["slo_attainment"][2]["percentile_met"].is_null());
  CHECK(j["config"]["model"] == "llama-3.1-8b");
  CHECK(j["simulated_time_s"] == 4.25);
  CHECK(j["replica_load"]["per_replica"].size() == 3);
}

TEST_CASE("identical input gives byte-identical outputs") {
  const RunOutput a = write_hand_run();
  const RunOutput b = write_hand_run();
  CHECK(a.requests_csv == b.requests_csv);
  CHECK(a.steps_csv == b.steps_csv);
  CHECK(a.summary_json == b.summary_json);
  CHECK(a.table == b.table);
  // Key order is fixed, not alphabetical: the counts come first.
  CHECK(a.summary_json.rfind("{\n  \"num_requests\": 5,\n  \"completed\": 3,", 0) == 0);
}

TEST_CASE("the summary table shows latencies, throughput, goodput and load") {
  const std::string table = write_hand_run().table;
  for (const char* text : {"Median TTFT (ms):", "Std TPOT (ms):", "P99 TPOT (ms):", "P90 ITL (ms):", "P99 E2EL (ms):",
                           "Request throughput (req/s):", "Input token throughput (tok/s):",
                           "Output token throughput (tok/s):", "Goodput (req/s):", "0.50", "ttft_p90<=1000ms:",
                           "PASS", "FAIL", "Prefix cache hit rate (%):", "25.00", "Preemptions:",
                           "Rejected requests:", "Max KV blocks used:", "30 (30.0%)", "Requests per replica:"}) {
    INFO(text);
    CHECK_THAT(table, Contains(text));
  }
}

TEST_CASE("the summary table names what ran, from the config echo") {
  // The engine's flat echo: one block.
  const std::string table = write_hand_run().table;
  CHECK_THAT(table, Contains("Configuration") && Contains("Model:") && Contains("llama-3.1-8b"));
  // A simulated cluster's resolved groups: one block per group, prefixed.
  Summary s;
  s.config["resolved_groups"] = nlohmann::ordered_json::array();
  for (const char* hw : {"h100-80gb", "a100-80gb"}) {
    s.config["resolved_groups"].push_back({{"model", "llama-3.1-70b"}, {"hardware", hw}, {"tp", 4}, {"pp", 2},
                                           {"ep", 1}, {"replicas", 3}, {"scheduler_preset", "vllm"},
                                           {"max_num_batched_tokens", 8192}, {"max_num_seqs", 256},
                                           {"max_model_len", 131072}, {"block_size", 16},
                                           {"enable_prefix_caching", true}, {"async_scheduling", false}});
  }
  std::ostringstream out;
  print_summary_table(out, s);
  // The value on the row of a label, spaces trimmed ("" when no such row).
  const auto value_of = [text = out.str()](const std::string& label) {
    const std::size_t at = text.find("\n" + label + ":");
    if (at == std::string::npos) return std::string();
    const std::size_t from = text.find_first_not_of(' ', at + label.size() + 2);
    return text.substr(from, text.find('\n', from) - from);
  };
  CHECK(value_of("Group 0 Hardware") == "h100-80gb");
  CHECK(value_of("Group 1 Hardware") == "a100-80gb");
  CHECK(value_of("Group 0 Layout (tp / pp / ep)") == "4 / 2 / 1");
  CHECK(value_of("Group 1 Replicas") == "3");
  CHECK(value_of("Group 1 Scheduler preset") == "vllm");
  CHECK(value_of("Group 0 max_num_batched_tokens") == "8192");
  CHECK(value_of("Group 0 max_num_seqs") == "256");
  CHECK(value_of("Group 1 max_model_len") == "131072");
  CHECK(value_of("Group 0 Block size (tokens)") == "16");
  CHECK(value_of("Group 0 Prefix caching") == "on");
  CHECK(value_of("Group 0 Async scheduling") == "off");
  CHECK(value_of("Model").empty());  // several groups: every row prefixed
}

TEST_CASE("the output directory is created and existing results are kept unless overwrite is asked") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "a" / "b";
  {
    OutputDir out(dir, false);
    auto file = out.open("requests.csv");
    file << "mine\n";
  }
  CHECK(std::filesystem::is_directory(dir));
  CHECK_THROWS_AS(OutputDir(dir, false), UsageError);
  CHECK_THROWS_WITH(OutputDir(dir, false), Contains("requests.csv") && Contains("--overwrite"));
  {
    std::ifstream in(dir / "requests.csv");
    std::string line;
    std::getline(in, line);
    CHECK(line == "mine");  // refusing left it alone
  }
  CHECK_NOTHROW(OutputDir(dir, true));
  CHECK_NOTHROW(OutputDir(dir, false, {"other.csv"}));

  const auto file = tmp.path() / "plain_file";
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(OutputDir(file, true), Contains("not a directory"));
}
