// bench_validate: the calibrate -> validate loop on the `small` model, as a
// user runs it: `twinserve calibrate` profiles this machine, then
// `twinserve validate` serves a chat-like trace at three loads on the engine
// and compares it with the simulator. Prints the errors against the targets
// set when the loop was built (|error| <= 5% on p50 and p90 of TTFT, TPOT and E2EL, <= 3% on
// output throughput), the replay parity figure, and the engine's own
// run-to-run noise. The engine serves each load three times: the measured
// figures are each metric's median over the runs, "noise" the largest
// difference of run 2 or 3 from run 1.
// Asserts nothing: these machines are noisy.
//
// bench_validate [WORK_DIR] [PROFILE.json]: results go to WORK_DIR (default
// bench_validate_out in the current folder); an existing PROFILE skips the
// calibration.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

int shell(const std::string& cmd) {
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  return std::system(cmd.c_str());
}

std::string pct(const nlohmann::json& v) {
  if (!v.is_number()) return "    –  ";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+6.1f%%", v.get<double>());
  return buf;
}

// Single-quoted for the shell (appends: GCC 12's -Wrestrict misfires on "'" + s + "'").
std::string quoted(const std::string& s) {
  std::string out(1, '\'');
  out.append(s);
  out.push_back('\'');
  return out;
}

// The error_pct of largest magnitude among the engine's repeat runs.
const nlohmann::json& widest(const nlohmann::json& repeats, const char* metric, const char* stat) {
  static const nlohmann::json none;
  const nlohmann::json* best = &none;
  for (const auto& run : repeats) {
    const auto& e = *stat ? run[metric]["error_pct"][stat] : run[metric]["error_pct"];
    if (e.is_number() && (!best->is_number() || std::abs(e.get<double>()) > std::abs(best->get<double>()))) best = &e;
  }
  return *best;
}

bool within(const nlohmann::json& v, double bound) { return v.is_number() && std::abs(v.get<double>()) <= bound; }

}  // namespace

int main(int argc, char** argv) {
  const fs::path bin = fs::absolute(fs::path(argv[0])).parent_path() / "twinserve";
  const fs::path work = fs::absolute(argc > 1 ? fs::path(argv[1]) : fs::path("bench_validate_out"));
  fs::create_directories(work);
  const fs::path profile = argc > 2 ? fs::path(argv[2]) : work / "small-cpu.json";
  const fs::path trace = work / "chat.jsonl";
  const fs::path out = work / "validation";
  const std::string b = quoted(bin.string());

  if (shell(b + " trace generate --requests 48 --rate 1 --arrivals gamma --cv 1.5 --prompt uniform:32:192 "
                "--output uniform:8:48 --seed 7 '" + trace.string() + "' --force >/dev/null") != 0) {
    std::printf("bench_validate: trace generate failed\n");
    return 0;
  }
  if (!fs::exists(profile)) {
    if (shell(b + " calibrate --model small --backend cpu --out '" + profile.string() + "'") != 0) {
      std::printf("bench_validate: calibrate failed (is `twinserve calibrate` built?)\n");
      return 0;
    }
  }
  if (shell(b + " validate --trace '" + trace.string() + "' --model small --profile '" + profile.string() +
            "' --loads 0.3,0.6,0.9 --engine-repeats 3 --seed 1 --out '" + out.string() + "' --overwrite") != 0) {
    std::printf("bench_validate: validate failed\n");
  }
  std::ifstream in(out / "report.json");
  if (!in) return 0;
  const auto report = nlohmann::json::parse(in);
  std::printf("\nsmall model, %s requests, predicted capacity %.3f req/s; targets: |err| <= 5%% (p50, p90), <= 3%% "
              "(throughput)\n",
              report["requests"].dump().c_str(), report["capacity_rps"].get<double>());
  std::printf("%-5s %-11s %8s %8s %8s %8s %8s %8s %9s %s\n", "load", "", "TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90",
              "E2EL p50", "E2EL p90", "out tok/s", "parity ns");
  int met = 0, total = 0;
  for (const auto& l : report["loads"]) {
    // "noise": the engine's later runs of the same requests against its
    // first (the larger difference), the floor under which an error cannot
    // be measured here.
    for (const char* model : {"calibrated", "roofline", "noise"}) {
      const std::string name = model;
      if (name == "noise" && !(l.contains("engine_repeats") && !l["engine_repeats"].empty())) continue;
      const auto& m = name == "calibrated" ? l : (name == "roofline" ? l["roofline"] : l["engine_repeats"][0]);
      std::printf("%-5.2f %-11s", l["load"].get<double>(), model);
      for (const char* metric : {"ttft_ms", "tpot_ms", "e2el_ms"}) {
        for (const char* stat : {"p50", "p90"}) {
          const auto& e = name == "noise" ? widest(l["engine_repeats"], metric, stat) : m[metric]["error_pct"][stat];
          std::printf(" %8s", pct(e).c_str());
          if (name == "calibrated") {
            ++total;
            met += within(e, 5.0);
          }
        }
      }
      const auto& t =
          name == "noise" ? widest(l["engine_repeats"], "output_throughput", "") : m["output_throughput"]["error_pct"];
      std::printf(" %9s", pct(t).c_str());
      if (name == "calibrated") {
        ++total;
        met += within(t, 3.0);
        std::printf(" %s", l["replay_parity_max_abs_ns"].dump().c_str());
      }
      std::printf("\n");
    }
  }
  std::printf("calibrated: %d of %d figures within target; report: %s\n", met, total, (out / "report.md").c_str());
  return 0;
}
