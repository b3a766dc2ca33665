// The Prometheus text-format reader: samples, labels and escapes, several
// scrapes in one text (split at a repeated series or `# EOF`), and each
// malformed line an error naming FILE:LINE; bounded on hostile input.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "base/error.hpp"
#include "metrics/prom_text.hpp"

using twin::Error;
using twin::parse_prom_text;

TEST_CASE("prom text: samples, labels with escapes, special values, timestamps") {
  const std::string text =
      "# HELP vllm:num_requests_running Number of requests.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3\n"
      "\n"
      "x_bucket{le=\"+Inf\", q=\"a\\\"b\\\\c\\nd\",} 1.5e3 1700000000000\r\n"
      "  plain 7\n"
      "nan_value NaN\n"
      "neg -Inf\n";
  const auto scrapes = parse_prom_text(text, "s.prom");
  REQUIRE(scrapes.size() == 1);
  const auto& s = scrapes[0].samples;
  REQUIRE(s.size() == 5);
  CHECK(s[0].name == "vllm:num_requests_running");
  CHECK(*s[0].label("model_name") == "m");
  CHECK(*s[0].label("engine") == "0");
  CHECK(s[0].label("le") == nullptr);
  CHECK(s[0].value == 3);
  CHECK(s[0].line == 3);
  CHECK(*s[1].label("le") == "+Inf");
  CHECK(*s[1].label("q") == "a\"b\\c\nd");
  CHECK(s[1].value == 1500);
  CHECK(s[2].name == "plain");
  CHECK(std::isnan(s[3].value));
  CHECK(std::isinf(s[4].value));
  CHECK(s[4].value < 0);
}

TEST_CASE("prom text: a repeated series or # EOF begins the next scrape") {
  const std::string one = "# TYPE a counter\na_total{m=\"x\"} 1\na_total{m=\"y\"} 2\nb 3\n";
  const auto appended = parse_prom_text(one + one + one, "s.prom");
  REQUIRE(appended.size() == 3);
  CHECK(appended[1].samples.size() == 3);
  CHECK(appended[1].first_line == 6);
  const auto open_metrics = parse_prom_text("a 1\n# EOF\nb 2\n# EOF\n", "s.prom");
  REQUIRE(open_metrics.size() == 2);
  CHECK(open_metrics[1].samples[0].name == "b");
  CHECK(parse_prom_text("# only comments\n\n", "s.prom").empty());
}

TEST_CASE("prom text: a malformed line is an error naming FILE:LINE") {
  const auto error_of = [](const std::string& text) {
    try {
      parse_prom_text(text, "bad.prom");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("ok 1\n1abc 2\n"), Catch::Contains("bad.prom:2: expected a name"));
  CHECK_THAT(error_of("a{b=\"c} 1\n"), Catch::Contains("bad.prom:1: a label value without its closing"));
  CHECK_THAT(error_of("a{b=c} 1\n"), Catch::Contains("bad.prom:1: expected '\"'"));
  CHECK_THAT(error_of("a{b=\"c\" d=\"e\"} 1\n"), Catch::Contains("expected ',' or '}'"));
  CHECK_THAT(error_of("a{b=\"c\",b=\"d\"} 1\n"), Catch::Contains("label b given twice"));
  CHECK_THAT(error_of("a{b=\"\\q\"} 1\n"), Catch::Contains("unknown escape"));
  CHECK_THAT(error_of("a\n"), Catch::Contains("bad.prom:1: a sample without a value"));
  CHECK_THAT(error_of("a 1x\n"), Catch::Contains("'1x' is not a number"));
  CHECK_THAT(error_of("a 1 2.5\n"), Catch::Contains("is not a timestamp"));
  CHECK_THAT(error_of("a 1 2 3\n"), Catch::Contains("text after the timestamp"));
  CHECK_THAT(error_of("a{b=\"c\"}1\n"), Catch::Contains("expected a blank"));
}

TEST_CASE("prom text: bounded on long lines, many labels, many samples") {
  twin::PromLimits small;
  small.max_line_bytes = 64;
  small.max_labels = 2;
  small.max_samples = 3;
  CHECK_THROWS_WITH(parse_prom_text("a " + std::string(100, '1') + "\n", "f", small), Catch::Contains("f:1: a line of 102 bytes"));
  CHECK_THROWS_WITH(parse_prom_text("a{x=\"1\",y=\"2\",z=\"3\"} 1\n", "f", small), Catch::Contains("more than 2 labels"));
  CHECK_THROWS_WITH(parse_prom_text("a 1\nb 1\nc 1\nd 1\n", "f", small), Catch::Contains("f:4: more than 3 samples"));
  // Random bytes: an error or a parse, never a crash or a hang.
  std::mt19937 rng(7);
  const std::string alphabet = "ab_:{}=\",\\ \n\t#0123456789.+-eInfNa";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 80);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    try {
      parse_prom_text(text, "fuzz");
    } catch (const Error&) {
    }
  }
}

TEST_CASE("prom text: what looks like an exposition") {
  CHECK(twin::looks_like_prom_text("\n# HELP a b\n"));
  CHECK(twin::looks_like_prom_text("vllm:x{a=\"b\"} 1\n"));
  CHECK(twin::looks_like_prom_text("# a comment\nx 1\n"));
  CHECK_FALSE(twin::looks_like_prom_text("{\"json\": 1}"));
  CHECK_FALSE(twin::looks_like_prom_text("id,arrival_s\n1,2\n"));
  CHECK_FALSE(twin::looks_like_prom_text(""));
}
