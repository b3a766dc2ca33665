// `twinserve trace stats|convert|generate`: inspect, transform and synthesise
// request traces (docs/traces.md).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "base/error.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "traces/generator.hpp"
#include "traces/length_dist.hpp"
#include "traces/trace_reader.hpp"
#include "traces/trace_stats.hpp"
#include "traces/trace_writer.hpp"
#include "traces/transforms.hpp"

namespace twin::cli {
namespace {

struct ReadFlags {
  std::string format = "auto";
  std::string on_bad_row = "error";
  bool keep_failed = false;
  std::int32_t hash_block_size = 0;
  double tolerance_s = 1.0;
  // Arrivals for traces without times (vidur-lengths, sharegpt).
  double rate = 0;
  std::string arrivals = "poisson";
  double cv = 1.0;
  std::uint64_t arrival_seed = 0;

  void add(CLI::App* sub) {
    sub->add_option("--format", format, "Input format: " + known_format_names())->capture_default_str();
    sub->add_option("--on-bad-row", on_bad_row, "error: stop at the first malformed row; skip: skip and count")
        ->capture_default_str();
    sub->add_flag("--keep-failed", keep_failed, "Keep BurstGPT rows with 0 response tokens (failed requests)");
    sub->add_option("--hash-block-size", hash_block_size,
                    "Tokens per hash id in Mooncake/Bailian traces (0: 512 for Mooncake, 16 for Bailian)")->check(int_range(0, 1 << 20));
    sub->add_option("--backwards-tolerance-s", tolerance_s,
                    "Rows may arrive this much earlier than the previous one (clamped) before it is an error")
        ->capture_default_str()->check(real_range(0, 9e9));
    sub->add_option("--rate", rate,
                    "Traces without arrival times (vidur-lengths, sharegpt): requests per second")
        ->check(real_range(0, 1e9, true));
    sub->add_option("--arrivals", arrivals, "With --rate: poisson | gamma | constant")->capture_default_str();
    sub->add_option("--cv", cv, "With --arrivals gamma: coefficient of variation of the gaps")
        ->capture_default_str()->check(real_range(0, 1e3, true));
    sub->add_option("--arrival-seed", arrival_seed, "With --rate: seed of the arrival process")
        ->capture_default_str()->check(CLI::NonNegativeNumber);
  }
  TraceReadOptions options() const {
    TraceReadOptions o;
    o.format = parse_format_name(format);
    o.on_bad_row = parse_bad_row_policy(on_bad_row);
    o.keep_failed = keep_failed;
    o.hash_block_size = hash_block_size;
    o.backwards_tolerance_s = tolerance_s;
    o.arrivals.rate = rate;
    o.arrivals.kind = parse_arrival_kind(arrivals, "--arrivals");
    o.arrivals.cv = cv;
    o.arrivals.seed = arrival_seed;
    return o;
  }
};

nlohmann::ordered_json length_json(const LengthStats& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
}

void report_skips(const TraceReadReport& rep) {
  if (rep.skipped_bad > 0)
    std::cerr << "twinserve: skipped " << rep.skipped_bad << " malformed row(s); first: " << rep.first_bad_row
              << "\n";
}

void run_stats(const std::string& path, const ReadFlags& flags, bool as_json) {
  TraceReader reader(path, flags.options());
  const TraceStats st = compute_stats(reader);
  const TraceReadReport& rep = reader.report();
  if (as_json) {
    nlohmann::ordered_json j;
    j["file"] = path;
    j["format"] = std::string(format_name(reader.format()));
    j["num_requests"] = st.num_requests;
    j["span_s"] = st.span_s;
    j["mean_rate"] = st.mean_rate;
    j["interarrival_cv"] = st.interarrival_cv;
    j["prompt_tokens"] = length_json(st.prompt_tokens);
    j["output_tokens"] = length_json(st.output_tokens);
    if (st.has_hash_ids) j["prefix_cache_share"] = st.prefix_cache_share;
    if (st.sessions > 0) j["num_sessions"] = st.sessions;
    j["skipped_bad_rows"] = rep.skipped_bad;
    j["skipped_failed_rows"] = rep.skipped_failed;
    j["reordered_rows"] = rep.reordered;
    std::cout << j.dump(2) << "\n";
  } else {
    auto line = [](const char* name, const LengthStats& s) {
      std::printf("%-16s mean %.1f  p50 %d  p90 %d  p99 %d  max %d\n", name, s.mean, s.p50, s.p90, s.p99, s.max);
    };
    std::printf("%-16s %s (%s)\n", "file", path.c_str(), std::string(format_name(reader.format())).c_str());
    std::printf("%-16s %lld\n", "requests", static_cast<long long>(st.num_requests));
    std::printf("%-16s %.3f s\n", "span", st.span_s);
    std::printf("%-16s %.4f req/s\n", "mean rate", st.mean_rate);
    std::printf("%-16s %.4f\n", "interarrival cv", st.interarrival_cv);
    line("prompt tokens", st.prompt_tokens);
    line("output tokens", st.output_tokens);
    if (st.has_hash_ids) std::printf("%-16s %.4f\n", "prefix cache", st.prefix_cache_share);
    if (st.sessions > 0) std::printf("%-16s %lld\n", "sessions", static_cast<long long>(st.sessions));
    if (rep.skipped_failed > 0)
      std::printf("%-16s %lld\n", "failed skipped", static_cast<long long>(rep.skipped_failed));
    if (rep.reordered > 0) std::printf("%-16s %lld\n", "reordered", static_cast<long long>(rep.reordered));
    std::fflush(stdout);
  }
  report_skips(rep);
}

// OUT's format: --to, else its extension (ours: .jsonl or .csv).
TraceFormat output_format(const std::string& out_path, const std::string& to) {
  auto ends_with = [&](std::string_view suffix) {
    return out_path.size() >= suffix.size() && out_path.compare(out_path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".gz") || ends_with(".zst"))
    throw UsageError("output '" + out_path + "': traces are written uncompressed; compress OUT afterwards (gzip, zstd)");
  return to.empty() ? output_format_for_path(out_path) : parse_output_format(to);
}

// Writes to a temporary next to OUT and renames at the end, so a failure
// leaves no half-written trace behind. Prints what the format could not hold.
template <class Source>
std::int64_t write_trace(const std::string& out_path, TraceFormat format, bool force, Source&& next) {
  if (!force && std::filesystem::exists(out_path))
    throw UsageError("output '" + out_path + "' exists; pass --overwrite (or --force) to replace it");
  const std::string tmp = out_path + ".tmp";
  std::int64_t rows = 0;
  try {
    TraceWriter writer(tmp, format, true);
    Request r;
    while (next(r)) writer.write(r);
    writer.close();
    rows = writer.rows();
    const std::string lost = writer.losses();
    if (!lost.empty())
      std::cerr << "twinserve: note: the " << format_name(format) << " format does not hold " << lost << "\n";
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  std::filesystem::rename(tmp, out_path);
  return rows;
}

// trace stats FILE
void install_stats(CLI::App* trace) {
  auto* sub = trace->add_subcommand("stats", "Count, rate, burstiness, length percentiles, prefix sharing");
  auto file = std::make_shared<std::string>();
  auto flags = std::make_shared<ReadFlags>();
  auto as_json = std::make_shared<bool>(false);
  sub->add_option("FILE", *file, "Trace file (format auto-detected)")->required();
  add_switch(*sub, FlagId::json, *as_json, "snake_case keys");
  flags->add(sub);
  sub->callback([=] { run_stats(*file, *flags, *as_json); });
}

// trace convert IN OUT
void install_convert(CLI::App* trace) {
  auto* sub = trace->add_subcommand(
      "convert", "Copy a trace into twinserve's JSONL or CSV (by OUT's extension) or, with --to, Mooncake, "
                 "Vidur or Azure form, optionally sliced, rate-scaled and clipped");
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto flags = std::make_shared<ReadFlags>();
  auto t = std::make_shared<TransformOptions>();
  auto force = std::make_shared<bool>(false);
  sub->add_option("IN", *in, "Input trace (any known format)")->required();
  auto to = std::make_shared<std::string>();
  sub->add_option("OUT", *out, "Output trace: .jsonl or .csv (ours), or any name with --to")->required();
  sub->add_option("--to", *to,
                  "Output format: jsonl | csv (ours, default: by OUT's extension), mooncake, vidur, azure "
                  "(for other tools; what they cannot hold is reported)");
  sub->add_option("--scale-rate", t->rate_scale, "Multiply the arrival rate by K (arrival times / K)")->check(real_range(0, 1e9, true));
  sub->add_option("--start-s", t->start_s, "Keep requests arriving at or after this time (s); output starts at 0")->check(real_range(0, 9e9));
  sub->add_option("--end-s", t->end_s, "Keep requests arriving before this time (s)")->check(real_range(0, 9e9, true));
  sub->add_option("--max-requests", t->max_requests, "Keep at most N requests")->check(CLI::NonNegativeNumber);
  sub->add_option("--max-prompt", t->max_prompt, "Clip prompt lengths to N tokens")->check(int_range(0, kMaxInt32));
  sub->add_option("--max-output", t->max_output, "Clip output lengths to N tokens")->check(int_range(0, kMaxInt32));
  add_switch(*sub, FlagId::overwrite, *force, "the trace OUT");
  flags->add(sub);
  sub->callback([=] {
    check_transform_options(*t);
    const TraceFormat format = output_format(*out, *to);
    TraceReader reader(*in, flags->options());
    TraceTransform transform([&reader](Request& r) { return reader.next(r); }, *t);
    const auto rows = write_trace(*out, format, *force, [&](Request& r) { return transform.next(r); });
    std::cerr << "twinserve: wrote " << rows << " request(s) to " << *out << "\n";
    report_skips(reader.report());
  });
}

// trace generate OUT
void install_generate(CLI::App* trace) {
  auto* sub = trace->add_subcommand("generate", "Synthesise a seeded workload (same options and seed, same bytes)");
  auto out = std::make_shared<std::string>();
  auto o = std::make_shared<GeneratorOptions>();
  auto arrivals = std::make_shared<std::string>("poisson");
  auto prefix = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  const std::string lengths = std::string("Length spec: ") + length_spec_help();
  sub->add_option("OUT", *out, "Output trace: .jsonl or .csv")->required();
  sub->add_option("--requests", o->max_requests, "Number of requests (0: until --duration-s)")->capture_default_str()->check(int_range(0, kMaxInt64));
  sub->add_option("--duration-s", o->duration_s, "Stop at this arrival time in seconds (0: no limit)")->check(real_range(0, 9e9));
  sub->add_option("--rate", o->rate, "Mean arrivals per second (new sessions per second with --sessions)")
      ->capture_default_str()->check(real_range(0, 1e9, true));
  sub->add_option("--arrivals", *arrivals, "poisson | gamma | constant | burst (every request at 0: static-batch experiments) | trace:PATH (replay its arrival times)")
      ->capture_default_str();
  sub->add_option("--cv", o->cv, "Gamma arrivals: coefficient of variation of the gaps (>1 is bursty)")
      ->capture_default_str()->check(real_range(0, 1e3, true));
  sub->add_option("--prompt", o->prompt, "Prompt lengths. " + lengths)->capture_default_str();
  sub->add_option("--output", o->output, "Output lengths. " + lengths)->capture_default_str();
  sub->add_option("--shared-prefix", *prefix,
                  "K:L:F: K system prompts of L tokens; a fraction F of requests starts with one");
  sub->add_option("--sessions", o->session_turns,
                  "Multi-turn sessions: turns per session as a length spec (e.g. uniform:2:8)");
  sub->add_option("--think-time-s", o->think_time_s, "Sessions: mean think time between turns (exponential)")
      ->capture_default_str()->check(real_range(0, 9e9));
  sub->add_option("--session-user-tokens", o->session_user_tokens,
                  "Sessions: new user tokens per later turn. " + lengths)
      ->capture_default_str();
  sub->add_option("--max-context", o->max_context, "Sessions: a session ends once its prompt would exceed this")
      ->capture_default_str()->check(int_range(1, kMaxInt32));
  sub->add_option("--hash-block-size", o->hash_block_size, "Tokens per hash id")->capture_default_str()->check(int_range(0, 1 << 20));
  add_flag(*sub, FlagId::seed, o->seed, "here the generator's")->capture_default_str();
  add_switch(*sub, FlagId::overwrite, *force, "the trace OUT");
  sub->callback([=] {
    GeneratorOptions opts = *o;
    parse_arrivals(*arrivals, opts);
    if (!prefix->empty()) parse_shared_prefix(*prefix, opts);
    TraceGenerator gen(opts);
    const auto rows = write_trace(*out, output_format(*out, ""), *force, [&](Request& r) { return gen.next(r); });
    std::cerr << "twinserve: wrote " << rows << " request(s) to " << *out << "\n";
  });
}

void install(CLI::App& root) {
  auto* trace = root.add_subcommand("trace", "Inspect, convert and generate request traces (docs/traces.md)");
  trace->require_subcommand(1);
  install_stats(trace);
  install_convert(trace);
  install_generate(trace);
}

RegisterCommand reg{"trace", install};

}  // namespace
}  // namespace twin::cli
