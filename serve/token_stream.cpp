#include "serve/token_stream.hpp"

#include <utility>

namespace twin {

void TokenStream::publish_admitted() {
  {
    const std::lock_guard lock(mutex_);
    admitted_ = true;
  }
  cv_.notify_all();
}

void TokenStream::publish_piece(std::string piece) {
  {
    const std::lock_guard lock(mutex_);
    pieces_.push_back(std::move(piece));
  }
  cv_.notify_all();
}

void TokenStream::publish_end(StreamEnd end) {
  {
    const std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = true;
    end_ = std::move(end);
  }
  cv_.notify_all();
}

bool TokenStream::wait(std::size_t seen, bool need_admitted, std::chrono::steady_clock::time_point deadline,
                       StreamNews& news) {
  std::unique_lock lock(mutex_);
  const auto has_news = [&] { return ended_ || pieces_.size() > seen || (need_admitted && admitted_); };
  const bool got = cv_.wait_until(lock, deadline, has_news);
  news.admitted = admitted_;
  news.pieces.assign(pieces_.begin() + static_cast<std::ptrdiff_t>(std::min(seen, pieces_.size())), pieces_.end());
  news.ended = ended_;
  if (ended_) news.end = end_;
  return got;
}

}  // namespace twin
