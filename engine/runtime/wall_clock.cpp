#include "engine/runtime/wall_clock.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "base/error.hpp"

#include "engine/runtime/prompt_tokens.hpp"
#include "engine/runtime/wait_until.hpp"

namespace twin {

WallClock::WallClock(std::span<Executor* const> executors, std::span<const Replica> replicas,
                     std::uint64_t token_seed, std::function<bool()> stop, OutputObserver on_output)
    : executors_(executors.begin(), executors.end()),
      replicas_(replicas),
      vocab_(executors.empty() ? 0 : executors.front()->runner().config().vocab_size),
      token_seed_(token_seed),
      stop_(std::move(stop)),
      on_output_(std::move(on_output)),
      t0_(Steady::now()) {
  if (executors_.empty() || executors_.size() != replicas_.size()) {
    throw Error("wall clock: " + std::to_string(executors_.size()) + " executors for " +
                std::to_string(replicas_.size()) + " replicas");
  }
}

Time WallClock::elapsed() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Steady::now() - t0_).count();
}

bool WallClock::stop_requested() {
  if (!stopped_ && stop_) stopped_ = stop_();
  return stopped_;
}

bool WallClock::wait_until(Time t) {
  const Steady::time_point until = t0_ + std::chrono::nanoseconds(t);
  // In slices while a stop can be asked for, so an interrupt during a long
  // idle gap is seen within kStopPoll.
  constexpr auto kStopPoll = std::chrono::milliseconds(50);
  if (stop_) {
    while (until - Steady::now() > kStopPoll) {
      if (stop_requested()) return false;
      std::this_thread::sleep_for(kStopPoll);
    }
  }
  twin::wait_until(until);
  return !stop_requested();
}

Time WallClock::read(Time now) const { return std::max(now, elapsed()); }

void WallClock::admit(Request& request, const Replica& replica) {
  if (!replica.rejection_reason(request)) materialize_prompt_tokens(request, vocab_, token_seed_);
}

StepTiming WallClock::run_step(std::int32_t index, const StepPlan& plan, const Replica& replica, Time now,
                               StepResult& result) {
  result = executors_[static_cast<std::size_t>(index)]->execute(plan, replica);
  const Time done = std::max(elapsed(), now + 1);
  return StepTiming{done, done};
}

void WallClock::on_ended(const RequestRecord& record) {
  if (on_output_ && record.replica >= 0 && static_cast<std::size_t>(record.replica) < executors_.size()) {
    const std::vector<TokenId>* tokens = executors_[static_cast<std::size_t>(record.replica)]->output_tokens(record.id);
    on_output_(record, tokens ? *tokens : std::vector<TokenId>{});
  }
  // A request handed off may have left tokens with its prefill executor.
  for (Executor* e : executors_) e->forget(record.id);
  last_end_ = std::max(last_end_, record.finish);
}

TransferTiming WallClock::kv_transfer(const InboundTransfer& t) {
  const auto in_range = [&](std::int32_t i) { return i >= 0 && static_cast<std::size_t>(i) < replicas_.size(); };
  if (!in_range(t.from_replica) || !in_range(t.to_replica)) {
    throw Error("wall clock: a KV transfer between replicas " + std::to_string(t.from_replica) + " and " +
                std::to_string(t.to_replica) + " of " + std::to_string(replicas_.size()));
  }
  const Replica& from = replicas_[static_cast<std::size_t>(t.from_replica)];
  const Replica& to = replicas_[static_cast<std::size_t>(t.to_replica)];
  const std::optional<SeqView> src = from.seq(t.id), dst = to.seq(t.id);
  if (!src || !dst) throw Error("wall clock: KV transfer of request " + std::to_string(t.id) + ", which is not held on both replicas");
  const std::int32_t bs = from.config().kv.block_size;
  if (to.config().kv.block_size != bs) throw Error("wall clock: a KV transfer between replicas of different block sizes");
  // The decode side's own prefix hits are the leading whole blocks; the
  // blocks from there to the prompt's end move (the last one may be partial).
  const std::int32_t prompt = src->request->prompt_len;
  const std::int32_t first = (prompt - t.tokens) / bs;
  const std::int32_t end = (prompt + bs - 1) / bs;
  if (static_cast<std::int32_t>(src->kv->blocks.size()) < end || static_cast<std::int32_t>(dst->kv->blocks.size()) < end) {
    throw Error("wall clock: request " + std::to_string(t.id) + "'s block tables hold fewer than the prompt's " +
                std::to_string(end) + " blocks");
  }
  copies_.clear();
  for (std::int32_t b = std::max(first, 0); b < end; ++b) {
    copies_.push_back(BlockCopy{src->kv->blocks[static_cast<std::size_t>(b)], dst->kv->blocks[static_cast<std::size_t>(b)]});
  }
  Executor& sender = *executors_[static_cast<std::size_t>(t.from_replica)];
  Executor& receiver = *executors_[static_cast<std::size_t>(t.to_replica)];
  const Time copy_start = elapsed();
  receiver.runner().copy_kv_from(sender.runner(), copies_);
  copy_ns_ += elapsed() - copy_start;
  copied_blocks_ += static_cast<std::int64_t>(copies_.size());
  sender.hand_over(t.id, receiver);
  return TransferTiming{std::max(elapsed(), t.start + 1),
                        static_cast<std::int64_t>(copies_.size()) * receiver.runner().kv_block_bytes()};
}

}  // namespace twin
