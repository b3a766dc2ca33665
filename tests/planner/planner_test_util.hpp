#pragma once
// Small traces for the planner tests, written as Vidur CSV
// (arrived_at,num_prefill_tokens,num_decode_tokens) so the CLI reads them too.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <unistd.h>

#include "planner/loaded_trace.hpp"
#include "traces/generator.hpp"

namespace twin::test {

// A file in this test process's own folder, removed when the process exits.
inline std::filesystem::path planner_tmp(const std::string& name) {
  struct Folder {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("twin_planner_" + std::to_string(::getpid()));
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static Folder folder;
  std::filesystem::create_directories(folder.path);
  return folder.path / name;
}

// n requests at exactly `rate` req/s, every prompt `prompt` tokens, `output` out.
inline LoadedTrace constant_trace(std::int32_t n, double rate, std::int32_t prompt, std::int32_t output) {
  LoadedTrace t;
  t.path = "constant";
  for (std::int32_t i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    r.arrival = static_cast<Time>(std::llround(i * 1e9 / rate));
    r.prompt_len = prompt;
    r.output_len = output;
    t.requests.push_back(r);
  }
  return t;
}

// Poisson arrivals, lognormal lengths: a chat-like mix, seeded.
inline LoadedTrace chat_trace(std::int32_t n, double rate, std::uint64_t seed = 7) {
  GeneratorOptions g;
  g.max_requests = n;
  g.rate = rate;
  g.prompt = "lognormal:median=400:sigma=0.8:max=4000";
  g.output = "lognormal:median=80:sigma=0.7:max=600";
  g.seed = seed;
  TraceGenerator gen(g);
  LoadedTrace t;
  t.path = "chat";
  Request r;
  while (gen.next(r)) t.requests.push_back(r);
  return t;
}

inline LoadedTrace scale_rate(LoadedTrace t, double factor) {
  for (auto& r : t.requests) r.arrival = static_cast<Time>(std::llround(static_cast<double>(r.arrival) / factor));
  return t;
}

inline std::string write_vidur(const LoadedTrace& t, const std::string& name) {
  const std::string path = planner_tmp(name).string();
  std::ofstream out(path);
  out << "arrived_at,num_prefill_tokens,num_decode_tokens\n";
  out.precision(12);
  for (const auto& r : t.requests) out << std::fixed << to_seconds(r.arrival) << "," << r.prompt_len << "," << r.output_len << "\n";
  return path;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace twin::test
