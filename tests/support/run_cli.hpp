#pragma once
// Runs the built `twinserve` binary (env TWIN_BIN, set by ctest) the way a
// script would, capturing stdout (and stderr when merged) and the exit code.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace twin::test {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

inline CliRun run_twinserve(const std::string& args, bool merge_stderr = false) {
  const char* bin = std::getenv("TWIN_BIN");
  REQUIRE(bin != nullptr);  // ctest sets it; by hand: TWIN_BIN=build/tools/twinserve
  const std::string cmd = std::string("'") + bin + "' " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace twin::test
