#pragma once
// A fixed-size log-bucketed histogram of non-negative integers (nanoseconds),
// for quantities too numerous to keep one by one (a 1M-request run has ~200M
// inter-token gaps). Values below 256 are kept exactly; above, each power of
// two is split into 128 equal buckets, and a value is reported as its
// bucket's midpoint, so any reported order statistic is within 2^-8 (0.39%)
// of the true one. Count, sum (hence mean), min and max are exact.
#include <array>
#include <cstdint>
#include <span>

namespace twin {

class LogHistogram {
 public:
  static constexpr int kSubBuckets = 128;
  static constexpr int kExactBelow = 2 * kSubBuckets;  // 256
  static constexpr int kNumBuckets = kExactBelow + (62 - 7) * kSubBuckets;
  static constexpr double kMaxRelativeError = 1.0 / (2.0 * kSubBuckets);

  // Negative values are a caller's bug: they throw twin::Error.
  void add(std::int64_t value, std::uint64_t count = 1);
  // Same as add() for each value, faster: the hot path of a request's gaps.
  void add_all(std::span<const std::int64_t> values);
  void merge(const LogHistogram& other);

  std::uint64_t count() const { return count_; }
  std::int64_t min() const { return min_; }  // 0 when empty
  std::int64_t max() const { return max_; }  // 0 when empty
  double mean() const;                       // NaN when empty
  // Population standard deviation with each value at its bucket's midpoint
  // (clamped to the range seen), as the percentiles; NaN when empty.
  double stddev() const;
  // The k-th smallest value (0-based, k < count()), approximated as above;
  // the first and last are exact.
  double order_statistic(std::uint64_t k) const;
  // Linear interpolation between closest ranks, like percentile_linear.
  double percentile(double p) const;  // NaN when empty

 private:
  static int bucket_of(std::int64_t value);
  static double midpoint_of(int bucket);

  std::array<std::uint64_t, kNumBuckets> counts_{};
  std::uint64_t count_ = 0;
  __extension__ unsigned __int128 sum_ = 0;  // exact: 2^64 values of 2^63 fit
  std::int64_t min_ = 0;
  std::int64_t max_ = 0;
};

}  // namespace twin
