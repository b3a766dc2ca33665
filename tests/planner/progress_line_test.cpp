// The long commands' progress line: what it says for a known and an
// unknown total (the line is drawn only on a terminal; its text is pure).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include "tools/twinserve/progress_line.hpp"

namespace twin::cli {

TEST_CASE("progress line: done of total, share, rate and the time left") {
  CHECK(progress_text("plan", 3, 12, "candidates", 6.0) == "  plan: 3/12 candidates (25%), 0.5/s, ETA 0:18");
  CHECK(progress_text("sweep", 12, 12, "points", 3.0) == "  sweep: 12/12 points (100%), 4/s, ETA 0:00");
  CHECK(progress_text("plan", 0, 5, "candidates", 0.0) == "  plan: 0/5 candidates (0%), 0/s, ETA -");
  CHECK(progress_text("plan", 1, 7201, "candidates", 1.0) == "  plan: 1/7201 candidates (0%), 1/s, ETA 2:00:00");
}

TEST_CASE("progress line: an unknown total shows the count, the rate and the time so far") {
  CHECK(progress_text("run", 40, 0, "requests ended", 80.0) == "  run: 40 requests ended, 0.5/s, 1:20 elapsed");
}

TEST_CASE("progress line: nothing reaches stderr when it is not a terminal") {
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(::dup2(::fileno(capture), STDERR_FILENO) >= 0);  // a file: not a terminal
  {
    ProgressLine line("plan", "candidates", true);
    for (int i = 1; i <= 3; ++i) line.update(i, 3);
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  CHECK(std::ftell(capture) == 0);
  std::fclose(capture);
}

}  // namespace twin::cli
