#include "engine/runtime/model_weights.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>

#include "base/error.hpp"
#include "engine/backend/fp8_rows.hpp"
#include "engine/backend/sampling.hpp"
#include "engine/runtime/safetensors.hpp"
#include "models/dtype.hpp"

namespace twin {
namespace {

// One source tensor (a Hugging Face name). A 1-D source (norm, bias) has
// rows == 1 and `one_dim`.
struct Part {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool one_dim = false;
  double init_scale = 0;  // random init: uniform with this standard deviation; 0 = ones
  std::int64_t numel() const { return rows * cols; }
};

// A view the forward pass reads, filled from its parts one after another in
// memory: matrices stacked by rows, 1-D biases concatenated.
struct Target {
  TensorView* view = nullptr;
  std::int64_t rows = 0, cols = 0;
  bool keep_f32 = false;  // norms and biases stay f32
  std::vector<Part> parts;
  TensorView* scales = nullptr;  // quantisable projection: where its per-channel scales go
};

Part mat(std::string name, std::int64_t rows, std::int64_t cols, double scale) {
  return {std::move(name), rows, cols, false, scale};
}
Part vec(std::string name, std::int64_t n, double scale) { return {std::move(name), 1, n, true, scale}; }

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::uint64_t name_hash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

ElemType source_dtype(const std::string& st_dtype) {
  if (st_dtype == "F32") return ElemType::f32;
  if (st_dtype == "BF16") return ElemType::bf16;
  if (st_dtype == "F16") return ElemType::f16;
  throw Error("unsupported dtype '" + st_dtype + "' (expected F32, F16 or BF16)");
}

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir) : dir_(dir) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(dir)) throw Error(dir + ": weights folder not found");
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".safetensors") paths.push_back(e.path());
    }
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw Error(dir + ": no *.safetensors file");
    for (const auto& p : paths) {
      files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
      // A tensor in two shards: which one the engine would load depends on
      // the file names' order, so neither is taken.
      for (const auto& [name, tensor] : files_.back()->tensors()) {
        if (const auto [it, fresh] = index_.emplace(name, files_.back().get()); !fresh) {
          throw Error(dir + ": tensor '" + excerpt(name) + "' is in two files, " + it->second->path() + " and " +
                      files_.back()->path());
        }
      }
    }
  }
  // The tensor `name` of shape `expected`; `file` (if given) is set to its file's path.
  const SafetensorsTensor& get(const std::string& name, const std::vector<std::int64_t>& expected,
                               const std::string** file = nullptr) const {
    const auto it = index_.find(name);
    if (it == index_.end()) throw Error(dir_ + ": tensor '" + name + "' (shape " + shape_text(expected) + ") is missing");
    const SafetensorsTensor& t = *it->second->find(name);
    const std::string& path = it->second->path();
    if (file) *file = &path;
    if (t.shape != expected) {
      throw Error(path + ": tensor '" + name + "' has shape " + shape_text(t.shape) + ", the config expects " +
                  shape_text(expected));
    }
    try {
      (void)source_dtype(t.dtype);
    } catch (const Error& e) {
      throw Error(path + ": tensor '" + name + "': " + e.what());
    }
    return t;
  }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> index_;  // tensor name -> its one file
};

// A NaN or infinity in a weight the forward pass reads poisons every
// output it reaches: refused, naming the element (docs/engine.md).
void check_finite(const std::vector<float>& values, const Part& part, const std::string& file) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  const auto at = static_cast<std::int64_t>(bad - values.begin());
  std::string message = file;
  message += ": tensor '";
  message += part.name;
  message += std::isnan(*bad) ? "' holds NaN at [" : "' holds an infinity at [";
  if (!part.one_dim) {
    message += std::to_string(at / part.cols);
    message += ", ";
  }
  message += std::to_string(part.one_dim ? at : at % part.cols);
  message += "]: the engine takes finite weights only";
  throw Error(message);
}

std::vector<Target> plan_targets(const ModelConfig& c, ModelWeights& w) {
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const std::int64_t qd = c.q_dim(), kvd = c.kv_dim();
  const double in_h = 1.0 / std::sqrt(static_cast<double>(H));
  const double in_i = 1.0 / std::sqrt(static_cast<double>(I));
  const double in_q = 1.0 / std::sqrt(static_cast<double>(qd));
  std::vector<Target> t;
  w.layers.resize(static_cast<std::size_t>(c.num_layers));
  t.push_back({&w.embed, V, H, false, {mat("model.embed_tokens.weight", V, H, in_h)}});
  t.push_back({&w.final_norm, 1, H, true, {vec("model.norm.weight", H, 0)}});
  if (!c.tie_word_embeddings) t.push_back({&w.lm_head, V, H, false, {mat("lm_head.weight", V, H, in_h)}});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back({&L.input_norm, 1, H, true, {vec(p + "input_layernorm.weight", H, 0)}});
    t.push_back({&L.qkv, qd + 2 * kvd, H, false,
                 {mat(p + "self_attn.q_proj.weight", qd, H, in_h), mat(p + "self_attn.k_proj.weight", kvd, H, in_h),
                  mat(p + "self_attn.v_proj.weight", kvd, H, in_h)},
                 &L.qkv_scales});
    if (c.attention_bias) {
      t.push_back({&L.qkv_bias, 1, qd + 2 * kvd, true,
                   {vec(p + "self_attn.q_proj.bias", qd, 0.02), vec(p + "self_attn.k_proj.bias", kvd, 0.02),
                    vec(p + "self_attn.v_proj.bias", kvd, 0.02)}});
    }
    if (c.qk_norm) {
      t.push_back({&L.q_norm, 1, c.head_dim, true, {vec(p + "self_attn.q_norm.weight", c.head_dim, 0)}});
      t.push_back({&L.k_norm, 1, c.head_dim, true, {vec(p + "self_attn.k_norm.weight", c.head_dim, 0)}});
    }
    t.push_back({&L.o, H, qd, false, {mat(p + "self_attn.o_proj.weight", H, qd, in_q)}, &L.o_scales});
    t.push_back({&L.post_norm, 1, H, true, {vec(p + "post_attention_layernorm.weight", H, 0)}});
    if (!c.is_moe()) {
      t.push_back({&L.gate_up, 2 * I, H, false,
                   {mat(p + "mlp.gate_proj.weight", I, H, in_h), mat(p + "mlp.up_proj.weight", I, H, in_h)},
                   &L.gate_up_scales});
      t.push_back({&L.down, H, I, false, {mat(p + "mlp.down_proj.weight", H, I, in_i)}, &L.down_scales});
    } else {
      const std::string m = p + "block_sparse_moe.";
      t.push_back({&L.router, c.num_experts, H, false, {mat(m + "gate.weight", c.num_experts, H, in_h)}});
      L.expert_gate_up.resize(static_cast<std::size_t>(c.num_experts));
      L.expert_down.resize(static_cast<std::size_t>(c.num_experts));
      // Sized now so the targets can point at them; emptied again below
      // when the experts stay float.
      L.expert_gate_up_scales.resize(static_cast<std::size_t>(c.num_experts));
      L.expert_down_scales.resize(static_cast<std::size_t>(c.num_experts));
      for (std::int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        const auto ei = static_cast<std::size_t>(e);
        t.push_back({&L.expert_gate_up[ei], 2 * I, H, false,
                     {mat(x + "w1.weight", I, H, in_h), mat(x + "w3.weight", I, H, in_h)},
                     &L.expert_gate_up_scales[ei]});
        t.push_back({&L.expert_down[ei], H, I, false, {mat(x + "w2.weight", H, I, in_i)}, &L.expert_down_scales[ei]});
      }
    }
  }
  return t;
}

// The part's values as f32 (random or converted from the checkpoint).
void part_values(const Part& part, const Checkpoint* ckpt, std::uint64_t seed, std::vector<float>& out) {
  const std::size_t n = static_cast<std::size_t>(part.numel());
  out.resize(n);
  if (ckpt) {
    const std::vector<std::int64_t> shape = part.one_dim ? std::vector<std::int64_t>{part.cols}
                                                          : std::vector<std::int64_t>{part.rows, part.cols};
    const std::string* file = nullptr;
    const SafetensorsTensor& t = ckpt->get(part.name, shape, &file);
    convert_to_f32(t.data, source_dtype(t.dtype), out.data(), n);
    check_finite(out, part, *file);
    return;
  }
  if (part.init_scale == 0) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
  // Uniform in [-a, a] has standard deviation a / sqrt(3).
  const double a = part.init_scale * std::sqrt(3.0);
  const std::uint64_t key = splitmix64(seed ^ name_hash(part.name));
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix64(key + i) >> 11) * (1.0 / 9007199254740992.0);
    out[i] = static_cast<float>((2.0 * u - 1.0) * a);
  }
}

// Symmetric per-row int8: scale = max |w| / 127 (1 for an all-zero row),
// q = round(w / scale) in [-127, 127].
void quantize_rows(const std::vector<float>& values, std::int64_t rows, std::int64_t cols, std::vector<std::int8_t>& q,
                   float* scales) {
  q.resize(values.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* w = values.data() + r * cols;
    float top = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) top = std::max(top, std::fabs(w[c]));
    const float scale = top > 0.0f ? top / 127.0f : 1.0f;
    scales[r] = scale;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float x = std::nearbyint(w[c] / scale);
      q[static_cast<std::size_t>(r * cols + c)] = static_cast<std::int8_t>(std::clamp(x, -127.0f, 127.0f));
    }
  }
}

}  // namespace

std::string quantization_label(const std::string& quantization) {
  return quantization + (quantization == "fp8" ? " W8A8 projections" : " weight-only projections");
}

std::string engine_storage_dtype(const std::string& text, const std::string& flag) {
  std::optional<Dtype> d;
  try {
    d = parse_dtype_or_auto(text);
  } catch (const UsageError& e) {
    throw UsageError(flag + ": " + e.what());
  }
  if (!d) return "auto";
  switch (*d) {
    case Dtype::fp32: return "f32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16:
      throw UsageError(flag + " " + text + ": the engine stores f32 or bf16 (an fp16 checkpoint is widened to f32); use auto, f32 or bf16");
    case Dtype::fp8:
    case Dtype::int8:
    case Dtype::fp4: break;
  }
  throw UsageError(flag + " " + text + ": " + std::string(dtype_name(*d)) +
                   " storage is not implemented on any backend yet (use auto, f32 or bf16)");
}

namespace {

// The matrices' storage: --dtype, or with auto a bf16 checkpoint's bf16
// (half the bytes to stream per decode step), else f32.
ElemType matrix_storage(const ModelConfig& config, const WeightOptions& options, const Checkpoint* ckpt) {
  const std::string dtype = engine_storage_dtype(options.dtype, "--dtype");
  if (dtype == "bf16") return ElemType::bf16;
  if (dtype == "auto" && ckpt) {
    const SafetensorsTensor& e = ckpt->get("model.embed_tokens.weight", {config.vocab_size, config.hidden_size});
    if (e.dtype == "BF16") return ElemType::bf16;
  }
  return ElemType::f32;
}

// --quantization: the projections' storage (i8 or f8e4m3), or nullopt for
// none; methods the engine does not run are refused by name.
std::optional<ElemType> projection_quantization(const std::string& quantization, const Backend& backend,
                                                const ModelConfig& config) {
  if (quantization == "int8") {
    if (backend.name() != "cpu") {
      throw UsageError("--quantization int8 runs on the cpu backend only (on CUDA: --quantization fp8)");
    }
    return ElemType::i8;
  }
  if (quantization == "fp8") {
    if (config.num_experts > 0) {
      throw UsageError("--quantization fp8: dense models only (the experts' fp8 GEMMs are not built; int8 "
                       "quantises MoE experts on the cpu backend)");
    }
    return ElemType::f8e4m3;
  }
  if (!quantization.empty() && quantization != "none") {
    throw UsageError("--quantization " + quantization +
                     ": the engine runs int8 (weight-only, cpu) and fp8 (W8A8, per-channel weight and per-token "
                     "activation scales); awq, gptq, int8_w8a8, nvfp4 and mxfp4 are priced by the simulator only");
  }
  return std::nullopt;
}

// Where each target and its scales go in the one allocation (64-byte aligned).
struct StorageLayout {
  std::vector<std::size_t> offsets, scale_offsets;
  std::size_t total = 0;
};

template <typename DtypeOf>
StorageLayout lay_out(const std::vector<Target>& targets, const DtypeOf& dtype_of, std::optional<ElemType> quantized) {
  StorageLayout l;
  for (const Target& t : targets) {
    const ElemType d = dtype_of(t);
    l.total = (l.total + 63) / 64 * 64;
    l.offsets.push_back(l.total);
    l.total += static_cast<std::size_t>(t.rows * t.cols) * elem_bytes(d);
    l.total = (l.total + 63) / 64 * 64;
    l.scale_offsets.push_back(l.total);
    if (quantized && d == *quantized) l.total += static_cast<std::size_t>(t.rows) * sizeof(float);
  }
  return l;
}

// Buffers reused from one part to the next.
struct Staging {
  std::vector<float> values, scales;
  std::vector<std::byte> bytes;
  std::vector<std::int8_t> int8;
  std::vector<std::uint8_t> fp8;
};

// One part's values converted to the target's storage and uploaded at byte
// `at` of it, its rows' scales (quantized storage) at `row`; returns the bytes.
std::size_t upload_part(Backend& backend, const Target& t, ElemType d, const Part& part, std::size_t at,
                        std::int64_t row, Staging& st) {
  const std::vector<float>& values = st.values;
  char* dst = static_cast<char*>(t.view->data) + at;
  if (d == ElemType::i8) {
    quantize_rows(values, part.rows, part.cols, st.int8, st.scales.data() + row);
    backend.upload(dst, st.int8.data(), st.int8.size());
    return st.int8.size();
  }
  if (d == ElemType::f8e4m3) {  // one scale per output channel: max |w| / 448
    st.fp8.resize(values.size());
    for (std::int64_t r = 0; r < part.rows; ++r) {
      const float* src = values.data() + r * part.cols;
      st.scales[static_cast<std::size_t>(row + r)] = fp8_row_scale(src, part.cols);
      quantize_row_fp8(src, part.cols, st.scales[static_cast<std::size_t>(row + r)], st.fp8.data() + r * part.cols);
    }
    backend.upload(dst, st.fp8.data(), st.fp8.size());
    return st.fp8.size();
  }
  st.bytes.resize(values.size() * elem_bytes(d));
  convert_from_f32(values.data(), st.bytes.data(), d, values.size());
  backend.upload(dst, st.bytes.data(), st.bytes.size());
  return st.bytes.size();
}

}  // namespace

// The tensors of one model in file order, each checked and uploaded as it
// is read, so a bad tensor is named with its file before the next is touched.
ModelWeights load_model_weights(Backend& backend, const ModelConfig& config, const WeightOptions& options) {
  check_model_config(config);
  std::unique_ptr<Checkpoint> ckpt;
  if (!options.dir.empty()) ckpt = std::make_unique<Checkpoint>(options.dir);
  const ElemType matrix_dtype = matrix_storage(config, options, ckpt.get());
  const std::optional<ElemType> quantized = projection_quantization(options.quantization, backend, config);

  ModelWeights w;
  std::vector<Target> targets = plan_targets(config, w);
  auto target_dtype = [&](const Target& t) {
    return t.keep_f32 ? ElemType::f32 : (quantized && t.scales ? *quantized : matrix_dtype);
  };
  const StorageLayout layout = lay_out(targets, target_dtype, quantized);
  w.storage = backend.allocate(std::max<std::size_t>(layout.total, 64));
  Staging st;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    const ElemType d = target_dtype(t);
    const bool scaled = quantized && d == *quantized;
    *t.view = w.storage.view(d, t.rows, t.cols, layout.offsets[i]);
    std::size_t at = 0;    // bytes into the target
    std::int64_t row = 0;  // rows into the target (parts stack by rows)
    if (scaled) st.scales.assign(static_cast<std::size_t>(t.rows), 0.0f);
    for (const Part& part : t.parts) {
      part_values(part, ckpt.get(), options.seed, st.values);
      at += upload_part(backend, t, d, part, at, row, st);
      row += part.rows;
    }
    if (scaled) {
      *t.scales = w.storage.view(ElemType::f32, 1, t.rows, layout.scale_offsets[i]);
      backend.upload(t.scales->data, st.scales.data(), st.scales.size() * sizeof(float));
      at += st.scales.size() * sizeof(float);
    }
    w.bytes += static_cast<std::int64_t>(at);
  }
  if (config.tie_word_embeddings) w.lm_head = w.embed;
  if (quantized != ElemType::i8) {
    for (LayerWeights& L : w.layers) {  // float experts: no scales (moe_experts reads empty spans)
      L.expert_gate_up_scales.clear();
      L.expert_down_scales.clear();
    }
  }
  backend.synchronize();
  return w;
}

}  // namespace twin
