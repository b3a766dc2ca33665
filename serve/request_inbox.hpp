#pragma once
// Where HTTP threads hand requests to the serving loop, and how the loop
// learns of them: a thread-safe queue read as the core's LiveRequestSource
// (engine/core/record_stream.hpp). Each request is stamped with its arrival
// on the loop's clock (ns since `origin`) when it is submitted, so a request
// sent during a step is queued as of its true arrival. A client that goes
// away cancels: a request not yet handed to the loop gets a cancel time of
// its arrival (the core ends it "cancelled" when it plans), one handed out
// becomes a cancel the loop applies at its next instant.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/record_stream.hpp"
#include "engine/core/request.hpp"
#include "serve/token_stream.hpp"

namespace twin {

// What a request carries beside the core's Request: its own sampling and
// stop rules, and the stream its tokens go to.
struct RequestExtras {
  float temperature = 1.0f;
  std::int32_t top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::vector<std::string> stop;  // stop strings (matched on the output text)
  bool ignore_eos = false;
  std::shared_ptr<TokenStream> stream;
};

class RequestInbox final : public LiveRequestSource {
 public:
  using Steady = std::chrono::steady_clock;
  explicit RequestInbox(Steady::time_point origin) : origin_(origin) {}

  // Stamps, numbers and queues a request; returns its id, or -1 once the
  // inbox is closed (the server is shutting down).
  RequestId submit(Request request, RequestExtras extras);
  void cancel(RequestId id);
  // Stops admitting; requests already queued are still handed out.
  void close();
  bool is_closed() const;

  // ---- the serving loop's side ----
  bool next(Request& out) override;
  bool closed() override;
  bool next_cancel(RequestId& id) override;
  // A handed-out request's extras (once; an empty set if unknown).
  RequestExtras take_extras(RequestId id);
  // Blocks until news (a submit, a cancel, the close, wake()) or `until`;
  // true when there was news (it is then consumed).
  bool wait_for_news(Steady::time_point until);
  bool take_news();
  void wake();

  // After the loop has stopped: the streams of requests it never took in
  // (still queued, or handed out and not admitted), emptied from the inbox.
  std::vector<std::shared_ptr<TokenStream>> drain_unserved();

  Steady::time_point origin() const { return origin_; }
  Time now() const;  // ns since the origin

 private:
  struct Entry {
    Request request;
    RequestExtras extras;
  };
  const Steady::time_point origin_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;
  std::deque<RequestId> cancels_;
  std::unordered_map<RequestId, RequestExtras> handed_out_;
  bool closed_ = false;
  bool news_ = false;
  RequestId next_id_ = 0;
  Time last_stamp_ = 0;
};

}  // namespace twin
