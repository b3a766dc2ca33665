#pragma once
// The ranges numeric and path flags are checked against, one helper per kind
// of range, shared by every subcommand. A value outside its range fails while
// the command line is parsed: "--threads: ..." and exit 2, before any file is
// read or memory allocated. Only values the user typed are checked, so a
// default such as -1 ("none") stays out of the user's reach.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>

namespace twin::cli {

inline constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();
inline constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

// An integer from lo to hi (both included).
CLI::Validator int_range(std::int64_t lo, std::int64_t hi);

// --max-model-len: an integer from lo to hi, or vLLM's "auto" (also -1):
// the largest the KV cache holds one request of (sim/cluster_config.hpp).
CLI::Validator max_model_len_value(std::int64_t lo, std::int64_t hi);

// A finite real number from lo to hi; the ends are included unless open.
// NaN and infinities are refused whatever the range.
CLI::Validator real_range(double lo, double hi, bool lo_open = false, bool hi_open = false);

// Worker threads: 0 (the default: one per hardware thread) up to
// kThreadsPerCore times the hardware's threads; more only adds contention
// and, in the thousands, exhausts the process table.
inline constexpr unsigned kThreadsPerCore = 4;
std::int64_t max_threads();
CLI::Validator thread_count();
// Threads that meet at every step of a run (simulate --jobs: each router
// refresh): 1 up to the hardware's threads, since one more than there are
// cores only waits on the others.
CLI::Validator core_thread_count();

// A path or name that must not be empty (`--out ''` would silently mean
// "write nothing" or the current folder).
CLI::Validator non_empty();

}  // namespace twin::cli
