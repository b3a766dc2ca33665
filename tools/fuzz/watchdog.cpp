#include "tools/fuzz/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tools/fuzz/crash_guard.hpp"

namespace twin::fuzz {

void start_watchdog(double seconds) {
  if (!(seconds > 0)) return;
  std::thread([seconds] {
    using Clock = std::chrono::steady_clock;
    const auto limit = std::chrono::duration<double>(seconds);
    // Polls a few times a second: an input is seen as running from the
    // first poll that finds it, so it is cut after limit to limit + 1 poll.
    const auto poll = std::chrono::duration<double>(std::min(0.25, seconds / 4));
    std::uint64_t seen = 0;
    Clock::time_point since = Clock::now();
    for (;;) {
      std::this_thread::sleep_for(poll);
      const std::uint64_t now_armed = armed_serial();
      if (now_armed == 0 || now_armed != seen) {
        seen = now_armed;
        since = Clock::now();
        continue;
      }
      if (Clock::now() - since < limit) continue;
      std::int64_t index = 0;
      const std::string path = save_armed_input("timeout", index);
      if (path.empty()) continue;  // it ended just now
      std::fprintf(stderr, "\ntwin_fuzz: input %lld ran over the --timeout-s limit of %g s (a hang?); saved as %s\n",
                   static_cast<long long>(index), seconds, path.c_str());
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }).detach();
}

void hang_for_watchdog_test() {
  static const std::string input = "an input that never ends";
  arm_crash_guard("watchdog-test", 0, 0, input);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace twin::fuzz
