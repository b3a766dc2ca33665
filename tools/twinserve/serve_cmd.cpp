// twinserve serve: an OpenAI-compatible HTTP server (serve/, docs/serve.md)
// over the real engine (the same flags as `run`) or, with --simulate, over
// the simulator's cost model paced on the wall clock. Either way the one
// serving core schedules the requests; on SIGTERM or Ctrl-C the server
// stops admitting, lets what is in flight finish for --shutdown-timeout
// seconds, aborts the rest ("interrupted") and writes requests.csv,
// steps.csv and summary.json to --out.
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "engine/core/serving_loop.hpp"
#include "engine/runtime/engine_setup.hpp"
#include "engine/runtime/executor.hpp"
#include "engine/runtime/engine.hpp"
#include "metrics/collector.hpp"
#include "metrics/kv_tier_tally.hpp"
#include "metrics/result_sink.hpp"
#include "metrics/run_writer.hpp"
#include "metrics/summary_table.hpp"
#include "serve/byte_tokenizer.hpp"
#include "serve/http_front.hpp"
#include "serve/request_inbox.hpp"
#include "serve/serve_clock.hpp"
#include "serve/serve_metrics.hpp"
#include "serve/step_backends.hpp"
#include "sim/replica_pricing.hpp"
#include "sim/cluster.hpp"
#include "sim/cluster_config.hpp"
#include "sim/run.hpp"
#include "sim/virtual_clock.hpp"
#include "tools/twinserve/command_registry.hpp"
#include "tools/twinserve/flag_registry.hpp"
#include "tools/twinserve/common_flags.hpp"
#include "tools/twinserve/engine_setup_flags.hpp"
#include "tools/twinserve/flag_checks.hpp"
#include "tools/twinserve/interrupt_guard.hpp"
#include "tools/twinserve/scheduler_flags.hpp"

namespace twin::cli {
namespace {

struct ServeArgs {
  std::optional<std::string> model, weights, served_model_name, hardware, profile;
  EngineFlags engine;
  EngineMemoryFlags memory;
  SchedulerFlags sched;
  OutputFlags out;
  bool simulate = false, no_steps = false;
  std::int32_t tp = 1;
  std::uint64_t seed = 0;
  std::optional<std::int32_t> eos_token;
  std::string host = "127.0.0.1";
  std::int32_t port = 8000;
  // At least bench's default pool (--connections 256): each kept-alive connection
  // holds a thread, so a smaller pool made every request from the 129th of a
  // default bench wait for a keep-alive timeout (about a second).
  std::int32_t http_threads = 320;
  double shutdown_timeout_s = 5;
  // Guards against clients (docs/serve.md, "Limits").
  std::uint64_t max_request_bytes = std::uint64_t{32} << 20;
  double request_read_timeout_s = 30;
  double keep_alive_timeout_s = 5;
};

// What serves the steps, and what summary.json says about it.
struct Served {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Executor> executor;
  ReplicaConfig replica;
  std::string model_name;
  std::int64_t vocab_size = 0;
  std::unique_ptr<LiveStepBackend> backend;
  nlohmann::ordered_json echo;
  std::string description;
  // KV tiers (--kv-offload-*): bytes per block for summary.json's kv_tiers,
  // and whether their loads overlap compute (simulated only).
  double kv_block_bytes = 0;
  bool tier_load_overlap = false;
};

Served build_engine(const ServeArgs& a, const RequestInbox& inbox) {
  EngineSetup setup = engine_setup_from_flags(a.model.value_or(""), a.sched, a.engine, a.memory, a.seed);
  setup.runner.weights_dir = a.weights.value_or("");
  setup.sampling.seed = a.seed;
  setup.sampling.eos_token = -1;  // the server's clock applies EOS per request (ignore_eos)
  EngineSettings es = engine_settings(setup);
  es.replica.scheduler.stop_at_eos = true;  // stop strings and EOS end a request at their token
  Served s;
  s.engine = std::make_unique<Engine>(es);
  if (const std::string plan = s.engine->memory_plan_line(); !plan.empty()) std::cerr << plan << "\n";
  s.description = "engine: " + s.engine->description();
  s.executor = std::make_unique<Executor>(s.engine->runner(), s.engine->settings().sampling, nullptr);
  s.replica = s.engine->replica_config();
  s.model_name = s.engine->model().name;
  s.vocab_size = s.engine->model().vocab_size;
  s.backend = std::make_unique<EngineStepBackend>(*s.executor, inbox, a.seed);
  s.echo = s.engine->config_echo();
  s.kv_block_bytes = static_cast<double>(s.engine->runner().kv_block_bytes());
  return s;
}

Served build_simulated(const ServeArgs& a, const ByteTokenizer*& tokenizer_out, std::unique_ptr<ByteTokenizer>& keep) {
  if (a.weights) throw UsageError("--weights is the engine's; --simulate prices steps with the cost model");
  ClusterConfig c;
  c.groups.emplace_back();
  ReplicaGroupConfig& g = c.groups.front();
  if (a.model) g.model = *a.model;
  g.hardware = a.hardware.value_or("h100-80gb");
  if (a.engine.dtype != "auto") g.dtype = a.engine.dtype;
  if (a.engine.kv_cache_dtype != "auto") g.kv_dtype = a.engine.kv_cache_dtype;
  g.tp = a.tp;
  if (a.profile) g.profile = *a.profile;
  if (a.sched.preset) c.scheduler_preset = *a.sched.preset;
  c.seed = a.seed;
  c.gpu_memory_utilization = a.memory.gpu_memory_utilization;
  if (a.memory.num_gpu_blocks) c.num_gpu_blocks_override = *a.memory.num_gpu_blocks;
  c.overrides = scheduler_overrides(a.sched);
  c.overrides.max_model_len = max_model_len_number(a.memory.max_model_len);
  c.max_model_len_auto = max_model_len_is_auto(a.memory.max_model_len);
  // The engine's KV tier flags, priced as simulate prices its own (DRAM above SSD).
  for (const auto& [name, gib] : {std::pair{"dram", a.memory.kv_offload_dram_gib}, std::pair{"ssd", a.memory.kv_offload_ssd_gib}}) {
    if (gib <= 0) continue;
    KvTierSpec t;
    t.name = name;
    t.capacity_gib = gib;
    c.kv_tiers.push_back(t);
  }
  Cluster cluster = build_cluster(c);
  Served s;
  SimReplicaSpec& spec = cluster.replicas.at(0);
  s.replica = spec.config;
  s.replica.scheduler.stop_at_eos = true;
  s.model_name = cluster.groups.front().model.name;
  s.vocab_size = cluster.groups.front().model.vocab_size;
  keep = std::make_unique<ByteTokenizer>(s.vocab_size);
  tokenizer_out = keep.get();
  std::vector<VirtualClock::Pricing> pricing = pricing_of({spec});
  s.backend = std::make_unique<PacedStepBackend>(std::make_unique<VirtualClock>(pricing), *keep, a.seed);
  s.echo = config_echo(c, cluster);
  if (const auto& tiers = cluster.groups.front().tiers) {
    s.kv_block_bytes = tiers->block_bytes();
    s.tier_load_overlap = tiers->load_overlap();
  }
  s.echo["mode"] = "simulated";
  s.description = "simulated: " + describe_cluster(cluster);
  return s;
}

void check_serve_args(const ServeArgs& a) {
  if (!a.simulate && !a.model && !a.weights) {
    throw UsageError("serve needs --model NAME (or --weights DIR holding a config.json), or --simulate");
  }
  if (!a.simulate && (a.hardware || a.profile || a.tp != 1)) {
    throw UsageError("--hw, --profile and --tp describe simulated hardware: they need --simulate");
  }
  if (!(a.shutdown_timeout_s >= 0 && a.shutdown_timeout_s <= 86400)) {
    throw UsageError("--shutdown-timeout must be 0 to 86400 seconds");
  }
}

HttpFrontOptions front_options_for(const ServeArgs& a, const std::string& name, const Served& s) {
  HttpFrontOptions front_options;
  front_options.host = a.host;
  front_options.port = a.port;
  front_options.threads = a.http_threads;
  front_options.max_request_bytes = static_cast<std::size_t>(a.max_request_bytes);
  front_options.connection.request_read_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(a.request_read_timeout_s * 1000));
  front_options.connection.keep_alive_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(a.keep_alive_timeout_s * 1000));
  front_options.limits.model_name = name;
  front_options.limits.vocab_size = s.vocab_size;
  front_options.limits.max_model_len = s.replica.scheduler.max_model_len;
  return front_options;
}

// The run's summary: the collector's figures with the served setup echoed
// and the replica's KV tiers tallied.
Summary serve_summary(const Served& s, MetricsCollector& collector, const ServingStats& stats, double wall_s,
                      const std::string& name, const Replica& replica) {
  SummaryContext context;
  context.num_replicas = 1;
  context.kv_blocks_capacity = s.replica.kv.num_blocks;
  context.simulated_time_s = to_seconds(stats.end_time);
  context.wall_time_s = wall_s;
  nlohmann::ordered_json& echo = context.config;
  for (const auto& [key, value] : s.echo.items()) echo[key] = value;
  echo["served_model_name"] = name;
  echo["frontend"] = "openai-http";
  echo["unserved"] = stats.unserved;
  echo["interrupted_requests"] = stats.interrupted;
  Summary summary = collector.summarize(context);
  if (!s.replica.kv.tiers.empty()) {
    KvTierTally tally;
    tally.add(replica.kv_cache(), s.replica.kv.block_size, s.kv_block_bytes);
    tally.finish(summary, s.backend->tier_load_stall_s(), s.tier_load_overlap);
  }
  return summary;
}

// The server assembled in order (engine or simulator, front, loop, shutdown),
// its objects outliving each other in this frame.
void serve(const ServeArgs& a) {
  check_serve_args(a);
  ResultFileOptions files;
  if (a.no_steps) files.steps.every = 0;
  RunWriter writer({a.out.dir, a.out.overwrite, files, false});  // claimed before the weights load
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not the end of the server
  const InterruptGuard interrupts;

  RequestInbox inbox(std::chrono::steady_clock::now());
  std::unique_ptr<ByteTokenizer> tokenizer_keep;
  const ByteTokenizer* tokenizer = nullptr;
  Served s = a.simulate ? build_simulated(a, tokenizer, tokenizer_keep) : build_engine(a, inbox);
  if (!tokenizer) {
    tokenizer_keep = std::make_unique<ByteTokenizer>(s.vocab_size);
    tokenizer = tokenizer_keep.get();
  }
  std::cerr << s.description << "\n";
  const std::string name = a.served_model_name.value_or(s.model_name);

  ResultColumns columns;
  for (const KvTierConfig& t : s.replica.kv.tiers) columns.tiers.push_back(t.name);
  writer.open(columns);
  MetricsCollector collector;
  ResultSink sink(collector, writer.requests(), writer.steps(), [&](const RequestRecord&) {
    writer.flush_requests();  // a reader sees each request as it ends
  });

  ServeMetrics metrics(name, s.replica.scheduler.max_model_len);
  ServeClockOptions clock_options;
  clock_options.eos_token = a.eos_token.value_or(-1);
  clock_options.signalled = [] { return InterruptGuard::received() != 0; };
  clock_options.grace = std::chrono::nanoseconds(from_seconds(a.shutdown_timeout_s));
  ServeClock clock(inbox, *s.backend, metrics, *tokenizer, clock_options);

  HttpFront front(inbox, metrics, *tokenizer, front_options_for(a, name, s));
  const int port = front.bind();
  front.start();
  std::cout << "twinserve serve: listening on http://" << a.host << ":" << port << " (model " << name << ", "
            << (a.simulate ? "simulated" : "engine") << ")" << std::endl;

  Replica replica(s.replica, 0);
  ServingOptions loop_options;
  loop_options.record_steps = true;
  ServingLoop<ServeClock> loop(std::span<Replica>(&replica, 1), clock, loop_options);
  const auto start = std::chrono::steady_clock::now();
  const ServingStats stats = loop.run_live(inbox, sink);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  StreamEnd unserved;
  unserved.outcome = Outcome::aborted;
  unserved.reason = "interrupted";
  for (const auto& stream : inbox.drain_unserved()) {
    if (stream) stream->publish_end(unserved);
  }
  front.stop();

  const Summary summary = serve_summary(s, collector, stats, wall_s, name, replica);
  writer.finish(summary, {"twinserve-serve", s.model_name, vllm_result_date()});
  print_summary_table(std::cout, summary);
  std::cout << "Served " << stats.arrivals << " requests in " << stats.steps << " steps, " << wall_s << " s wall; "
            << stats.interrupted << " in flight at shutdown aborted (reason 'interrupted')\n";
  if (writer.writes()) std::cout << "Wrote results to " << a.out.dir << "\n";
}

const RegisterCommand registration{"serve", [](CLI::App& root) {
  auto args = std::make_shared<ServeArgs>();
  auto& a = *args;
  auto* sub = root.add_subcommand(
      "serve", "Serve the OpenAI API (/v1/completions, /v1/chat/completions, /metrics) on the engine or, with "
               "--simulate, on the simulator's cost model paced on the wall clock (docs/serve.md)");
  add_flag(*sub, FlagId::model, a.model, "default: --weights' config.json");
  add_flag(*sub, FlagId::weights, a.weights, "the engine only");
  sub->add_option("--served-model-name", a.served_model_name, "The model name clients send and /v1/models lists "
                                                              "(default: the model's)");
  sub->add_flag("--simulate", a.simulate, "No engine: each step lasts what the simulator's cost model prices it at, "
                                          "waited on the wall clock (a mocker of hardware that may not exist)");
  add_flag(*sub, FlagId::hardware, a.hardware, "--simulate only (default h100-80gb)");
  add_flag(*sub, FlagId::profile, a.profile, "--simulate only: the cost model instead of the roofline");
  add_flag(*sub, FlagId::tensor_parallel, a.tp, "--simulate only");
  add_engine_flags(*sub, a.engine);
  add_engine_memory_flags(*sub, a.memory);
  add_kv_offload_flags(*sub, a.memory);
  add_scheduler_flags(*sub, a.sched);
  add_flag(*sub, FlagId::seed, a.seed, "here random weights and requests sent without a seed");
  add_flag(*sub, FlagId::eos_token, a.eos_token, "unless it sends ignore_eos; random weights have no EOS");
  sub->add_option("--host", a.host, "Address to listen on (default 127.0.0.1)");
  sub->add_option("--port", a.port, "Port (default 8000; 0: a free one, printed on stdout)")->check(int_range(0, 65535));
  sub->add_option("--http-threads", a.http_threads, "HTTP worker threads; each open stream holds one, further "
                                                    "connections wait (default 320)")
      ->check(int_range(1, 4096));
  sub->add_option("--shutdown-timeout", a.shutdown_timeout_s, "Seconds in-flight requests may finish after SIGTERM/"
                                                              "Ctrl-C before they are aborted (default 5; 0: at once)")
      ->check(real_range(0, 86400));
  sub->add_option("--max-request-bytes", a.max_request_bytes, "Largest request body; a larger one is a 413, refused "
                                                             "before it is read whole (default 33554432, 32 MiB)")
      ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 40));
  sub->add_option("--request-read-timeout", a.request_read_timeout_s,
                  "Seconds a client has to send a whole request, head and body; then the connection closes, "
                  "so slow clients cannot hold the HTTP threads (default 30)")
      ->check(real_range(0.001, 86400));
  sub->add_option("--keep-alive-timeout", a.keep_alive_timeout_s,
                  "Seconds a kept-alive connection may idle between requests (default 5, as vLLM's)")
      ->check(real_range(0.001, 86400));
  add_output_flags(*sub, a.out, "Write requests.csv, steps.csv and summary.json here at shutdown", false);
  add_switch(*sub, FlagId::no_steps, a.no_steps);
  sub->callback([args] { serve(*args); });
}};

}  // namespace
}  // namespace twin::cli
