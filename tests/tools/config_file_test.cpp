// --config FILE.yaml: vLLM's config file of flags. Read unit by unit, then
// end to end: the file gives the bytes the same flags give, the command line
// wins over it, and a bad key, value or YAML names the file and line.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "tests/support/run_cli.hpp"
#include "tools/twinserve/config_file.hpp"

namespace twin {
namespace {

std::filesystem::path tmp(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_tools_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string write(const std::string& name, const std::string& text) {
  const auto path = tmp(name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string read(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

// summary.json without its wall-clock figure (the one thing that differs
// between two runs of the same simulation).
nlohmann::json summary_of(const std::filesystem::path& dir) {
  nlohmann::json j = nlohmann::json::parse(read(dir / "summary.json"));
  j.erase("wall_time_s");
  return j;
}

std::string small_trace() {
  std::string rows;
  for (int i = 0; i < 60; ++i) {
    rows += "{\"id\":" + std::to_string(i) + ",\"arrival_s\":" + std::to_string(i * 0.05) +
            ",\"prompt_len\":" + std::to_string(200 + 37 * (i % 7)) + ",\"output_len\":" + std::to_string(20 + i % 11) + "}\n";
  }
  return write("trace.jsonl", rows);
}

}  // namespace

TEST_CASE("read_yaml_flags: keys as flags, lists, switches and a map as JSON, with their lines") {
  const std::string path = write("flags.yaml",
                                 "# a comment\n"
                                 "max-num-batched-tokens: 2048\n"
                                 "max_num_seqs: 64\n"
                                 "hw: [h100-80gb, a100-80gb]\n"
                                 "no-steps: true\n"
                                 "speculative-config: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: \"4\"}\n");
  const std::vector<cli::YamlFlag> flags = cli::read_yaml_flags(path);
  REQUIRE(flags.size() == 5);
  CHECK(flags[0].flag == "--max-num-batched-tokens");
  CHECK(flags[0].values == std::vector<std::string>{"2048"});
  CHECK(flags[0].line == 2);
  CHECK(flags[1].key == "max_num_seqs");
  CHECK(flags[1].flag == "--max-num-seqs");
  CHECK(flags[2].values == std::vector<std::string>{"h100-80gb", "a100-80gb"});
  CHECK(flags[3].values == std::vector<std::string>{"true"});
  CHECK(nlohmann::json::parse(flags[4].values.at(0)) ==
        nlohmann::json{{"method", "ngram"}, {"num_speculative_tokens", 3}, {"prompt_lookup_max", "4"}});
  CHECK(flags[4].line == 6);
  CHECK(cli::read_yaml_flags(write("empty.yaml", "# nothing\n")).empty());
  CHECK(cli::is_yaml_path("a/B.YML"));
  CHECK(cli::is_yaml_path("c.yaml"));
  CHECK_FALSE(cli::is_yaml_path("c.json"));
  CHECK_FALSE(cli::is_yaml_path(".yaml"));
}

TEST_CASE("read_yaml_flags: bad YAML and bad shapes name the file and line") {
  const std::string bad = write("bad.yaml", "model: tiny\nhw: h200\nslo: [ttft_p90<=1s\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(bad); }), Catch::StartsWith(bad + ":4:") && Catch::Contains("not valid YAML"));
  const std::string twice = write("twice.yaml", "max-num-seqs: 8\nmodel: tiny\nmax_num_seqs: 16\n");
  CHECK(error_of([&] { cli::read_yaml_flags(twice); }) == twice + ":3: key 'max_num_seqs' given twice (first on line 1)");
  // In a map a JSON flag takes too (yaml-cpp keeps both; JSON kept the last).
  const std::string nested = write("nested.yaml", "model: tiny\nspeculative-config:\n  method: ngram\n  method: eagle\n");
  CHECK(error_of([&] { cli::read_yaml_flags(nested); }) == nested + ":4: key 'method' given twice");
  const std::string empty = write("novalue.yaml", "model: tiny\nno-steps:\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(empty); }), Catch::StartsWith(empty + ":2: key 'no-steps' has no value"));
  const std::string list = write("list.yaml", "- model\n- tiny\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(list); }), Catch::StartsWith(list + ":1: expected a map"));
  const std::string dashes = write("dashes.yaml", "--model: tiny\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(dashes); }), Catch::StartsWith(dashes + ":1: key '--model'"));
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(tmp("missing.yaml").string()); }), Catch::Contains("cannot read"));
}

// Nine anchors, each a map of nine aliases of the one before: 9^9 values.
std::string alias_bomb() {
  std::string text = "a: &a {x0: 1, x1: 1, x2: 1, x3: 1, x4: 1, x5: 1, x6: 1, x7: 1, x8: 1}\n";
  const std::string names = "abcdefghi";
  for (std::size_t n = 1; n < names.size(); ++n) {
    text += std::string(1, names[n]) + ": &" + names[n] + " {";
    for (int k = 0; k < 9; ++k) text += (k ? ", k" : "k") + std::to_string(k) + ": *" + names[n - 1];
    text += "}\n";
  }
  return text;
}

TEST_CASE("read_yaml_flags: recursive aliases, alias bombs and deep nesting are refused naming the file and line") {
  // Before: the recursive alias overflowed the stack (exit 139) and the bomb
  // of 700 bytes grew past gigabytes.
  const std::string recursive = write("recursive.yaml", "a: &a\n  b: *a\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(recursive); }),
             Catch::StartsWith(recursive + ":1: a recursive alias"));
  const std::string in_list = write("recursive_list.yaml", "model: tiny\nslo: &s [ttft_p90<=1s, *s]\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(in_list); }), Catch::StartsWith(in_list + ":2: a recursive alias"));
  const std::string bomb = write("bomb.yaml", alias_bomb());
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(bomb); }),
             Catch::StartsWith(bomb + ":") && Catch::Contains("more than 100000 values"));
  // Aliases within the budget still work.
  const std::string shared = write("shared.yaml", "speculative-config: &s {method: ngram}\n");
  CHECK(cli::read_yaml_flags(shared).size() == 1);
  const std::string deep = write("deep.yaml", "speculative-config: " + std::string(100, '[') + std::string(100, ']') + "\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(deep); }), Catch::StartsWith(deep + ":1: nested deeper than 64"));
  // A value yaml-cpp cannot convert (a map as a key) names the file: before,
  // "yaml-cpp: error at line 1 ... bad conversion", no file, exit 1.
  const std::string conv = write("conv.yaml", "speculative-config: {[1]: 2}\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(conv); }), Catch::StartsWith(conv + ":1: "));
  // yaml-cpp 0.7's LoadAll looped for ever (memory growing) on a ',' out of place.
  const std::string comma = write("comma.yaml", ",max-num-seqs: 8\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(comma); }), Catch::StartsWith(comma + ":1:1: not valid YAML"));
  const std::string two = write("two.yaml", "model: tiny\n---\nmodel: tiny\n");
  CHECK_THAT(error_of([&] { cli::read_yaml_flags(two); }), Catch::Contains("a second YAML document"));
  const std::string long_key = write("long_key.yaml", std::string(100000, 'k') + ": 1\n");
  CHECK(error_of([&] { cli::read_yaml_flags(long_key); }).size() < 1000);
}

TEST_CASE("apply_yaml_flags: the command line wins, unknown keys and refused values name the line") {
  CLI::App app;
  auto* sub = app.add_subcommand("simulate");
  int seqs = 0, tp = 1;
  bool no_steps = false;
  std::string model;
  sub->add_option("--max-num-seqs", seqs);
  sub->add_option("--tp", tp)->check(CLI::Range(1, 8));
  sub->add_option("--model", model)->required();
  sub->add_flag("--no-steps", no_steps);
  const std::string path = write("apply.yaml", "max-num-seqs: 64\nmodel: tiny\nno_steps: true\n");
  sub->callback([&] {});
  // --max-num-seqs on the command line; the file gives --model (required) and the switch.
  sub->add_option_function<std::string>("--config", [&](const std::string& p) { cli::apply_yaml_flags(*sub, p, cli::read_yaml_flags(p)); });
  std::vector<std::string> args{path, "--config", "32", "--max-num-seqs", "simulate"};  // reversed, as CLI11 takes them
  app.parse(args);
  CHECK(seqs == 32);
  CHECK(model == "tiny");
  CHECK(no_steps);

  CLI::App app2;
  auto* sub2 = app2.add_subcommand("simulate");
  sub2->add_option("--tp", tp)->check(CLI::Range(1, 8));
  sub2->add_option_function<std::string>("--config", [&](const std::string& p) { cli::apply_yaml_flags(*sub2, p, cli::read_yaml_flags(p)); });
  const std::string unknown = write("unknown.yaml", "tp: 2\nmax-num-batched-token: 2048\n");
  std::vector<std::string> args2{unknown, "--config", "simulate"};
  CHECK(error_of([&] { app2.parse(args2); }) ==
        unknown + ":2: unknown key 'max-num-batched-token': `twinserve simulate` has no --max-num-batched-token");
  CLI::App app3;
  auto* sub3 = app3.add_subcommand("simulate");
  sub3->add_option("--tp", tp)->check(CLI::Range(1, 8));
  sub3->add_option_function<std::string>("--config", [&](const std::string& p) { cli::apply_yaml_flags(*sub3, p, cli::read_yaml_flags(p)); });
  const std::string refused = write("refused.yaml", "# TP\ntp: 0\n");
  std::vector<std::string> args3{refused, "--config", "simulate"};
  CHECK_THAT(error_of([&] { app3.parse(args3); }),
             Catch::StartsWith(refused + ":2: key 'tp': ") && Catch::Contains("--tp"));
}

TEST_CASE("simulate --config FILE.yaml writes the summary.json the same flags write, and flags override the file") {
  const std::string trace = small_trace();
  const std::string flags = "--model llama-3.1-8b --hw h100-80gb --replicas 2 --router least_outstanding "
                            "--max-num-batched-tokens 2048 --max-num-seqs 64 --slo 'ttft_p90<=2s' --seed 3 --no-steps --quiet";
  const auto a = tmp("sim_flags"), b = tmp("sim_yaml"), c = tmp("sim_override"), d = tmp("sim_flags32");
  for (const auto& dir : {a, b, c, d}) std::filesystem::remove_all(dir);
  const auto r1 = test::run_twinserve("simulate --trace '" + trace + "' " + flags + " --out '" + a.string() + "'", true);
  INFO(r1.out);
  REQUIRE(r1.exit_code == 0);
  const std::string yaml = write("simulate.yaml",
                                 "# the same run as the flags\n"
                                 "trace: " + trace + "\n"
                                 "model: llama-3.1-8b\n"
                                 "hardware: h100-80gb\n"
                                 "replicas: 2\n"
                                 "router: least_outstanding\n"
                                 "max-num-batched-tokens: 2048\n"
                                 "max_num_seqs: 64\n"
                                 "slo: ttft_p90<=2s\n"
                                 "seed: 3\n"
                                 "no-steps: true\n"
                                 "quiet: true\n");
  const auto r2 = test::run_twinserve("simulate --config '" + yaml + "' --out '" + b.string() + "'", true);
  INFO(r2.out);
  REQUIRE(r2.exit_code == 0);
  CHECK(summary_of(a) == summary_of(b));
  CHECK(read(a / "requests.csv") == read(b / "requests.csv"));

  // The command line's --max-num-seqs wins over the file's.
  const auto r3 = test::run_twinserve("simulate --config '" + yaml + "' --max-num-seqs 32 --out '" + c.string() + "'", true);
  REQUIRE(r3.exit_code == 0);
  std::string flags32 = flags;
  flags32.replace(flags32.find("--max-num-seqs 64"), 17, "--max-num-seqs 32");
  const auto r5 = test::run_twinserve("simulate --trace '" + trace + "' " + flags32 + " --out '" + d.string() + "'", true);
  REQUIRE(r5.exit_code == 0);
  CHECK(summary_of(c) == summary_of(d));
  CHECK(summary_of(c) != summary_of(b));
}

TEST_CASE("A YAML config file's errors: an unknown key, a refused value and bad YAML name the file and line (exit 2)") {
  const std::string trace = small_trace();
  const std::string unknown = write("unknown_cli.yaml", "trace: " + trace + "\nmax-num-batched-token: 2048\n");
  const auto r1 = test::run_twinserve("simulate --config '" + unknown + "'", true);
  CHECK(r1.exit_code == 2);
  CHECK_THAT(r1.out, Catch::Contains(unknown + ":2: unknown key 'max-num-batched-token': `twinserve simulate` has no --max-num-batched-token"));
  const std::string bad = write("bad_cli.yaml", "trace: " + trace + "\nmodel: {llama\n");
  const auto r2 = test::run_twinserve("simulate --config '" + bad + "'", true);
  CHECK(r2.exit_code == 2);
  CHECK_THAT(r2.out, Catch::Contains(bad + ":3:") && Catch::Contains("not valid YAML"));
  const std::string refused = write("refused_cli.yaml", "trace: " + trace + "\ntp: 0\n");
  const auto r3 = test::run_twinserve("simulate --config '" + refused + "'", true);
  CHECK(r3.exit_code == 2);
  CHECK_THAT(r3.out, Catch::Contains(refused + ":2: key 'tp': "));
  // Every long command takes it, and refuses a key another command has.
  for (const char* command : {"run", "validate", "plan", "sweep"}) {
    INFO(command);
    const std::string other = write(std::string(command) + "_other.yaml", "explain-memory: true\n");
    const auto r = test::run_twinserve(std::string(command) + " --config '" + other + "'", true);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(other + ":1: unknown key 'explain-memory': `twinserve " + command + "` has no --explain-memory"));
  }
  // A recursive alias: exit 2 naming the file and line (before: 139).
  const std::string recursive = write("recursive_cli.yaml", "a: &a\n  b: *a\n");
  const auto r5 = test::run_twinserve("simulate --config '" + recursive + "'", true);
  CHECK(r5.exit_code == 2);
  CHECK_THAT(r5.out, Catch::Contains(recursive + ":1: a recursive alias"));
  // run, validate and plan have no cluster config: a JSON --config is refused by name.
  const auto r4 = test::run_twinserve("run --config cluster.json --model tiny --trace '" + trace + "'", true);
  CHECK(r4.exit_code == 2);
  CHECK_THAT(r4.out, Catch::Contains("--config cluster.json: expected a YAML file of flags (.yaml or .yml)"));
}

TEST_CASE("simulate and sweep: a --config that is not YAML is still the cluster config, as --cluster-config") {
  const std::string trace = small_trace();
  const std::string cluster = write("cluster.json", R"({"groups": [{"model": "llama-3.1-8b", "hardware": "h100-80gb", "count": 2}]})");
  const auto a = tmp("cluster_config"), b = tmp("cluster_cluster"), c = tmp("cluster_yaml");
  for (const auto& dir : {a, b, c}) std::filesystem::remove_all(dir);
  const auto r1 = test::run_twinserve("simulate --trace '" + trace + "' --config '" + cluster + "' --quiet --out '" + a.string() + "'", true);
  INFO(r1.out);
  REQUIRE(r1.exit_code == 0);
  const auto r2 = test::run_twinserve("simulate --trace '" + trace + "' --cluster-config '" + cluster + "' --quiet --out '" + b.string() + "'", true);
  REQUIRE(r2.exit_code == 0);
  const std::string yaml = write("with_cluster.yaml", "cluster-config: " + cluster + "\ntrace: " + trace + "\nquiet: true\n");
  const auto r3 = test::run_twinserve("simulate --config '" + yaml + "' --out '" + c.string() + "'", true);
  REQUIRE(r3.exit_code == 0);
  CHECK(summary_of(a) == summary_of(b));
  CHECK(summary_of(a) == summary_of(c));
  CHECK(summary_of(a)["replica_load"]["num_replicas"] == 2);
  const auto r4 = test::run_twinserve("simulate --trace '" + trace + "' --config '" + cluster + "' --cluster-config other.json", true);
  CHECK(r4.exit_code == 2);
  CHECK_THAT(r4.out, Catch::Contains("two cluster configs"));
  // sweep: the same rule, and the file's --vary list is the grid.
  const auto s1 = tmp("sweep_flags"), s2 = tmp("sweep_yaml");
  for (const auto& dir : {s1, s2}) std::filesystem::remove_all(dir);
  const auto w1 = test::run_twinserve("sweep --trace '" + trace + "' --config '" + cluster + "' --vary max_num_seqs=8,64 "
                                      "--vary router=round_robin,least_kv --jobs 1 --quiet --out '" + s1.string() + "'", true);
  INFO(w1.out);
  REQUIRE(w1.exit_code == 0);
  const std::string sweep_yaml = write("sweep.yaml", "trace: " + trace + "\nconfig_cluster: x\n");
  const auto w_bad = test::run_twinserve("sweep --config '" + sweep_yaml + "'", true);
  CHECK(w_bad.exit_code == 2);
  CHECK_THAT(w_bad.out, Catch::Contains(sweep_yaml + ":2: unknown key 'config_cluster'"));
  const std::string sweep_ok = write("sweep_ok.yaml", "trace: " + trace + "\ncluster_config: " + cluster +
                                                          "\nvary:\n  - max_num_seqs=8,64\n  - router=round_robin,least_kv\njobs: 1\nquiet: true\n");
  const auto w2 = test::run_twinserve("sweep --config '" + sweep_ok + "' --out '" + s2.string() + "'", true);
  INFO(w2.out);
  REQUIRE(w2.exit_code == 0);
  CHECK(read(s1 / "sweep.csv") == read(s2 / "sweep.csv"));
}

}  // namespace twin
