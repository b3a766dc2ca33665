#pragma once
// A fixed pool of worker threads for data-parallel loops. parallel_for splits
// [0, count) into contiguous ranges, one per thread; the caller runs one of
// them. Callers give each index work that does not depend on how indices
// are grouped, so results are the same for any thread count.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace twin {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (the caller counts as one)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) on disjoint ranges covering [0, count); returns
  // when all are done. Runs inline when count is small or the pool is size 1.
  // An exception thrown by a body is rethrown here (the first one).
  void parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& body);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
  std::int64_t count_ = 0;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace twin
