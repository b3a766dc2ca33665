#include "sim/thread_team.hpp"

#include <string>

#include "base/error.hpp"

namespace twin {

ThreadTeam::ThreadTeam(int size)
    : size_(size), start_(size >= 1 && size <= kMaxSize ? size : 1), done_(size >= 1 && size <= kMaxSize ? size : 1) {
  if (size < 1 || size > kMaxSize) {
    throw UsageError("thread team: size must be from 1 to " + std::to_string(kMaxSize) + ", got " + std::to_string(size));
  }
  errors_.resize(static_cast<std::size_t>(size));
  threads_.reserve(static_cast<std::size_t>(size - 1));
  for (int w = 1; w < size; ++w) threads_.emplace_back([this, w] { member(w); });
}

ThreadTeam::~ThreadTeam() {
  if (threads_.empty()) return;
  stopping_ = true;
  start_.arrive_and_wait();
  for (std::thread& t : threads_) t.join();
}

void ThreadTeam::call(int w) {
  try {
    (*task_)(w);
  } catch (...) {
    errors_[static_cast<std::size_t>(w)] = std::current_exception();
  }
}

void ThreadTeam::member(int w) {
  for (;;) {
    start_.arrive_and_wait();  // the barrier orders task_ and stopping_ before the reads
    if (stopping_) return;
    call(w);
    done_.arrive_and_wait();
  }
}

void ThreadTeam::run(const std::function<void(int)>& fn) {
  task_ = &fn;
  for (std::exception_ptr& e : errors_) e = nullptr;
  if (!threads_.empty()) start_.arrive_and_wait();
  call(0);
  if (!threads_.empty()) done_.arrive_and_wait();
  task_ = nullptr;
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace twin
