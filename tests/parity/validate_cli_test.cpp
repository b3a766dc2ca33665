// `twinserve validate` end to end on the tiny model: replay parity is exact
// at every load, report.json carries every key, the per-load folders hold
// each run's files, and bad input fails with a message. How close the
// calibrated model comes is a measurement, not a test (machines are noisy):
// bench_validate prints it (`make bench`).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using twin::test::CliRun;
using twin::test::run_twinserve;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("twin_validate_cli_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A calibrated profile of the tiny model on this machine (the quick grid).
std::string make_profile(const fs::path& dir, const std::string& name = "tiny-profile.json") {
  const std::string profile = (dir / name).string();
  const auto r = run_twinserve("calibrate --model tiny --quick --threads 1 --out " + profile, true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  return profile;
}

// The chat-like trace the tiny validate runs serve.
std::string make_trace(const fs::path& dir) {
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 100 --rate 50 --prompt uniform:8:48 --output uniform:16:48 "
                        "--seed 4 " + trace).exit_code == 0);
  return trace;
}

// `validate` of the tiny model as every test here runs it, plus `extra` flags.
CliRun validate_tiny(const std::string& trace, const std::string& profile, const fs::path& out,
                     const std::string& loads, const std::string& extra = "") {
  return run_twinserve("validate --trace " + trace + " --model tiny --profile " + profile + " --loads " + loads +
                           " --threads 1 --seed 2 --max-num-batched-tokens 64 --num-gpu-blocks-override 64 " +
                           extra + " --out " + out.string(),
                       true);
}

}  // namespace

TEST_CASE("validate on the tiny model: exact replay parity and a complete report") {
  const fs::path dir = fresh_dir("ok");
  const std::string trace = make_trace(dir);
  const std::string profile = make_profile(dir);
  const fs::path out = dir / "out";
  const auto r = validate_tiny(trace, profile, out, "0.5,0.9");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out / "report.json");
  const auto report = nlohmann::json::parse(in);
  CHECK(report["replay_parity_exact"] == true);
  CHECK(report["capacity_rps"].get<double>() > 0);
  // The engine as the profile was measured (f32 weights and KV) and the
  // roofline priced with the profile of the device it ran on.
  CHECK(report["roofline_hardware"] == "cpu");
  // ... and it says that column is no prediction of this machine.
  CHECK(report["roofline_caveat"].get<std::string>().find("calibrated column") != std::string::npos);
  CHECK(report["engine"].get<std::string>().find("f32 weights, f32 KV") != std::string::npos);
  REQUIRE(report["loads"].size() == 2);
  for (const auto& load : report["loads"]) {
    INFO(load.dump());
    CHECK(load["replay_parity_max_abs_ns"] == 0);
    for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) {
      for (const char* stat : {"p50", "p90", "p99"}) {
        for (const char* key : {"measured", "predicted", "error_pct"}) {
          INFO(metric << " " << stat << " " << key);
          CHECK(load[metric][key][stat].is_number());
        }
      }
    }
    for (const char* key : {"measured", "predicted", "error_pct"}) CHECK(load["output_throughput"][key].is_number());
    CHECK(load["step_time_error"].size() >= 1);
    CHECK(load["roofline"]["ttft_ms"]["predicted"]["p50"].is_number());
    const fs::path folder = out / load["folder"].get<std::string>();
    CHECK(fs::exists(folder / "trace.jsonl"));
    for (const char* run : {"engine", "calibrated", "replay", "roofline"}) {
      for (const char* file : {"requests.csv", "steps.csv", "summary.json"}) CHECK(fs::exists(folder / run / file));
    }
    // The replay wrote what the engine wrote, byte for byte.
    std::ifstream a(folder / "engine" / "requests.csv"), b(folder / "replay" / "requests.csv");
    CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
  }
  CHECK(fs::exists(out / "report.md"));
  {
    // The HTML report: the 7 charts of predicted against measured, inline.
    std::ifstream hin(out / "report.html");
    const std::string html(std::istreambuf_iterator<char>(hin), {});
    std::size_t svgs = 0;
    for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
    CHECK(svgs == 7);
    CHECK(html.find("class=\"errors\"") != std::string::npos);
  }
  CHECK(r.out.find("replay parity") != std::string::npos);
  // Which ops each model gets wrong: the CPU engine timed its own ops.
  {
    std::ifstream rin(out / "report.json");
    const auto rep = nlohmann::json::parse(rin);
    for (const auto* ops : {&rep["loads"][0]["op_time_error"], &rep["loads"][0]["roofline"]["op_time_error"]}) {
      REQUIRE(ops->is_array());
      std::set<std::string> names;
      for (const auto& row : *ops) {
        names.insert(row["op"].get<std::string>());
        CHECK(row["measured_ms_per_step"].get<double>() >= 0);
      }
      for (const char* op : {"attention", "qkv_proj", "lm_head", "sample", "outside the ops"}) CHECK(names.count(op) == 1);
    }
    std::ifstream mdin(out / "report.md");
    const std::string md(std::istreambuf_iterator<char>(mdin), {});
    CHECK(md.find("Per op, inside the engine's steps") != std::string::npos);
    CHECK(md.find("Largest misses") != std::string::npos);
  }

  // --engine-repeats 2: the engine serves each load twice; the second run is
  // compared with the first (the machine's noise floor).
  const fs::path twice = dir / "twice";
  const auto rr = validate_tiny(trace, profile, twice, "0.5", "--engine-repeats 2 --no-plots");
  INFO(rr.out);
  REQUIRE(rr.exit_code == 0);
  CHECK(rr.out.find("noise") != std::string::npos);
  std::ifstream tin(twice / "report.json");
  const auto treport = nlohmann::json::parse(tin);
  const auto& repeats = treport["loads"][0]["engine_repeats"];
  REQUIRE(repeats.size() == 1);
  // The noise compares run 2 with run 1; the models are compared with the
  // median of the runs (of two: their mean).
  const double run1 = repeats[0]["ttft_ms"]["measured"]["p50"], run2 = repeats[0]["ttft_ms"]["predicted"]["p50"];
  const auto& cal = treport["loads"][0]["ttft_ms"];
  const double measured = cal["measured"]["p50"], predicted = cal["predicted"]["p50"];
  CHECK(measured == Approx((run1 + run2) / 2).epsilon(1e-4));
  CHECK(cal["error_pct"]["p50"].get<double>() == Approx((predicted - measured) / measured * 100)
            .margin(2e-3));  // the JSON rounds ms to 6 decimals: ~2e-4 points of error at 0.3 ms
  CHECK(repeats[0]["output_throughput"]["error_pct"].is_number());
  CHECK(fs::exists(twice / "load_0.50" / "engine_2" / "requests.csv"));
  std::ifstream md(twice / "report.md");
  CHECK(std::string(std::istreambuf_iterator<char>(md), {}).find("The engine against itself") != std::string::npos);

  // An engine storage flag that contradicts the profile is refused before
  // anything runs: the prediction would be for another engine.
  const auto contradicts = validate_tiny(trace, profile, dir / "bf16", "0.5", "--kv-cache-dtype bf16");
  CHECK(contradicts.exit_code == 2);
  CHECK(contradicts.out.find("--kv-cache-dtype bf16 contradicts the profile") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "bf16" / "report.json"));

  // Results already there are kept unless --overwrite.
  const auto again = run_twinserve("validate --trace " + trace + " --model tiny --profile " + profile +
                                       " --loads 0.5 --out " + out.string(),
                                   true);
  CHECK(again.exit_code == 2);
  CHECK(again.out.find("--overwrite") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("calibrate and validate carry the engine's quantization through the profile") {
  const fs::path dir = fresh_dir("int8");
  const std::string trace = make_trace(dir);
  const std::string profile = (dir / "int8-profile.json").string();
  const auto cal = run_twinserve("calibrate --model tiny --quick --threads 1 --quantization int8 --out " + profile, true);
  INFO(cal.out);
  REQUIRE(cal.exit_code == 0);
  {
    std::ifstream in(profile);
    CHECK(nlohmann::json::parse(in)["metadata"]["quantization"] == "int8");
  }
  // Unset: the engine runs the profile's int8 GEMMs, and the replay still
  // matches it exactly.
  const fs::path out = dir / "out";
  const auto r = validate_tiny(trace, profile, out, "0.5");
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out / "report.json");
  const auto report = nlohmann::json::parse(in);
  CHECK(report["engine"].get<std::string>().find("int8 weight-only projections") != std::string::npos);
  CHECK(report["replay_parity_exact"] == true);
  // A quantization the profile was not measured with is refused by name.
  const auto none = validate_tiny(trace, profile, dir / "out2", "0.5", "--quantization none");
  CHECK(none.exit_code == 2);
  CHECK(none.out.find("--quantization none contradicts the profile") != std::string::npos);
  const std::string plain = make_profile(dir);
  const auto int8 = validate_tiny(trace, plain, dir / "out3", "0.5", "--quantization int8");
  CHECK(int8.exit_code == 2);
  CHECK(int8.out.find("measured with no quantization") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("validate: bad input exits non-zero with a message") {
  const fs::path dir = fresh_dir("bad");
  const std::string trace = (dir / "t.jsonl").string();
  REQUIRE(run_twinserve("trace generate --requests 4 --rate 50 --seed 1 " + trace).exit_code == 0);
  const std::string profile = (dir / "profile.json").string();  // never read: the loads fail first
  std::ofstream(profile) << "{}\n";
  const std::string base = "validate --trace " + trace + " --model tiny --out " + (dir / "out").string();

  const auto no_profile = run_twinserve(base, true);
  CHECK(no_profile.exit_code == 2);
  CHECK(no_profile.out.find("--profile") != std::string::npos);
  CHECK(no_profile.out.find("calibrate") != std::string::npos);
  const auto bad_repeats = run_twinserve(base + " --profile " + profile + " --engine-repeats 0", true);
  CHECK(bad_repeats.exit_code == 2);
  CHECK(bad_repeats.out.find("--engine-repeats") != std::string::npos);

  const auto missing = run_twinserve(base + " --profile " + (dir / "none.json").string(), true);
  CHECK(missing.exit_code == 1);
  CHECK(missing.out.find("none.json") != std::string::npos);

  for (const char* loads : {"0.3,abc", "0.5,-1", "0", "0.3,,0.9"}) {
    INFO(loads);
    const auto bad = run_twinserve(base + " --profile " + profile + " --loads '" + loads + "'", true);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.find("--loads") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "out" / "report.json"));
  fs::remove_all(dir);
}
