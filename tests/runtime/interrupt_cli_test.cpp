// The built `twinserve` under real signals and overload, as a user meets it:
// Ctrl-C (SIGINT) or SIGTERM during `run` keeps the records and marks the
// summary; --max-queued-requests sheds load with a reason per request; an
// unwritable --out is found before any work.
//
// No timing is assumed: the signal is sent once the process has installed
// its handler (read from /proc/PID/status, SigCgt), which it does just
// before serving, and the trace's last request is due 1000 s later, so the
// run is still serving whenever the signal lands. The deadline for that is
// only a guard against a broken build.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runtime/reference_model.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/run_cli.hpp"

namespace fs = std::filesystem;
using twin::test::run_twinserve;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts twinserve with `args`, stdout and stderr into `log`. `hook`
// non-empty: TWIN_TEST_RAISE_AFTER_POLLS=`hook`, so the run raises the
// signal itself at a known poll of its stop hook. `background`: SIGINT
// ignored, as a non-interactive shell starts a background job (`cmd &`).
pid_t spawn_twinserve(const std::vector<std::string>& args, const fs::path& log, const std::string& hook = "",
                      bool background = false) {
  const char* bin = std::getenv("TWIN_BIN");
  REQUIRE(bin != nullptr);
  std::vector<std::string> all{bin};
  all.insert(all.end(), args.begin(), args.end());
  // Everything the child needs is built before the fork: this process may
  // have threads, so the child may only make async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string hook_name = "TWIN_TEST_RAISE_AFTER_POLLS=";
  std::vector<std::string> env_text;
  if (!hook.empty()) env_text.push_back(hook_name + hook);
  for (char** e = environ; *e; ++e) {
    if (std::string(*e).rfind(hook_name, 0) != 0) env_text.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) ::_exit(127);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    // Default dispositions, whatever the test runner left; SIGINT ignored
    // for a background job.
    ::signal(SIGINT, background ? SIG_IGN : SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

// Whether process `pid` runs twinserve and catches signal `sig` (its
// handler is installed). Until the exec the child is a copy of this test
// process, whose framework catches SIGINT too: hence the name.
bool catches(pid_t pid, int sig) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  std::getline(status, line);
  if (line != "Name:\ttwinserve") return false;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (sig - 1)) & 1ull;
    }
  }
  return false;
}

// Waits for the child to exit; its exit code, or -1 if a signal ended it.
int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs twinserve with `args` under `mpirun -n 2`, its stop hook raising at
// `hook` (TWIN_TEST_RAISE_AFTER_POLLS) on every rank, stdout and stderr
// into `log`; the launcher's exit status.
int mpirun_twinserve(const std::vector<std::string>& args, const std::string& hook, const fs::path& log) {
  std::string cmd = "TWIN_TEST_RAISE_AFTER_POLLS=" + hook +
                    " ASAN_OPTIONS=detect_leaks=0 mpirun --allow-run-as-root --oversubscribe -x "
                    "TWIN_TEST_RAISE_AFTER_POLLS -x ASAN_OPTIONS -n 2 '" +
                    std::string(std::getenv("TWIN_BIN")) + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " > '" + log.string() + "' 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace

TEST_CASE("run: a real SIGINT or SIGTERM mid-run keeps the records, marks summary.json, exits 128 + signal") {
  const fs::path dir = twin::test::temp_dir("interrupt_cli");
  const fs::path trace = dir / "late.jsonl";
  // Two requests now, one due in 1000 s: the run is serving (or waiting for
  // it) whenever the signal arrives.
  std::ofstream(trace) << "{\"id\":0,\"arrival_s\":0,\"prompt_len\":8,\"output_len\":4}\n"
                          "{\"id\":1,\"arrival_s\":0,\"prompt_len\":12,\"output_len\":64}\n"
                          "{\"id\":2,\"arrival_s\":1000,\"prompt_len\":8,\"output_len\":4}\n";
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const fs::path out = dir / ("out" + std::to_string(sig));
    fs::remove_all(out);
    const pid_t pid = spawn_twinserve(
        {"run", "--trace", trace.string(), "--model", "tiny", "--threads", "1", "--quiet", "--out", out.string()},
        dir / "log.txt");
    // Wait until it is serving: its handler is installed just before.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    bool ready = false;
    while (!ready && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) FAIL("twinserve ended before serving: " << read_text(dir / "log.txt"));
      ready = catches(pid, sig);
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ready) ::kill(pid, SIGKILL);
    REQUIRE(ready);
    REQUIRE(::kill(pid, sig) == 0);
    const int code = wait_exit(pid);
    const std::string log = read_text(dir / "log.txt");
    INFO(log);
    CHECK(code == 128 + sig);  // as a shell reports a process a signal ended
    CHECK_THAT(log, Catch::Contains("interrupted by signal " + std::to_string(sig)));
    REQUIRE(fs::exists(out / "requests.csv"));
    REQUIRE(fs::exists(out / "steps.csv"));
    REQUIRE(fs::exists(out / "summary.json"));
    const auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
    CHECK(summary.at("config").at("interrupted") == true);
    CHECK(summary.at("config").contains("interrupted_requests"));
    // Request 2 was never due, so never submitted; 0 and 1 each ended once
    // (finished, or aborted as interrupted).
    const std::string csv = read_text(out / "requests.csv");
    CHECK_THAT(csv, Catch::StartsWith("id,"));
    CHECK(csv.find("\n2,") == std::string::npos);
    for (const char* id : {"\n0,", "\n1,"}) {
      const auto at = csv.find(id);
      REQUIRE(at != std::string::npos);
      const std::string row = csv.substr(at + 1, csv.find('\n', at + 1) - at - 1);
      INFO(row);
      CHECK((row.find(",finished,") != std::string::npos ||
             (row.find(",aborted,") != std::string::npos && row.find("interrupted") != std::string::npos)));
    }
    // The folder takes a rerun with --overwrite.
    CHECK(run_twinserve("run --trace '" + (dir / "late.jsonl").string() +
                        "' --model tiny --asap --threads 1 --quiet --overwrite --max-requests 2 --out '" + out.string() +
                        "'")
              .exit_code == 0);
  }
}

TEST_CASE("run --max-queued-requests: arrivals past the limit are rejected with reason 'queue full'") {
  const fs::path dir = twin::test::temp_dir("queue_cli");
  const fs::path trace = dir / "burst.jsonl";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 6; ++i) t << "{\"id\":" << i << ",\"arrival_s\":0,\"prompt_len\":8,\"output_len\":3}\n";
  }
  fs::remove_all(dir / "out");
  // --asap: all six are submitted at t = 0, before the first step, so the
  // queue holds 2 and the other 4 find it full.
  const auto r = run_twinserve("run --trace '" + trace.string() +
                                   "' --model tiny --asap --threads 1 --quiet --max-queued-requests 2 --out '" +
                                   (dir / "out").string() + "'",
                               true);
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir / "out" / "requests.csv");
  std::string line;
  std::getline(in, line);
  REQUIRE(line.size() > 19);
  CHECK(line.substr(line.size() - 19) == ",reason,scheduled_s");
  int rejected = 0, finished = 0;
  while (std::getline(in, line)) {
    if (line.find(",rejected,") != std::string::npos) {
      ++rejected;
      CHECK(line.substr(line.size() - 12) == ",queue full,");  // never scheduled: no scheduled_s
    }
    if (line.find(",finished,") != std::string::npos) ++finished;
  }
  CHECK(rejected == 4);
  CHECK(finished == 2);
  CHECK_THAT(r.out, Catch::Contains("Rejected requests:                       4"));
}

TEST_CASE("calibrate and validate: an unwritable --out is found before the model loads") {
  // /proc takes no new files, even for root.
  const auto cal = run_twinserve("calibrate --model tiny --quick --out /proc/twin-profile.json", true);
  INFO(cal.out);
  CHECK(cal.exit_code == 1);
  CHECK_THAT(cal.out, Catch::Contains("/proc: the output directory is not writable"));
  CHECK_THAT(cal.out, !Catch::Contains("calibrate: tiny"));  // nothing was timed

  const fs::path dir = twin::test::temp_dir("unwritable_cli");
  std::ofstream(dir / "t.jsonl") << "{\"id\":0,\"arrival_s\":0,\"prompt_len\":8,\"output_len\":3}\n";
  std::ofstream(dir / "p.json") << "{}";
  const auto val = run_twinserve("validate --trace '" + (dir / "t.jsonl").string() + "' --model tiny --profile '" +
                                     (dir / "p.json").string() + "' --out /proc/twin-validation",
                                 true);
  INFO(val.out);
  CHECK(val.exit_code == 1);
  CHECK_THAT(val.out, Catch::Contains("/proc/twin-validation"));
  CHECK_THAT(val.out, !Catch::Contains("engine:"));
}

TEST_CASE("validate: a real SIGINT during the engine run stops it cleanly, its records kept, exits 130") {
  const fs::path dir = twin::test::temp_dir("interrupt_validate");
  fs::remove_all(dir / "out");
  const fs::path trace = dir / "t.jsonl", profile = dir / "tiny.json";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 6; ++i) t << "{\"id\":" << i << ",\"arrival_s\":" << i << ",\"prompt_len\":16,\"output_len\":4}\n";
  }
  REQUIRE(run_twinserve("calibrate --model tiny --quick --overwrite --out '" + profile.string() + "'").exit_code == 0);
  // A load of 10^-6 of the capacity spreads six arrivals over days: the
  // engine run is still waiting for them whenever the signal lands.
  const pid_t pid = spawn_twinserve({"validate", "--trace", trace.string(), "--model", "tiny", "--profile",
                                     profile.string(), "--loads", "0.000001", "--threads", "1", "--no-plots", "--out",
                                     (dir / "out").string()},
                                    dir / "log.txt");
  const fs::path engine_dir = dir / "out" / "load_0.00" / "engine";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) FAIL("validate ended before serving: " << read_text(dir / "log.txt"));
    // Serving: the guard is installed and the engine run's folder exists.
    ready = catches(pid, SIGINT) && fs::exists(engine_dir);
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!ready) ::kill(pid, SIGKILL);
  REQUIRE(ready);
  REQUIRE(::kill(pid, SIGINT) == 0);
  const int code = wait_exit(pid);
  const std::string log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 128 + SIGINT);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: before any load finished"));
  CHECK_THAT(log, Catch::Contains(engine_dir.string()));
  REQUIRE(fs::exists(engine_dir / "summary.json"));
  CHECK(fs::exists(engine_dir / "requests.csv"));
  const auto summary = nlohmann::json::parse(read_text(engine_dir / "summary.json"));
  CHECK(summary.at("config").at("interrupted") == true);
  CHECK_FALSE(fs::exists(dir / "out" / "report.json"));  // no load finished: nothing to report
}

namespace {

// Runs twinserve as a script's background job (`cmd &`) is started: SIGINT
// ignored, and the run raising the signal itself at poll `hook`
// (spawn_twinserve). Returns the exit code.
int run_interrupted(const std::vector<std::string>& args, const std::string& hook, const fs::path& log) {
  return wait_exit(spawn_twinserve(args, log, hook, true));
}

// Every line of a CSV has the header's number of columns and ends in a newline.
void check_whole_lines(const fs::path& csv) {
  const std::string text = read_text(csv);
  INFO(csv.string());
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::istringstream in(text);
  std::string header, line;
  std::getline(in, header);
  const auto columns = std::count(header.begin(), header.end(), ',');
  while (std::getline(in, line)) CHECK(std::count(line.begin(), line.end(), ',') == columns);
}

}  // namespace

TEST_CASE("simulate: an interrupt stops the run, files whole, summary marked, exit 128 + signal, even started with &") {
  // Before: no handler; exit 130 with no message and no summary.json, a
  // line of requests.csv cut in half, steps.csv empty, SIGINT ignored in
  // the background.
  const fs::path dir = twin::test::temp_dir("interrupt_simulate");
  const fs::path trace = dir / "t.jsonl";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 400; ++i) t << "{\"id\":" << i << ",\"arrival_s\":" << i * 0.05 << ",\"prompt_len\":256,\"output_len\":128}\n";
  }
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const fs::path out = dir / ("out" + std::to_string(sig));
    fs::remove_all(out);
    const int code = run_interrupted({"simulate", "--trace", trace.string(), "--model", "llama-3.1-8b", "--hw",
                                      "h100-80gb", "--out", out.string()},
                                     "3000," + std::to_string(sig), dir / "log.txt");
    const std::string log = read_text(dir / "log.txt");
    INFO(log);
    CHECK(code == 128 + sig);
    CHECK_THAT(log, Catch::Contains("interrupted by signal " + std::to_string(sig)));
    const auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
    CHECK(summary.at("config").at("interrupted") == true);
    CHECK(summary.at("config").at("interrupted_requests").get<int>() > 0);
    check_whole_lines(out / "requests.csv");
    check_whole_lines(out / "steps.csv");
    const std::string requests = read_text(out / "requests.csv");
    CHECK(requests.find(",interrupted,") != std::string::npos);
    const std::string steps = read_text(out / "steps.csv");
    CHECK(std::count(steps.begin(), steps.end(), '\n') > 1);
  }
}

TEST_CASE("run --asap: an interrupt exits 128 + signal, summary marked, unfinished requests 'interrupted'") {
  // Before: exit 0, no mark, the unfinished requests 'aborted' (the stop
  // emptied the loop's queue, which then read as work never served).
  const fs::path dir = twin::test::temp_dir("interrupt_asap");
  const fs::path trace = dir / "t.jsonl";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 4; ++i) t << "{\"id\":" << i << ",\"arrival_s\":" << i << ",\"prompt_len\":8,\"output_len\":200}\n";
  }
  const fs::path out = dir / "out";
  fs::remove_all(out);
  const int code = run_interrupted({"run", "--trace", trace.string(), "--model", "tiny", "--asap", "--threads", "1",
                                    "--quiet", "--out", out.string()},
                                   "20", dir / "log.txt");
  const std::string log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 130);
  const auto summary = nlohmann::json::parse(read_text(out / "summary.json"));
  CHECK(summary.at("config").at("interrupted") == true);
  check_whole_lines(out / "requests.csv");
  const std::string csv = read_text(out / "requests.csv");
  CHECK(csv.find(",interrupted,") != std::string::npos);
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(",aborted,") != std::string::npos) CHECK(line.find("interrupted") != std::string::npos);
  }
}

TEST_CASE("plan: an interrupt writes the candidates evaluated so far, says so and exits 128 + signal") {
  // Before: no handler; the plan ended with nothing written.
  const fs::path dir = twin::test::temp_dir("interrupt_plan");
  const fs::path trace = dir / "t.jsonl";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 40; ++i) t << "{\"id\":" << i << ",\"arrival_s\":" << i * 0.5 << ",\"prompt_len\":128,\"output_len\":32}\n";
  }
  const fs::path out = dir / "out";
  fs::remove_all(out);
  // One thread: the first candidate runs, the second poll raises SIGINT,
  // so no further candidate starts.
  const int code = run_interrupted({"plan", "--trace", trace.string(), "--slo", "ttft_p90<=2s", "--model",
                                    "llama-3.1-8b", "--hw", "h100-80gb", "--tp", "1,2,4", "--jobs", "1",
                                    "--probe-requests", "20", "--no-plots", "--quiet", "--out", out.string()},
                                   "2", dir / "log.txt");
  const std::string log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 130);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: 1 of 3 candidates evaluated"));
  const auto plan = nlohmann::json::parse(read_text(out / "plan.json"));
  CHECK(plan.at("interrupted") == true);
  CHECK(plan.at("candidates_evaluated") == 1);
  CHECK(plan.at("candidates_enumerated") == 3);
  CHECK(fs::exists(out / "plan.csv"));
}

TEST_CASE("plan under mpirun: an interrupt on a rank writes the candidates the ranks finished, marked") {
  // Before: under MPI no handler was installed; a signal ended the ranks
  // with the default action and nothing was written.
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) TWIN_SKIP("mpirun not found");
  const fs::path dir = twin::test::temp_dir("interrupt_plan_mpi");
  const fs::path trace = dir / "t.jsonl";
  {
    std::ofstream t(trace);
    for (int i = 0; i < 40; ++i) t << "{\"id\":" << i << ",\"arrival_s\":" << i * 0.5 << ",\"prompt_len\":128,\"output_len\":32}\n";
  }
  const fs::path out = dir / "out";
  fs::remove_all(out);
  // Three candidates over two ranks: rank 0 has the first and the third,
  // rank 1 the second. Each rank's second poll raises SIGINT: rank 0 stops
  // before its third candidate; rank 1 polls once and finishes.
  const std::vector<std::string> args{"plan", "--trace", trace.string(), "--slo", "ttft_p90<=2s", "--model",
                                      "llama-3.1-8b", "--hw", "h100-80gb", "--tp", "1,2,4", "--jobs", "1",
                                      "--probe-requests", "20", "--no-plots", "--quiet", "--out", out.string()};
  const int status = mpirun_twinserve(args, "2", dir / "mpi.log");
  const std::string log = read_text(dir / "mpi.log");
  INFO(log);
  CHECK(status != 0);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: 2 of 3 candidates evaluated"));
  const auto plan = nlohmann::json::parse(read_text(out / "plan.json"));
  CHECK(plan.at("interrupted") == true);
  CHECK(plan.at("candidates_evaluated") == 2);
  CHECK(plan.at("candidates_enumerated") == 3);
  CHECK(fs::exists(out / "plan.csv"));
}

namespace {

// summary.json without its wall time, the one figure a run may not repeat.
std::string summary_without_wall(const fs::path& dir) {
  std::istringstream in(read_text(dir / "summary.json"));
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find("\"wall_time_s\"") == std::string::npos) out += line + "\n";
  }
  return out;
}

// A trace of `n` requests, one every `gap_s` seconds.
fs::path steady_trace(const fs::path& dir, int n, double gap_s, int prompt, int output) {
  const fs::path trace = dir / "t.jsonl";
  std::ofstream t(trace);
  for (int i = 0; i < n; ++i) {
    t << "{\"id\":" << i << ",\"arrival_s\":" << i * gap_s << ",\"prompt_len\":" << prompt
      << ",\"output_len\":" << output << "}\n";
  }
  return trace;
}

}  // namespace

TEST_CASE("simulate with a router refresh period: an interrupt stops at a refresh, same bytes on 1 or 2 threads and MPI ranks") {
  // Before: no stop with a refresh period; a signal killed the run as the
  // default action does.
  const fs::path dir = twin::test::temp_dir("interrupt_windowed");
  const fs::path trace = steady_trace(dir, 400, 0.05, 256, 128);
  const std::vector<std::string> args{"simulate", "--trace", trace.string(), "--model", "llama-3.1-8b", "--hw",
                                      "h100-80gb", "--replicas", "4", "--router-refresh-s", "0.5", "--quiet",
                                      "--overwrite", "--out"};
  // The 20th refresh of 40 asks for the stop.
  auto run = [&](const std::string& jobs, int sig) {
    const fs::path out = dir / ("out_j" + jobs + "_" + std::to_string(sig));
    std::vector<std::string> all = args;
    all.insert(all.end(), {out.string(), "--jobs", jobs});
    const int code = run_interrupted(all, "20," + std::to_string(sig), dir / "log.txt");
    const std::string log = read_text(dir / "log.txt");
    INFO(log);
    CHECK(code == 128 + sig);
    CHECK_THAT(log, Catch::Contains("interrupted by signal " + std::to_string(sig)));
    return out;
  };
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const fs::path one = run("1", sig), two = run("2", sig);  // --jobs: at most the hardware threads
    const auto summary = nlohmann::json::parse(read_text(one / "summary.json"));
    CHECK(summary.at("config").at("interrupted") == true);
    CHECK(summary.at("config").at("interrupted_requests").get<int>() > 0);
    check_whole_lines(one / "requests.csv");
    check_whole_lines(one / "steps.csv");
    const std::string requests = read_text(one / "requests.csv");
    CHECK(requests.find(",interrupted,") != std::string::npos);
    // Requests past the stop's refresh (about 10 s in) never arrived.
    CHECK(std::count(requests.begin(), requests.end(), '\n') < 300);
    CHECK(requests == read_text(two / "requests.csv"));
    CHECK(read_text(one / "steps.csv") == read_text(two / "steps.csv"));
    CHECK(summary_without_wall(one) == summary_without_wall(two));
  }
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    WARN("mpirun not found: the MPI interrupt is not checked");
    return;
  }
  // Under mpirun -n 2 both ranks poll at each refresh: the stop travels
  // with the exchange and rank 0 writes the one-process bytes.
  const fs::path ranks = dir / "out_mpi";
  std::vector<std::string> mpi_args = args;
  mpi_args.insert(mpi_args.end(), {ranks.string(), "--jobs", "1"});
  const int status = mpirun_twinserve(mpi_args, "20", dir / "mpi.log");
  INFO(read_text(dir / "mpi.log"));
  CHECK(status != 0);
  CHECK_THAT(read_text(dir / "mpi.log"), Catch::Contains("interrupted by signal 2"));
  const fs::path one = dir / ("out_j1_" + std::to_string(SIGINT));
  CHECK(read_text(one / "requests.csv") == read_text(ranks / "requests.csv"));
  CHECK(read_text(one / "steps.csv") == read_text(ranks / "steps.csv"));
  CHECK(summary_without_wall(one) == summary_without_wall(ranks));
}

TEST_CASE("simulate: a stop after the last arrival's refresh stops MPI ranks as it stops one process") {
  // Before: across ranks the replicas ran to their end at once after the
  // last arrival, never asking the stop hook; a signal then was ignored
  // (exit 0, summary not marked) where one process stopped at the next period.
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) TWIN_SKIP("mpirun not found");
  const fs::path dir = twin::test::temp_dir("interrupt_drain");
  const fs::path trace = steady_trace(dir, 400, 0.05, 256, 128);
  const std::vector<std::string> args{"simulate", "--trace", trace.string(), "--model", "llama-3.1-8b", "--hw",
                                      "h100-80gb", "--replicas", "4", "--router-refresh-s", "0.5", "--quiet",
                                      "--overwrite", "--jobs", "1", "--out"};
  // 40 refreshes route the 400 arrivals; the 42nd poll is in the drain.
  const fs::path one = dir / "one";
  std::vector<std::string> all = args;
  all.push_back(one.string());
  CHECK(run_interrupted(all, "42,2", dir / "log.txt") == 130);
  const std::string requests = read_text(one / "requests.csv");
  CHECK(std::count(requests.begin(), requests.end(), '\n') == 401);  // every request arrived
  CHECK(requests.find(",interrupted,") != std::string::npos);
  const fs::path ranks = dir / "ranks";
  std::vector<std::string> mpi_args = args;
  mpi_args.push_back(ranks.string());
  const int status = mpirun_twinserve(mpi_args, "42,2", dir / "mpi.log");
  INFO(read_text(dir / "mpi.log"));
  CHECK(status != 0);
  CHECK_THAT(read_text(dir / "mpi.log"), Catch::Contains("interrupted by signal 2"));
  CHECK(nlohmann::json::parse(read_text(ranks / "summary.json")).at("config").at("interrupted") == true);
  CHECK(read_text(one / "requests.csv") == read_text(ranks / "requests.csv"));
  CHECK(read_text(one / "steps.csv") == read_text(ranks / "steps.csv"));
  CHECK(summary_without_wall(one) == summary_without_wall(ranks));
}

TEST_CASE("sweep: an interrupt writes the rows finished, says so and exits 128 + signal") {
  // Before: no handler; the sweep ended with nothing written.
  const fs::path dir = twin::test::temp_dir("interrupt_sweep");
  const fs::path trace = steady_trace(dir, 40, 0.5, 128, 32);
  const fs::path out = dir / "out";
  fs::remove_all(out);
  // One thread: the first point runs, the second poll (before the second
  // point) raises the signal, so no further point starts.
  for (const int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    const int code = run_interrupted({"sweep", "--trace", trace.string(), "--vary", "max_num_batched_tokens=512,1024,2048", "--jobs", "1",
                                      "--quiet", "--overwrite", "--out", out.string()},
                                     "2," + std::to_string(sig), dir / "log.txt");
    const std::string log = read_text(dir / "log.txt");
    INFO(log);
    CHECK(code == 128 + sig);
    CHECK_THAT(log, Catch::Contains("interrupted by signal " + std::to_string(sig) +
                                    ": 1 of 3 points finished; sweep.csv has those rows"));
    check_whole_lines(out / "sweep.csv");
    const std::string csv = read_text(out / "sweep.csv");
    CHECK(std::count(csv.begin(), csv.end(), '\n') == 2);  // the header and the first point
    CHECK(csv.find("\n512,") != std::string::npos);
  }
}

TEST_CASE("calibrate: an interrupt stops the timing, writes no partial profile, exits 128 + signal") {
  // Before: no handler; the signal ended the process with no message.
  const fs::path dir = twin::test::temp_dir("interrupt_calibrate");
  const fs::path out = dir / "tiny.json";
  fs::remove(out);
  const int code = run_interrupted({"calibrate", "--model", "tiny", "--quick", "--rounds", "1", "--quiet", "--out",
                                    out.string()},
                                   "3", dir / "log.txt");
  const std::string log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 130);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: calibration stopped in round 1/1 after 2 of "));
  CHECK_THAT(log, Catch::Contains("no profile written"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("calibrate --measured and validate --measured: an interrupt keeps what is whole, marked, exits 130") {
  const fs::path dir = twin::test::temp_dir("interrupt_measured");
  const fs::path trace = dir / "t.jsonl";
  REQUIRE(run_twinserve("trace generate --requests 60 --rate 8 --prompt uniform:64:512 --output uniform:8:64 --seed 5 '" +
                        trace.string() + "'").exit_code == 0);
  const std::vector<std::string> deploy{"--model", "llama-3.1-8b", "--hw", "h100-80gb", "--num-gpu-blocks-override", "2000"};
  fs::remove_all(dir / "sim");
  {
    std::vector<std::string> args{"simulate", "--trace", trace.string(), "--no-progress", "--out", (dir / "sim").string()};
    args.insert(args.end(), deploy.begin(), deploy.end());
    REQUIRE(wait_exit(spawn_twinserve(args, dir / "log.txt")) == 0);
  }
  // calibrate --measured: the 5th simulation of the search asks for the
  // stop; the base's and four more were run. The best so far is written.
  const fs::path fitted = dir / "fitted.json";
  fs::remove(fitted);
  std::vector<std::string> cal{"calibrate", "--measured", (dir / "sim").string(), "--trace", trace.string(),
                               "--fit-params", "compute_scale,memory_scale", "--max-evals", "24", "--quiet",
                               "--out", fitted.string()};
  cal.insert(cal.end(), deploy.begin(), deploy.end());
  int code = run_interrupted(cal, "5", dir / "log.txt");
  std::string log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 130);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: the fit stopped after 5 simulations"));
  const auto profile = nlohmann::json::parse(read_text(fitted));
  CHECK(profile.at("fitted_from").at("interrupted") == true);
  CHECK(profile.at("fitted_from").at("evaluations") == 5);
  CHECK(profile.at("fitted_from").at("parameters").at(0).at("ci95").is_null());
  // validate --measured: the prediction stops at its 50th turn; predicted/
  // is whole and marked, and no report compares half a prediction.
  const fs::path val = dir / "val";
  fs::remove_all(val);
  std::vector<std::string> vargs{"validate", "--measured", (dir / "sim" / "requests.csv").string(), "--trace",
                                 trace.string(), "--out", val.string()};
  vargs.insert(vargs.end(), deploy.begin(), deploy.end());
  code = run_interrupted(vargs, "50", dir / "log.txt");
  log = read_text(dir / "log.txt");
  INFO(log);
  CHECK(code == 130);
  CHECK_THAT(log, Catch::Contains("interrupted by signal 2: the prediction stopped"));
  const auto summary = nlohmann::json::parse(read_text(val / "predicted" / "summary.json"));
  CHECK(summary.at("config").at("interrupted") == true);
  check_whole_lines(val / "predicted" / "requests.csv");
  CHECK(read_text(val / "predicted" / "requests.csv").find(",interrupted,") != std::string::npos);
  CHECK_FALSE(fs::exists(val / "report.json"));
}
