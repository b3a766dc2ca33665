#include "traces/clients.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "engine/core/prefix_hash.hpp"

namespace twin {
namespace {

// Tokens per hash id of a session whose rows carry none.
constexpr std::int32_t kSessionHashBlock = 16;
constexpr std::uint64_t kSessionIdSeed = 0x5457494E53455331ull;  // "TWINSES1"

// A hash id for trace block j of a row whose own ids do not name it: unique
// to the row, the same every run.
std::uint64_t own_hash_id(RequestId id, std::size_t j) {
  return hash_combine(hash_combine(kSessionIdSeed, static_cast<std::uint64_t>(id)), j);
}

std::size_t blocks_for(std::int64_t tokens, std::int32_t per_block) {
  return static_cast<std::size_t>((tokens + per_block - 1) / per_block);
}

bool later(const auto& a, const auto& b) { return a.due != b.due ? a.due > b.due : a.seq > b.seq; }

// A request due at `send` arrives then; its cancel time keeps its distance.
void send_at(Request& r, Time send) {
  if (r.cancel_time != kNoTime) r.cancel_time += send - r.arrival;
  r.arrival = send;
}

}  // namespace

Time think_time_from_seconds(double seconds, const char* flag) {
  if (!(seconds >= 0) || !(seconds <= 9.0e9)) {
    throw UsageError(std::string(flag) + " must be from 0 to 9e9 seconds");
  }
  return from_seconds(seconds);
}

TraceClients::TraceClients(RequestSource& trace, const ClientOptions& options) : trace_(trace), options_(options) {}

// Rows are read until nothing unread can be due before what is known. A
// turn is due no earlier than its row's time when think times are the
// trace's gaps and times are kept, so the trace's order bounds it; with
// every time at 0 or a fixed think time, a session that ended waits for
// its next row to be found.
bool TraceClients::wants_more_rows() const {
  if (awaiting_ > 0 && (options_.at_once || options_.think_time)) return true;
  if (options_.at_once) return open_.empty();
  Time best = open_.empty() ? kNoTime : open_.front().arrival;
  if (!ready_.empty() && (best == kNoTime || ready_.front().due < best)) best = ready_.front().due;
  return best == kNoTime || last_read_ <= best;
}

void TraceClients::read_ahead() {
  Request row;
  while (!trace_done_ && wants_more_rows()) {
    if (!trace_.next(row)) {
      trace_done_ = true;
      awaiting_ = 0;  // the sessions still waiting have ended
      break;
    }
    take_row(row);
  }
}

void TraceClients::take_row(Request& row) {
  last_read_ = row.arrival;
  if (!options_.sessions || row.session_id < 0) {
    open_.push_back(std::move(row));
    return;
  }
  const auto it = sessions_.find(row.session_id);
  if (it == sessions_.end()) {
    open_.push_back(first_turn(std::move(row)));
    return;
  }
  Conversation& conv = it->second;
  if (conv.in_flight || !conv.waiting.empty()) {
    conv.waiting.push_back(std::move(row));
    return;
  }
  if (conv.awaiting) {
    conv.awaiting = false;
    if (awaiting_ > 0) --awaiting_;
  }
  make_ready(conv, std::move(row), conv.ended_at);
}

// A session's first turn: its prompt named in full (ids of its own where the
// row has none), so every later turn can repeat it block for block.
Request TraceClients::first_turn(Request row) {
  if (!row.prompt_tokens.empty()) {
    throw UsageError("request " + std::to_string(row.id) + " (session " + std::to_string(row.session_id) +
                     "): --sessions names prompts by hash ids, and this trace's rows carry token ids");
  }
  if (row.hash_block_size <= 0 || row.hash_ids.empty()) {
    row.hash_ids.clear();
    row.hash_block_size = kSessionHashBlock;
  }
  const std::size_t blocks = blocks_for(row.prompt_len, row.hash_block_size);
  for (std::size_t j = row.hash_ids.size(); j < blocks; ++j) row.hash_ids.push_back(own_hash_id(row.id, j));
  Conversation& conv = sessions_[row.session_id];
  conv.last = row;
  conv.trace_prompt = row.prompt_len;
  conv.trace_output = row.output_len;
  conv.trace_arrival = row.arrival;
  conv.in_flight = true;  // queued, then sent
  return row;
}

// Turn k+1 of `conv`, its row `row`, due a think time after turn k ended
// (`ended_at`).
void TraceClients::make_ready(Conversation& conv, Request row, Time ended_at) {
  const Time think = options_.think_time ? *options_.think_time : std::max<Time>(0, row.arrival - conv.trace_arrival);
  if (think > std::numeric_limits<Time>::max() - ended_at) {
    throw Error("session " + std::to_string(row.session_id) + ": request " + std::to_string(row.id) +
                " would go out past the clock's range");
  }
  Request turn = next_turn(conv, std::move(row));
  conv.in_flight = true;
  ready_.push_back(Ready{ended_at + think, ready_seq_++, std::move(turn)});
  std::push_heap(ready_.begin(), ready_.end(), [](const Ready& a, const Ready& b) { return later(a, b); });
}

// The conversation so far (turn k's prompt, then the tokens it got), then
// the row's new user tokens: the row's prompt less turn k's row prompt and
// output, or the whole row prompt when it is shorter than those (a trace
// whose prompts do not repeat the history).
Request TraceClients::next_turn(Conversation& conv, Request row) {
  const Request& last = conv.last;
  const std::int32_t t = last.hash_block_size;
  const std::int64_t history = static_cast<std::int64_t>(last.prompt_len) + conv.last_output;
  const std::int64_t trace_history = static_cast<std::int64_t>(conv.trace_prompt) + conv.trace_output;
  std::int64_t user = row.prompt_len - trace_history;
  bool aligned = history == trace_history && row.hash_block_size == t;
  if (user < 0) {
    user = row.prompt_len;
    aligned = false;
    ++report_.short_turn_prompts;
  }
  const std::int64_t prompt = history + user;
  if (prompt > std::numeric_limits<std::int32_t>::max()) {
    throw Error("session " + std::to_string(row.session_id) + ": request " + std::to_string(row.id) +
                "'s prompt would hold more than 2^31 - 1 tokens");
  }
  Request turn;
  turn.id = row.id;
  turn.arrival = row.arrival;
  turn.cancel_time = row.cancel_time;
  turn.priority = row.priority;
  turn.session_id = row.session_id;
  turn.output_len = row.output_len;
  turn.prompt_len = static_cast<std::int32_t>(prompt);
  turn.hash_block_size = t;
  turn.hash_ids.assign(last.hash_ids.begin(),
                       last.hash_ids.begin() + static_cast<std::ptrdiff_t>(
                                                   std::min(last.hash_ids.size(), blocks_for(last.prompt_len, t))));
  const std::size_t blocks = blocks_for(prompt, t);
  for (std::size_t j = turn.hash_ids.size(); j < blocks; ++j) {
    turn.hash_ids.push_back(aligned && j < row.hash_ids.size() ? row.hash_ids[j] : own_hash_id(row.id, j));
  }
  turn.generated = last.generated;
  if (conv.last_output > 0) {
    turn.generated.push_back(GeneratedSpan{last.id, last.prompt_len, static_cast<std::int32_t>(history)});
  }
  conv.last = turn;
  conv.trace_prompt = row.prompt_len;
  conv.trace_output = row.output_len;
  conv.trace_arrival = row.arrival;
  return turn;
}

Time TraceClients::open_due() const {
  return options_.at_once ? clock_ : std::max(open_.front().arrival, clock_);
}

Time TraceClients::next_due() {
  read_ahead();
  Time due = open_.empty() ? kNoTime : open_due();
  if (!ready_.empty()) {
    const Time turn = std::max(ready_.front().due, clock_);
    if (due == kNoTime || turn <= due) due = turn;
  }
  return due;
}

bool TraceClients::next(Request& out) {
  read_ahead();
  const bool from_ready =
      !ready_.empty() && (open_.empty() || std::max(ready_.front().due, clock_) <= open_due());
  Time due;
  if (from_ready) {
    due = std::max(ready_.front().due, clock_);
    std::pop_heap(ready_.begin(), ready_.end(), [](const Ready& a, const Ready& b) { return later(a, b); });
    out = std::move(ready_.back().request);
    ready_.pop_back();
  } else if (!open_.empty()) {
    due = open_due();
    out = std::move(open_.front());
    open_.pop_front();
  } else {
    return false;
  }
  send_at(out, due);
  clock_ = std::max(clock_, due);
  if (options_.sessions && out.session_id >= 0) {
    const auto [it, fresh] = session_of_.emplace(out.id, out.session_id);
    if (!fresh) {
      throw Error("request id " + std::to_string(out.id) +
                  " is in flight twice: --sessions needs the trace's request ids to be unique");
    }
  }
  return true;
}

void TraceClients::on_ended(const RequestRecord& record, Time now) {
  clock_ = std::max(clock_, now);
  const auto it = session_of_.find(record.id);
  if (it == session_of_.end()) return;
  Conversation& conv = sessions_.at(it->second);
  session_of_.erase(it);
  conv.in_flight = false;
  conv.last_output = record.output_tokens;
  conv.ended_at = now;
  if (!conv.waiting.empty()) {
    Request row = std::move(conv.waiting.front());
    conv.waiting.pop_front();
    make_ready(conv, std::move(row), now);
  } else if (!trace_done_) {
    conv.awaiting = true;
    ++awaiting_;
  }
}

ConcurrencyLimit::ConcurrencyLimit(ClientSource& inner, std::int32_t max_concurrency)
    : inner_(inner), max_(max_concurrency) {
  if (max_ < 1) throw UsageError("--max-concurrency must be >= 1");
}

Time ConcurrencyLimit::next_due() {
  if (outstanding_ >= max_) return kNoTime;
  const Time due = inner_.next_due();
  return due == kNoTime ? kNoTime : std::max(due, clock_);
}

bool ConcurrencyLimit::next(Request& out) {
  if (outstanding_ >= max_ || !inner_.next(out)) return false;
  send_at(out, std::max(out.arrival, clock_));
  clock_ = out.arrival;
  ++outstanding_;
  return true;
}

void ConcurrencyLimit::on_ended(const RequestRecord& record, Time now) {
  inner_.on_ended(record, now);
  clock_ = std::max(clock_, now);
  --outstanding_;
}

Clients::Clients(RequestSource& trace, const ClientOptions& options) : trace_(trace) {
  if (!options.any()) return;
  clients_ = std::make_unique<TraceClients>(trace, options);
  if (options.max_concurrency > 0) limit_ = std::make_unique<ConcurrencyLimit>(*clients_, options.max_concurrency);
}

RequestSource& Clients::source() {
  if (limit_) return *limit_;
  if (clients_) return *clients_;
  return trace_;
}

ClientReport Clients::report() const { return clients_ ? clients_->report() : ClientReport{}; }

}  // namespace twin
