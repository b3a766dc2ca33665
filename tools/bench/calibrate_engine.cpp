// bench_calibrate_engine: `calibrate --measured` on a real engine, as a user
// fits a live deployment: our CPU engine (`twinserve serve --model tiny`)
// behind its OpenAI front, its capacity probed by one `bench --asap` run,
// two `bench` runs at 0.3 and 0.6 of that capacity, the fit on them (from
// their per-request results, then from their /metrics scrapes), and a run
// at 0.9 predicted by the fitted profile (`validate --measured`). The 0.9
// run is made twice: the difference between the two is the engine's own
// run-to-run noise, printed beside the prediction's error. About a minute.
//
// bench_calibrate_engine [WORK_DIR] (default bench_calibrate_engine_out).
// Asserts nothing: this machine is shared and noisy.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int shell(const std::string& cmd) {
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  return std::system(cmd.c_str());
}

std::string quoted(const std::string& s) {
  std::string out(1, '\'');
  out.append(s);
  out.push_back('\'');
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The engine behind serve, started in the background; its pid and port.
struct Server {
  long pid = 0;
  int port = 0;
};

Server start_server(const std::string& bin, const fs::path& work) {
  Server s;
  const fs::path log = work / "serve.out", pid = work / "serve.pid";
  fs::remove(log);
  if (shell(bin + " serve --model tiny --port 0 --shutdown-timeout 0 > " + quoted(log.string()) + " 2> " +
            quoted((work / "serve.err").string()) + " & echo $! > " + quoted(pid.string())) != 0)
    return s;
  s.pid = std::atol(slurp(pid).c_str());
  const std::string mark = "listening on http://127.0.0.1:";
  for (int i = 0; i < 600 && s.port == 0; ++i) {  // up to a minute to load
    const std::string text = slurp(log);
    if (const auto at = text.find(mark); at != std::string::npos) s.port = std::atoi(text.c_str() + at + mark.size());
    if (s.port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return s;
}

void stop_server(const Server& s) {
  if (s.pid > 0) ::kill(static_cast<pid_t>(s.pid), SIGTERM);
}

// summary.json's statistic of a metric (ttft_ms, tpot_ms, e2el_ms).
double stat_of(const fs::path& run, const char* metric, const char* stat) {
  const json j = json::parse(slurp(run / "summary.json"), nullptr, false);
  if (j.is_discarded() || !j.contains(metric)) return NAN;
  return j[metric].value(stat, NAN);
}

double pct(double a, double b) { return 100 * (b - a) / a; }

bool bench_run(const std::string& b, const std::string& url, const fs::path& work, const std::string& name, double rate,
               int seed) {
  const fs::path trace = work / (name + ".jsonl");
  char r[32];
  std::snprintf(r, sizeof r, "%.3f", rate);
  return shell(b + " trace generate --requests 60 --rate " + r + " --prompt uniform:32:192 --output uniform:8:48 --seed " +
               std::to_string(seed) + " " + quoted(trace.string()) + " --force >/dev/null") == 0 &&
         shell(b + " bench --trace " + quoted(trace.string()) + " --base-url " + url + " --seed " + std::to_string(seed) +
               " --quiet --out " + quoted((work / name).string()) + " --overwrite >/dev/null") == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path bin = fs::absolute(fs::path(argv[0])).parent_path() / "twinserve";
  const fs::path work = fs::absolute(argc > 1 ? fs::path(argv[1]) : fs::path("bench_calibrate_engine_out"));
  fs::create_directories(work);
  const std::string b = quoted(bin.string());
  const Server server = start_server(b, work);
  if (server.port == 0) {
    std::printf("bench_calibrate_engine: serve did not start (see %s)\n", (work / "serve.err").c_str());
    stop_server(server);
    return 0;
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port);
  // Capacity: 60 requests sent at once, completed per second.
  bool ok = bench_run(b, url, work, "capacity", 1e6, 1);
  const json cap = json::parse(slurp(work / "capacity" / "summary.json"), nullptr, false);
  const double capacity = cap.is_discarded() ? NAN : cap.value("request_throughput", NAN);
  std::printf("capacity: %.2f req/s\n", capacity);
  ok = ok && std::isfinite(capacity) && bench_run(b, url, work, "load03", 0.3 * capacity, 3) &&
       bench_run(b, url, work, "load06", 0.6 * capacity, 6) && bench_run(b, url, work, "load09a", 0.9 * capacity, 9) &&
       bench_run(b, url, work, "load09b", 0.9 * capacity, 9);
  stop_server(server);
  if (!ok) {
    std::printf("bench_calibrate_engine: a bench run failed\n");
    return 0;
  }
  const std::string deploy = " --model tiny --hw cpu --num-gpu-blocks-override 131072 ";
  const std::string w = work.string() + "/";
  for (const char* source : {"results", "scrapes"}) {
    const std::string sub = std::string(source) == "scrapes" ? "/metrics.prom" : "";
    const std::string fitted = w + "fitted-" + source + ".json";
    std::printf("\n== fit from the 0.3 and 0.6 runs' %s\n", source);
    if (shell(b + " calibrate --measured " + quoted(w + "load03" + sub + "=" + w + "load03.jsonl") + " " +
              quoted(w + "load06" + sub + "=" + w + "load06.jsonl") + deploy +
              "--fit-params compute_scale,host_overhead_us --max-evals 120 --quiet --overwrite --out " + quoted(fitted)) != 0) {
      std::printf("(the fit failed: its error is above)\n");
      continue;
    }
    shell(b + " validate --measured " + quoted(w + "load09a" + sub) + " --trace " + quoted(w + "load09a.jsonl") + deploy.substr(0, deploy.find(" --hw")) +
          " --hw " + quoted(fitted) + " --num-gpu-blocks-override 131072 --out " + quoted(w + "predict09-" + source) +
          " --overwrite >/dev/null");
    const json rep = json::parse(slurp(work / ("predict09-" + std::string(source)) / "report.json"), nullptr, false);
    // validate's per-request report has p50/p90 (its summaries'), the scrape report means.
    const char* stat = sub.empty() ? "p50" : "mean";
    std::printf("\nThe 0.9 run predicted from the fit (%s), %s error, beside the engine's own run-to-run difference:\n",
                source, stat);
    const char* names[3][3] = {{"ttft", "ttft_ms", "ttft_ms"}, {"tpot", "tpot_ms", "tpot_ms"}, {"e2e", "e2e_ms", "e2el_ms"}};
    for (const auto& n : names) {
      double err = NAN;
      if (!rep.is_discarded()) {
        if (sub.empty() && rep.contains(n[2])) err = rep[n[2]]["error_pct"].value("p50", NAN);
        if (!sub.empty() && rep.contains("metrics")) err = rep["metrics"][n[1]]["mean"].value("error_pct", NAN);
      }
      const double a = stat_of(work / "load09a", n[2], stat), c = stat_of(work / "load09b", n[2], stat);
      std::printf("  %-4s predicted %+7.1f%%   run-to-run %+7.1f%% (%.2f vs %.2f ms)\n", n[0], err, pct(a, c), a, c);
    }
  }
  return 0;
}
