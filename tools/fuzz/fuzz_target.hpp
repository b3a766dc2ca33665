#pragma once
// One fuzz target: a reader or loader of outside input, with valid seed
// inputs to mutate from. `run` feeds one input to the reader exactly as the
// program would (through a file where the program reads a file) and lets
// whatever it throws escape; the driver sorts the outcome: accepted, refused
// with twin::Error (the contract), or anything else (a bug).
#include <cstddef>
#include <string>
#include <vector>

namespace twin::fuzz {

// Where file-reading targets put their input: one folder per driver,
// removed when it ends.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // A path in the folder named `name`.
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `data` to path(name) and returns that path.
  std::string write(const std::string& name, const std::string& data) const;

 private:
  std::string dir_;
};

struct FuzzTarget {
  std::string name;     // --reader NAME
  std::string summary;  // one line for --list
  std::size_t max_bytes = 1 << 16;  // mutated inputs are cut to this
  std::vector<std::string> (*seeds)() = nullptr;
  void (*run)(const std::string& input, const Scratch& scratch) = nullptr;
  // Whether an error message says where the problem is (the file, line or
  // key; for a flag's value, the flag or the part of it). Unset: the
  // message must name the scratch file `input_file` that run() reads.
  bool (*names_origin)(const std::string& message, const Scratch& scratch) = nullptr;
  const char* input_file = nullptr;
};

// A target whose run() reads its input from the scratch file `input_file`:
// an error names its origin when it names that file.
FuzzTarget file_target(const char* name, const char* summary, std::vector<std::string> (*seeds)(),
                       void (*run)(const std::string&, const Scratch&), const char* input_file,
                       std::size_t max_bytes = 1 << 16);

// Whether `message`, an error `target` refused an input with, names its origin.
bool names_origin(const FuzzTarget& target, const std::string& message, const Scratch& scratch);

// Every target, in a fixed order (targets_*.cpp each add theirs).
const std::vector<FuzzTarget>& all_targets();
const FuzzTarget* find_target(const std::string& name);

// Per-family lists, concatenated by all_targets().
std::vector<FuzzTarget> trace_targets();
std::vector<FuzzTarget> json_targets();
std::vector<FuzzTarget> text_targets();
std::vector<FuzzTarget> binary_targets();
std::vector<FuzzTarget> serve_targets();

}  // namespace twin::fuzz
