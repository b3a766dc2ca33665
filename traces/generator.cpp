#include "traces/generator.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <queue>
#include <vector>

#include "base/error.hpp"
#include "traces/length_dist.hpp"
#include "traces/prng.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

namespace {
constexpr double kMaxSeconds = 9.0e9;  // int64 ns reach about 292 years
}  // namespace

void parse_shared_prefix(std::string_view spec, GeneratorOptions& o) {
  const std::size_t a = spec.find(':');
  const std::size_t b = a == spec.npos ? spec.npos : spec.find(':', a + 1);
  auto fail = [&] {
    return UsageError("--shared-prefix '" + excerpt(spec, 80) +
                      "': expected K:L:F (K system prompts of L tokens, L at most 16777216, used by a fraction F in [0,1])");
  };
  if (b == spec.npos) throw fail();
  std::string_view k = spec.substr(0, a), l = spec.substr(a + 1, b - a - 1), f = spec.substr(b + 1);
  auto ok = [](std::string_view t, auto& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size();
  };
  // L is bounded as a length spec is: each shared request carries L /
  // hash_block_size hash ids.
  if (!ok(k, o.prefix_count) || !ok(l, o.prefix_tokens) || !ok(f, o.prefix_fraction) || o.prefix_count < 1 ||
      o.prefix_tokens < 1 || o.prefix_tokens > kMaxSpecLength || !(o.prefix_fraction >= 0 && o.prefix_fraction <= 1))
    throw fail();
}

void parse_arrivals(std::string_view spec, GeneratorOptions& o) {
  if (spec == "poisson") {
    o.arrivals = ArrivalKind::poisson;
  } else if (spec == "gamma") {
    o.arrivals = ArrivalKind::gamma;
  } else if (spec == "constant") {
    o.arrivals = ArrivalKind::constant;
  } else if (spec == "burst") {
    o.arrivals = ArrivalKind::burst;
  } else if (spec.substr(0, 6) == "trace:" && spec.size() > 6) {
    o.arrivals = ArrivalKind::replay;
    o.replay_path = std::string(spec.substr(6));
  } else {
    throw UsageError("--arrivals '" + excerpt(spec, 80) + "': known: poisson, gamma, constant, burst, trace:PATH");
  }
}

namespace {

// Stream numbers: one PRNG per purpose (see Rng).
enum Stream : std::uint64_t { kArrivalStream = 1, kPromptStream, kOutputStream, kPrefixStream, kSessionStream };

struct Session {
  std::int64_t id = 0;
  std::int32_t turns_left = 0;
  std::int32_t prompt_len = 0;
  std::int32_t output_len = 0;
  std::vector<std::uint64_t> hash_ids;
};

struct PendingTurn {
  Time at;
  std::int64_t seq;  // breaks ties in creation order
  std::size_t slot;
  bool operator>(const PendingTurn& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

}  // namespace

struct TraceGenerator::Impl {
  GeneratorOptions o;
  Rng arrival_rng, prompt_rng, output_rng, prefix_rng, session_rng;
  LengthDist prompt, output;
  std::optional<LengthDist> turns, user_tokens;
  std::optional<TraceReader> replay;
  double clock_s = 0;       // arrival process time (seconds, as a double sum of gaps)
  bool started = false;
  Time duration_ns = 0;
  std::int64_t emitted = 0;
  std::uint64_t next_fresh_hash = 0;
  std::int64_t next_session = 0;
  std::optional<Time> next_start;  // next arrival of the process, drawn ahead
  bool arrivals_done = false;
  std::vector<Session> sessions;
  std::vector<std::size_t> free_slots;
  std::priority_queue<PendingTurn, std::vector<PendingTurn>, std::greater<>> pending;
  std::int64_t pending_seq = 0;
  Request replay_row;

  explicit Impl(const GeneratorOptions& opt)
      : o(opt),
        arrival_rng(opt.seed, kArrivalStream),
        prompt_rng(opt.seed, kPromptStream),
        output_rng(opt.seed, kOutputStream),
        prefix_rng(opt.seed, kPrefixStream),
        session_rng(opt.seed, kSessionStream),
        prompt(LengthDist::parse(opt.prompt, "--prompt")),
        output(LengthDist::parse(opt.output, "--output")) {
    if (o.max_requests < 0) throw UsageError("--requests must be >= 0");
    if (!(o.duration_s >= 0) || !(o.duration_s <= kMaxSeconds))
      throw UsageError("--duration-s must be from 0 to 9e9 seconds");
    if (o.max_requests == 0 && o.duration_s == 0 && o.arrivals != ArrivalKind::replay)
      throw UsageError("give --requests or --duration-s (or both) so the trace ends");
    if (o.arrivals == ArrivalKind::burst && o.max_requests == 0)
      throw UsageError("--arrivals burst needs --requests: every request arrives at 0, so --duration-s never ends it");
    if (o.arrivals != ArrivalKind::replay && o.arrivals != ArrivalKind::burst && !(o.rate > 0 && std::isfinite(o.rate)))
      throw UsageError("--rate must be a number > 0");
    if (o.arrivals == ArrivalKind::gamma && !(o.cv > 0 && std::isfinite(o.cv)))
      throw UsageError("--cv must be a number > 0");
    if (o.hash_block_size < 1) throw UsageError("--hash-block-size must be >= 1");
    if (o.prefix_count < 0 || o.prefix_tokens < 0 || o.prefix_tokens > kMaxSpecLength ||
        !(o.prefix_fraction >= 0 && o.prefix_fraction <= 1))
      throw UsageError("--shared-prefix: K >= 0, L from 0 to 16777216 and F in [0, 1]");
    if (!(o.think_time_s >= 0) || !(o.think_time_s <= kMaxSeconds))
      throw UsageError("--think-time-s must be from 0 to 9e9 seconds");
    if (o.max_context < 1) throw UsageError("--max-context must be >= 1");
    if (!o.session_turns.empty()) {
      turns = LengthDist::parse(o.session_turns, "--sessions");
      user_tokens = LengthDist::parse(o.session_user_tokens, "--session-user-tokens");
    }
    if (o.arrivals == ArrivalKind::replay) replay.emplace(o.replay_path);
    duration_ns = from_seconds(o.duration_s);
    // System prompt k's full blocks are ids k * blocks + b + 1; fresh ids follow.
    next_fresh_hash = static_cast<std::uint64_t>(o.prefix_count) *
                          static_cast<std::uint64_t>(o.prefix_tokens / o.hash_block_size) + 1;
  }

  bool uses_hash_ids() const { return (o.prefix_count > 0 && o.prefix_fraction > 0) || turns.has_value(); }

  // Seconds on the trace's clock (int64 ns): past about 292 years is an
  // error, never a wrapped time.
  [[noreturn]] void past_clock() const {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "request %lld would arrive past the clock's range (about 292 years); raise --rate or lower "
                  "--think-time-s",
                  static_cast<long long>(emitted));
    throw Error(buf);
  }
  Time clock_time(double seconds) const {
    if (!(seconds <= kMaxSeconds)) past_clock();
    return from_seconds(seconds);
  }

  // Next arrival time of the process, or nullopt when it has ended.
  std::optional<Time> draw_arrival() {
    if (o.arrivals == ArrivalKind::replay) {
      if (!replay->next(replay_row)) return std::nullopt;
      return replay_row.arrival;
    }
    if (started) {
      const double mean = 1.0 / o.rate;
      switch (o.arrivals) {
        case ArrivalKind::poisson:
          clock_s += arrival_rng.exponential(mean);
          break;
        case ArrivalKind::gamma: {
          // Gamma gaps with shape 1/cv^2 have mean `mean` and CV `cv`.
          const double shape = 1.0 / (o.cv * o.cv);
          clock_s += arrival_rng.gamma(shape, mean / shape);
          break;
        }
        case ArrivalKind::constant:
        case ArrivalKind::replay:
          clock_s += mean;
          break;
        case ArrivalKind::burst:
          break;  // every arrival at 0
      }
    }
    started = true;  // the first request arrives at 0
    return clock_time(clock_s);
  }

  void fresh_ids(std::vector<std::uint64_t>& ids, std::size_t count) {
    while (ids.size() < count) ids.push_back(next_fresh_hash++);
  }

  std::size_t blocks_for(std::int32_t tokens) const {
    return static_cast<std::size_t>((tokens + o.hash_block_size - 1) / o.hash_block_size);
  }

  // A new prompt: maybe a system prompt, then the request's own tokens.
  void first_prompt(Request& r) {
    const std::int32_t own = prompt.sample(prompt_rng);
    r.prompt_len = own;
    r.hash_ids.clear();
    if (o.prefix_count > 0 && o.prefix_fraction > 0 && prefix_rng.uniform() < o.prefix_fraction) {
      const auto k = prefix_rng.below(static_cast<std::uint64_t>(o.prefix_count));
      r.prompt_len = static_cast<std::int32_t>(std::min<std::int64_t>(
          static_cast<std::int64_t>(own) + o.prefix_tokens, std::numeric_limits<std::int32_t>::max()));
      // Only the system prompt's full blocks are shared: a partial last
      // block also holds the request's own tokens.
      const std::uint64_t shared = static_cast<std::uint64_t>(o.prefix_tokens / o.hash_block_size);
      for (std::uint64_t b = 0; b < shared; ++b) r.hash_ids.push_back(k * shared + b + 1);
    }
    if (uses_hash_ids()) {
      fresh_ids(r.hash_ids, blocks_for(r.prompt_len));
      r.hash_block_size = o.hash_block_size;
    }
  }

  void emit_common(Request& r, Time at) {
    r.id = emitted++;
    r.arrival = at;
    r.output_len = output.sample(output_rng);
    r.prompt_tokens.clear();
    r.priority = 0;
    r.cancel_time = kNoTime;
    r.hash_block_size = uses_hash_ids() ? o.hash_block_size : 0;
    if (!uses_hash_ids()) r.hash_ids.clear();
  }

  void schedule_next_turn(std::size_t slot, Time at) {
    Session& s = sessions[slot];
    if (--s.turns_left <= 0) {
      free_slots.push_back(slot);
      return;
    }
    const Time think = clock_time(session_rng.exponential(o.think_time_s));
    if (think > std::numeric_limits<Time>::max() - at) past_clock();
    pending.push({at + think, pending_seq++, slot});
  }

  bool next(Request& r) {
    if (o.max_requests > 0 && emitted >= o.max_requests) return false;
    if (!next_start && !arrivals_done) {
      next_start = draw_arrival();
      if (!next_start) arrivals_done = true;
    }
    const bool take_turn = !pending.empty() && (!next_start || pending.top().at <= *next_start);
    if (take_turn) {
      const PendingTurn turn = pending.top();
      if (duration_ns > 0 && turn.at > duration_ns) return false;
      pending.pop();
      Session& s = sessions[turn.slot];
      const std::int32_t user = user_tokens->sample(session_rng);
      const std::int64_t len = static_cast<std::int64_t>(s.prompt_len) + s.output_len + user;
      if (len > o.max_context) {
        free_slots.push_back(turn.slot);  // context full: the session ends
        return next(r);
      }
      // Blocks fully inside the previous prompt are unchanged; the rest
      // (its partial last block, the output, the new user tokens) are new.
      s.hash_ids.resize(static_cast<std::size_t>(s.prompt_len / o.hash_block_size));
      s.prompt_len = static_cast<std::int32_t>(len);
      fresh_ids(s.hash_ids, blocks_for(s.prompt_len));
      emit_common(r, turn.at);
      r.prompt_len = s.prompt_len;
      r.hash_ids = s.hash_ids;
      r.session_id = s.id;
      s.output_len = r.output_len;
      schedule_next_turn(turn.slot, turn.at);
      return true;
    }
    if (!next_start) return false;
    const Time at = *next_start;
    if (duration_ns > 0 && at > duration_ns) return false;
    next_start.reset();
    first_prompt(r);
    const std::int32_t prompt_len = r.prompt_len;
    emit_common(r, at);
    r.prompt_len = prompt_len;
    r.session_id = -1;
    if (turns) {
      std::size_t slot;
      if (!free_slots.empty()) {
        slot = free_slots.back();
        free_slots.pop_back();
      } else {
        slot = sessions.size();
        sessions.emplace_back();
      }
      Session& s = sessions[slot];
      s.id = next_session++;
      s.turns_left = turns->sample(session_rng);
      s.prompt_len = r.prompt_len;
      s.output_len = r.output_len;
      s.hash_ids = r.hash_ids;
      r.session_id = s.id;
      schedule_next_turn(slot, at);
    }
    return true;
  }
};

TraceGenerator::TraceGenerator(const GeneratorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
TraceGenerator::~TraceGenerator() = default;
TraceGenerator::TraceGenerator(TraceGenerator&&) noexcept = default;
TraceGenerator& TraceGenerator::operator=(TraceGenerator&&) noexcept = default;
bool TraceGenerator::next(Request& out) { return impl_->next(out); }

}  // namespace twin
