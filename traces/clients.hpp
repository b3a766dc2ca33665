#pragma once
// Clients as request sources (docs/simulate.md, "Clients"): a trace's rows
// sent as a benchmark client sends them, reacting to the requests that end.
//
// - Open loop (no client option): the trace's times, read as they are; this
//   file is not involved.
// - --max-concurrency N: at most N requests in flight, as vllm bench serve's
//   semaphore: a request goes out at the later of its time and the instant a
//   slot frees (in trace order), and arrives (TTFT counts from) then.
// - --request-rate inf: every trace time is 0 (vLLM's spelling): a burst, or
//   with --max-concurrency N a closed loop of N clients, each sending its
//   next request the instant its previous one ends.
// - sessions: the rows of one session (session_id >= 0) are the turns of a
//   chat, in trace order. Turn k+1 goes out a think time after turn k's last
//   token (the trace's gap between the two turns' times, or a fixed one), and
//   its prompt is the conversation so far, turn k's prompt and the output it
//   got, then the new user tokens, so the prefix cache sees what a chat
//   server sees. The answer's tokens are named as the request generated them
//   (Request::generated, engine/core/prefix_hash.hpp); the user tokens keep
//   the row's hash ids where the row lays them out as the conversation does.
//
// Memory: the trace is read as far ahead as the next due request needs (with
// sessions and --request-rate inf, up to a finished session's next row: the
// whole trace in the worst case), and a session keeps its last prompt's ids.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/core/record_stream.hpp"

namespace twin {

struct ClientOptions {
  std::int32_t max_concurrency = 0;  // > 0: at most this many requests in flight
  bool at_once = false;              // every trace time is 0 (--request-rate inf)
  bool sessions = false;             // closed-loop turns of the trace's sessions
  std::optional<Time> think_time;    // sessions: fixed think time; unset: the trace's gaps
  bool any() const { return max_concurrency > 0 || at_once || sessions; }
};

// Turns whose trace prompt is shorter than the conversation so far (the
// trace's prompts do not repeat the history): each is taken as the new user
// message alone.
struct ClientReport {
  std::int64_t short_turn_prompts = 0;
};

// The trace's rows as clients send them: open loop (at their times, or all
// at 0) or sessions.
class TraceClients final : public ClientSource {
 public:
  TraceClients(RequestSource& trace, const ClientOptions& options);
  Time next_due() override;
  bool next(Request& out) override;
  void on_ended(const RequestRecord& record, Time now) override;
  const ClientReport& report() const { return report_; }

 private:
  struct Conversation {
    Request last;                      // the turn last sent, its prompt as sent
    std::int32_t last_output = 0;      // the tokens it got (once ended)
    std::int32_t trace_prompt = 0;     // its row's prompt and output lengths
    std::int32_t trace_output = 0;
    Time trace_arrival = 0;            // its row's time
    Time ended_at = 0;                 // when it ended (once ended)
    bool in_flight = false;
    bool awaiting = false;             // ended, its next row not read yet
    std::deque<Request> waiting;       // later rows read, earlier turn not ended
  };
  struct Ready {
    Time due = 0;
    std::uint64_t seq = 0;  // ties in the order they became ready
    Request request;
  };

  void read_ahead();
  bool wants_more_rows() const;
  void take_row(Request& row);
  Request first_turn(Request row);
  void make_ready(Conversation& conv, Request row, Time ended_at);
  Request next_turn(Conversation& conv, Request row);
  Time open_due() const;

  RequestSource& trace_;
  ClientOptions options_;
  bool trace_done_ = false;
  Time last_read_ = 0;           // the trace time of the last row read
  Time clock_ = 0;               // the latest end or send
  std::deque<Request> open_;     // rows due at their trace time (or at once), in trace order
  std::vector<Ready> ready_;     // session turns due after their think time (a min-heap)
  std::uint64_t ready_seq_ = 0;
  std::int64_t awaiting_ = 0;    // sessions ended, their next row not read yet
  std::unordered_map<std::int64_t, Conversation> sessions_;
  std::unordered_map<RequestId, std::int64_t> session_of_;  // a turn in flight -> its session
  ClientReport report_;
};

// At most N of the inner source's requests in flight: one goes out at the
// later of its due time and the instant a slot frees, in the inner order.
class ConcurrencyLimit final : public ClientSource {
 public:
  ConcurrencyLimit(ClientSource& inner, std::int32_t max_concurrency);
  Time next_due() override;
  bool next(Request& out) override;
  void on_ended(const RequestRecord& record, Time now) override;

 private:
  ClientSource& inner_;
  std::int32_t max_;
  std::int32_t outstanding_ = 0;
  Time clock_ = 0;  // the latest end or send
};

// The clients the options ask for over a trace source; source() is the
// trace itself when they ask for none.
class Clients {
 public:
  Clients(RequestSource& trace, const ClientOptions& options);
  RequestSource& source();
  ClientReport report() const;

 private:
  RequestSource& trace_;
  std::unique_ptr<TraceClients> clients_;
  std::unique_ptr<ConcurrencyLimit> limit_;
};

// Checks a think time in seconds (UsageError naming `flag`).
Time think_time_from_seconds(double seconds, const char* flag);

}  // namespace twin
