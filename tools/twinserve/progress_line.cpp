#include "tools/twinserve/progress_line.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace twin::cli {
namespace {

std::string clock_text(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

std::string progress_text(const std::string& label, std::int64_t done, std::int64_t total, const std::string& unit,
                          double elapsed_s) {
  char buf[256];
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
  if (total > 0) {
    const double pct = 100.0 * static_cast<double>(done) / static_cast<double>(total);
    std::string eta = "-";
    if (rate > 0 && done < total) eta = clock_text(static_cast<double>(total - done) / rate);
    if (done >= total) eta = "0:00";
    std::snprintf(buf, sizeof buf, "  %s: %lld/%lld %s (%.0f%%), %.3g/s, ETA %s", label.c_str(),
                  static_cast<long long>(done), static_cast<long long>(total), unit.c_str(), pct, rate, eta.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "  %s: %lld %s, %.3g/s, %s elapsed", label.c_str(), static_cast<long long>(done),
                  unit.c_str(), rate, clock_text(elapsed_s).c_str());
  }
  return buf;
}

bool progress_line_shown(bool wanted) { return wanted && isatty(STDERR_FILENO); }

ProgressLine::ProgressLine(std::string label, std::string unit, bool wanted)
    : label_(std::move(label)), unit_(std::move(unit)), shown_(progress_line_shown(wanted)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(std::int64_t done, std::int64_t total, const std::string& note) {
  if (!shown_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  // Nothing in the first half second: a rate over a few milliseconds means
  // nothing, and work that ends sooner needs no line.
  if (now - start_ < std::chrono::milliseconds(500)) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(200) && !(total > 0 && done >= total)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // One terminal row at most (a wrapped line would not be rewritten by
  // '\r'): the note only where it fits.
  std::string text = progress_text(label_, done, total, unit_, elapsed);
  if (!note.empty() && text.size() + 2 + note.size() <= 79) text += ", " + note;
  if (text.size() > 79) text.resize(79);
  std::fprintf(stderr, "\r%-79s", text.c_str());
  std::fflush(stderr);
}

void ProgressLine::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!drawn_) return;
  std::fprintf(stderr, "\r%79s\r", "");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace twin::cli
