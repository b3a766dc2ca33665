#pragma once
// The one progress line of the long commands (plan, sweep, run, calibrate):
// "  plan: 12/27 candidates (44%), 0.8/s, ETA 0:19" rewritten in place on
// stderr, at most five times a second, only when stderr is a terminal and
// the user did not ask for quiet; cleared when the work ends. Pipes and logs
// get nothing, so outputs stay byte-stable.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace twin::cli {

// The line for `done` of `total` (0: unknown) `unit` after `elapsed_s`.
std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, const std::string& unit,
                          double elapsed_s);

class ProgressLine {
 public:
  // Shown only if `wanted` and stderr is a terminal.
  ProgressLine(std::string label, std::string unit, bool wanted);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Thread-safe; cheap when hidden or called more often than the line redraws.
  void update(std::int64_t done, std::int64_t total);
  void finish();  // clears the line (also on destruction)

 private:
  std::string label_, unit_;
  bool shown_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mutex_;
};

}  // namespace twin::cli
