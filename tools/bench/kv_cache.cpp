// KV cache costs: ns per admit (lookup + allocate) + free for a typical
// request, ns per prefix lookup with and without hits, ns per decode-step
// growth. Prints figures; asserts nothing.
#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/core/kv_cache.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ns_per(Clock::time_point start, long iterations) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(iterations);
}

twin::Request make_request(twin::RequestId id, std::int32_t len, twin::TokenId first) {
  twin::Request r;
  r.id = id;
  r.prompt_len = len;
  r.output_len = 128;
  r.prompt_tokens.resize(static_cast<std::size_t>(len));
  for (std::int32_t i = 0; i < len; ++i) r.prompt_tokens[static_cast<std::size_t>(i)] = first + i;
  return r;
}

twin::KvCacheConfig config(std::int32_t block_size, bool caching) {
  twin::KvCacheConfig c;
  c.num_blocks = 65536;
  c.block_size = block_size;
  c.enable_prefix_caching = caching;
  return c;
}

volatile std::int64_t sink = 0;

}  // namespace

int main() {
  constexpr std::int32_t kPrompt = 2048;
  constexpr long kIters = 20000;
  std::printf("prompt %d tokens, %ld iterations each, pool 65536 blocks\n", kPrompt, kIters);
  std::printf("%-6s %-10s %14s %14s %14s %14s %12s\n", "block", "caching", "admit+free ns", "lookup-hit ns",
              "lookup-miss ns", "per hit blk ns", "grow ns");
  for (const std::int32_t bs : {1, 16, 512}) {
    for (const bool caching : {false, true}) {
      twin::KvCache kv(config(bs, caching));
      const twin::Request cached = make_request(1, kPrompt, 0);
      const twin::Request fresh = make_request(2, kPrompt, 1 << 20);
      twin::SeqKv seed_seq, hit_seq, miss_seq, seq;
      kv.init_seq(cached, seed_seq);
      kv.allocate(cached, seed_seq, 0, kPrompt, true);
      kv.publish(cached, seed_seq, kPrompt);
      kv.init_seq(cached, hit_seq);
      kv.init_seq(fresh, miss_seq);
      seq.blocks.reserve(static_cast<std::size_t>(kPrompt / bs + 2));

      // Admit a request whose prompt is mostly cached, then free it.
      auto t0 = Clock::now();
      for (long i = 0; i < kIters; ++i) {
        seq.hashes = hit_seq.hashes;
        const std::int32_t hits = kv.lookup(cached, seq);
        kv.allocate(cached, seq, hits, kPrompt + 1, true);
        kv.free(seq);
      }
      const double admit_ns = ns_per(t0, kIters);

      t0 = Clock::now();
      for (long i = 0; i < kIters; ++i) sink = sink + kv.lookup(cached, hit_seq);
      const double hit_ns = ns_per(t0, kIters);
      t0 = Clock::now();
      for (long i = 0; i < kIters; ++i) sink = sink + kv.lookup(fresh, miss_seq);
      const double miss_ns = ns_per(t0, kIters);
      const std::int32_t hit_blocks = kv.lookup(cached, hit_seq);

      // One decode token at a time for a running request: the common case.
      twin::SeqKv running;
      kv.init_seq(fresh, running);
      kv.allocate(fresh, running, 0, kPrompt, false);
      std::int32_t total = kPrompt;
      t0 = Clock::now();
      for (long i = 0; i < kIters; ++i) kv.allocate(fresh, running, 0, ++total, false);
      const double grow_ns = ns_per(t0, kIters);

      std::printf("%-6d %-10s %14.1f %14.1f %14.1f %14.2f %12.1f\n", bs, caching ? "on" : "off", admit_ns, hit_ns,
                  miss_ns, hit_blocks > 0 ? hit_ns / hit_blocks : 0.0, grow_ns);
    }
  }

  // Hashing a prompt once per request (init_seq).
  for (const std::int32_t bs : {1, 16, 512}) {
    twin::KvCache kv(config(bs, true));
    const twin::Request r = make_request(3, kPrompt, 0);
    twin::SeqKv s;
    constexpr long kHashIters = 2000;
    const auto t0 = Clock::now();
    for (long i = 0; i < kHashIters; ++i) kv.init_seq(r, s);
    std::printf("init_seq (hash %d-token prompt) block %d: %.1f ns (%.2f ns/token)\n", kPrompt, bs,
                ns_per(t0, kHashIters), ns_per(t0, kHashIters) / kPrompt);
  }
  return 0;
}
