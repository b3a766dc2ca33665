#include "serve/request_inbox.hpp"

#include <algorithm>
#include <utility>

namespace twin {

Time RequestInbox::now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - origin_).count();
}

RequestId RequestInbox::submit(Request request, RequestExtras extras) {
  RequestId id = -1;
  {
    const std::lock_guard lock(mutex_);
    if (closed_) return -1;
    id = next_id_++;
    // Stamped under the lock, so stamps rise in queue order.
    last_stamp_ = std::max(last_stamp_, now());
    request.id = id;
    request.arrival = last_stamp_;
    queue_.push_back(Entry{std::move(request), std::move(extras)});
    news_ = true;
  }
  cv_.notify_all();
  return id;
}

void RequestInbox::cancel(RequestId id) {
  {
    const std::lock_guard lock(mutex_);
    const auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return e.request.id == id; });
    if (queued != queue_.end()) {
      queued->request.cancel_time = queued->request.arrival;
    } else {
      cancels_.push_back(id);
    }
    news_ = true;
  }
  cv_.notify_all();
}

void RequestInbox::close() {
  {
    const std::lock_guard lock(mutex_);
    closed_ = true;
    news_ = true;
  }
  cv_.notify_all();
}

bool RequestInbox::is_closed() const {
  const std::lock_guard lock(mutex_);
  return closed_;
}

bool RequestInbox::next(Request& out) {
  const std::lock_guard lock(mutex_);
  if (queue_.empty()) return false;
  Entry& e = queue_.front();
  out = std::move(e.request);
  handed_out_.emplace(out.id, std::move(e.extras));
  queue_.pop_front();
  return true;
}

bool RequestInbox::closed() {
  const std::lock_guard lock(mutex_);
  return closed_ && queue_.empty();
}

bool RequestInbox::next_cancel(RequestId& id) {
  const std::lock_guard lock(mutex_);
  if (cancels_.empty()) return false;
  id = cancels_.front();
  cancels_.pop_front();
  return true;
}

RequestExtras RequestInbox::take_extras(RequestId id) {
  const std::lock_guard lock(mutex_);
  const auto it = handed_out_.find(id);
  if (it == handed_out_.end()) return {};
  RequestExtras extras = std::move(it->second);
  handed_out_.erase(it);
  return extras;
}

std::vector<std::shared_ptr<TokenStream>> RequestInbox::drain_unserved() {
  const std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<TokenStream>> out;
  for (Entry& e : queue_) out.push_back(std::move(e.extras.stream));
  for (auto& [id, extras] : handed_out_) out.push_back(std::move(extras.stream));
  queue_.clear();
  handed_out_.clear();
  closed_ = true;
  return out;
}

bool RequestInbox::wait_for_news(Steady::time_point until) {
  std::unique_lock lock(mutex_);
  const bool got = cv_.wait_until(lock, until, [&] { return news_; });
  news_ = false;
  return got;
}

bool RequestInbox::take_news() {
  const std::lock_guard lock(mutex_);
  const bool got = news_;
  news_ = false;
  return got;
}

void RequestInbox::wake() {
  {
    const std::lock_guard lock(mutex_);
    news_ = true;
  }
  cv_.notify_all();
}

}  // namespace twin
