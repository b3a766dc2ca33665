// Metrics at the scale of a big simulation: 1M requests with ~200 output
// tokens each (~200M inter-token gaps) through the collector, plus the
// requests.csv writer. Prints rates and peak RSS; asserts nothing.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "metrics/collector.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/summary_json.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

int main() {
  using namespace twin;
  constexpr int kRequests = 1'000'000;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> output_tokens(100, 300);
  std::uniform_int_distribution<Time> gap(5 * kNsPerMs, 60 * kNsPerMs);

  MetricsCollector collector;
  const auto path = std::filesystem::temp_directory_path() / "twin_bench_metrics_requests.csv";
  std::ofstream csv(path, std::ios::binary);
  RequestCsvWriter writer(csv);

  RequestRecord r;
  std::uint64_t gaps = 0;
  double add_s = 0, write_s = 0;
  for (int i = 0; i < kRequests; ++i) {
    r.id = i;
    r.replica = i % 32;
    r.arrival = static_cast<Time>(i) * 10 * kNsPerMs;
    r.first_token = r.arrival + 200 * kNsPerMs;
    r.output_tokens = output_tokens(rng);
    r.prompt_tokens = 1000;
    r.cached_prompt_tokens = 256;
    r.itl.resize(static_cast<std::size_t>(r.output_tokens - 1));
    Time t = r.first_token;
    for (auto& g : r.itl) {
      g = gap(rng);
      t += g;
    }
    r.finish = t;
    gaps += r.itl.size();
    auto start = std::chrono::steady_clock::now();
    collector.add(r);
    add_s += seconds_since(start);
    start = std::chrono::steady_clock::now();
    writer.write(r);
    write_s += seconds_since(start);
  }
  csv.close();
  const auto csv_bytes = std::filesystem::file_size(path);
  std::filesystem::remove(path);

  auto start = std::chrono::steady_clock::now();
  SummaryContext context;
  context.slos = parse_slos("ttft_p90<=1s,tpot_p99<=50ms,itl<=60ms");
  context.num_replicas = 32;
  const Summary summary = collector.summarize(context);
  const double summarize_s = seconds_since(start);

  std::printf("requests                 %d\n", kRequests);
  std::printf("inter-token gaps         %llu\n", static_cast<unsigned long long>(gaps));
  std::printf("collector.add            %.3f s (%.1f M gaps/s)\n", add_s, static_cast<double>(gaps) / add_s / 1e6);
  std::printf("requests.csv write       %.3f s (%.2f M rows/s, %.1f MB)\n", write_s, kRequests / write_s / 1e6,
              static_cast<double>(csv_bytes) / 1e6);
  std::printf("summarize                %.3f s\n", summarize_s);
  std::printf("itl p50 / p99 (ms)       %.3f / %.3f\n", summary.itl_ms.p50, summary.itl_ms.p99);
  std::printf("goodput (req/s)          %.3f\n", summary.goodput);
  std::printf("peak RSS                 %.1f MB\n", peak_rss_mb());
  return 0;
}
