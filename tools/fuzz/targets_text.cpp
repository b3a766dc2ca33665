// Fuzz targets over the text values of flags and config keys that have a
// grammar of their own: SLO lists, --vary axes, length distributions,
// generator specs, and scheduler / KV options (key=value, one per line, as
// flags and cluster configs set them).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "engine/core/replica.hpp"
#include "metrics/slo.hpp"
#include "planner/sweep.hpp"
#include "tools/fuzz/fuzz_target.hpp"
#include "traces/generator.hpp"
#include "traces/length_dist.hpp"
#include "traces/prng.hpp"

namespace twin::fuzz {
namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// --- SLO lists (--slo, cluster config "slos") ---

std::vector<std::string> slo_seeds() {
  return {"ttft_p90<=2s,tpot_p99<=100ms", "ttft_p99.9<=500ms, itl_p50<=20ms ,e2el<=10s", "tpot<=250us",
          "e2el_p100<=1.5s"};
}

void run_slo(const std::string& input, const Scratch&) {
  const std::vector<Slo> slos = parse_slos(input);
  // The canonical text (summary.json's echo) must read back the same.
  const std::string text = format_slos(slos);
  const std::vector<Slo> back = parse_slos(text);
  if (back.size() != slos.size()) throw std::logic_error("SLO round trip changed the count: " + text);
  for (std::size_t i = 0; i < slos.size(); ++i) {
    if (back[i].metric != slos[i].metric || back[i].percentile != slos[i].percentile ||
        back[i].threshold_ms != slos[i].threshold_ms) {
      throw std::logic_error("SLO round trip changed " + text);
    }
  }
}

bool names_slo(const std::string& message, const Scratch&) { return message.rfind("SLO", 0) == 0; }

// --- sweep --vary axes, one per line ---

std::vector<std::string> vary_seeds() {
  return {"max_num_batched_tokens=512,2048\nenable_prefix_caching=true,false",
          "router=round_robin,least_outstanding\nrate_scale=0.5,1,2", "tp=1,2\nmodel=llama-3.1-8b\npreset=vllm,sarathi",
          "scheduler.block_size=16,32\ngpu_memory_utilization=0.8,0.9\nseed=1,2"};
}

void run_vary(const std::string& input, const Scratch&) {
  std::vector<VaryAxis> axes;
  for (std::string_view line : lines_of(input)) axes.push_back(parse_vary(line));
  const ClusterConfig base;
  check_vary_axes(base, axes);
  std::vector<std::string> first;
  for (const VaryAxis& a : axes) first.push_back(a.values.empty() ? std::string() : a.values.front());
  double rate_scale = 1;
  (void)apply_vary(base, axes, first, rate_scale);
}

bool names_vary(const std::string& message, const Scratch&) {
  return message.find("--vary") != std::string::npos || message.find('\'') != std::string::npos ||
         message.find('"') != std::string::npos;
}

// --- length distributions (--prompt, --output, --session-user-tokens) ---

std::vector<std::string> length_seeds() {
  return {"lognormal:median=800:sigma=1", "lognormal:mean=200:sigma=0.8:max=4096", "uniform:32:256", "fixed:100",
          "zipf:max=1000:s=1.2", "fixed:1"};
}

void run_length(const std::string& input, const Scratch&) {
  const LengthDist dist = LengthDist::parse(input, "--prompt");
  Rng rng(7);
  for (int i = 0; i < 64; ++i) {
    if (dist.sample(rng) < 0) throw std::logic_error("negative length from '" + input + "'");
  }
}

bool names_flag(const std::string& message, const Scratch&) {
  return message.find("--prompt") != std::string::npos;
}

// --- generator specs: line 1 --arrivals, line 2 --shared-prefix, line 3 --sessions ---

std::vector<std::string> generator_seeds() {
  return {"poisson\n8:512:0.5\nuniform:2:8", "gamma\n1:16:1\n", "constant\n\n", "poisson\n2:4:0\nfixed:3"};
}

void run_generator(const std::string& input, const Scratch&) {
  const std::vector<std::string_view> lines = lines_of(input);
  GeneratorOptions options;
  options.max_requests = 16;
  options.rate = 50;
  options.prompt = "uniform:1:64";
  options.output = "uniform:1:8";
  options.session_user_tokens = "uniform:1:16";
  options.think_time_s = 0.1;
  options.max_context = 512;
  if (lines.size() > 0) parse_arrivals(lines[0], options);
  if (lines.size() > 1 && !lines[1].empty()) parse_shared_prefix(lines[1], options);
  if (lines.size() > 2) options.session_turns = std::string(lines[2]);
  TraceGenerator generator(options);
  Request req;
  while (generator.next(req)) {
  }
}

bool names_generator_flag(const std::string& message, const Scratch&) {
  return message.find("--") != std::string::npos || message.find("arrival") != std::string::npos ||
         message.find("prefix") != std::string::npos || message.find("session") != std::string::npos;
}

// --- scheduler / KV options, key=value per line; "preset=NAME" first picks the preset ---

std::vector<std::string> option_seeds() {
  return {"preset=vllm\nmax_num_batched_tokens=2048\nmax_num_seqs=128\nnum_gpu_blocks=4096\nblock_size=16",
          "preset=sarathi\nenable_prefix_caching=false\nnum_blocks=100\nwatermark=0.01\nmax_model_len=4096",
          "preset=vllm-v0\npreemption=swap\nnum_host_blocks=64\nnum_gpu_blocks=256",
          "preset=static\nnum_gpu_blocks=1000000\nblock_size=1", "preset=lightllm\nnum_gpu_blocks=67108864"};
}

void run_options(const std::string& input, const Scratch&) {
  std::vector<std::string_view> lines = lines_of(input);
  std::string_view preset = "vllm";
  if (!lines.empty() && lines.front().rfind("preset=", 0) == 0) {
    preset = lines.front().substr(7);
    lines.erase(lines.begin());
  }
  ReplicaConfig config = replica_preset(preset);
  for (std::string_view line : lines) {
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) throw UsageError("option '" + excerpt(line) + "': expected KEY=VALUE");
    set_replica_option(config, line.substr(0, eq), line.substr(eq + 1));
  }
  if (config.kv.num_blocks == 0) config.kv.num_blocks = 1024;
  validate(config);
  // Building the replica builds its KV cache: a pool of any size the
  // options allow must cost no more than the blocks in use.
  Replica replica(config, 0);
  (void)replica.plan(0);
}

// An option's own error quotes its key; the cross-option checks (validate)
// name the keys they compare after the part that checks them.
bool names_key(const std::string& message, const Scratch&) {
  return message.find('\'') != std::string::npos || message.find("preset") != std::string::npos ||
         message.rfind("scheduler config: ", 0) == 0 || message.rfind("replica config: ", 0) == 0 ||
         message.rfind("kv cache: ", 0) == 0;
}

FuzzTarget text_target(const char* name, const char* summary, std::vector<std::string> (*seeds)(),
                       void (*run)(const std::string&, const Scratch&),
                       bool (*names)(const std::string&, const Scratch&)) {
  FuzzTarget t;
  t.name = name;
  t.summary = summary;
  t.seeds = seeds;
  t.run = run;
  t.names_origin = names;
  t.max_bytes = 4096;
  return t;
}

}  // namespace

std::vector<FuzzTarget> text_targets() {
  return {
      text_target("slo", "SLO list (parse_slos; the canonical text must read back the same)", slo_seeds, run_slo,
                  names_slo),
      text_target("vary", "sweep --vary axes, one per line (parse_vary, check_vary_axes, apply_vary)", vary_seeds,
                  run_vary, names_vary),
      text_target("length-dist", "length distribution spec (LengthDist::parse, then samples)", length_seeds,
                  run_length, names_flag),
      text_target("generator", "--arrivals / --shared-prefix / --sessions, one per line (then 16 requests)",
                  generator_seeds, run_generator, names_generator_flag),
      text_target("scheduler-options", "scheduler / KV options KEY=VALUE per line (set_replica_option, validate, "
                  "a replica built)", option_seeds, run_options, names_key),
  };
}

}  // namespace twin::fuzz
