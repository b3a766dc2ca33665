// twin_fuzz: the deterministic mutation fuzzer over every reader and loader
// (docs/fuzz.md). `make fuzz` runs 10^6 inputs per reader; ctest runs a few
// thousand per reader and replays the saved regressions.
//
//   twin_fuzz --reader NAME|all --iterations N --seed S
//   twin_fuzz --reader NAME --seed S --dump I        input I of that run, to stdout
//   twin_fuzz --reader NAME --replay FILE_OR_DIR     run saved inputs (regressions, crashes);
//                                                    a file named refuse-* must be refused, accept-* accepted
//   twin_fuzz --list
//   --timeout-s T (default 10): an input running longer is saved as a hang
//
// Exit status: 0 when no input failed (and, with --strict, every error named
// its origin and stayed short), 1 otherwise, 2 for a usage error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/fuzz/alloc_guard.hpp"
#include "tools/fuzz/crash_guard.hpp"
#include "tools/fuzz/driver.hpp"
#include "tools/fuzz/fuzz_target.hpp"
#include "tools/fuzz/watchdog.hpp"

namespace fs = std::filesystem;
using namespace twin::fuzz;

namespace {

// An input as one printable line, cut to about `max` characters.
std::string printable(const std::string& s, std::size_t max = 160) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (out.size() >= max) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> files_under(const fs::path& p) {
  std::vector<fs::path> files;
  if (fs::is_directory(p)) {
    for (const auto& e : fs::directory_iterator(p)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::exists(p)) {
    files.push_back(p);
  }
  return files;
}

void print_findings(const char* what, const std::vector<Finding>& list, const FuzzTarget& t, std::uint64_t seed) {
  for (const Finding& f : list) {
    std::printf("  %s, input %lld: %s\n", what, static_cast<long long>(f.index), printable(f.message, 400).c_str());
    std::printf("    input: %s\n", printable(f.input).c_str());
    std::printf("    again: twin_fuzz --reader %s --seed %llu --dump %lld\n", t.name.c_str(),
                static_cast<unsigned long long>(seed), static_cast<long long>(f.index));
  }
}

int fuzz(const FuzzTarget& t, const DriverOptions& options, bool strict, const Scratch& scratch) {
  const auto start = std::chrono::steady_clock::now();
  const DriverReport r = run_driver(t, options, scratch);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s seed %llu: %lld inputs, %lld accepted, %lld refused, %lld failed; %lld errors without origin, "
              "%lld over %zu bytes\n",
              t.name.c_str(), static_cast<unsigned long long>(options.seed), static_cast<long long>(r.inputs),
              static_cast<long long>(r.accepted), static_cast<long long>(r.refused), static_cast<long long>(r.failed),
              static_cast<long long>(r.without_origin), static_cast<long long>(r.long_messages), kMaxMessageBytes);
  // Wall time is printed for people; nothing depends on it.
  std::printf("  %.0f inputs/s\n", seconds > 0 ? static_cast<double>(r.inputs) / seconds : 0.0);
  if (leaked(r)) {
    std::printf("  LEAKED over the run: %lld file descriptors, %lld memory mappings\n",
                static_cast<long long>(r.fds_gained), static_cast<long long>(r.mappings_gained));
  }
  print_findings("FAILED", r.failures, t, options.seed);
  print_findings("seed refused", r.bad_seeds, t, options.seed);
  print_findings("no origin", r.no_origin, t, options.seed);
  print_findings("too long", r.too_long, t, options.seed);
  std::fflush(stdout);
  const bool bad = r.failed > 0 || r.seeds_refused > 0 || leaked(r) ||
                   (strict && (r.without_origin > 0 || r.long_messages > 0));
  return bad ? 1 : 0;
}

int replay(const FuzzTarget& t, const std::string& path, bool strict, const Scratch& scratch) {
  const std::vector<fs::path> files = files_under(path);
  if (files.empty()) {
    std::fprintf(stderr, "twin_fuzz: no inputs at %s\n", path.c_str());
    return 2;
  }
  int status = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string input = read_file(files[i]);
    arm_crash_guard(t.name, 0, static_cast<std::int64_t>(i), input);
    const Outcome out = run_one(t, input, scratch);
    disarm_crash_guard();
    const char* verdict = out.verdict == Verdict::accepted ? "accepted"
                          : out.verdict == Verdict::refused ? "refused"
                                                            : "FAILED";
    // A saved input may say what must become of it: refuse-* must be
    // refused, accept-* accepted (an input once wrongly accepted, or wrongly
    // refused, stays fixed).
    const std::string name = files[i].filename().string();
    const bool wrong_verdict = (name.rfind("refuse", 0) == 0 && out.verdict != Verdict::refused) ||
                               (name.rfind("accept", 0) == 0 && out.verdict != Verdict::accepted);
    const bool bad = out.verdict == Verdict::failed || wrong_verdict ||
                     (strict && out.verdict == Verdict::refused &&
                      (!out.names_origin || out.message.size() > kMaxMessageBytes));
    std::printf("%s %s: %s%s%s\n", bad ? "BAD" : "ok ", files[i].filename().c_str(), verdict,
                out.message.empty() ? "" : ": ", printable(out.message, 300).c_str());
    if (bad) status = 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twin_fuzz: deterministic mutation fuzzing of twinserve's readers and loaders"};
  std::string reader;
  DriverOptions options;
  std::string replay_path, corpus_dir, crash_dir = ".";
  long long dump = -1;
  std::size_t max_alloc_mb = 512;
  double timeout_s = 10;
  bool list = false, strict = false, hang_test = false;
  app.add_option("--reader", reader, "Target name (see --list), or 'all'");
  app.add_option("--iterations", options.iterations, "Mutated inputs per reader (after the seeds)")
      ->check(CLI::Range(0LL, 1LL << 40));
  app.add_option("--seed", options.seed, "Seed of the mutations: same seed, same inputs");
  app.add_option("--corpus", corpus_dir, "A folder of extra seed inputs for the reader");
  app.add_option("--replay", replay_path, "Run the inputs in this file or folder and report each");
  app.add_option("--dump", dump, "Write input I of the run to stdout and exit")->check(CLI::Range(0LL, 1LL << 40));
  app.add_option("--crash-dir", crash_dir, "Where a crashing input is saved");
  app.add_option("--max-alloc-mb", max_alloc_mb, "One allocation larger than this fails the input (0: no cap)");
  app.add_option("--examples", options.examples, "Examples printed of each kind of finding");
  app.add_option("--timeout-s", timeout_s,
                 "One input running longer than this is a hang: saved to --crash-dir as timeout-*, exit 1 (0: no limit)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--hang-self-test", hang_test, "Run an input that never ends (the watchdog's test)")->group("");
  std::string crash_test;
  app.add_option("--crash-self-test", crash_test, "Run an input that crashes: segv, or ub (the crash guard's test)")
      ->group("");
  app.add_flag("--strict", strict, "Also fail on an error without its origin or over 1000 bytes");
  app.add_flag("--list", list, "List the targets");
  CLI11_PARSE(app, argc, argv);

  if (hang_test) {
    install_crash_guard(crash_dir);
    start_watchdog(timeout_s);
    hang_for_watchdog_test();
  }
  if (!crash_test.empty()) {
    install_crash_guard(crash_dir);
    crash_for_guard_test(crash_test);
  }
  if (list || reader.empty()) {
    for (const FuzzTarget& t : all_targets()) std::printf("%-20s %s\n", t.name.c_str(), t.summary.c_str());
    return list ? 0 : 2;
  }
  std::vector<const FuzzTarget*> targets;
  if (reader == "all") {
    for (const FuzzTarget& t : all_targets()) targets.push_back(&t);
  } else if (const FuzzTarget* t = find_target(reader)) {
    targets.push_back(t);
  } else {
    std::fprintf(stderr, "twin_fuzz: unknown reader '%s' (--list names them)\n", reader.c_str());
    return 2;
  }
  if (!corpus_dir.empty()) {
    for (const fs::path& p : files_under(corpus_dir)) options.extra_seeds.push_back(read_file(p));
  }
  if (dump >= 0) {
    const std::string input = input_at(*targets.front(), options, dump);
    std::fwrite(input.data(), 1, input.size(), stdout);
    return 0;
  }

  install_crash_guard(crash_dir);
  start_watchdog(timeout_s);
  set_allocation_cap(max_alloc_mb << 20);
  const Scratch scratch;
  int status = 0;
  for (const FuzzTarget* t : targets) {
    const int s = replay_path.empty() ? fuzz(*t, options, strict, scratch) : replay(*t, replay_path, strict, scratch);
    status = std::max(status, s);
  }
  return status;
}
