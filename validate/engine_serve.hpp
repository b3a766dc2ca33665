#pragma once
// The engine side of a validation: one model runner (weights loaded once)
// serving each scaled trace against the wall clock through the same driver
// and replica as `twinserve run`, written in the shared schema.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/replica.hpp"
#include "engine/core/request.hpp"
#include "engine/runtime/model_config.hpp"
#include "engine/runtime/model_runner.hpp"
#include "validate/run_recorder.hpp"

namespace twin {

struct EngineSpec {
  std::string model;        // name or config path, as `run --model`
  std::string weights;      // safetensors folder; empty: random weights from seed
  std::string backend = "cpu";
  std::int32_t threads = 0;
  std::uint64_t seed = 0;
  ReplicaConfig replica;    // kv.num_blocks set
};

class EngineServer {
 public:
  explicit EngineServer(const EngineSpec& spec);
  ~EngineServer();
  // Serves `trace` (arrival order; arrivals are the wall-clock offsets, ns)
  // and writes dir/{requests,steps}.csv and summary.json.
  RunRecords serve(const std::vector<Request>& trace, const std::filesystem::path& dir, bool overwrite,
                   const nlohmann::ordered_json& echo);
  const ModelConfig& model() const { return model_; }
  std::string description() const;

 private:
  EngineSpec spec_;
  ModelConfig model_;
  std::unique_ptr<ModelRunner> runner_;
};

}  // namespace twin
