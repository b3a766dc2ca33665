#pragma once
// Keeps the input being run where a crash handler can reach it: on a fatal
// signal (or a sanitizer report) the input is written to a file and its
// number printed, then the process dies as it would have. Everything the
// handler touches is prepared before the input runs, so it only calls
// async-signal-safe functions.
#include <cstdint>
#include <string>

namespace twin::fuzz {

// Installs the handlers once; crash files go to `dir` as
// crash-READER-seedS-inputI.
void install_crash_guard(const std::string& dir);
// The input about to run (kept by pointer: it must outlive the run).
void arm_crash_guard(const std::string& reader, std::uint64_t seed, std::int64_t index, const std::string& input);
void disarm_crash_guard();

// For the watchdog (watchdog.hpp), from another thread: a number that
// changes with every input armed (0 while none is), and the armed input
// saved to the crash dir as PREFIX-READER-seedS-inputI. The save returns the
// file's path and the input's number, or an empty path if none is armed.
std::uint64_t armed_serial();
std::string save_armed_input(const char* prefix, std::int64_t& index);

// The guard's own test: arms an input, then dies of `kind` ("segv"; "ub",
// a UBSan report, in a sanitizer build). Never returns.
[[noreturn]] void crash_for_guard_test(const std::string& kind);

}  // namespace twin::fuzz
