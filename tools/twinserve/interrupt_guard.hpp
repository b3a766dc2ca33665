#pragma once
// Ctrl-C (SIGINT) and SIGTERM during a command that serves on the engine:
// the first signal only sets a flag the serving loop polls between steps, so
// the run stops admitting, ends what is in flight and still writes its
// records; a second signal takes the default action (the process exits at
// once), for a user who does not want to wait for the step in flight.
#include <string>

#include "base/error.hpp"

namespace twin::cli {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous ones
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal received, 0 if none yet.
  static int received();

  // The stop hook every long command polls. For tests, the environment
  // variable TWIN_TEST_RAISE_AFTER_POLLS=N[,SIG] makes the Nth poll raise
  // SIG (default SIGINT) through the real handler: an interrupt at a known
  // point of a run, without timing.
  static bool stop_requested();
};

// What a command throws once a signal has stopped it and what it had is
// written: main prints "interrupted by signal S: <what>" and exits 128 + S
// (130 for Ctrl-C, 143 for SIGTERM), as a shell reports a process a signal
// ended.
struct Interrupted : Error {
  explicit Interrupted(const std::string& what)
      : Error("interrupted by signal " + std::to_string(InterruptGuard::received()) + ": " + what),
        signal(InterruptGuard::received()) {}
  int signal;
};

}  // namespace twin::cli
