// Every JSON file the command line reads, poisoned: each gives a clean error
// naming the file (and the key where there is one), never a crash and never
// the whole offending value.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

fs::path temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("twin_bad_json_cli_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string deep(std::size_t n) { return std::string(n, '[') + std::string(n, ']'); }

}  // namespace

TEST_CASE("readers: a value nested 100,000 arrays deep is an error naming the file, exit 1") {
  const std::string trace = write("ok.jsonl", R"({"id":0,"arrival_s":0,"prompt_len":8,"output_len":2})" "\n");
  const std::string value = deep(100000);
  struct Case {
    const char* what;
    std::string file, args;
    int code;
  };
  const std::string model = write("deep_model.json", R"({"hidden_size": )" + value + "}");
  const std::string hw = write("deep_hw.json", R"({"name": "x", "peak_tflops": )" + value + "}");
  const std::string cluster = write("deep_cluster.json", R"({"groups": [{"model": "tiny", "scheduler": )" + value + "}]}");
  const std::string profile = write("deep_profile.json", R"({"version": 2, "ops": )" + value + "}");
  const std::string search = write("deep_search.json", R"({"tp": )" + value + "}");
  const std::string jsonl = write("deep_trace.jsonl", R"({"id": 0, "arrival_s": )" + value + "}\n");
  const Case cases[] = {
      {"model config", model, "models show '" + model + "'", 1},
      {"model via simulate", model, "simulate --trace '" + trace + "' --model '" + model + "' --hw cpu --no-progress", 1},
      {"hardware profile", hw, "hw show '" + hw + "'", 1},
      {"cluster config", cluster, "simulate --trace '" + trace + "' --config '" + cluster + "' --no-progress", 1},
      {"calibrated profile", profile,
       "simulate --trace '" + trace + "' --model tiny --hw cpu --profile '" + profile + "' --no-progress", 1},
      {"plan search file", search,
       "plan --trace '" + trace + "' --slo 'ttft_p90<=1s' --out '" + (temp_dir() / "plan").string() + "' --search '" +
           search + "'",
       2},
      {"trace line", jsonl, "trace stats '" + jsonl + "'", 1},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const auto r = run_twinserve(c.args, true);
    CHECK(r.exit_code == c.code);
    CHECK_THAT(r.out, Catch::Contains(c.file));
    CHECK(r.out.size() < 1000);
  }
}

TEST_CASE("readers: 1e309 names its key, a megabyte string is quoted in ~200 characters") {
  const std::string trace = write("ok2.jsonl", R"({"id":0,"arrival_s":0,"prompt_len":8,"output_len":2})" "\n");
  const std::string cluster =
      write("ovf_cluster.json", R"({"groups": [{"model": "tiny"}, {"model": "tiny", "scheduler": {"max_num_seqs": 1e309}}]})");
  auto r = run_twinserve("simulate --trace '" + trace + "' --config '" + cluster + "' --no-progress", true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains(cluster + ": key 'groups[1].scheduler.max_num_seqs': number out of range: 1e309"));
  CHECK_THAT(r.out, !Catch::Contains("json.exception"));

  const std::string model = write("ovf_model.json", R"({"hidden_size": 64, "rope_theta": 1e309})");
  r = run_twinserve("models show '" + model + "'", true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("key 'rope_theta': number out of range"));

  const std::string mb(1 << 20, 'q');
  const std::string hw = write("mb_hw.json", R"({"name": "x", "kind": ")" + mb + R"("})");
  r = run_twinserve("hw show '" + hw + "'", true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("key 'kind'"));
  CHECK(r.out.size() < 600);
  const std::string model_mb = write("mb_model.json", R"({"model_type": ")" + mb + R"("})");
  r = run_twinserve("models show '" + model_mb + "'", true);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("key 'model_type'"));
  CHECK(r.out.size() < 800);
}

TEST_CASE("cluster config: core option errors name the file and the key path") {
  const std::string trace = write("ok3.jsonl", R"({"id":0,"arrival_s":0,"prompt_len":8,"output_len":2})" "\n");
  struct Case {
    std::string json, expect;
  };
  const Case cases[] = {
      {R"({"groups": [{"model": "tiny"}, {"model": "tiny", "scheduler": {"max_num_seqs": 0}}]})",
       "groups[1].scheduler.max_num_seqs: scheduler option 'max_num_seqs': bad value '0'"},
      {R"({"groups": [{"model": "tiny"}], "router": "fastest"})", "router: unknown router policy 'fastest'"},
      {R"({"groups": [{"model": "tiny", "scheduler": {"preset": "vllm"}}]})", "groups[0].scheduler.preset: "},
      {R"({"groups": [{"model": "tiny"}], "scheduler": {"preset": "fastest"}})", "scheduler.preset: unknown scheduler preset"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    const std::string path = write("bad_cluster.json", c.json);
    const auto r = run_twinserve("simulate --trace '" + trace + "' --config '" + path + "' --no-progress", true);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Catch::Contains(path + ": " + c.expect));
  }
}
