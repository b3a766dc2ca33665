#pragma once
// A fixed team of threads that run one task together per call: run(fn)
// calls fn(w) for every member w in [0, size), member 0 on the calling
// thread, and returns when all have finished. Member w is always the same
// thread, so state a member owns stays on one thread; the threads live as
// long as the team, so a run of thousands of short windows (the windowed
// simulator's refresh periods) starts none per window.
#include <barrier>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace twin {

class ThreadTeam {
 public:
  static constexpr int kMaxSize = 1024;
  explicit ThreadTeam(int size);  // UsageError outside [1, kMaxSize]
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }
  // An exception escaping fn(w) is rethrown once all members are done (the
  // lowest member's, when several throw).
  void run(const std::function<void(int)>& fn);

 private:
  void member(int w);
  void call(int w);

  int size_;
  std::barrier<> start_, done_;
  const std::function<void(int)>* task_ = nullptr;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

}  // namespace twin
