#include "validate/engine_serve.hpp"

#include <map>

#include "engine/runtime/executor.hpp"
#include "engine/runtime/wall_clock_driver.hpp"
#include "models/model_desc.hpp"

namespace twin {

EngineServer::EngineServer(const EngineSpec& spec)
    : spec_(spec), model_(model_config_from(resolve_model(spec.model.empty() ? spec.weights : spec.model))) {
  RunnerOptions ro;
  ro.backend = spec.backend;
  ro.threads = spec.threads;
  ro.weights_dir = spec.weights;
  ro.seed = spec.seed;
  ro.num_blocks = spec.replica.kv.num_blocks;
  ro.block_size = spec.replica.kv.block_size;
  ro.num_host_blocks = spec.replica.kv.num_host_blocks;
  runner_ = std::make_unique<ModelRunner>(model_, ro);
  // Per-op times for the report's op table: free on the CPU backend, a stall
  // per op on a GPU (it would change the run being validated).
  runner_->set_time_ops(runner_->device_threads() > 0);
}

EngineServer::~EngineServer() = default;

std::string EngineServer::description() const {
  return model_.name + " (" + runner_->weight_dtype_name() + ", " +
         (spec_.weights.empty() ? "random weights" : spec_.weights) + ") on " + runner_->device_name() + ", " +
         std::to_string(spec_.replica.kv.num_blocks) + " KV blocks of " + std::to_string(spec_.replica.kv.block_size) +
         " tokens, preset " + spec_.replica.scheduler.preset;
}

RunRecords EngineServer::serve(const std::vector<Request>& trace, const std::filesystem::path& dir, bool overwrite,
                               const nlohmann::ordered_json& echo) {
  RunRecorder recorder(dir, overwrite);
  ExecutorOptions eo;
  eo.seed = spec_.seed;
  Executor executor(*runner_, eo);
  Replica replica(spec_.replica, 0);
  DriveCallbacks callbacks;
  callbacks.on_request = [&](const RequestRecord& r) { recorder.on_request(r); };
  callbacks.on_step = [&](const StepRecord& s) { recorder.on_step(s); };
  DriveOptions options;
  options.token_seed = spec_.seed;  // as `twinserve run --seed`
  std::size_t i = 0;
  const DriveStats stats = drive_wall_clock(
      replica, executor,
      [&](Request& r) {
        if (i == trace.size()) return false;
        r = trace[i++];
        return true;
      },
      options, callbacks);
  SummaryContext context;
  context.num_replicas = 1;
  context.kv_blocks_capacity = spec_.replica.kv.num_blocks;
  context.wall_time_s = stats.wall_time_s;
  context.config = echo;
  context.config["mode"] = "engine";
  context.config["model"] = model_.name;
  context.config["weights"] = spec_.weights.empty() ? "random" : spec_.weights;
  context.config["weight_dtype"] = runner_->weight_dtype_name();
  context.config["backend"] = spec_.backend;
  context.config["device"] = runner_->device_name();
  context.config["seed"] = spec_.seed;
  context.config["scheduler_preset"] = spec_.replica.scheduler.preset;
  context.config["max_num_batched_tokens"] = effective_token_budget(spec_.replica.scheduler);
  context.config["max_num_seqs"] = spec_.replica.scheduler.max_num_seqs;
  context.config["max_model_len"] = spec_.replica.scheduler.max_model_len;
  context.config["enable_chunked_prefill"] = spec_.replica.scheduler.enable_chunked_prefill;
  context.config["block_size"] = spec_.replica.kv.block_size;
  context.config["enable_prefix_caching"] = spec_.replica.kv.enable_prefix_caching;
  context.config["num_gpu_blocks"] = spec_.replica.kv.num_blocks;
  context.config["unserved"] = stats.unserved;
  RunRecords records = recorder.finish(context);
  if (runner_->times_ops()) {
    std::map<std::uint64_t, OpTimes> by_step(executor.step_op_times().begin(), executor.step_op_times().end());
    for (const StepRecord& s : records.steps) {
      const auto it = by_step.find(s.step_id);
      if (it == by_step.end()) {  // a step the executor did not run: no op table rather than a wrong one
        records.step_op_ns.clear();
        break;
      }
      records.step_op_ns.push_back(it->second);
    }
  }
  return records;
}

}  // namespace twin
