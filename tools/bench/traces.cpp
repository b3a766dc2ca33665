// Trace parsing and generation speed. Writes a synthetic Azure-format file of
// 2M rows to /tmp (timestamps and lengths like the real trace), parses it,
// and times the generator. Prints figures; asserts nothing.
#include <chrono>
#include <cstdio>
#include <string>

#include "traces/generator.hpp"
#include "traces/prng.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_writer.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  using namespace twin;
  const std::int64_t rows = 2'000'000;
  const std::string azure_path = "/tmp/twin_bench_azure_2m.csv";
  {
    std::FILE* f = std::fopen(azure_path.c_str(), "wb");
    if (!f) return 1;
    std::fputs("TIMESTAMP,ContextTokens,GeneratedTokens\n", f);
    Rng rng(1);
    double t = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      t += rng.exponential(0.01);
      const auto whole = static_cast<long long>(t);
      const auto frac = static_cast<long long>((t - static_cast<double>(whole)) * 1e7);
      std::fprintf(f, "2023-11-16 %02lld:%02lld:%02lld.%07lld,%d,%d\n", (whole / 3600) % 24, (whole / 60) % 60,
                   whole % 60, frac, 1 + static_cast<int>(rng.below(8000)), 1 + static_cast<int>(rng.below(1000)));
    }
    std::fclose(f);
  }
  {
    const auto t0 = std::chrono::steady_clock::now();
    TraceReadOptions o;
    o.backwards_tolerance_s = 1e9;  // the synthetic clock wraps at midnight
    TraceReader reader(azure_path, o);
    Request r;
    std::int64_t n = 0, tokens = 0;
    while (reader.next(r)) {
      ++n;
      tokens += r.prompt_len;
    }
    const double s = seconds_since(t0);
    std::printf("trace parse azure csv: %lld rows in %.3f s = %.2f M rows/s (checksum %lld)\n",
                static_cast<long long>(n), s, static_cast<double>(n) / s / 1e6, static_cast<long long>(tokens));
  }
  std::remove(azure_path.c_str());

  for (bool with_prefix : {false, true}) {
    GeneratorOptions o;
    o.max_requests = 1'000'000;
    o.rate = 100;
    if (with_prefix) {
      o.prefix_count = 8;
      o.prefix_tokens = 512;
      o.prefix_fraction = 0.5;
      o.session_turns = "uniform:1:4";
    }
    const auto t0 = std::chrono::steady_clock::now();
    TraceGenerator gen(o);
    Request r;
    std::int64_t n = 0;
    while (gen.next(r)) ++n;
    const double s = seconds_since(t0);
    std::printf("trace generate%s: %lld requests in %.3f s = %.2f M requests/s\n",
                with_prefix ? " (shared prefix + sessions, hash ids)" : " (poisson, lognormal)",
                static_cast<long long>(n), s, static_cast<double>(n) / s / 1e6);
  }
  {
    const std::string out = "/tmp/twin_bench_trace.jsonl";
    GeneratorOptions o;
    o.max_requests = 1'000'000;
    o.rate = 100;
    const auto t0 = std::chrono::steady_clock::now();
    TraceGenerator gen(o);
    TraceWriter w(out);
    Request r;
    while (gen.next(r)) w.write(r);
    w.close();
    const double ws = seconds_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    TraceReader reader(out);
    std::int64_t n = 0;
    while (reader.next(r)) ++n;
    const double rs = seconds_since(t1);
    std::printf("trace generate+write twin-jsonl: %.2f M rows/s; read back: %.2f M rows/s\n", 1.0 / ws,
                static_cast<double>(n) / rs / 1e6);
    std::remove(out.c_str());
  }
  return 0;
}
