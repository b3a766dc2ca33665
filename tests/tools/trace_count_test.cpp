// TraceCount: simulate's progress total, counted beside the run. The count
// is waited for by joining its thread, never by sleeping.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tools/twinserve/trace_count.hpp"

namespace twin {
namespace {

std::string jsonl(const std::string& name, int rows) {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_tools_count_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream f(path, std::ios::binary);
  for (int i = 0; i < rows; ++i) {
    f << "{\"id\":" << i << ",\"arrival_s\":" << i * 0.5 << ",\"prompt_len\":16,\"output_len\":4}\n";
  }
  return path.string();
}

std::int64_t counted(const std::string& path, std::int64_t max_requests, bool wanted) {
  cli::TraceCount count(path, TraceReadOptions{}, max_requests, wanted);
  count.wait();
  return count.total();
}

}  // namespace

TEST_CASE("TraceCount counts a trace's requests, at most max_requests, and only when wanted") {
  const std::string path = jsonl("count.jsonl", 37);
  CHECK(counted(path, 0, true) == 37);
  CHECK(counted(path, 10, true) == 10);
  CHECK(counted(path, 100, true) == 37);
  CHECK(counted(path, 0, false) == 0);
}

TEST_CASE("TraceCount leaves a pipe and a bad trace uncounted (the run reads the pipe and reports the error)") {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_tools_count_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "trace.fifo").string();
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  {
    cli::TraceCount count(fifo, TraceReadOptions{}, 0, true);  // would block reading the pipe if it tried
    count.wait();
    CHECK(count.total() == 0);
  }
  ::unlink(fifo.c_str());
  std::ofstream(dir / "bad.jsonl") << "{\"id\":0,\"arrival_s\":0,\"prompt_len\":16,\"output_len\":4}\nnot json\n";
  cli::TraceCount bad((dir / "bad.jsonl").string(), TraceReadOptions{}, 0, true);
  bad.wait();  // the thread ended on the error
  CHECK(bad.total() == 0);
}

}  // namespace twin
