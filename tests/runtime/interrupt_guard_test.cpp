// The first SIGINT / SIGTERM under `run` only sets the flag its serving loop
// polls (DriveOptions::stop), so the process lives on to write its records;
// the handlers are restored when the guard goes. (The second signal's
// default action would end this test process, so it is not raised here.)
#include <catch2/catch.hpp>

#include <csignal>

#include "tools/twinserve/interrupt_guard.hpp"

using twin::cli::InterruptGuard;

TEST_CASE("an interrupt under the guard sets its flag instead of ending the process") {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  for (int sig : {SIGINT, SIGTERM}) {
    const InterruptGuard guard;
    CHECK(InterruptGuard::received() == 0);
    std::raise(sig);
    CHECK(InterruptGuard::received() == sig);
  }
  // The old handlers are back between guards, and a new guard starts clear.
  struct sigaction now {};
  sigaction(SIGINT, nullptr, &now);
  CHECK(now.sa_handler == before.sa_handler);
  const InterruptGuard again;
  CHECK(InterruptGuard::received() == 0);
}
