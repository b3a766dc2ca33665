#include <catch2/catch.hpp>

#include <memory>

#include "base/error.hpp"
#include "engine/core/router.hpp"
#include "tests/core_sched/sched_test_util.hpp"

namespace twin::test {
namespace {

struct Cluster {
  std::vector<std::unique_ptr<Replica>> owned;
  std::vector<const Replica*> view;
  explicit Cluster(int n) {
    for (int i = 0; i < n; ++i) {
      owned.push_back(std::make_unique<Replica>(config_for("vllm", 100), i));
      view.push_back(owned.back().get());
    }
  }
  Replica& operator[](int i) { return *owned[static_cast<std::size_t>(i)]; }
};

}  // namespace

TEST_CASE("router names round-trip and unknown names list the known", "[router]") {
  for (const auto& name : router_names()) CHECK(router_policy(name) == name);
  try {
    router_policy("random");
    FAIL("no throw");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("power_of_two") != std::string::npos);
  }
}

TEST_CASE("round_robin cycles", "[router]") {
  Cluster c(3);
  Router r("round_robin", 1);
  std::vector<std::int32_t> picks;
  for (int i = 0; i < 5; ++i) picks.push_back(r.pick(make_request(i, 10, 1), c.view));
  CHECK(picks == std::vector<std::int32_t>{0, 1, 2, 0, 1});
}

TEST_CASE("least_outstanding picks the least loaded - ties to the lowest index", "[router]") {
  Cluster c(3);
  Router r("least_outstanding", 1);
  CHECK(r.pick(make_request(0, 10, 1), c.view) == 0);
  c[0].add(make_request(1, 10, 1), 0);
  c[1].add(make_request(2, 10, 1), 0);
  CHECK(r.pick(make_request(0, 10, 1), c.view) == 2);
  c[2].add(make_request(3, 10, 1), 0);
  c[2].add(make_request(4, 10, 1), 0);
  CHECK(r.pick(make_request(0, 10, 1), c.view) == 0);
}

TEST_CASE("least_kv picks the lowest KV usage", "[router]") {
  Cluster c(2);
  c[0].add(make_request(1, 100, 10), 0);
  step(c[0], 0);
  Router r("least_kv", 1);
  CHECK(r.pick(make_request(0, 10, 1), c.view) == 1);
}

TEST_CASE("prefix_affinity follows the cached prefix - else the least loaded", "[router]") {
  Cluster c(3);
  c[2].add(make_token_request(1, 64, 1, 5, 64), 0);
  while (c[2].has_work()) step(c[2], 0);
  c[0].add(make_request(9, 10, 5), 0);
  Router r("prefix_affinity", 1);
  CHECK(r.pick(make_token_request(2, 64, 1, 5, 64), c.view) == 2);
  CHECK(r.pick(make_token_request(3, 64, 1, 6, 64), c.view) == 1);  // no hit anywhere: least loaded, lowest index
}

TEST_CASE("power_of_two is seeded - deterministic and prefers the less loaded", "[router]") {
  Cluster c(4);
  for (int i = 0; i < 5; ++i) c[0].add(make_request(100 + i, 10, 1), 0);
  Router a("power_of_two", 42), b("power_of_two", 42);
  int zero = 0;
  for (int i = 0; i < 200; ++i) {
    const auto pa = a.pick(make_request(i, 10, 1), c.view);
    CHECK(pa == b.pick(make_request(i, 10, 1), c.view));
    CHECK(pa >= 0);
    CHECK(pa < 4);
    zero += pa == 0;
  }
  CHECK(zero == 0);  // replica 0 always loses its comparison
  Router one("power_of_two", 1);
  CHECK(one.pick(make_request(0, 10, 1), std::span<const Replica* const>(c.view.data(), 1)) == 0);
  CHECK_THROWS_AS(one.pick(make_request(0, 10, 1), std::span<const Replica* const>()), Error);
}

TEST_CASE("dp_balance scores waiting x 4 + running as vLLM's DP coordinator", "[router]") {
  Cluster c(2);
  Router r("dp_balance", 1);
  CHECK(r.pick(make_request(0, 10, 5), c.view) == 0);  // a tie goes to the first rank
  // Rank 0: three running (score 3); rank 1: one waiting (score 4).
  for (int id = 1; id <= 3; ++id) c[0].add(make_request(id, 10, 5), 0);
  step(c[0], 0);
  REQUIRE(c[0].num_running() == 3);
  REQUIRE(c[0].num_waiting() == 0);
  c[1].add(make_request(4, 10, 5), 0);
  REQUIRE(c[1].num_waiting() == 1);
  CHECK(r.pick(make_request(0, 10, 5), c.view) == 0);
  // least_outstanding, counting requests alike, would pick rank 1.
  Router lo("least_outstanding", 1);
  CHECK(lo.pick(make_request(0, 10, 5), c.view) == 1);
  c[0].add(make_request(5, 10, 5), 0);  // rank 0: 3 running + 1 waiting = 7
  CHECK(r.pick(make_request(0, 10, 5), c.view) == 1);
}

}  // namespace twin::test
