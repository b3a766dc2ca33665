#include "serve/serve_clock.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "engine/runtime/wait_until.hpp"

namespace twin {
namespace {

constexpr auto kStopPoll = std::chrono::milliseconds(50);  // how often a wait looks at the shutdown flag
constexpr auto kSpin = std::chrono::milliseconds(2);        // the end of a wait spins: a sleep wakes late

}  // namespace

ServeClock::ServeClock(RequestInbox& inbox, LiveStepBackend& backend, ServeMetrics& metrics,
                       const ByteTokenizer& tokenizer, ServeClockOptions options)
    : inbox_(inbox), backend_(backend), metrics_(metrics), tokenizer_(tokenizer), options_(std::move(options)) {}

ServeClock::Steady::time_point ServeClock::at(Time t) const {
  return t == kNoTime ? Steady::time_point::max() : inbox_.origin() + std::chrono::nanoseconds(t);
}

bool ServeClock::stop_requested() {
  if (stopped_) return true;
  const auto now = Steady::now();
  if (!signalled_at_ && options_.signalled && options_.signalled()) {
    signalled_at_ = now;
    inbox_.close();
  }
  if (signalled_at_ && now - *signalled_at_ >= options_.grace) stopped_ = true;
  return stopped_;
}

bool ServeClock::wait_until(Time t) {
  const Steady::time_point until = at(t);
  while (until - Steady::now() > kStopPoll) {
    if (stop_requested()) return false;
    std::this_thread::sleep_for(kStopPoll);
  }
  twin::wait_until(until);
  return !stop_requested();
}

bool ServeClock::wait_for_input(Time t) {
  const Steady::time_point until = at(t);
  while (true) {
    if (stop_requested()) return false;
    const auto now = Steady::now();
    if (now >= until) return true;
    if (until - now > kSpin) {
      // Sliced so a shutdown (and its grace running out) is seen.
      const auto slice = std::min(until - kSpin, now + kStopPoll);
      if (inbox_.wait_for_news(slice)) return false;
    } else {
      if (inbox_.take_news()) return false;
      std::this_thread::yield();
    }
  }
}

Time ServeClock::read(Time now) const { return std::max(now, inbox_.now()); }

void ServeClock::admit(Request& request, const Replica& replica) {
  Live live{inbox_.take_extras(request.id), Detokenizer(tokenizer_), {}, 0, 0, 0, 0, {}, false};
  for (const std::string& s : live.extras.stop) live.hold = std::max(live.hold, s.size() - 1);
  if (!replica.admission_reason(request)) {
    backend_.admit(request.id, live.extras);
    if (live.extras.stream) live.extras.stream->publish_admitted();
  }
  live_.insert_or_assign(request.id, std::move(live));
}

void ServeClock::take_token(Live& live, TokenId token, RequestId id, StepResult& result) {
  bool stop = !live.extras.ignore_eos && options_.eos_token >= 0 && token == options_.eos_token;
  if (!stop) {
    live.text += live.detok.push(token);
    // The earliest stop string in the text not yet released (one may start
    // in the held-back bytes).
    std::size_t cut = std::string::npos;
    const std::size_t from = live.released;
    for (const std::string& s : live.extras.stop) cut = std::min(cut, live.text.find(s, from));
    if (cut != std::string::npos) {
      live.text.resize(cut);
      stop = true;
    }
  }
  if (stop) {
    live.stop_hit = true;
    result.stopped.push_back(id);
  }
  // Release what can no longer be the start of a stop string, never
  // splitting a UTF-8 character.
  std::size_t limit = live.stop_hit ? live.text.size() : live.text.size() - std::min(live.hold, live.text.size());
  while (limit > live.released && limit < live.text.size() &&
         (static_cast<unsigned char>(live.text[limit]) & 0xC0) == 0x80) {
    --limit;
  }
  limit = std::max(limit, live.released);
  live.pending.push_back(live.text.substr(live.released, limit - live.released));
  live.released = limit;
}

StepTiming ServeClock::run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                                StepResult& result) {
  result.stopped.clear();  // the loop recycles results; a pricing backend leaves it as it was
  const StepTiming timing = backend_.run_step(index, plan, replica, now, result);
  for (const ScheduledSeq& q : plan.seqs) {
    if (!q.samples) continue;
    const auto it = live_.find(q.id);
    if (it == live_.end() || it->second.stop_hit) continue;
    Live& live = it->second;
    take_token(live, backend_.token(q.id, live.generated), q.id, result);
    ++live.generated;
  }
  snapshot(replica);
  return timing;
}

void ServeClock::on_completed(std::int32_t, const StepPlan& plan, const StepResult&, const Replica& replica) {
  std::int64_t tokens = 0;
  for (const ScheduledSeq& q : plan.seqs) {
    if (!q.samples || !replica.seq(q.id)) continue;  // one that ended here publishes from its record
    const auto it = live_.find(q.id);
    if (it == live_.end()) continue;
    Live& live = it->second;
    while (!live.pending.empty()) {
      if (live.extras.stream) live.extras.stream->publish_piece(std::move(live.pending.front()));
      live.pending.pop_front();
      ++live.published;
      ++tokens;
    }
  }
  if (tokens > 0) metrics_.add_generation_tokens(tokens);
  snapshot(replica);
}

void ServeClock::on_ended(const RequestRecord& record) {
  StreamEnd end;
  end.outcome = record.outcome;
  end.reason = record.reason;
  end.prompt_tokens = record.prompt_tokens;
  end.completion_tokens = record.output_tokens;
  end.cached_tokens = record.cached_prompt_tokens;
  end.id = record.id;
  end.arrival = record.arrival;
  end.first_token = record.first_token;
  end.finish = record.finish;
  const auto it = live_.find(record.id);
  if (it == live_.end()) {
    metrics_.on_request_end(record, "");
    return;
  }
  Live& live = it->second;
  std::int64_t tokens = 0;
  // The tokens the core counted; a step it dropped (cancelled inside it) is not.
  while (!live.pending.empty() && live.published < record.output_tokens) {
    if (live.extras.stream) live.extras.stream->publish_piece(std::move(live.pending.front()));
    live.pending.pop_front();
    ++live.published;
    ++tokens;
  }
  if (tokens > 0) metrics_.add_generation_tokens(tokens);
  if (record.outcome == Outcome::finished) {
    end.finish_reason = live.stop_hit ? "stop" : "length";
    if (!live.stop_hit) live.text += live.detok.flush();
    end.tail = live.text.substr(std::min(live.released, live.text.size()));
  }
  metrics_.on_request_end(record, end.finish_reason);
  if (live.extras.stream) live.extras.stream->publish_end(std::move(end));
  backend_.forget(record.id);
  live_.erase(it);
}

void ServeClock::snapshot(const Replica& replica) {
  ServeGauges g;
  g.running = replica.num_running();
  g.waiting = replica.num_waiting();
  g.kv_usage = replica.kv_usage();
  const KvCacheStats& kv = replica.kv_stats();
  const std::int64_t block = replica.config().kv.block_size;
  g.prefix_queries = kv.queried_blocks * block;
  g.prefix_hits = kv.hit_blocks * block;
  metrics_.set_gauges(g);
}

}  // namespace twin
