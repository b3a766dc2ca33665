#include "tools/twinserve/interrupt_guard.hpp"

#include <csignal>

namespace twin::cli {
namespace {

volatile std::sig_atomic_t g_received = 0;
struct sigaction g_old_int, g_old_term;

// Only async-signal-safe calls here: a flag, then signal() and raise().
extern "C" void on_signal(int sig) {
  if (g_received != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_received = sig;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_received = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking wait returns to the loop
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int InterruptGuard::received() { return g_received; }

}  // namespace twin::cli
