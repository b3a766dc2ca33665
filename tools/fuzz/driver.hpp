#pragma once
// The fuzz loop: the target's seeds as they are, then `iterations` mutated
// inputs, each run in-process and sorted. The inputs depend on the seed
// alone (never on how earlier inputs fared), so `--seed S` reproduces a run
// input for input on any machine.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/fuzz/fuzz_target.hpp"

namespace twin::fuzz {

enum class Verdict {
  accepted,  // the reader took it
  refused,   // twin::Error: the contract for bad input
  failed,    // any other exception (std::out_of_range, bad_alloc, a broken round trip...)
};

struct Outcome {
  Verdict verdict = Verdict::accepted;
  std::string message;        // what() of the exception
  bool names_origin = true;   // refused: the message says where (file, line, key)
};

// Messages longer than this quote too much input to be read.
inline constexpr std::size_t kMaxMessageBytes = 1000;

Outcome run_one(const FuzzTarget& target, const std::string& input, const Scratch& scratch);

struct DriverOptions {
  std::uint64_t seed = 1;
  std::int64_t iterations = 10000;
  std::vector<std::string> extra_seeds;  // added to the target's own
  std::size_t examples = 3;              // examples kept of each kind of finding
};

struct Finding {
  std::int64_t index = 0;  // input number (seeds first)
  std::string message;
  std::string input;
};

struct DriverReport {
  std::int64_t inputs = 0, accepted = 0, refused = 0, failed = 0;
  std::int64_t without_origin = 0;  // refused with a message not naming where
  std::int64_t long_messages = 0;   // refused with a message over kMaxMessageBytes
  std::int64_t seeds_refused = 0;   // a seed the reader does not take: the harness is wrong
  std::vector<Finding> failures, no_origin, too_long, bad_seeds;
  // Open file descriptors and memory mappings gained over the run (Linux
  // /proc; 0 elsewhere): a reader that leaks either on a refused input
  // gains one per input.
  std::int64_t fds_gained = 0, mappings_gained = 0;
};

// What counts as a leak: any descriptor; mappings beyond the allocator's
// own slack (it maps and keeps arenas), which a leak per input soon passes.
bool leaked(const DriverReport& report);

// Input number `index` of a run (for --dump): seeds first, then mutations.
std::string input_at(const FuzzTarget& target, const DriverOptions& options, std::int64_t index);

DriverReport run_driver(const FuzzTarget& target, const DriverOptions& options, const Scratch& scratch);

}  // namespace twin::fuzz
