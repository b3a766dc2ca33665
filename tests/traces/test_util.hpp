#pragma once
// Helpers shared by the trace tests.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "traces/trace_reader.hpp"

namespace twin::test {

inline std::string fixture(const std::string& name) {
  return std::string(TWIN_SOURCE_DIR) + "/tests/traces/fixtures/" + name;
}

// A unique scratch path under /tmp (removed by the caller's TempFile).
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& suffix) {
    static int counter = 0;
    path = "/tmp/twin_traces_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + suffix;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<Request> read_all(const std::string& path, const TraceReadOptions& o = {}) {
  TraceReader reader(path, o);
  std::vector<Request> out;
  Request r;
  while (reader.next(r)) out.push_back(r);
  return out;
}

}  // namespace twin::test
