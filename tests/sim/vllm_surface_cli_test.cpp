// vLLM's spellings through the built twinserve: the short -tp/-pp/-dp
// aliases, --no-enable-chunked-prefill's budget and --rate for traces
// without arrival times.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

bool have_bin() { return std::getenv("TWIN_BIN") != nullptr; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kModel = " --model llama-3.1-8b --hw h100-80gb";

}  // namespace

TEST_CASE("vLLM's -tp, -pp and -dp are its long names where the command has them") {
  if (!have_bin()) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  const auto short_form = run_twinserve("simulate -tp 2 -pp=2" + kModel + " --explain-memory", true);
  REQUIRE(short_form.exit_code == 0);
  CHECK_THAT(short_form.out, Catch::Contains("tp=2 pp=2"));
  const auto long_form =
      run_twinserve("simulate --tensor-parallel-size 2 --pipeline-parallel-size 2" + kModel + " --explain-memory", true);
  CHECK(long_form.out == short_form.out);
  // A command without the long name says so (not "-d -p" misread): the
  // engine's run has no data parallelism. calibrate has the name for a
  // measured deployment and refuses it when timing the engine.
  const auto dp = run_twinserve("run -dp 2 --model tiny --out /nonexistent/x", true);
  CHECK(dp.exit_code == 2);
  CHECK_THAT(dp.out, Catch::Contains("-dp") && Catch::Contains("--data-parallel-size") && Catch::Contains("`run`"));
  const auto cal_dp = run_twinserve("calibrate -dp 2 --model tiny --out /nonexistent/x.json", true);
  CHECK(cal_dp.exit_code == 2);
  CHECK_THAT(cal_dp.out, Catch::Contains("--data-parallel-size describes a measured deployment"));
  // Every command with --tp takes vLLM's names: calibrate reaches its own
  // check of the degree (the engine runs one device), not a parse error.
  const auto cal = run_twinserve("calibrate -tp 0 --model tiny --out /nonexistent/x.json", true);
  CHECK(cal.exit_code == 2);
  CHECK_THAT(cal.out, Catch::Contains("--tp"));
  for (const char* cmd : {"plan", "serve", "calibrate", "validate", "simulate"}) {
    INFO(cmd);
    const auto help = run_twinserve(std::string(cmd) + " --help", true);
    CHECK_THAT(help.out, Catch::Contains("--tensor-parallel-size"));
  }
}

TEST_CASE("chunked prefill off alone budgets max(max_model_len, 2048), as vLLM") {
  if (!have_bin()) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  const auto unset = run_twinserve("simulate" + kModel + " --no-enable-chunked-prefill --explain-memory", true);
  REQUIRE(unset.exit_code == 0);
  CHECK_THAT(unset.out, Catch::Contains("max_num_batched_tokens 131072, max_num_seqs 256, max_model_len 131072"));
  const auto short_len =
      run_twinserve("simulate" + kModel + " --no-enable-chunked-prefill --max-model-len 1000 --explain-memory", true);
  CHECK_THAT(short_len.out, Catch::Contains("max_num_batched_tokens 2048,"));
  // A budget given below max_model_len stays an error naming both flags.
  const auto small = run_twinserve(
      "simulate" + kModel + " --no-enable-chunked-prefill --max-num-batched-tokens 4096 --explain-memory", true);
  CHECK(small.exit_code == 2);
  CHECK_THAT(small.out, Catch::Contains("--max-num-batched-tokens") && Catch::Contains("--max-model-len"));
}

TEST_CASE("simulate --rate gives a length-only trace the arrivals trace convert --rate writes") {
  if (!have_bin()) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  const fs::path dir = fs::temp_directory_path() / "twin_vllm_surface_rate";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path lengths = dir / "lengths.csv";
  {
    std::ofstream out(lengths);
    out << "num_prefill_tokens,num_decode_tokens\n";
    for (int i = 0; i < 40; ++i) out << 100 + 37 * i << "," << 10 + i << "\n";
  }
  const std::string rate = " --rate 3 --arrival-seed 7";
  REQUIRE(run_twinserve("simulate --trace '" + lengths.string() + "'" + rate + kModel + " --no-progress --out '" +
                        (dir / "direct").string() + "'")
              .exit_code == 0);
  const fs::path converted = dir / "converted.jsonl";
  REQUIRE(run_twinserve("trace convert '" + lengths.string() + "' '" + converted.string() + "'" + rate).exit_code == 0);
  REQUIRE(run_twinserve("simulate --trace '" + converted.string() + "'" + kModel + " --no-progress --out '" +
                        (dir / "converted").string() + "'")
              .exit_code == 0);
  const std::string direct = slurp(dir / "direct" / "requests.csv");
  CHECK(!direct.empty());
  CHECK(direct == slurp(dir / "converted" / "requests.csv"));
  CHECK_THAT(slurp(dir / "direct" / "summary.json"), Catch::Contains("\"rate\": 3"));
  // Another seed, other arrivals; no rate, the error says how to give one;
  // a trace with its own times refuses a rate.
  REQUIRE(run_twinserve("simulate --trace '" + lengths.string() + "' --rate 3 --arrival-seed 8" + kModel +
                        " --no-progress --out '" + (dir / "seed8").string() + "'")
              .exit_code == 0);
  CHECK(slurp(dir / "seed8" / "requests.csv") != direct);
  const auto none = run_twinserve("simulate --trace '" + lengths.string() + "'" + kModel, true);
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.out, Catch::Contains("--rate R"));
  CHECK(run_twinserve("simulate --trace '" + converted.string() + "' --rate 3" + kModel).exit_code == 2);
  fs::remove_all(dir);
}

TEST_CASE("SGLang's and TensorRT-LLM's spellings of the same knobs give the same run") {
  if (!have_bin()) TWIN_SKIP("TWIN_BIN not set (run through ctest)");
  // The memory plan's header (preset, budgets, prefix caching) and the
  // graph each step runs at.
  auto both = [](const std::string& args) {
    const auto memory = run_twinserve("simulate" + kModel + args + " --explain-memory", true);
    const auto ops = run_twinserve("simulate" + kModel + args + " --explain-ops 20x100,3000", true);
    return std::make_pair(memory.exit_code + ops.exit_code, memory.out + ops.out);
  };
  // SGLang's launch_server names against vLLM's.
  const auto sglang = both(" --scheduler sglang --tp-size 2 --chunked-prefill-size 4096 --max-running-requests 64"
                           " --cuda-graph-max-bs 32 --disable-radix-cache");
  REQUIRE(sglang.first == 0);
  const auto vllm_names = both(" --scheduler sglang --tensor-parallel-size 2 --max-num-batched-tokens 4096"
                               " --max-num-seqs 64 --set graph_capture_max_tokens=32 --no-enable-prefix-caching");
  CHECK(sglang.second == vllm_names.second);
  CHECK_THAT(sglang.second, Catch::Contains("largest 32") && Catch::Contains("max_num_seqs 64"));
  // trtllm-serve's underscores.
  const auto trt = both(" --scheduler trtllm --tp_size 2 --max_batch_size 64 --max_num_tokens 4096");
  REQUIRE(trt.first == 0);
  CHECK(trt.second == both(" --scheduler trtllm -tp 2 --max-num-seqs 64 --max-num-batched-tokens 4096").second);
  // No graphs and a largest graph contradict.
  const auto contradict = run_twinserve("simulate" + kModel + " --disable-cuda-graph --cuda-graph-max-bs 8 --explain-ops 8x100", true);
  CHECK(contradict.exit_code != 0);
  CHECK_THAT(contradict.out, Catch::Contains("contradict"));
}
