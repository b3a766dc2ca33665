// `twinserve models` and `twinserve hw` as a script sees them: the built
// binary (env TWIN_BIN), its --json output and its exit codes.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

using twin::test::run_twinserve;

TEST_CASE("models show --json prints one object with the sizes") {
  auto r = run_twinserve("models show llama-2-7b --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["name"] == "llama-2-7b");
  CHECK(j["num_parameters"].get<int64_t>() == 6'738'415'616);
  CHECK(j["num_active_parameters"] == j["num_parameters"]);
  CHECK(j["kv_bytes_per_token"]["fp16"] == 524288);
  CHECK(j["kv_bytes_per_token"]["fp8"] == 262144);
  CHECK(j["weight_bytes"]["bf16"].get<int64_t>() == 2 * j["num_parameters"].get<int64_t>());
  CHECK(j["num_key_value_heads"] == 32);
  CHECK(j["head_dim"] == 128);

  auto mix = nlohmann::json::parse(run_twinserve("models show mixtral-8x7b --json").out);
  CHECK(mix["num_local_experts"] == 8);
  CHECK(mix["num_active_parameters"].get<int64_t>() < mix["num_parameters"].get<int64_t>() / 3);
}

TEST_CASE("models list and show print every bundled model") {
  auto r = run_twinserve("models list");
  REQUIRE(r.exit_code == 0);
  for (const char* name : {"llama-3.1-405b", "qwen2.5-72b", "tiny", "small", "yi-34b"})
    CHECK(r.out.find(name) != std::string::npos);
  auto show = run_twinserve("models show llama-3.1-8b");
  REQUIRE(show.exit_code == 0);
  CHECK(show.out.find("131072") != std::string::npos);  // bf16 KV bytes per token
  for (const char* name : {"qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b"}) {
    CAPTURE(name);
    CHECK(r.out.find(name) != std::string::npos);
    const auto q = run_twinserve(std::string("models show ") + name);
    REQUIRE(q.exit_code == 0);
    CHECK(q.out.find("per head (Qwen3)") != std::string::npos);
  }
  const auto a3b = nlohmann::json::parse(run_twinserve("models show qwen3-30b-a3b --json").out);
  CHECK(a3b["model_type"] == "qwen3_moe");
  CHECK(a3b["qk_norm"] == "per_head");
  CHECK(a3b["num_local_experts"] == 128);
  CHECK(a3b["moe_intermediate_size"] == 768);
  CHECK(nlohmann::json::parse(run_twinserve("models show llama-3.1-8b --json").out)["qk_norm"] == "none");
}

TEST_CASE("unknown names exit 2 and list the known ones") {
  auto r = run_twinserve("models show llama-9 --json", true);
  CHECK(r.exit_code == 2);
  CHECK(r.out.find("llama-2-7b") != std::string::npos);
  auto h = run_twinserve("hw show h300", true);
  CHECK(h.exit_code == 2);
  CHECK(h.out.find("h100-80gb") != std::string::npos);
  CHECK(run_twinserve("models").exit_code == 2);  // a subcommand is required
}

TEST_CASE("hw show --json round-trips the profile with its sources") {
  auto r = run_twinserve("hw show h100-80gb --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["peak_tflops"]["bf16"] == 989.4);
  CHECK(j["memory_bandwidth_gbps"] == 3350);
  CHECK(j["efficiency"]["memory"] == 0.89);
  CHECK(j["sources"].contains("peak_tflops.bf16"));
  CHECK_FALSE(j["peak_tflops"].contains("fp4"));
  auto a100 = nlohmann::json::parse(run_twinserve("hw show a100-80gb --json").out);
  CHECK_FALSE(a100["peak_tflops"].contains("fp8"));
  auto list = run_twinserve("hw list");
  CHECK(list.exit_code == 0);
  CHECK(list.out.find("l40s") != std::string::npos);
  for (const char* name : {"rtx-4090", "rtx-pro-6000-blackwell-workstation", "rtx-pro-6000-blackwell-server"})
    CHECK(list.out.find(name) != std::string::npos);
  auto g = nlohmann::json::parse(run_twinserve("hw show rtx-4090 --json").out);
  CHECK(g["peak_tflops"]["bf16"] == 165.2);
  CHECK(g["memory_bandwidth_gbps"] == 1008);
  CHECK(g["interconnect"] == "pcie");
  CHECK(g["sources"].contains("memory_bytes"));
  auto server = nlohmann::json::parse(run_twinserve("hw show rtx-pro-6000-blackwell-server --json").out);
  CHECK(server["memory_bandwidth_gbps"] == 1597);
  CHECK(run_twinserve("hw show rtx-pro-6000-blackwell-workstation").out.find("1792") != std::string::npos);
}

TEST_CASE("every command that reads a trace and writes results takes the same flag groups") {
  // Registered once (tools/twinserve/common_flags): a command that lacks one
  // of them has drifted from the others.
  for (const char* cmd : {"run", "simulate", "validate", "sweep", "plan"}) {
    CAPTURE(cmd);
    const auto r = run_twinserve(std::string(cmd) + " --help");
    REQUIRE(r.exit_code == 0);
    for (const char* flag : {"--trace", "--format", "--on-bad-row", "--max-requests", "--out", "--overwrite"}) {
      CAPTURE(flag);
      // The flag, then a space or its next alias ("--overwrite,--force").
      CHECK((r.out.find(std::string(flag) + " ") != std::string::npos ||
             r.out.find(std::string(flag) + ",") != std::string::npos));
    }
  }
  for (const char* cmd : {"run", "simulate", "validate"})
    CHECK(run_twinserve(std::string(cmd) + " --help").out.find("--num-gpu-blocks") != std::string::npos);
}
