// engine_settings (engine/runtime/engine_setup): the one rule by which run
// and validate turn their flags into the engine's settings.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "engine/runtime/engine_setup.hpp"
#include "tests/support/error_of.hpp"

namespace twin::test {
namespace {

EngineSetup tiny_setup() {
  EngineSetup s;
  s.model = "tiny";  // a context of 2048 positions
  s.runner.threads = 1;
  return s;
}

}  // namespace

TEST_CASE("engine_settings: max_model_len defaults to the model's context and may not exceed it", "[engine_setup]") {
  EngineSetup s = tiny_setup();
  const EngineSettings d = engine_settings(s);
  CHECK(d.replica.scheduler.max_model_len == 2048);
  REQUIRE(d.model_config.has_value());
  CHECK(d.model_config->name == "tiny");
  CHECK(d.replica.scheduler.preset == "vllm");

  s.overrides.max_model_len = 512;
  CHECK(engine_settings(s).replica.scheduler.max_model_len == 512);
  s.overrides.max_model_len = 4096;
  const std::string e = error_of([&] { (void)engine_settings(s); });
  CHECK(e.find("--max-model-len 4096") != std::string::npos);
  CHECK(e.find("2048") != std::string::npos);
}

TEST_CASE("engine_settings: a fixed block count takes the replica's route whichever field set it", "[engine_setup]") {
  EngineSetup by_runner = tiny_setup();
  by_runner.runner.num_blocks = 64;  // --num-gpu-blocks-override through runner_options
  EngineSetup by_flag = tiny_setup();
  by_flag.overrides.num_gpu_blocks = 64;  // --set num_gpu_blocks=64
  for (const EngineSetup& s : {by_runner, by_flag}) {
    const EngineSettings e = engine_settings(s);
    CHECK(e.replica.kv.num_blocks == 64);
    CHECK(e.runner.num_blocks == 0);
  }
  by_runner.runner.kv_cache_memory_bytes = 1 << 20;
  CHECK(error_of([&] { (void)engine_settings(by_runner); }).find("--kv-cache-memory-bytes") != std::string::npos);
}

TEST_CASE("engine_settings: the stop rule, the scheduler preset and bad values", "[engine_setup]") {
  EngineSetup s = tiny_setup();
  CHECK_FALSE(engine_settings(s).replica.scheduler.stop_at_eos);
  s.sampling.eos_token = 3;
  CHECK(engine_settings(s).replica.scheduler.stop_at_eos);

  s.scheduler_preset = "sarathi";
  CHECK(engine_settings(s).replica.scheduler.preset == "sarathi");
  s.scheduler_preset = "magic";
  CHECK(error_of([&] { (void)engine_settings(s); }).find("magic") != std::string::npos);

  s = tiny_setup();
  s.runner.swap_space_bytes = -1;
  CHECK(error_of([&] { (void)engine_settings(s); }).find("--swap-space") != std::string::npos);
  s = tiny_setup();
  s.overrides.max_num_seqs = 0;
  CHECK_THROWS_AS(engine_settings(s), UsageError);
  s = tiny_setup();
  s.model = "no-such-model";
  CHECK_THROWS(engine_settings(s));
}

}  // namespace twin::test
