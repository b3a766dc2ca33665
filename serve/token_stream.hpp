#pragma once
// What one HTTP request waits on: the serving loop's thread publishes its
// request's verdict (taken in or rejected), its output text one piece per
// token, and its end; the HTTP thread that owns the connection reads them.
// One mutex and condition variable per request, so streams do not contend.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/records.hpp"

namespace twin {

struct StreamEnd {
  Outcome outcome = Outcome::finished;
  std::string reason;         // the record's: "queue full", "cancelled", "interrupted", ...
  std::string finish_reason;  // OpenAI's: "length", "stop" (finished requests)
  std::string tail;           // text held back until the end (a possible stop string's start)
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;
  // The server's record of the request (requests.csv's id and times, ns on
  // the serving loop's clock), so a response can carry it: a client compares
  // its own timing with the server's for the same request.
  RequestId id = -1;
  Time arrival = kNoTime, first_token = kNoTime, finish = kNoTime;
};

// A copy of what the reader has not seen yet.
struct StreamNews {
  bool admitted = false;             // the core queued it (rejections end at once instead)
  std::vector<std::string> pieces;   // one per token, from the reader's position on
  bool ended = false;
  StreamEnd end;
};

class TokenStream {
 public:
  // ---- the serving loop's side ----
  void publish_admitted();
  void publish_piece(std::string piece);
  void publish_end(StreamEnd end);

  // ---- the HTTP side ----
  // Waits until there is news past `seen` pieces (or the verdict, when
  // `need_admitted` and not yet known) or the deadline; fills `news` with
  // what is new. True when there was news.
  bool wait(std::size_t seen, bool need_admitted, std::chrono::steady_clock::time_point deadline, StreamNews& news);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool admitted_ = false;
  std::vector<std::string> pieces_;
  bool ended_ = false;
  StreamEnd end_;
};

}  // namespace twin
