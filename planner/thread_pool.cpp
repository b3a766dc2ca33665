#include "planner/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace twin {

int default_jobs() { return std::max(1u, std::thread::hardware_concurrency()); }

void parallel_for(const std::vector<std::size_t>& indices, int jobs, const std::function<void(std::size_t)>& fn,
                  const ProgressFn& on_done) {
  if (jobs <= 0) jobs = default_jobs();
  const int threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(jobs), indices.size()));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex, done_mutex;
  std::size_t done = 0;
  auto worker = [&] {
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= indices.size() || failed.load()) return;
      try {
        fn(indices[k]);
        if (on_done) {
          std::lock_guard<std::mutex> lock(done_mutex);
          on_done(++done, indices.size());
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace twin
