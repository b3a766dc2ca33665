// Inputs that once crashed or exhausted `run` and its sibling commands: a
// safetensors header nested 100,000 deep, a trace row claiming 2^31 prompt
// tokens, and numeric flags outside any sane range.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.hpp"
#include "engine/runtime/safetensors.hpp"
#include "tests/runtime/reference_model.hpp"
#include "tests/support/run_cli.hpp"
#include "tests/support/skip.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

std::string write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

std::string count_outcome(const fs::path& requests_csv, const std::string& outcome) {
  std::ifstream in(requests_csv);
  std::string line, rows;
  while (std::getline(in, line))
    if (line.find("," + outcome + ",") != std::string::npos) rows += line.substr(0, line.find(',')) + " ";
  return rows;
}

}  // namespace

TEST_CASE("safetensors: a header nested 100,000 arrays deep is an error naming the file") {
  const std::string path = twin::test::temp_dir("guard") + "/deep.safetensors";
  const std::string header = R"({"w": {"dtype": "F32", "shape": )" + std::string(100000, '[') +
                             std::string(100000, ']') + R"(, "data_offsets": [0, 0]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(path, bytes + header);
  try {
    twin::SafetensorsFile file(path);
    FAIL("no error");
  } catch (const twin::Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::StartsWith(path + ": header: key 'w.shape[0]"));
    CHECK_THAT(what, Catch::Contains("nested deeper than"));
  }
}

TEST_CASE("run: a row claiming 2^31 prompt tokens is rejected from its numbers, as the simulator does") {
  const fs::path dir = twin::test::temp_dir("guard_big_row");
  const std::string trace = write_file(dir / "big.jsonl",
                                       "{\"id\":0,\"arrival_s\":0,\"prompt_len\":2147483647,\"output_len\":5}\n"
                                       "{\"id\":1,\"arrival_s\":0,\"prompt_len\":8,\"output_len\":3}\n");
  fs::remove_all(dir / "run");
  fs::remove_all(dir / "sim");
  // Materialising the prompt would take 8 GiB: the run must finish without it.
  const auto r = run_twinserve("run --trace '" + trace + "' --model tiny --asap --threads 1 --out '" +
                                   (dir / "run").string() + "'",
                               true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("1 requests rejected"));
  CHECK(count_outcome(dir / "run" / "requests.csv", "rejected") == "0 ");
  CHECK(count_outcome(dir / "run" / "requests.csv", "finished") == "1 ");
  std::ifstream in(dir / "run" / "requests.csv");
  std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(csv, Catch::Contains("prompt + output = 2147483652 tokens exceeds max_model_len"));

  // The simulator records the same rejection (same reason text).
  REQUIRE(run_twinserve("simulate --trace '" + trace + "' --model tiny --hw cpu --no-progress --out '" +
                        (dir / "sim").string() + "'")
              .exit_code == 0);
  std::ifstream sin(dir / "sim" / "requests.csv");
  std::string sim_csv((std::istreambuf_iterator<char>(sin)), std::istreambuf_iterator<char>());
  CHECK_THAT(sim_csv, Catch::Contains("prompt + output = 2147483652 tokens exceeds max_model_len"));
}

TEST_CASE("flags: every numeric flag outside its range exits 2 naming the flag") {
  const fs::path dir = twin::test::temp_dir("guard_flags");
  const std::string trace =
      write_file(dir / "t.jsonl", "{\"id\":0,\"arrival_s\":0,\"prompt_len\":8,\"output_len\":3}\n");
  const std::string run = "run --trace '" + trace + "' --model tiny ";
  const std::string sim = "simulate --trace '" + trace + "' --model tiny --hw cpu ";
  const std::string plan = "plan --trace '" + trace + "' --slo 'ttft_p90<=1s' --out '" + (dir / "plan").string() + "' ";
  const std::string convert = "trace convert '" + trace + "' '" + (dir / "out.jsonl").string() + "' ";
  struct Case {
    std::string args, flag;
  };
  const Case cases[] = {
      {run + "--threads 100000", "--threads"},
      {run + "--threads -1", "--threads"},
      {run + "--temperature nan", "--temperature"},
      {run + "--temperature inf", "--temperature"},
      {run + "--temperature -1", "--temperature"},
      {run + "--top-p inf", "--top-p"},
      {run + "--top-p 0", "--top-p"},
      {run + "--top-p 1.5", "--top-p"},
      {run + "--top-k -1", "--top-k"},
      {run + "--time-scale inf", "--time-scale"},
      {run + "--time-scale nan", "--time-scale"},
      {run + "--time-scale 1e-300", "--time-scale"},
      {run + "--time-scale 0", "--time-scale"},
      {run + "--out ''", "--out"},
      {run + "--swap-space 2048", "--swap-space"},
      {run + "--gpu-memory-utilization 0", "--gpu-memory-utilization"},
      {run + "--max-model-len 0", "--max-model-len"},
      {run + "--eos-token -3", "--eos-token"},
      {run + "--max-num-seqs 0", "--max-num-seqs"},
      {run + "--block-size 100000", "--block-size"},
      {"validate --trace '" + trace + "' --model tiny --threads 100000", "--threads"},
      {"validate --trace '" + trace + "' --model tiny --engine-repeats 0", "--engine-repeats"},
      {"validate --trace '" + trace + "' --model tiny --out ''", "--out"},
      {"calibrate --model tiny --out x.json --threads -1", "--threads"},
      {"calibrate --model tiny --out x.json --rounds 0", "--rounds"},
      {"calibrate --model tiny --out ''", "--out"},
      {sim + "--replicas 0", "--replicas"},
      {sim + "--tp -2", "--tp"},
      {sim + "--gpu-memory-utilization nan", "--gpu-memory-utilization"},
      {sim + "--out ''", "--out"},
      {plan + "--jobs 100000", "--jobs"},
      {plan + "--tp 1,0", "--tp"},
      {plan + "--tolerance inf", "--tolerance"},
      {plan + "--budget nan", "--budget"},
      {"sweep --trace '" + trace + "' --vary replicas=1,2 --jobs -1", "--jobs"},
      {"sweep --trace '" + trace + "' --vary replicas=1,2 --out ''", "--out"},
      {convert + "--end-s -1", "--end-s"},
      {convert + "--end-s nan", "--end-s"},
      {convert + "--start-s inf", "--start-s"},
      {convert + "--scale-rate 0", "--scale-rate"},
      {convert + "--max-prompt -1", "--max-prompt"},
      {"trace generate '" + (dir / "g.jsonl").string() + "' --rate nan", "--rate"},
      {"trace generate '" + (dir / "g.jsonl").string() + "' --duration-s inf", "--duration-s"},
      {"trace stats '" + trace + "' --backwards-tolerance-s nan", "--backwards-tolerance-s"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const auto r = run_twinserve(c.args, true);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.out, Catch::Contains(c.flag + ":"));
  }
  // In range still runs.
  CHECK(run_twinserve(run + "--asap --threads 1 --temperature 0.7 --top-p 0.9 --top-k 5 --time-scale 2").exit_code == 0);
}

TEST_CASE("run: a 240 MiB row of hash ids under a 1 GiB address-space limit is a FILE:LINE error, not bad_alloc") {
#if defined(__SANITIZE_ADDRESS__)
  TWIN_SKIP("under ASan: its shadow memory alone is past any address-space limit");
#endif
  if (std::system("prlimit --version > /dev/null 2>&1") != 0) TWIN_SKIP("prlimit (util-linux) is not installed");
  const fs::path dir = twin::test::temp_dir("guard_huge_row");
  // 120 Mi ids at 2 bytes each: within the 256 MiB line cap, 1 GiB as a
  // vector of ids; the reader stops at 2^24 of them.
  {
    std::ofstream out(dir / "huge.jsonl", std::ios::binary);
    out << R"({"id":0,"arrival_s":0,"prompt_len":8,"output_len":3,"hash_block_size":16,"hash_ids":[1)";
    const std::string chunk = [] {
      std::string s;
      for (int i = 0; i < (1 << 20); ++i) s += ",1";
      return s;
    }();
    for (int i = 0; i < 120; ++i) out << chunk;
    out << "]}\n";
  }
  const std::string limit = "prlimit --as=1073741824 ";
  const char* bin = std::getenv("TWIN_BIN");
  REQUIRE(bin != nullptr);
  for (const std::string& cmd :
       {std::string("trace stats '") + (dir / "huge.jsonl").string() + "'",
        "run --trace '" + (dir / "huge.jsonl").string() +
            "' --model tiny --threads 1 --asap --quiet --num-gpu-blocks-override 256 --overwrite --out '" +
            (dir / "out").string() + "'"}) {
    INFO(cmd);
    const std::string full = limit + "'" + bin + "' " + cmd + " 2>&1";
    FILE* p = ::popen(full.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string text;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    const int status = ::pclose(p);
    INFO(text);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(text, Catch::Contains((dir / "huge.jsonl").string() + ":1: 'hash_ids' holds more than 16777216 elements"));
    CHECK_THAT(text, !Catch::Contains("bad_alloc"));
  }
  fs::remove(dir / "huge.jsonl");
}
