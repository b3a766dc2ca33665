#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "metrics/percentile.hpp"

using twin::percentile_linear;

// Expected values are numpy.percentile(x, p) (linear, the default), by hand.
TEST_CASE("percentile_linear matches numpy's default on hand-computed values") {
  const std::vector<double> four = {1, 2, 3, 4};
  CHECK(percentile_linear(four, 50) == Approx(2.5));
  CHECK(percentile_linear(four, 90) == Approx(3.7));   // rank 2.7
  CHECK(percentile_linear(four, 99) == Approx(3.97));  // rank 2.97
  CHECK(percentile_linear(four, 0) == 1);
  CHECK(percentile_linear(four, 100) == 4);
  CHECK(percentile_linear(four, 25) == Approx(1.75));  // rank 0.75

  const std::vector<double> five = {10, 20, 30, 40, 50};
  CHECK(percentile_linear(five, 50) == 30);            // exact rank 2
  CHECK(percentile_linear(five, 90) == Approx(46));    // rank 3.6
  CHECK(percentile_linear(five, 99) == Approx(49.6));  // rank 3.96

  // Nearest-rank would give 100 here; linear interpolation does not.
  const std::vector<double> skewed = {1, 1, 1, 100};
  CHECK(percentile_linear(skewed, 90) == Approx(70.3));  // rank 2.7: 1 + 0.7 * 99
}

TEST_CASE("percentile_linear of one value is that value, of none is NaN") {
  const std::vector<double> one = {7.5};
  CHECK(percentile_linear(one, 1) == 7.5);
  CHECK(percentile_linear(one, 99) == 7.5);
  CHECK(std::isnan(percentile_linear(std::vector<double>{}, 50)));
}
