#include "metrics/log_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "base/error.hpp"

namespace twin {

int LogHistogram::bucket_of(std::int64_t value) {
  if (value < kExactBelow) return static_cast<int>(value);
  const auto v = static_cast<std::uint64_t>(value);
  const int top_bit = 63 - std::countl_zero(v);  // >= 8
  const int shift = top_bit - 7;                 // keeps the top 8 bits
  const int sub = static_cast<int>(v >> shift) - kSubBuckets;
  return kExactBelow + (top_bit - 8) * kSubBuckets + sub;
}

double LogHistogram::midpoint_of(int bucket) {
  if (bucket < kExactBelow) return bucket;
  const int top_bit = 8 + (bucket - kExactBelow) / kSubBuckets;
  const int sub = (bucket - kExactBelow) % kSubBuckets;
  const int shift = top_bit - 7;
  const double width = std::ldexp(1.0, shift);
  const double low = static_cast<double>(kSubBuckets + sub) * width;
  // The bucket holds the integers low .. low + width - 1.
  return low + (width - 1.0) / 2.0;
}

void LogHistogram::add(std::int64_t value, std::uint64_t count) {
  if (value < 0) {
    throw Error("LogHistogram: negative value " + std::to_string(value));
  }
  if (count == 0) return;
  counts_[bucket_of(value)] += count;
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  count_ += count;
  sum_ += static_cast<unsigned __int128>(value) * count;
}

void LogHistogram::add_all(std::span<const std::int64_t> values) {
  if (values.empty()) return;
  std::int64_t low = values.front();
  std::int64_t high = values.front();
  unsigned __int128 sum = 0;
  for (const std::int64_t value : values) {
    if (value < 0) throw Error("LogHistogram: negative value " + std::to_string(value));
    ++counts_[bucket_of(value)];
    low = std::min(low, value);
    high = std::max(high, value);
    sum += static_cast<std::uint64_t>(value);
  }
  min_ = count_ == 0 ? low : std::min(min_, low);
  max_ = count_ == 0 ? high : std::max(max_, high);
  count_ += values.size();
  sum_ += sum;
}

void LogHistogram::merge(const LogHistogram& other) {
  if (other.count_ == 0) return;
  for (int i = 0; i < kNumBuckets; ++i) counts_[i] += other.counts_[i];
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
}

double LogHistogram::mean() const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  // Integer part exactly, then the remainder: no precision lost to the sum's size.
  const unsigned __int128 whole = sum_ / count_;
  const unsigned __int128 rest = sum_ % count_;
  return static_cast<double>(whole) + static_cast<double>(rest) / static_cast<double>(count_);
}

double LogHistogram::stddev() const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  const double m = mean();
  long double squares = 0;  // bucket by bucket, in bucket order: the same bytes whatever the add order
  for (int i = 0; i < kNumBuckets; ++i) {
    if (counts_[static_cast<std::size_t>(i)] == 0) continue;
    const double mid = std::clamp(midpoint_of(i), static_cast<double>(min_), static_cast<double>(max_));
    squares += static_cast<long double>(counts_[static_cast<std::size_t>(i)]) * (mid - m) * (mid - m);
  }
  return std::sqrt(static_cast<double>(squares / static_cast<long double>(count_)));
}

double LogHistogram::order_statistic(std::uint64_t k) const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  if (k == 0) return static_cast<double>(min_);
  if (k + 1 >= count_) return static_cast<double>(max_);
  std::uint64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += counts_[i];
    if (seen > k) {
      const double mid = midpoint_of(i);
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

double LogHistogram::percentile(double p) const {
  if (count_ == 0) return std::numeric_limits<double>::quiet_NaN();
  if (p <= 0) return static_cast<double>(min_);
  if (p >= 100) return static_cast<double>(max_);
  const double rank = static_cast<double>(count_ - 1) * p / 100.0;
  const auto lower = static_cast<std::uint64_t>(std::floor(rank));
  const double fraction = rank - static_cast<double>(lower);
  const double low = order_statistic(lower);
  if (fraction == 0 || lower + 1 >= count_) return low;
  const double high = order_statistic(lower + 1);
  return low + fraction * (high - low);
}

}  // namespace twin
