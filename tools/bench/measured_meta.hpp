#pragma once
// A measured run's meta.json (vllm bench's engine arguments, its KV block
// count, the GPU) read once for the benches that replay it
// (bench_measured, bench_calibrate_measured): each missing key is an
// error naming the file and the key.
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace twin::bench {

// "NVIDIA GeForce RTX 4090" -> "rtx-4090"; "meta-llama/Llama-3.1-8B" -> "llama-3.1-8b".
inline std::string bundled_name(std::string s) {
  for (const char* drop : {"NVIDIA ", "GeForce "}) {
    if (const auto at = s.find(drop); at != std::string::npos) s.erase(at, std::string(drop).size());
  }
  if (const auto slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  for (char& ch : s) ch = ch == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// meta.json's value at `path` (keys, outermost first), or an error naming
// the file and the key.
inline const nlohmann::json& meta_at(const nlohmann::json& meta, std::initializer_list<const char*> path,
                                     const std::filesystem::path& file) {
  const nlohmann::json* j = &meta;
  std::string name;
  for (const char* key : path) {
    name += name.empty() ? key : std::string(".") + key;
    const auto it = j->find(key);
    if (!j->is_object() || it == j->end()) throw std::runtime_error(file.string() + ": no key '" + name + "'");
    j = &*it;
  }
  return *j;
}

struct MeasuredRunMeta {
  std::string model_id, model, hw;  // as the run names them, and bundled names
  int tp = 1, dp = 1;
  bool expert_parallel = false;
  long max_num_seqs = 256, max_num_batched_tokens = 8192;
  long max_model_len = 0;  // 0: vLLM's default, the model's own context
  long block_size = 16;
  double gpu_memory_utilization = 0.9;
  bool prefix_caching = true;
  long num_gpu_blocks = 0;  // 0: not recorded (the simulator's memory plan)

  std::string gpu_memory_utilization_text() const {
    std::ostringstream out;  // as a stream prints it: 0.9, not 0.900000
    out << gpu_memory_utilization;
    return out.str();
  }
  // The engine's arguments as twinserve flags (simulate's and calibrate
  // --measured's), each after a space.
  std::string flags() const {
    std::string f = " --model " + model + " --hw " + hw + " --tp " + std::to_string(tp) + " --max-num-seqs " +
                    std::to_string(max_num_seqs) + " --max-num-batched-tokens " +
                    std::to_string(max_num_batched_tokens) + " --block-size " + std::to_string(block_size) +
                    " --gpu-memory-utilization " + gpu_memory_utilization_text();
    f += " --data-parallel-size " + std::to_string(dp);
    if (expert_parallel) f += " --enable-expert-parallel";
    if (max_model_len > 0) f += " --max-model-len " + std::to_string(max_model_len);
    if (!prefix_caching) f += " --no-enable-prefix-caching";
    return f;
  }
};

inline MeasuredRunMeta read_measured_meta(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "meta.json";
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot be read");
  const nlohmann::json meta = nlohmann::json::parse(in);
  const nlohmann::json& args = meta_at(meta, {"engine_kwargs"}, file);
  MeasuredRunMeta m;
  m.model_id = meta_at(meta, {"model"}, file).get<std::string>();
  m.model = bundled_name(m.model_id);
  m.hw = bundled_name(meta_at(meta, {"hardware", "device_name"}, file).get<std::string>());
  // A key vLLM left at its default is null or absent.
  const auto arg = [&](const char* key, long fallback) {
    const auto it = args.find(key);
    return it == args.end() || it->is_null() ? fallback : it->get<long>();
  };
  m.tp = static_cast<int>(arg("tensor_parallel_size", 1));
  m.dp = static_cast<int>(arg("data_parallel_size", 1));
  m.expert_parallel = args.value("enable_expert_parallel", false);
  m.max_num_seqs = arg("max_num_seqs", 256);
  m.max_num_batched_tokens = arg("max_num_batched_tokens", 8192);
  m.max_model_len = arg("max_model_len", 0);
  // No kv_cache block (vLLM's block count not recorded): the memory plan.
  if (meta.contains("kv_cache")) {
    const nlohmann::json& kv = meta_at(meta, {"kv_cache"}, file);
    m.block_size = kv.value("block_size", 16L);
    m.gpu_memory_utilization = kv.value("gpu_memory_utilization", 0.9);
    m.prefix_caching = kv.value("enable_prefix_caching", true);
    const auto blocks = kv.find("num_gpu_blocks");
    m.num_gpu_blocks = blocks == kv.end() || blocks->is_null() ? 0 : blocks->get<long>();
  }
  return m;
}

}  // namespace twin::bench
