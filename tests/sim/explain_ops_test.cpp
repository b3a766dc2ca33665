// `simulate --explain-ops` (sim/explain_ops.hpp): the step shapes it reads,
// a mixed step's ops (a chunk's prefill attention beside the decodes'), and
// errors naming the bad shape.
#include <catch2/catch.hpp>

#include <string>

#include "base/error.hpp"
#include "sim/explain_ops.hpp"
#include "sim_test_util.hpp"

using namespace twin;
using namespace twin::test;

TEST_CASE("explain-ops prices a chunk and decodes in one step when they are joined by '+'") {
  Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb", 1));
  const std::string mixed = explain_ops(c, "1920+128x1024");
  CHECK_THAT(mixed, Catch::Contains("prefill of 1920 tokens + 128 decodes after 1024 cached tokens"));
  // One step: both attention kinds in the same table, one header line.
  CHECK_THAT(mixed, Catch::Contains("attn_prefill") && Catch::Contains("attn_decode"));
  CHECK(mixed.find("tokens:") == mixed.rfind("tokens:"));
  // Its parts on their own are two steps.
  const std::string apart = explain_ops(c, "1920,128x1024");
  CHECK(apart.find("prefill of 1920 tokens:") != std::string::npos);
  CHECK(apart.find("128 decodes after 1024 cached tokens:") != std::string::npos);
}

TEST_CASE("explain-ops names a shape it cannot read") {
  Cluster c = build_cluster(one_group("llama-3.1-8b", "h100-80gb", 1));
  for (const char* bad : {"1+", "+8x100", "1++2", "8x", "x8", "0", "abc", "8x100+q"}) {
    INFO(bad);
    CHECK_THROWS_AS(explain_ops(c, bad), UsageError);
    CHECK_THROWS_WITH(explain_ops(c, bad), Catch::Contains("--explain-ops") && Catch::Contains("'+'"));
  }
}
