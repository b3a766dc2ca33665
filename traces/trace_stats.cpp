#include "traces/trace_stats.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

namespace twin {

namespace {

LengthStats length_stats(std::vector<std::int32_t>& values) {
  LengthStats s;
  if (values.empty()) return s;
  double sum = 0;
  for (auto v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  auto rank = [&](double p) {
    // Nearest rank: ceil(p/100 * n), 1-based.
    auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(n) - 1e-9));
    k = std::clamp<std::size_t>(k, 1, n);
    return values[k - 1];
  };
  s.p50 = rank(50);
  s.p90 = rank(90);
  s.p99 = rank(99);
  s.max = values.back();
  return s;
}

// Chains a block id onto its parent's chain hash (splitmix-style mixing), so
// equal ids under different prefixes give different chain hashes.
std::uint64_t chain_hash(std::uint64_t parent, std::uint64_t id) {
  std::uint64_t z = parent * 0x9E3779B97F4A7C15ull ^ (id + 0x632BE59BD9B4E019ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

TraceStats compute_stats(TraceReader& reader) {
  return compute_stats([&reader](Request& r) { return reader.next(r); });
}

TraceStats compute_stats(const std::function<bool(Request&)>& next) {
  TraceStats st;
  std::vector<std::int32_t> prompts, outputs;
  std::unordered_set<std::uint64_t> seen_chains;  // membership only; never iterated
  std::unordered_set<std::int64_t> sessions;
  double cached_tokens = 0, hashed_prompt_tokens = 0, all_prompt_tokens = 0;
  // Welford's running mean and variance of the gaps (seconds).
  double gap_mean = 0, gap_m2 = 0;
  std::int64_t gaps = 0;
  Time first = 0, prev = 0;
  Request r;
  while (next(r)) {
    if (st.num_requests == 0) {
      first = r.arrival;
    } else {
      const double gap = to_seconds(r.arrival - prev);
      ++gaps;
      const double delta = gap - gap_mean;
      gap_mean += delta / static_cast<double>(gaps);
      gap_m2 += delta * (gap - gap_mean);
    }
    prev = r.arrival;
    ++st.num_requests;
    prompts.push_back(r.prompt_len);
    outputs.push_back(r.output_len);
    all_prompt_tokens += r.prompt_len;
    if (r.session_id >= 0) sessions.insert(r.session_id);
    if (!r.hash_ids.empty() && r.hash_block_size > 0) {
      st.has_hash_ids = true;
      hashed_prompt_tokens += r.prompt_len;
      std::uint64_t chain = 0;
      std::int64_t covered = 0;
      for (std::uint64_t id : r.hash_ids) {
        chain = chain_hash(chain, id);
        const std::int64_t tokens =
            std::min<std::int64_t>(r.hash_block_size, std::max<std::int64_t>(0, r.prompt_len - covered));
        covered += r.hash_block_size;
        if (!seen_chains.insert(chain).second) cached_tokens += static_cast<double>(tokens);
      }
    }
  }
  st.span_s = st.num_requests > 0 ? to_seconds(prev - first) : 0;
  st.mean_rate = st.span_s > 0 ? static_cast<double>(st.num_requests - 1) / st.span_s : 0;
  if (gaps > 1 && gap_mean > 0) st.interarrival_cv = std::sqrt(gap_m2 / static_cast<double>(gaps - 1)) / gap_mean;
  st.prompt_tokens = length_stats(prompts);
  st.output_tokens = length_stats(outputs);
  if (st.has_hash_ids && hashed_prompt_tokens > 0) st.prefix_cache_share = cached_tokens / all_prompt_tokens;
  st.sessions = static_cast<std::int64_t>(sessions.size());
  return st;
}

}  // namespace twin
