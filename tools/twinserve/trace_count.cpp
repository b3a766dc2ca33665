#include "tools/twinserve/trace_count.hpp"

#include <exception>
#include <filesystem>
#include <system_error>

namespace twin::cli {

TraceCount::TraceCount(const std::string& path, const TraceReadOptions& options, std::int64_t max_requests,
                       bool wanted) {
  // A regular file only: a second reader of a pipe (--trace /dev/stdin)
  // would take the run's rows.
  std::error_code ec;
  if (!wanted || !std::filesystem::is_regular_file(path, ec)) return;
  thread_ = std::thread([this, path, options, max_requests] {
    try {
      TraceReader reader(path, options);
      Request request;
      std::int64_t n = 0;
      while (!stop_.load(std::memory_order_relaxed) && (max_requests <= 0 || n < max_requests) && reader.next(request)) {
        ++n;
      }
      if (!stop_.load(std::memory_order_relaxed)) total_.store(n, std::memory_order_relaxed);
    } catch (const std::exception&) {
      // The run's own reader meets the same error and reports it.
    }
  });
}

void TraceCount::wait() {
  if (thread_.joinable()) thread_.join();
}

TraceCount::~TraceCount() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

}  // namespace twin::cli
