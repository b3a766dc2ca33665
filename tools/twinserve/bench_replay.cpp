#include "tools/twinserve/bench_replay.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.hpp"

namespace twin::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Text prompts: one common English word per prompt token (a word is about a
// token to most tokenizers; the server's usage count says what it was).
constexpr const char* kWords[] = {
    "the",   "of",   "and",  "to",    "in",    "is",   "that", "for",  "it",    "as",    "was",   "with", "be",
    "by",    "on",   "not",  "he",    "this",  "are",  "or",   "his",  "from",  "at",    "which", "but",  "have",
    "an",    "had",  "they", "you",   "were",  "their", "one", "all",  "we",    "can",   "her",   "has",  "there",
    "been",  "if",   "more", "when",  "will",  "would", "who", "so",   "no",    "time",  "people", "year", "way",
    "day",   "man",  "thing", "woman", "life", "child", "world", "school", "state", "family", "student", "group"};
constexpr std::size_t kNumWords = sizeof kWords / sizeof kWords[0];

std::string prompt_text(const std::vector<TokenId>& tokens) {
  std::string text;
  text.reserve(tokens.size() * 5);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) text.push_back(' ');
    text += kWords[static_cast<std::size_t>(tokens[i]) % kNumWords];
  }
  return text;
}

// A job queue with a bound: the dispatcher hands trace indices to the
// workers in trace order.
class JobQueue {
 public:
  void push(std::size_t i) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(i);
    }
    ready_.notify_one();
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }
  bool pop(std::size_t& i) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (jobs_.empty()) return false;
    i = jobs_.front();
    jobs_.pop_front();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::size_t> jobs_;
  bool closed_ = false;
};

// A request's record and vLLM-format entry from its stream. The record's
// timeline is the trace's: the first timestamp is the bench's start, and
// each request arrives when it was sent; `ended` is the bench's clock when
// the stream ended (a failed one's finish).
void record_stream(const Request& req, const StreamResult& s, Time first_arrival, Time ended, RequestRecord& rec,
                   VllmRequestEntry& entry, std::optional<TtftPair>& ttft) {
  rec.id = req.id;
  rec.replica = 0;
  rec.arrival = first_arrival + s.sent;
  rec.prompt_tokens = s.prompt_tokens.value_or(req.prompt_len);
  entry.input_len = rec.prompt_tokens;
  entry.start_time_s = to_seconds(rec.arrival);
  const auto on_line = [&](Time t) { return first_arrival + t; };
  if (!s.error.empty()) {
    rec.outcome = s.refused ? Outcome::rejected : Outcome::aborted;
    rec.reason = s.error;
    rec.output_tokens = static_cast<std::int32_t>(s.token_chunks.size());
    if (!s.token_chunks.empty()) rec.first_token = on_line(s.token_chunks.front());
    rec.finish = std::max(rec.arrival, on_line(ended));
    entry.error = s.error;
    entry.latency_s = 0;
    return;
  }
  const auto chunks = static_cast<std::int32_t>(s.token_chunks.size());
  rec.outcome = Outcome::finished;
  rec.output_tokens = std::max(1, s.completion_tokens.value_or(chunks));
  rec.first_token = on_line(s.token_chunks.front());
  rec.finish = on_line(s.token_chunks.back());
  for (std::size_t k = 1; k < s.token_chunks.size(); ++k) {
    entry.itl_s.push_back(to_seconds(s.token_chunks[k] - s.token_chunks[k - 1]));
  }
  // One token per chunk: the gaps are the ITL; chunks of several tokens
  // leave them out (the counts would not match).
  if (chunks == rec.output_tokens) {
    for (std::size_t k = 1; k < s.token_chunks.size(); ++k) rec.itl.push_back(s.token_chunks[k] - s.token_chunks[k - 1]);
  }
  entry.output_len = rec.output_tokens;
  entry.ttft_s = to_seconds(s.token_chunks.front() - s.sent);
  ttft = TtftPair{s.token_chunks.front() - s.sent, s.server_ttft};
  entry.latency_s = to_seconds(s.token_chunks.back() - s.sent);
}

}  // namespace

bool is_chat(const std::string& endpoint) { return endpoint.find("chat/completions") != std::string::npos; }

std::string completion_body(const Request& r, const BenchOptions& o) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  if (is_chat(o.endpoint)) {
    j["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt_text(r.prompt_tokens)}}});
    j["max_completion_tokens"] = r.output_len;
  } else {
    if (o.prompt_format == "tokens") {
      j["prompt"] = r.prompt_tokens;
    } else {
      j["prompt"] = prompt_text(r.prompt_tokens);
    }
  }
  j["max_tokens"] = r.output_len;
  j["ignore_eos"] = true;  // the trace's output length, as vllm bench serve's random dataset does
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

BenchResult run_bench(std::vector<Request> trace, const BenchOptions& o) {
  const std::size_t n = trace.size();
  BenchResult result;
  result.records.resize(n);
  result.entries.resize(n);
  if (n == 0) return result;
  Time first_arrival = trace.front().arrival;
  for (const Request& r : trace) first_arrival = std::min(first_arrival, r.arrival);
  std::vector<std::string> bodies(n);
  for (std::size_t i = 0; i < n; ++i) bodies[i] = completion_body(trace[i], o);

  std::vector<std::optional<TtftPair>> ttfts(n);
  const std::size_t workers = std::min<std::size_t>(
      n, static_cast<std::size_t>(o.max_concurrency > 0 ? o.max_concurrency : std::max(1, o.connections)));
  // Set once the pool is up (starting 256 threads takes a while); the
  // workers read it only after the queue hands them a request.
  Clock::time_point t0 = Clock::now();
  const auto now = [&t0] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(); };
  std::atomic<bool> stopping{false};
  const auto stop = [&] {
    if (!stopping && o.stop && o.stop()) stopping = true;
    return stopping.load();
  };
  std::vector<Time> due(n);
  for (std::size_t i = 0; i < n; ++i) due[i] = o.asap ? 0 : trace[i].arrival - first_arrival;

  JobQueue queue;
  std::atomic<std::int64_t> ended{0};
  std::mutex lag_mutex;
  const auto work = [&] {
    CompletionClient client(o.url, o.endpoint, o.timeout_s);
    std::size_t i;
    while (queue.pop(i)) {
      const Request& req = trace[i];
      RequestRecord& rec = result.records[i];
      VllmRequestEntry& entry = result.entries[i];
      StreamResult s;
      if (stop()) {
        s.sent = now();
        s.error = "interrupted";
      } else {
        s = client.stream(bodies[i], now, stop);
      }
      if (o.max_concurrency <= 0 && s.sent - due[i] > 10 * kNsPerMs) {
        std::lock_guard lock(lag_mutex);
        ++result.late_sends;
        result.max_send_lag = std::max(result.max_send_lag, s.sent - due[i]);
      }
      record_stream(req, s, first_arrival, now(), rec, entry, ttfts[i]);
      const std::int64_t done = ++ended;
      if (o.progress) o.progress(done);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (std::size_t w = 0; w < workers; ++w) pool.emplace_back(work);

  // The dispatcher: each request at its timestamp on the bench's clock,
  // waking at least every 100 ms to see an interrupt.
  t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    while (!stop()) {
      const Time wait = due[i] - now();
      if (wait <= 0) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<Time>(wait, 100 * kNsPerMs)));
    }
    queue.push(i);  // after an interrupt the workers record it as interrupted
  }
  queue.close();
  for (std::thread& t : pool) t.join();
  result.interrupted = stopping.load();
  for (const auto& t : ttfts) {
    if (t) result.ttfts.push_back(*t);
  }
  Time last = 0;
  for (const RequestRecord& r : result.records) last = std::max(last, r.finish - first_arrival);
  result.wall = last;
  return result;
}

}  // namespace twin::cli
