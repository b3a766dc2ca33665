#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "metrics/log_histogram.hpp"
#include "metrics/percentile.hpp"

using twin::LogHistogram;

TEST_CASE("log histogram percentiles stay within the stated relative error of the exact ones") {
  std::mt19937_64 rng(42);
  // Log-uniform over 1 ns .. 100 s, the range of inter-token gaps and more.
  std::uniform_real_distribution<double> log_value(0.0, std::log(1e11));
  LogHistogram h;
  std::vector<double> exact;
  for (int i = 0; i < 20000; ++i) {
    const auto v = static_cast<std::int64_t>(std::exp(log_value(rng)));
    h.add(v);
    exact.push_back(static_cast<double>(v));
  }
  std::sort(exact.begin(), exact.end());
  REQUIRE(h.count() == exact.size());
  CHECK(h.min() == exact.front());
  CHECK(h.max() == exact.back());
  long double sum = 0;
  for (double v : exact) sum += v;
  CHECK(h.mean() == Approx(static_cast<double>(sum / exact.size())).epsilon(1e-12));

  const double bound = LogHistogram::kMaxRelativeError;
  CHECK(bound <= 0.005);
  for (double p : {0.1, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9}) {
    const double want = twin::percentile_linear(exact, p);
    const double got = h.percentile(p);
    INFO("p" << p << " exact " << want << " histogram " << got);
    CHECK(std::abs(got - want) <= bound * want + 1e-9);
  }
  for (std::uint64_t k = 0; k < exact.size(); k += 97) {
    const double want = exact[k];
    CHECK(std::abs(h.order_statistic(k) - want) <= bound * want + 1e-9);
  }
}

TEST_CASE("log histogram keeps small values exactly and rejects negative ones") {
  LogHistogram h;
  for (std::int64_t v = 0; v < 256; ++v) h.add(v);
  for (std::uint64_t k = 0; k < 256; ++k) CHECK(h.order_statistic(k) == static_cast<double>(k));
  CHECK(h.percentile(50) == Approx(127.5));
  CHECK_THROWS_AS(h.add(-1), twin::Error);
}

TEST_CASE("log histogram merge equals adding everything to one") {
  LogHistogram a, b, all;
  for (std::int64_t v = 1; v < 100000; v += 37) {
    (v % 2 ? a : b).add(v * 1000);
    all.add(v * 1000);
  }
  a.merge(b);
  LogHistogram batch;
  std::vector<std::int64_t> values;
  for (std::int64_t v = 1; v < 100000; v += 37) values.push_back(v * 1000);
  batch.add_all(values);
  CHECK(batch.count() == all.count());
  CHECK(batch.mean() == all.mean());
  CHECK(batch.min() == all.min());
  CHECK(batch.max() == all.max());
  CHECK(batch.percentile(50) == all.percentile(50));
  CHECK_THROWS_AS(batch.add_all(std::vector<std::int64_t>{-3}), twin::Error);
  CHECK(a.count() == all.count());
  CHECK(a.min() == all.min());
  CHECK(a.max() == all.max());
  for (double p : {5.0, 50.0, 95.0}) CHECK(a.percentile(p) == all.percentile(p));
  // Extreme values do not overflow the bucket range.
  LogHistogram big;
  big.add(INT64_MAX);
  big.add(1);
  CHECK(big.max() == INT64_MAX);
  CHECK(big.percentile(50) > 0);
  big.add(INT64_MAX);
  CHECK(big.mean() == Approx((2.0 * static_cast<double>(INT64_MAX) + 1) / 3));  // the sum does not overflow
}
