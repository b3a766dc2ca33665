#include "tests/runtime/reference_model.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/runtime/safetensors.hpp"

namespace twin::test {
namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using Vec = std::vector<float>;

// y[n] = W[n, k] · x[k] (+ b)
Vec matvec(const Vec& w, const Vec& x, std::int64_t n, const Vec* bias = nullptr, std::int64_t row0 = 0) {
  const auto k = static_cast<std::int64_t>(x.size());
  Vec y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    double s = bias ? (*bias)[static_cast<std::size_t>(row0 + i)] : 0.0;
    for (std::int64_t j = 0; j < k; ++j) s += double(w[static_cast<std::size_t>((row0 + i) * k + j)]) * x[static_cast<std::size_t>(j)];
    y[static_cast<std::size_t>(i)] = static_cast<float>(s);
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * r * w[i]);
  return y;
}

// One head's d values normalised in place (Qwen3's q_norm / k_norm).
void norm_head(float* head, std::int64_t d, const Vec& w, double eps) {
  const Vec y = rmsnorm(Vec(head, head + d), w, eps);
  std::copy(y.begin(), y.end(), head);
}

// The frequency of rotated pair i, with the config's rope_scaling written
// from the Hugging Face formulas on their own (not rope.cpp's code).
double rope_freq(const ModelConfig& c, std::int64_t i, std::int64_t d) {
  const double freq = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  if (c.rope_scaling == RopeScaling::linear) return freq / c.rope_factor;
  if (c.rope_scaling != RopeScaling::llama3) return freq;
  const double original = static_cast<double>(c.rope_original_max_position);
  const double wavelength = 2.0 * 3.14159265358979323846 / freq;
  if (wavelength < original / c.rope_high_freq_factor) return freq;
  if (wavelength > original / c.rope_low_freq_factor) return freq / c.rope_factor;
  const double t = (original / wavelength - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
  return t * freq + (1.0 - t) * freq / c.rope_factor;
}

void rope(float* head, std::int64_t d, std::int64_t pos, const ModelConfig& c) {
  for (std::int64_t i = 0; i < d / 2; ++i) {
    const double freq = rope_freq(c, i, d);
    const double a = static_cast<double>(pos) * freq;
    const double c = std::cos(a), s = std::sin(a);
    const double x1 = head[i], x2 = head[i + d / 2];
    head[i] = static_cast<float>(x1 * c - x2 * s);
    head[i + d / 2] = static_cast<float>(x2 * c + x1 * s);
  }
}

Vec silu_mul_mlp(const WeightMap& w, const std::string& gate, const std::string& up, const std::string& down,
                 const Vec& h, std::int64_t I, std::int64_t H) {
  const Vec g = matvec(w.at(gate), h, I), u = matvec(w.at(up), h, I);
  Vec a(static_cast<std::size_t>(I));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(g[i] / (1.0 + std::exp(-double(g[i]))) * u[i]);
  return matvec(w.at(down), a, H);
}

}  // namespace

ModelConfig tiny_config(bool bias, bool tied, std::int64_t experts) {
  ModelConfig c;
  c.name = "tiny";
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 256;
  c.max_position_embeddings = 2048;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.attention_bias = bias;
  c.tie_word_embeddings = tied;
  c.num_experts = experts;
  c.experts_per_token = experts > 0 ? 2 : 0;
  return c;
}

WeightMap random_weights(const ModelConfig& c, std::uint64_t seed) {
  WeightMap w;
  std::uint64_t counter = mix(seed);
  auto fill = [&](const std::string& name, std::int64_t n, double scale, double offset = 0.0) {
    Vec v(static_cast<std::size_t>(n));
    for (auto& x : v) {
      const double u = static_cast<double>(mix(counter++) >> 11) * (1.0 / 9007199254740992.0);
      x = static_cast<float>(offset + (2 * u - 1) * scale * std::sqrt(3.0));
    }
    w[name] = std::move(v);
  };
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, qd = c.q_dim(), kvd = c.kv_dim();
  const double sh = 1 / std::sqrt(double(H)), si = 1 / std::sqrt(double(I)), sq = 1 / std::sqrt(double(qd));
  fill("model.embed_tokens.weight", V * H, 1.0);
  fill("model.norm.weight", H, 0.1, 1.0);
  if (!c.tie_word_embeddings) fill("lm_head.weight", V * H, sh);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    fill(p + "input_layernorm.weight", H, 0.1, 1.0);
    fill(p + "post_attention_layernorm.weight", H, 0.1, 1.0);
    fill(p + "self_attn.q_proj.weight", qd * H, sh * 2);
    fill(p + "self_attn.k_proj.weight", kvd * H, sh * 2);
    fill(p + "self_attn.v_proj.weight", kvd * H, sh);
    fill(p + "self_attn.o_proj.weight", H * qd, sq);
    if (c.qk_norm) {
      fill(p + "self_attn.q_norm.weight", c.head_dim, 0.1, 1.0);
      fill(p + "self_attn.k_norm.weight", c.head_dim, 0.1, 1.0);
    }
    if (c.attention_bias) {
      fill(p + "self_attn.q_proj.bias", qd, 0.1);
      fill(p + "self_attn.k_proj.bias", kvd, 0.1);
      fill(p + "self_attn.v_proj.bias", kvd, 0.1);
    }
    if (!c.is_moe()) {
      fill(p + "mlp.gate_proj.weight", I * H, sh);
      fill(p + "mlp.up_proj.weight", I * H, sh);
      fill(p + "mlp.down_proj.weight", H * I, si);
    } else {
      const std::string m = p + "block_sparse_moe.";
      fill(m + "gate.weight", c.num_experts * H, sh);
      for (std::int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        fill(x + "w1.weight", I * H, sh);
        fill(x + "w3.weight", I * H, sh);
        fill(x + "w2.weight", H * I, si);
      }
    }
  }
  return w;
}

std::string write_checkpoint(const std::string& dir, const ModelConfig& c, const WeightMap& weights,
                             const std::string& dtype) {
  std::filesystem::create_directories(dir);
  const std::int64_t H = c.hidden_size, I = c.intermediate_size;
  auto shape_of = [&](const std::string& name, std::size_t n) -> std::vector<std::int64_t> {
    if (name.find("norm") != std::string::npos || name.ends_with(".bias")) return {static_cast<std::int64_t>(n)};
    const std::int64_t cols = name.find("o_proj") != std::string::npos ? c.q_dim()
                              : (name.find("down_proj") != std::string::npos || name.ends_with("w2.weight")) ? I
                                                                                                            : H;
    return {static_cast<std::int64_t>(n) / cols, cols};
  };
  std::vector<std::vector<std::byte>> storage;
  std::vector<SafetensorsWriteTensor> tensors;
  for (const auto& [name, v] : weights) {
    std::vector<std::byte> bytes;
    if (dtype == "F32") {
      bytes.resize(v.size() * 4);
      std::memcpy(bytes.data(), v.data(), bytes.size());
    } else {
      bytes.resize(v.size() * 2);
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::uint32_t u;
        std::memcpy(&u, &v[i], 4);
        std::uint16_t h;
        if (dtype == "BF16") {
          h = static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        } else {  // F16 of small normal values: good enough for tests (values here are well within range)
          const std::uint32_t sign = (u >> 16) & 0x8000u;
          const std::int32_t exp = static_cast<std::int32_t>((u >> 23) & 0xff) - 127 + 15;
          const std::uint32_t mant = u & 0x7fffffu;
          if (exp <= 0) h = static_cast<std::uint16_t>(sign);
          else h = static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13));
        }
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    storage.push_back(std::move(bytes));
    tensors.push_back({name, dtype, shape_of(name, v.size()), storage.back()});
  }
  write_safetensors(dir + "/model.safetensors", tensors);
  nlohmann::json cfg = {{"model_type", c.is_moe() ? "mixtral" : (c.qk_norm ? "qwen3" : "llama")},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_layers},
                        {"num_attention_heads", c.num_heads},
                        {"num_key_value_heads", c.num_kv_heads},
                        {"vocab_size", c.vocab_size},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"rms_norm_eps", c.rms_norm_eps},
                        {"rope_theta", c.rope_theta},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"attention_bias", c.attention_bias},
                        {"head_dim", c.head_dim},
                        {"torch_dtype", "float32"}};
  if (c.rope_scaling != RopeScaling::none) {
    cfg["rope_scaling"] = {{"rope_type", c.rope_scaling == RopeScaling::llama3 ? "llama3" : "linear"},
                           {"factor", c.rope_factor},
                           {"low_freq_factor", c.rope_low_freq_factor},
                           {"high_freq_factor", c.rope_high_freq_factor},
                           {"original_max_position_embeddings", c.rope_original_max_position}};
  }
  if (c.sliding_window > 0) cfg["sliding_window"] = c.sliding_window;
  if (c.is_moe()) {
    cfg["num_local_experts"] = c.num_experts;
    cfg["num_experts_per_tok"] = c.experts_per_token;
  }
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  return dir;
}

std::vector<std::vector<float>> reference_logits(const ModelConfig& c, const WeightMap& w,
                                                 const std::vector<std::int32_t>& tokens) {
  const std::int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, d = c.head_dim;
  const std::int64_t nh = c.num_heads, nkv = c.num_kv_heads, T = static_cast<std::int64_t>(tokens.size());
  std::vector<Vec> x(static_cast<std::size_t>(T));
  const Vec& emb = w.at("model.embed_tokens.weight");
  for (std::int64_t t = 0; t < T; ++t) {
    x[static_cast<std::size_t>(t)].assign(emb.begin() + tokens[static_cast<std::size_t>(t)] * H,
                                          emb.begin() + (tokens[static_cast<std::size_t>(t)] + 1) * H);
  }
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<Vec> q(static_cast<std::size_t>(T)), k(q.size()), v(q.size());
    for (std::int64_t t = 0; t < T; ++t) {
      const auto ti = static_cast<std::size_t>(t);
      const Vec h = rmsnorm(x[ti], w.at(p + "input_layernorm.weight"), c.rms_norm_eps);
      const bool b = c.attention_bias;
      q[ti] = matvec(w.at(p + "self_attn.q_proj.weight"), h, nh * d, b ? &w.at(p + "self_attn.q_proj.bias") : nullptr);
      k[ti] = matvec(w.at(p + "self_attn.k_proj.weight"), h, nkv * d, b ? &w.at(p + "self_attn.k_proj.bias") : nullptr);
      v[ti] = matvec(w.at(p + "self_attn.v_proj.weight"), h, nkv * d, b ? &w.at(p + "self_attn.v_proj.bias") : nullptr);
      if (c.qk_norm) {  // Qwen3: each head's values normalised on their own, then rotated
        const Vec& qn = w.at(p + "self_attn.q_norm.weight");
        const Vec& kn = w.at(p + "self_attn.k_norm.weight");
        for (std::int64_t hh = 0; hh < nh; ++hh) norm_head(q[ti].data() + hh * d, d, qn, c.rms_norm_eps);
        for (std::int64_t hh = 0; hh < nkv; ++hh) norm_head(k[ti].data() + hh * d, d, kn, c.rms_norm_eps);
      }
      for (std::int64_t hh = 0; hh < nh; ++hh) rope(q[ti].data() + hh * d, d, t, c);
      for (std::int64_t hh = 0; hh < nkv; ++hh) rope(k[ti].data() + hh * d, d, t, c);
    }
    for (std::int64_t t = 0; t < T; ++t) {
      const auto ti = static_cast<std::size_t>(t);
      Vec attn(static_cast<std::size_t>(nh * d), 0.0f);
      for (std::int64_t hh = 0; hh < nh; ++hh) {
        const std::int64_t kh = hh / (nh / nkv);
        std::vector<double> s(static_cast<std::size_t>(t + 1));
        double mx = -1e300;
        for (std::int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (std::int64_t e = 0; e < d; ++e) {
            dot += double(q[ti][static_cast<std::size_t>(hh * d + e)]) * k[static_cast<std::size_t>(j)][static_cast<std::size_t>(kh * d + e)];
          }
          s[static_cast<std::size_t>(j)] = dot / std::sqrt(double(d));
          mx = std::max(mx, s[static_cast<std::size_t>(j)]);
        }
        double z = 0;
        // A sliding window hides the keys more than `window` positions back.
        const std::int64_t lo = c.sliding_window > 0 ? std::max<std::int64_t>(0, t - c.sliding_window + 1) : 0;
        for (std::int64_t j = 0; j < lo; ++j) s[static_cast<std::size_t>(j)] = -1e300;
        if (lo > 0) mx = *std::max_element(s.begin() + lo, s.end());
        for (auto& e : s) z += (e = e <= -1e300 ? 0.0 : std::exp(e - mx));
        for (std::int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (std::int64_t j = 0; j <= t; ++j) acc += s[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j)][static_cast<std::size_t>(kh * d + e)];
          attn[static_cast<std::size_t>(hh * d + e)] = static_cast<float>(acc / z);
        }
      }
      const Vec o = matvec(w.at(p + "self_attn.o_proj.weight"), attn, H);
      for (std::int64_t e = 0; e < H; ++e) x[ti][static_cast<std::size_t>(e)] += o[static_cast<std::size_t>(e)];
      const Vec h = rmsnorm(x[ti], w.at(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      Vec m(static_cast<std::size_t>(H), 0.0f);
      if (!c.is_moe()) {
        m = silu_mul_mlp(w, p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight", h, I, H);
      } else {
        const std::string mp = p + "block_sparse_moe.";
        const Vec r = matvec(w.at(mp + "gate.weight"), h, c.num_experts);
        std::vector<std::int64_t> order(static_cast<std::size_t>(c.num_experts));
        for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<std::int64_t>(e);
        std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return r[static_cast<std::size_t>(a)] > r[static_cast<std::size_t>(b)]; });
        // softmax then top-k renormalised == softmax over the kept logits
        double z = 0;
        std::vector<double> g(static_cast<std::size_t>(c.experts_per_token));
        for (std::size_t j = 0; j < g.size(); ++j) z += (g[j] = std::exp(double(r[static_cast<std::size_t>(order[j])]) - r[static_cast<std::size_t>(order[0])]));
        for (std::size_t j = 0; j < g.size(); ++j) {
          const std::string xe = mp + "experts." + std::to_string(order[j]) + ".";
          const Vec y = silu_mul_mlp(w, xe + "w1.weight", xe + "w3.weight", xe + "w2.weight", h, I, H);
          for (std::size_t e = 0; e < m.size(); ++e) m[e] += static_cast<float>(g[j] / z * y[e]);
        }
      }
      for (std::int64_t e = 0; e < H; ++e) x[ti][static_cast<std::size_t>(e)] += m[static_cast<std::size_t>(e)];
    }
  }
  std::vector<Vec> logits;
  const Vec& head = c.tie_word_embeddings ? emb : w.at("lm_head.weight");
  for (std::int64_t t = 0; t < T; ++t) {
    logits.push_back(matvec(head, rmsnorm(x[static_cast<std::size_t>(t)], w.at("model.norm.weight"), c.rms_norm_eps), V));
  }
  return logits;
}

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_runtime_test_" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace twin::test
