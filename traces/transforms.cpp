#include "traces/transforms.hpp"

#include <cmath>
#include <string>

#include "base/error.hpp"
#include "engine/core/timeline.hpp"

namespace twin {

void check_transform_options(const TransformOptions& o) {
  if (!(o.rate_scale > 0) || !std::isfinite(o.rate_scale)) throw UsageError("--scale-rate must be a number > 0");
  // Times are int64 nanoseconds: about 292 years either way.
  constexpr double kMaxSeconds = 9.0e9;
  if (!(o.start_s >= 0) || !(o.start_s <= kMaxSeconds)) throw UsageError("--start-s must be a number from 0 to 9e9 seconds");
  if (o.end_s >= 0 && !(o.end_s <= kMaxSeconds)) throw UsageError("--end-s must be at most 9e9 seconds");
  if (o.end_s >= 0 && o.end_s <= o.start_s) throw UsageError("--end-s must be greater than --start-s");
  if (o.max_prompt < 0) throw UsageError("--max-prompt must be >= 0");
  if (o.max_output < 0) throw UsageError("--max-output must be >= 0");
}

TraceTransform::TraceTransform(std::function<bool(Request&)> source, const TransformOptions& options)
    : source_(std::move(source)), options_(options) {
  check_transform_options(options_);
  start_ns_ = from_seconds(options_.start_s);
  end_ns_ = options_.end_s < 0 ? -1 : from_seconds(options_.end_s);
}

bool TraceTransform::next(Request& r) {
  if (options_.max_requests >= 0 && kept_ >= options_.max_requests) return false;
  for (;;) {
    if (!source_(r)) return false;
    if (r.arrival < start_ns_) {
      ++dropped_;
      continue;
    }
    // Arrivals are sorted, so the first one past the window ends it.
    if (end_ns_ >= 0 && r.arrival >= end_ns_) return false;
    break;
  }
  ++kept_;
  // The one rescaling rule (engine/core/timeline.hpp): cancel times scale
  // with the arrivals, the client's patience with them.
  try {
    replay_faster(r, start_ns_, options_.rate_scale);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; check --scale-rate");
  }
  if (options_.max_prompt > 0 && r.prompt_len > options_.max_prompt) {
    r.prompt_len = options_.max_prompt;
    if (!r.prompt_tokens.empty()) r.prompt_tokens.resize(static_cast<std::size_t>(r.prompt_len));
    if (!r.hash_ids.empty() && r.hash_block_size > 0) {
      const auto blocks = static_cast<std::size_t>((r.prompt_len + r.hash_block_size - 1) / r.hash_block_size);
      if (r.hash_ids.size() > blocks) r.hash_ids.resize(blocks);
    }
  }
  if (options_.max_output > 0 && r.output_len > options_.max_output) r.output_len = options_.max_output;
  return true;
}

}  // namespace twin
