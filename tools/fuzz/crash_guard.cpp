#include "tools/fuzz/crash_guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace twin::fuzz {
namespace {

std::string crash_dir = ".";
char crash_path[4096] = {0};
const std::string* current = nullptr;
// What the watchdog needs besides the above; guarded by `armed` (the crash
// handlers run on the input's own thread and read without it).
std::mutex armed;
std::uint64_t serial = 0;
std::string current_reader;
std::uint64_t current_seed = 0;
std::int64_t current_index = 0;

void write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w <= 0) return;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

void save_current() {
  if (!current || crash_path[0] == '\0') return;
  const int fd = ::open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    write_all(fd, current->data(), current->size());
    ::close(fd);
  }
  const char* msg = "\ntwin_fuzz: crashed on the input saved as ";
  write_all(2, msg, std::strlen(msg));
  write_all(2, crash_path, std::strlen(crash_path));
  write_all(2, "\n", 1);
}

#if !defined(__SANITIZE_ADDRESS__)
std::vector<char> alt_stack;

void on_signal(int sig) {
  save_current();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
#endif

}  // namespace

void install_crash_guard(const std::string& dir) {
  crash_dir = dir.empty() ? "." : dir;
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer prints its report and then calls this before exiting.
  __sanitizer_set_death_callback(save_current);
  // GCC links UBSan as a runtime of its own (libubsan) with its own copy of
  // that hook, and a UBSan report ends the process through it: set it there
  // too, or a UBSan finding leaves no input behind.
  if (void* ubsan = ::dlopen("libubsan.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    using SetDeathCallback = void (*)(void (*)());
    void* symbol = ::dlsym(ubsan, "__sanitizer_set_death_callback");
    SetDeathCallback set = nullptr;
    static_assert(sizeof set == sizeof symbol);
    std::memcpy(&set, &symbol, sizeof set);
    if (set && set != &__sanitizer_set_death_callback) set(save_current);
  }
#else
  // A stack overflow (deep nesting) runs the handler on a stack of its own.
  alt_stack.resize(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt_stack.data();
  ss.ss_size = alt_stack.size();
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

void arm_crash_guard(const std::string& reader, std::uint64_t seed, std::int64_t index, const std::string& input) {
  const std::lock_guard<std::mutex> lock(armed);
  std::snprintf(crash_path, sizeof crash_path, "%s/crash-%s-seed%llu-input%lld", crash_dir.c_str(), reader.c_str(),
                static_cast<unsigned long long>(seed), static_cast<long long>(index));
  current = &input;
  ++serial;
  if (current_reader != reader) current_reader = reader;
  current_seed = seed;
  current_index = index;
}

void disarm_crash_guard() {
  const std::lock_guard<std::mutex> lock(armed);
  current = nullptr;
}

std::uint64_t armed_serial() {
  const std::lock_guard<std::mutex> lock(armed);
  return current ? serial : 0;
}

std::string save_armed_input(const char* prefix, std::int64_t& index) {
  const std::lock_guard<std::mutex> lock(armed);
  if (!current) return {};
  const std::string path = crash_dir + "/" + prefix + "-" + current_reader + "-seed" + std::to_string(current_seed) +
                           "-input" + std::to_string(current_index);
  index = current_index;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f) {
    std::fwrite(current->data(), 1, current->size(), f);
    std::fclose(f);
  }
  return path;
}

void crash_for_guard_test(const std::string& kind) {
  static const std::string input = "an input that crashes";
  arm_crash_guard("crash-test", 0, 0, input);
  if (kind == "segv") ::raise(SIGSEGV);
#if defined(__SANITIZE_ADDRESS__)
  if (kind == "ub") {
    // Signed overflow: a UBSan report (-fno-sanitize-recover ends the run).
    volatile int big = 2147483647;
    volatile int one = 1;
    const int sum = big + one;
    std::fprintf(stderr, "twin_fuzz: the overflow was not caught (%d)\n", sum);
    std::exit(3);
  }
#endif
  std::fprintf(stderr, "twin_fuzz: no crash self-test '%s' in this build (segv; ub with the sanitizers)\n", kind.c_str());
  std::exit(2);
}

}  // namespace twin::fuzz
