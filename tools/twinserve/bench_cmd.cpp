// twinserve bench: replay a trace against any OpenAI-compatible server
// (twinserve serve, a real vLLM, anything with /v1/completions) and write
// what the client saw in the schema run and simulate write (docs/bench.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "engine/runtime/prompt_tokens.hpp"
#include "metrics/collector.hpp"
#include "metrics/output_dir.hpp"
#include "metrics/request_csv.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/summary_json.hpp"
#include "metrics/summary_table.hpp"
#include "metrics/vllm_detailed.hpp"
#include "metrics/vllm_result.hpp"
#include "models/model_desc.hpp"
#include "tools/twinserve/bench_replay.hpp"
#include "tools/twinserve/bench_server_check.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/progress_line.hpp"
#include "traces/trace_reader.hpp"

namespace twin::cli {
namespace {

struct BenchArgs {
  TraceInputFlags in;
  OutputFlags out{"bench", false};
  std::string base_url, endpoint = "/v1/completions", model, prompt_format = "tokens";
  std::optional<std::int64_t> vocab_size;
  std::uint64_t seed = 0;
  bool asap = false, quiet = false;
  std::string request_rate;  // only "inf": the same as --asap, vllm bench serve's spelling
  std::int32_t max_concurrency = 0, connections = 256;
  double timeout_s = 600;
};

// The first model the server lists (GET /v1/models), as vllm bench serve
// picks it; a server that cannot be reached is the error here, named by URL.
std::string first_model(CompletionClient& client) {
  std::string error;
  const auto body = client.get("/v1/models", error);
  if (!body) throw Error(error);
  try {
    const auto j = nlohmann::json::parse(*body);
    if (j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].contains("id") &&
        j["data"][0]["id"].is_string()) {
      return j["data"][0]["id"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  throw Error("/v1/models: the server lists no model (expected {\"data\": [{\"id\": ...}]}); give --model");
}

// Token ids are drawn below the model's vocabulary when twinserve knows the
// model (a bundled name or a config.json), else below --vocab-size.
std::int64_t vocab_for(const BenchArgs& a, const std::string& model) {
  if (a.vocab_size) return *a.vocab_size;
  try {
    return resolve_model(model).vocab_size;
  } catch (const Error&) {
    std::cerr << "bench: model '" << model << "' is not one twinserve knows; prompt token ids are drawn below 32000 "
              << "(--vocab-size sets it)\n";
    return 32000;
  }
}

// The server's /metrics, or "" when it has none (not every server does).
std::string scrape_metrics(CompletionClient& client) {
  std::string error;
  return client.get("/metrics", error).value_or("");
}

// The server's /metrics after the run ("" when it had none before it).
std::string scrape_after(const BenchOptions& o, double timeout_s, const std::string& metrics_before) {
  if (metrics_before.empty()) return "";
  CompletionClient client(o.url, o.endpoint, std::min(timeout_s, 30.0));
  return scrape_metrics(client);
}

// metrics.prom: the two scrapes, before and after the run, one after the
// other (the second begins where a series repeats): a run that calibrate
// --measured reads as scrapes (docs/calibrate.md).
void write_scrapes(const OutputDir& out, const std::string& before, const std::string& after) {
  if (before.empty() || after.empty()) return;
  std::ofstream file = out.open("metrics.prom");
  file << before << (before.back() == '\n' ? "" : "\n") << after << (after.back() == '\n' ? "" : "\n");
  if (!file) throw Error((out.path() / "metrics.prom").string() + ": write failed");
}

std::vector<Request> read_requests(const BenchArgs& a) {
  TraceReader reader(a.in.path, trace_read_options(a.in));
  std::vector<Request> out;
  Request r;
  while ((a.in.max_requests <= 0 || static_cast<std::int64_t>(out.size()) < a.in.max_requests) && reader.next(r)) {
    out.push_back(r);
  }
  if (out.empty()) throw Error(a.in.path + ": the trace has no requests");
  return out;
}

SummaryContext summary_context(const BenchArgs& a, const BenchOptions& o, const BenchResult& result) {
  SummaryContext context;
  context.num_replicas = 1;
  context.simulated_time_s = to_seconds(result.wall);
  context.wall_time_s = to_seconds(result.wall);
  context.config["client"] = "twinserve bench";
  context.config["base_url"] = a.base_url;
  context.config["endpoint"] = o.endpoint;
  context.config["model"] = o.model;
  context.config["trace"] = a.in.path;
  if (a.in.max_requests > 0) context.config["max_requests"] = a.in.max_requests;
  context.config["prompt_format"] = o.prompt_format;
  context.config["asap"] = a.asap;
  context.config["max_concurrency"] = a.max_concurrency > 0 ? nlohmann::ordered_json(a.max_concurrency) : nullptr;
  if (result.interrupted) context.config["interrupted"] = true;
  return context;
}

// summary.json (with the server check last) and vllm_result.json.
void write_json_files(const OutputDir& out, const Summary& summary, const ServerTtftCheck& server_check,
                      const BenchArgs& a, const BenchOptions& o, const BenchResult& result) {
  std::ofstream json = out.open("summary.json");
  nlohmann::ordered_json summary_json = summary_to_json(summary);
  summary_json["server_ttft"] = server_ttft_json(server_check);
  json << summary_json.dump(2) << "\n";
  if (!json) throw Error((out.path() / "summary.json").string() + ": write failed");
  nlohmann::ordered_json vllm = vllm_result_json(summary, {"twinserve-bench", o.model, vllm_result_date()});
  // vLLM's --backend names the request function, as endpoint_type does.
  vllm["endpoint_type"] = vllm["backend"] = is_chat(o.endpoint) ? "openai-chat" : "openai";
  vllm["max_concurrency"] = a.max_concurrency > 0 ? nlohmann::ordered_json(a.max_concurrency) : nullptr;
  add_vllm_detailed(vllm, result.entries);
  std::ofstream vllm_file = out.open("vllm_result.json");
  vllm_file << vllm.dump(2) << "\n";
  if (!vllm_file) throw Error((out.path() / "vllm_result.json").string() + ": write failed");
}

void run(const BenchArgs& a) {
  BenchOptions o;
  o.url = parse_base_url(a.base_url);
  o.endpoint = a.endpoint.empty() || a.endpoint.front() != '/' ? "/" + a.endpoint : a.endpoint;
  if (is_chat(o.endpoint) && a.prompt_format == "tokens") {
    throw UsageError("--endpoint " + o.endpoint + " takes text messages: add --prompt-format text");
  }
  o.prompt_format = a.prompt_format;
  o.asap = a.asap;
  o.max_concurrency = a.max_concurrency;
  o.connections = a.connections;
  o.timeout_s = a.timeout_s;
  o.seed = a.seed;
  // Output folder first: a run of minutes is not lost to an existing file.
  const OutputDir out(a.out.dir, a.out.overwrite, {"requests.csv", "summary.json", "vllm_result.json", "metrics.prom"});
  std::string metrics_before;  // the server's /metrics before the run ("" when it has none)
  {
    CompletionClient probe(o.url, o.endpoint, std::min(a.timeout_s, 30.0));
    o.model = a.model.empty() ? first_model(probe) : a.model;
    if (!a.model.empty()) {
      std::string error;
      if (!probe.get("/v1/models", error) && error.rfind("cannot reach", 0) == 0) throw Error(error);
    }
    metrics_before = scrape_metrics(probe);
  }
  o.vocab_size = vocab_for(a, o.model);
  std::vector<Request> trace = read_requests(a);
  for (Request& r : trace) materialize_prompt_tokens(r, o.vocab_size, o.seed);

  ProgressLine progress("bench", "requests", !a.quiet);
  const auto total = static_cast<std::int64_t>(trace.size());
  o.progress = [&](std::int64_t ended) { progress.update(ended, total); };
  const InterruptGuard interrupts;  // the first Ctrl-C cancels the streams in flight, the records are written
  o.stop = [] { return InterruptGuard::stop_requested(); };
  if (!a.quiet) {
    std::cerr << "bench: " << trace.size() << " requests to " << o.url.scheme_host_port << o.url.prefix << o.endpoint
              << " (model " << o.model << ", "
              << (a.asap ? "all at once" : "at the trace's timestamps")
              << (a.max_concurrency > 0 ? ", at most " + std::to_string(a.max_concurrency) + " in flight" : "") << ")\n";
  }
  const BenchResult result = run_bench(std::move(trace), o);
  progress.finish();
  // The client's TTFT against the server's: its records of the same
  // requests when it sent them (twinserve serve), else its /metrics histogram.
  const std::string metrics_after = scrape_after(o, a.timeout_s, metrics_before);
  const ServerTtftCheck server_check = check_server_ttft(result.ttfts, metrics_before, metrics_after);
  write_scrapes(out, metrics_before, metrics_after);

  // requests.csv in end order, as run and simulate write it.
  std::vector<const RequestRecord*> by_end;
  for (const RequestRecord& r : result.records) by_end.push_back(&r);
  std::stable_sort(by_end.begin(), by_end.end(),
                   [](const RequestRecord* x, const RequestRecord* y) { return x->finish < y->finish; });
  MetricsCollector collector;
  std::ofstream requests_file = out.open("requests.csv");
  RequestCsvWriter requests(requests_file);
  ResultSink sink(collector, &requests, nullptr);
  for (const RequestRecord* r : by_end) sink.on_request(*r);
  requests_file.flush();
  if (!requests_file) throw Error((out.path() / "requests.csv").string() + ": write failed");

  Summary summary = collector.summarize(summary_context(a, o, result));
  if (const std::string w = server_ttft_warning(server_check); !w.empty()) summary.warnings.push_back(w);
  write_json_files(out, summary, server_check, a, o, result);
  print_summary_table(std::cout, summary);
  print_summary_warnings(std::cerr, summary);
  if (result.late_sends > 0) {
    std::cerr << "warning: " << result.late_sends << " requests were sent over 10 ms after their timestamp (the latest "
              << to_seconds(result.max_send_lag) << " s behind): every connection was busy; raise --connections\n";
  }
  std::cout << "Wrote requests.csv, summary.json and vllm_result.json to " << a.out.dir << "\n";
  if (result.interrupted) {
    throw Interrupted(
                "the requests not finished are recorded as aborted");
  }
}

const RegisterCommand registration{"bench", [](CLI::App& root) {
  auto args = std::make_shared<BenchArgs>();
  auto* sub = root.add_subcommand(
      "bench", "Replay a trace against an OpenAI-compatible server (streaming) and write the client's view");
  auto& a = *args;
  add_trace_input_flags(*sub, a.in, "Request trace (any format `trace stats` reads)", true);
  sub->add_option("--base-url", a.base_url, "Server, e.g. http://127.0.0.1:8000 (a path after the port prefixes the endpoint)")
      ->required();
  sub->add_option("--endpoint", a.endpoint, "API endpoint: /v1/completions (default) or /v1/chat/completions");
  add_flag(*sub, FlagId::model, a.model, "the name sent in each request (default: the first of the server's /v1/models)");
  sub->add_option("--prompt-format", a.prompt_format,
                  "tokens (default): prompts as token-id lists, the trace's exact lengths and shared prefixes; "
                  "text: one word per token (the server's tokenizer decides the count)")
      ->check(CLI::IsMember({"tokens", "text"}));
  sub->add_option("--vocab-size", a.vocab_size,
                  "Prompt token ids are drawn below this (default: the model's vocabulary if twinserve knows the model, else 32000)")
      ->check(int_range(2, kMaxInt32));
  add_flag(*sub, FlagId::seed, a.seed, "here the prompt tokens (as `run` materialises them)");
  add_switch(*sub, FlagId::asap, a.asap);
  add_flag(*sub, FlagId::request_rate, a.request_rate, "here the same as --asap");
  refuse_flag(*sub, FlagId::sessions,
              "bench sends the trace's rows as they are (a session's turns at their trace times); closed-loop "
              "sessions are simulated: `simulate --sessions`");
  add_flag(*sub, FlagId::max_concurrency, a.max_concurrency, "here one thread each: at most 4096")
      ->check(int_range(1, 4096));
  sub->add_option("--connections", a.connections,
                  "Without --max-concurrency: the pool of connections (one thread each, default 256); a request "
                  "finding all busy is sent late, and the bench says so")
      ->check(int_range(1, 4096));
  sub->add_option("--timeout", a.timeout_s, "Seconds to wait for a response's next bytes (default 600)")
      ->check(real_range(0.001, 1e6));
  add_output_flags(*sub, a.out, "Write requests.csv, summary.json and vllm_result.json here (default ./bench)", false);
  add_switch(*sub, FlagId::quiet, a.quiet);
  sub->callback([args] {
    if (args->request_rate == "inf") args->asap = true;
    run(*args);
  });
}};

}  // namespace
}  // namespace twin::cli
