#include "tools/twinserve/interrupt_guard.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace twin::cli {
namespace {

volatile std::sig_atomic_t g_received = 0;
long g_raise_after = 0;  // TWIN_TEST_RAISE_AFTER_POLLS
int g_raise_signal = SIGINT;
std::atomic<long> g_polls{0};
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
  g_polls = 0;
  g_raise_after = 0;
  if (const char* hook = std::getenv("TWIN_TEST_RAISE_AFTER_POLLS"); hook && *hook) {
    char* end = nullptr;
    g_raise_after = std::strtol(hook, &end, 10);
    g_raise_signal = end && *end == ',' ? static_cast<int>(std::strtol(end + 1, nullptr, 10)) : SIGINT;
  }
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

bool InterruptGuard::stop_requested() {
  if (g_raise_after > 0 && ++g_polls == g_raise_after) std::raise(g_raise_signal);
  return g_received != 0;
}

}  // namespace twin::cli
