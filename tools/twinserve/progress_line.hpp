#pragma once
// The one progress line of the long commands (simulate, plan, sweep, run,
// calibrate):
// "  plan: 12/27 candidates (44%), 0.8/s, ETA 0:19" rewritten in place on
// stderr, at most five times a second, from half a second after the work
// began (shorter work shows none), only when stderr is a terminal and
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

// Whether a line `wanted` would show: stderr is a terminal.
bool progress_line_shown(bool wanted);

class ProgressLine {
 public:
  // Shown only if `wanted` and stderr is a terminal.
  ProgressLine(std::string label, std::string unit, bool wanted);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Thread-safe; cheap when hidden or called more often than the line redraws.
  // `note` (e.g. simulate's virtual clock) follows the ETA where the line
  // has room for it (79 columns).
  void update(std::int64_t done, std::int64_t total, const std::string& note = "");
  void finish();  // clears the line (also on destruction)
  bool shown() const { return shown_; }  // wanted and stderr a terminal

 private:
  std::string label_, unit_;
  bool shown_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mutex_;
};

}  // namespace twin::cli
