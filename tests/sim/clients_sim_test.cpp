// Clients as request sources (traces/clients.hpp, docs/simulate.md
// "Clients"): closed loops at a fixed concurrency and sessions whose next
// turn waits for the answer, run through the simulator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "engine/core/kv_cache.hpp"
#include "engine/core/prefix_hash.hpp"
#include "sim_test_util.hpp"
#include "traces/clients.hpp"
#include "traces/generator.hpp"

using namespace twin;
using namespace twin::test;

namespace {

// n requests, the i-th at i * gap, outputs of varied lengths so ends spread.
ListSource trace_of(int n, Time gap) {
  ListSource s;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival = i * gap;
    r.prompt_len = 200 + 37 * (i % 11);
    r.output_len = 20 + 13 * (i % 7);
    s.requests.push_back(r);
  }
  return s;
}

CollectSink simulate(const ClusterConfig& config, RequestSource& source, Time refresh = 0) {
  Cluster cluster = build_cluster(config);
  SimOptions options;
  options.router = "least_outstanding";
  WindowOptions window;
  window.router_refresh = refresh;
  Simulator sim(std::move(cluster.replicas), options, nullptr, window);
  CollectSink sink;
  sim.run(source, sink);
  return sink;
}

// The most requests in flight at any instant (an end at t frees its slot
// before an arrival at t takes it).
int peak_in_flight(const std::vector<RequestRecord>& records) {
  std::vector<std::pair<Time, int>> edges;
  for (const RequestRecord& r : records) {
    edges.emplace_back(r.arrival, +1);
    edges.emplace_back(r.finish, -1);
  }
  std::sort(edges.begin(), edges.end());
  int now = 0, peak = 0;
  for (const auto& [t, d] : edges) peak = std::max(peak, now += d);
  return peak;
}

double output_throughput(const std::vector<RequestRecord>& records) {
  Time last = 0;
  double tokens = 0;
  for (const RequestRecord& r : records) {
    last = std::max(last, r.finish);
    tokens += r.output_tokens;
  }
  return tokens / to_seconds(last);
}

double mean_tpot_s(const std::vector<RequestRecord>& records) {
  double sum = 0;
  for (const RequestRecord& r : records) sum += to_seconds(r.finish - r.first_token) / (r.output_tokens - 1);
  return sum / static_cast<double>(records.size());
}

std::vector<RequestRecord> closed_loop(int clients, int requests, int replicas = 1) {
  ListSource trace = trace_of(requests, 0);
  ClientOptions o;
  o.max_concurrency = clients;
  o.at_once = true;
  Clients c(trace, o);
  return simulate(one_group("llama-3.1-8b", "h100-80gb", 1, 1, replicas), c.source()).requests;
}

}  // namespace

TEST_CASE("a closed loop keeps N requests in flight and replaces an ended one at the same instant") {
  const std::vector<RequestRecord> records = closed_loop(8, 120, 2);
  REQUIRE(records.size() == 120);
  CHECK(peak_in_flight(records) == 8);
  // The first 8 go out at 0; each later one exactly when one ended.
  std::vector<Time> finishes, arrivals;
  for (const RequestRecord& r : records) {
    CHECK(r.outcome == Outcome::finished);
    finishes.push_back(r.finish);
    if (r.arrival > 0) arrivals.push_back(r.arrival);
  }
  std::sort(finishes.begin(), finishes.end());
  std::sort(arrivals.begin(), arrivals.end());
  REQUIRE(arrivals.size() == 120 - 8);
  finishes.resize(arrivals.size());
  CHECK(arrivals == finishes);
  // Same inputs, same records.
  const std::vector<RequestRecord> again = closed_loop(8, 120, 2);
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].id == again[i].id);
    CHECK(records[i].arrival == again[i].arrival);
    CHECK(records[i].finish == again[i].finish);
  }
}

TEST_CASE("max-concurrency: a request goes out at the later of its trace time and a free slot") {
  ListSource trace = trace_of(150, 2 * kNsPerMs);
  const std::vector<Request> rows = trace.requests;
  ClientOptions o;
  o.max_concurrency = 8;
  Clients c(trace, o);
  const std::vector<RequestRecord> records = simulate(one_group("llama-3.1-8b", "h100-80gb"), c.source()).requests;
  REQUIRE(records.size() == rows.size());
  CHECK(peak_in_flight(records) == 8);
  std::multiset<Time> ends;
  for (const RequestRecord& r : records) ends.insert(r.finish);
  std::map<RequestId, Time> sent;
  for (const RequestRecord& r : records) sent[r.id] = r.arrival;
  int delayed = 0;
  Time previous = 0;
  for (const Request& row : rows) {
    const Time at = sent.at(row.id);
    CHECK(at >= row.arrival);
    CHECK(at >= previous);  // in trace order
    previous = at;
    if (at > row.arrival) {
      ++delayed;
      CHECK(ends.count(at) > 0);  // it waited for a slot, which freed then
    }
  }
  CHECK(delayed > 0);
  CHECK(delayed < static_cast<int>(rows.size()));
}

TEST_CASE("throughput and TPOT rise with the closed loop's clients") {
  const std::vector<RequestRecord> c8 = closed_loop(8, 256);
  const std::vector<RequestRecord> c32 = closed_loop(32, 256);
  CHECK(peak_in_flight(c32) == 32);
  CHECK(output_throughput(c32) > 2 * output_throughput(c8));
  CHECK(mean_tpot_s(c32) > mean_tpot_s(c8));
}

TEST_CASE("request rate inf alone sends the whole trace at 0") {
  ListSource trace = trace_of(20, kNsPerSec);
  ClientOptions o;
  o.at_once = true;
  Clients c(trace, o);
  const std::vector<RequestRecord> records = simulate(one_group("llama-3.1-8b", "h100-80gb"), c.source()).requests;
  REQUIRE(records.size() == 20);
  for (const RequestRecord& r : records) CHECK(r.arrival == 0);
}

TEST_CASE("closed-loop clients refuse a router refresh period, naming the flags") {
  ListSource trace = trace_of(10, 0);
  ClientOptions o;
  o.max_concurrency = 4;
  Clients c(trace, o);
  CHECK_THROWS_WITH(simulate(one_group("llama-3.1-8b", "h100-80gb", 1, 1, 2), c.source(), kNsPerSec / 10),
                    Catch::Contains("--max-concurrency") && Catch::Contains("--router-refresh-s"));
}

namespace {

Request row(RequestId id, Time at, std::int32_t prompt, std::int32_t output, std::vector<std::uint64_t> ids) {
  Request r;
  r.id = id;
  r.arrival = at;
  r.prompt_len = prompt;
  r.output_len = output;
  r.session_id = 0;
  r.hash_block_size = 16;
  r.hash_ids = std::move(ids);
  return r;
}

RequestRecord ended(RequestId id, std::int32_t output) {
  RequestRecord r;
  r.id = id;
  r.output_tokens = output;
  return r;
}

}  // namespace

TEST_CASE("a session's next turn repeats the last prompt and answer, named as the KV cache names them") {
  // Turn 0: 100 tokens (7 ids of 16), 40 out. Turn 1 as the generator writes
  // it: the 6 full blocks of turn 0, then new ids for the rest, 30 user tokens.
  ListSource trace;
  trace.requests.push_back(row(0, 0, 100, 40, {1, 2, 3, 4, 5, 6, 7}));
  trace.requests.push_back(row(1, 5 * kNsPerSec, 170, 10, {1, 2, 3, 4, 5, 6, 20, 21, 22, 23, 24}));
  ClientOptions o;
  o.sessions = true;
  TraceClients clients(trace, o);
  REQUIRE(clients.next_due() == 0);
  Request first, second;
  REQUIRE(clients.next(first));
  CHECK(clients.next_due() == kNoTime);  // turn 1 waits for turn 0's answer
  clients.on_ended(ended(0, 40), 2 * kNsPerSec);
  REQUIRE(clients.next_due() == 7 * kNsPerSec);  // its end + the trace's 5 s gap
  REQUIRE(clients.next(second));
  CHECK(second.arrival == 7 * kNsPerSec);
  CHECK(second.prompt_len == 170);
  REQUIRE(second.generated.size() == 1);
  CHECK(second.generated[0].request == 0);
  CHECK(second.generated[0].begin == 100);
  CHECK(second.generated[0].end == 140);
  CHECK(clients.next_due() == kNoTime);
  for (const std::int32_t b : {1, 16, 32, 64}) {
    INFO("block size " << b);
    // What turn 0's KV cache names: its prompt blocks, then the blocks it generates.
    std::vector<BlockHash> chain = prompt_block_hashes(first, b);
    for (std::int32_t k = 100 / b; k < 140 / b; ++k) {
      chain.push_back(generated_block_hash(chain.empty() ? 0 : chain.back(), 0, k));
    }
    const std::vector<BlockHash> next = prompt_block_hashes(second, b);
    CHECK(next.size() == static_cast<std::size_t>(170 / b));  // every block named
    REQUIRE(next.size() >= chain.size());
    CHECK(std::equal(chain.begin(), chain.end(), next.begin()));
    // A block of the answer's tail and the new user tokens is not a block turn 0 generated.
    if (140 % b != 0 && 140 / b < 170 / b) {
      CHECK(next[static_cast<std::size_t>(140 / b)] != generated_block_hash(chain.back(), 0, 140 / b));
    }
  }
}

TEST_CASE("a generated span outside the prompt is an error naming the request") {
  Request r = row(3, 0, 50, 10, {1, 2, 3, 4});
  r.generated.push_back(GeneratedSpan{2, 40, 60});
  CHECK_THROWS_WITH(prompt_block_hashes(r, 16), Catch::Contains("request 3") && Catch::Contains("[40, 60)"));
}

namespace {

struct SessionRun {
  std::vector<Request> rows;
  std::map<RequestId, RequestRecord> records;
};

SessionRun run_sessions(std::optional<Time> think) {
  GeneratorOptions g;
  g.max_requests = 60;
  g.rate = 1;
  g.session_turns = "fixed:4";
  g.think_time_s = 3;
  g.prompt = "uniform:100:600";
  g.output = "uniform:20:200";
  g.session_user_tokens = "uniform:10:80";
  g.seed = 5;
  SessionRun out;
  TraceGenerator gen(g);
  Request r;
  while (gen.next(r)) out.rows.push_back(r);
  ListSource trace;
  trace.requests = out.rows;
  ClientOptions o;
  o.sessions = true;
  o.think_time = think;
  Clients c(trace, o);
  for (RequestRecord& rec : simulate(one_group("llama-3.1-8b", "h100-80gb"), c.source()).requests) {
    out.records.emplace(rec.id, std::move(rec));
  }
  return out;
}

void check_sessions(const SessionRun& run, std::optional<Time> think) {
  REQUIRE(run.records.size() == run.rows.size());
  std::map<std::int64_t, std::vector<const Request*>> sessions;
  for (const Request& r : run.rows) sessions[r.session_id].push_back(&r);
  REQUIRE(sessions.size() > 5);
  const std::int32_t block = 16;  // vLLM's default block size
  int later_turns = 0;
  for (const auto& [id, turns] : sessions) {
    CHECK(run.records.at(turns.front()->id).arrival == turns.front()->arrival);  // a session starts at its time
    for (std::size_t k = 0; k + 1 < turns.size(); ++k) {
      const Request& row_k = *turns[k];
      const Request& row_next = *turns[k + 1];
      const RequestRecord& k_rec = run.records.at(row_k.id);
      const RequestRecord& next_rec = run.records.at(row_next.id);
      REQUIRE(k_rec.outcome == Outcome::finished);
      const Time gap = think ? *think : row_next.arrival - row_k.arrival;
      CHECK(next_rec.arrival == k_rec.finish + gap);  // after the LAST token
      const std::int32_t user = row_next.prompt_len - row_k.prompt_len - row_k.output_len;
      CHECK(next_rec.prompt_tokens == k_rec.prompt_tokens + k_rec.output_tokens + user);
      // Every full block of turn k's prompt is a hit.
      CHECK(next_rec.cached_prompt_tokens >= k_rec.prompt_tokens / block * block);
      ++later_turns;
    }
  }
  CHECK(later_turns > 10);
}

}  // namespace

TEST_CASE("sessions: turn k+1 goes out a think time after turn k's last token") {
  check_sessions(run_sessions(std::nullopt), std::nullopt);
  check_sessions(run_sessions(kNsPerSec / 2), kNsPerSec / 2);
}
