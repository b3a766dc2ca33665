#include "engine/runtime/wait_until.hpp"

#include <thread>

namespace twin {

void wait_until(std::chrono::steady_clock::time_point until) {
  using Clock = std::chrono::steady_clock;
  // Longer than a late wake-up, short enough that spinning costs little.
  constexpr auto kSpin = std::chrono::milliseconds(2);
  if (until - Clock::now() > kSpin) std::this_thread::sleep_until(until - kSpin);
  while (Clock::now() < until) std::this_thread::yield();
}

}  // namespace twin
