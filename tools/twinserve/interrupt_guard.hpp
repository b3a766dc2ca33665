#pragma once
// Ctrl-C (SIGINT) and SIGTERM during a command that serves on the engine:
// the first signal only sets a flag the serving loop polls between steps, so
// the run stops admitting, ends what is in flight and still writes its
// records; a second signal takes the default action (the process exits at
// once), for a user who does not want to wait for the step in flight.
namespace twin::cli {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous ones
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal received, 0 if none yet.
  static int received();
};

}  // namespace twin::cli
