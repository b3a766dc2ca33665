#include "tools/fuzz/fuzz_target.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/error.hpp"

namespace twin::fuzz {

Scratch::Scratch() {
  // Every input is written to a file and read back: on a disk-backed /tmp
  // that is ten times slower than in memory, so /dev/shm comes first.
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp && *tmp ? tmp : "/tmp";
  std::error_code ec;
  if (!(tmp && *tmp) && std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) {
    base = "/dev/shm";
  }
  std::string pattern = base + "/twin_fuzz.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) throw Error("twin_fuzz: cannot create a scratch folder from " + pattern);
  dir_ = buffer.data();
}

Scratch::~Scratch() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string Scratch::write(const std::string& name, const std::string& data) const {
  const std::string p = path(name);
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) throw Error("twin_fuzz: cannot write " + p);
  const bool ok = std::fwrite(data.data(), 1, data.size(), f) == data.size();
  if (std::fclose(f) != 0 || !ok) throw Error("twin_fuzz: cannot write " + p);
  return p;
}

FuzzTarget file_target(const char* name, const char* summary, std::vector<std::string> (*seeds)(),
                       void (*run)(const std::string&, const Scratch&), const char* input_file,
                       std::size_t max_bytes) {
  FuzzTarget t{name, summary, max_bytes, seeds, run, nullptr};
  t.input_file = input_file;
  return t;
}

bool names_origin(const FuzzTarget& target, const std::string& message, const Scratch& scratch) {
  if (target.names_origin) return target.names_origin(message, scratch);
  return target.input_file && message.find(scratch.path(target.input_file)) != std::string::npos;
}

const std::vector<FuzzTarget>& all_targets() {
  static const std::vector<FuzzTarget> targets = [] {
    std::vector<FuzzTarget> all;
    for (auto* family : {trace_targets, json_targets, text_targets, binary_targets, serve_targets}) {
      for (FuzzTarget& t : family()) all.push_back(std::move(t));
    }
    return all;
  }();
  return targets;
}

const FuzzTarget* find_target(const std::string& name) {
  for (const FuzzTarget& t : all_targets()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace twin::fuzz
