#include "hwprofiles/calibrated_profile.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "base/error.hpp"
#include "models/dtype.hpp"
#include "models/json_fields.hpp"
#include "models/quantization.hpp"

namespace twin {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

// ---- writing ---------------------------------------------------------------

OJson point_json(const CalibratedPoint& p, const char* x_key) {
  OJson j;
  j[x_key] = p.x;
  j["time_ns"] = p.time_ns;
  j["p10_ns"] = p.p10_ns;
  j["p90_ns"] = p.p90_ns;
  j["flops"] = p.flops;
  j["bytes"] = p.bytes;
  return j;
}

OJson points_json(const std::vector<CalibratedPoint>& points, const char* x_key) {
  OJson a = OJson::array();
  for (const CalibratedPoint& p : points) a.push_back(point_json(p, x_key));
  return a;
}

const char* curve_x_key(TableKind kind) { return kind == TableKind::gemm ? "m" : "tokens"; }
const char* row_key_name(OpKind op) { return op == OpKind::attn_prefill ? "tokens_per_seq" : "num_seqs"; }

// ---- reading ---------------------------------------------------------------

struct Reader {
  const std::string& origin;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(origin + ": key '" + excerpt(path) + "': " + what);
  }

  // Every key of `known` is required except those in `optional`.
  void check_keys(const Json& obj, const std::string& path, const std::set<std::string>& known,
                  const std::set<std::string>& optional = {}) const {
    if (!obj.is_object()) fail(path.empty() ? "(top level)" : path, "expected a JSON object, got " + json_excerpt(obj));
    for (const auto& [key, value] : obj.items()) {
      if (known.count(key)) continue;
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail(path.empty() ? key : path + "." + key, "unknown key (known: " + list + ")");
    }
    for (const auto& k : known) {
      if (!obj.contains(k) && !optional.count(k)) fail(path.empty() ? k : path + "." + k, "missing required key");
    }
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  double number(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = obj.at(key);
    if (!v.is_number()) fail(join(path, key), "expected a number, got " + json_excerpt(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(join(path, key), "expected a finite number");
    return d;
  }
  double positive(const Json& obj, const std::string& path, const char* key) const {
    const double d = number(obj, path, key);
    if (!(d > 0)) fail(join(path, key), "expected a positive number, got " + json_excerpt(obj.at(key)));
    return d;
  }
  // A fitted factor on the op tables' times: near 1 in any real profile.
  // 1e-300 or 1e300 would price every step at nothing or at infinity.
  double scale(const Json& obj, const std::string& path, const char* key) const {
    const double d = number(obj, path, key);
    if (!(d >= kMinOpScale && d <= kMaxOpScale)) {
      fail(join(path, key), "expected a scale from 0.001 to 1000, got " + json_excerpt(obj.at(key)));
    }
    return d;
  }
  double non_negative(const Json& obj, const std::string& path, const char* key) const {
    const double d = number(obj, path, key);
    if (d < 0) fail(join(path, key), "expected a non-negative number, got " + json_excerpt(obj.at(key)));
    return d;
  }
  std::int64_t integer(const Json& obj, const std::string& path, const char* key, std::int64_t lo) const {
    const Json& v = obj.at(key);
    if (!v.is_number_integer()) fail(join(path, key), "expected an integer, got " + json_excerpt(v));
    const std::int64_t i = v.get<std::int64_t>();
    if (i < lo) fail(join(path, key), "expected an integer >= " + std::to_string(lo) + ", got " + json_excerpt(v));
    return i;
  }
  std::string string(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = obj.at(key);
    if (!v.is_string()) fail(join(path, key), "expected a string, got " + json_excerpt(v));
    return v.get<std::string>();
  }
  bool boolean(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = obj.at(key);
    if (!v.is_boolean()) fail(join(path, key), "expected true or false, got " + json_excerpt(v));
    return v.get<bool>();
  }
  const Json& array(const Json& obj, const std::string& path, const char* key) const {
    const Json& v = obj.at(key);
    if (!v.is_array()) fail(join(path, key), "expected an array, got " + json_excerpt(v));
    return v;
  }

  OpKind op(const Json& obj, const std::string& path, TableKind want) const {
    const std::string name = string(obj, path, "op");
    OpKind kind{};
    try {
      kind = parse_op_kind(name);
    } catch (const UsageError& e) {
      fail(join(path, "op"), e.what());
    }
    if (table_kind(kind) != want) fail(join(path, "op"), "op '" + name + "' has no table in this section");
    return kind;
  }

  std::vector<CalibratedPoint> points(const Json& obj, const std::string& path, const char* x_key,
                                      bool x_may_be_zero) const {
    const Json& a = array(obj, path, "points");
    if (a.empty()) fail(join(path, "points"), "expected at least one point");
    std::vector<CalibratedPoint> out;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string p = join(path, "points") + "[" + std::to_string(i) + "]";
      check_keys(a[i], p, {x_key, "time_ns", "p10_ns", "p90_ns", "flops", "bytes"});
      CalibratedPoint pt;
      pt.x = x_may_be_zero ? non_negative(a[i], p, x_key) : positive(a[i], p, x_key);
      pt.time_ns = positive(a[i], p, "time_ns");
      pt.p10_ns = non_negative(a[i], p, "p10_ns");
      pt.p90_ns = non_negative(a[i], p, "p90_ns");
      pt.flops = non_negative(a[i], p, "flops");
      pt.bytes = non_negative(a[i], p, "bytes");
      if (!out.empty() && !(pt.x > out.back().x)) fail(join(p, x_key), "points must ascend in " + std::string(x_key));
      out.push_back(pt);
    }
    return out;
  }
};

}  // namespace

TableKind table_kind(OpKind op) {
  switch (op) {
    case OpKind::qkv_proj:
    case OpKind::o_proj:
    case OpKind::gate_up_proj:
    case OpKind::down_proj:
    case OpKind::moe_router:
    case OpKind::moe_gate_up_proj:
    case OpKind::moe_down_proj:
    case OpKind::lm_head:
      return TableKind::gemm;
    case OpKind::embed:
    case OpKind::rmsnorm:
    case OpKind::qk_norm:
    case OpKind::rotary:
    case OpKind::silu_mul:
    case OpKind::final_norm:
    case OpKind::sample:
      return TableKind::elementwise;
    case OpKind::attn_prefill:
    case OpKind::attn_decode:
      return TableKind::attention;
    default:
      return TableKind::none;
  }
}

namespace {

OJson metadata_json(const ProfileMetadata& m) {
  OJson meta;
  meta["model"] = m.model;
  meta["dtype"] = m.dtype;
  meta["kv_dtype"] = m.kv_dtype;
  if (!m.quantization.empty()) meta["quantization"] = m.quantization;
  meta["backend"] = m.backend;
  meta["device"] = m.device;
  if (!m.hardware.empty()) meta["hardware"] = m.hardware;
  meta["cpu_model"] = m.cpu_model;
  meta["hostname"] = m.hostname;
  meta["date"] = m.date;
  meta["git_commit"] = m.git_commit;
  meta["twinserve_version"] = m.twinserve_version;
  meta["threads"] = m.threads;
  meta["tp"] = m.tp;
  meta["block_size"] = m.block_size;
  meta["max_tokens"] = m.max_tokens;
  meta["repeats"] = m.repeats;
  meta["rounds"] = m.rounds;
  meta["quick"] = m.quick;
  meta["seconds"] = m.seconds;
  return meta;
}

OJson fit_json(const StepFitQuality& q) {
  OJson fit;
  fit["steps"] = q.steps;
  fit["mean_abs_error"] = q.mean_abs_error;
  fit["max_abs_error"] = q.max_abs_error;
  fit["unscaled_ratio_mean"] = q.unscaled_ratio_mean;
  fit["unscaled_ratio_min"] = q.unscaled_ratio_min;
  fit["unscaled_ratio_max"] = q.unscaled_ratio_max;
  fit["in_situ_ratio_mean"] = q.in_situ_ratio_mean;
  return fit;
}

OJson samples_json(const StepOverhead& overhead) {
  OJson samples = OJson::array();
  for (const OverheadSample& s : overhead.samples) {
    OJson o;
    o["label"] = s.label;
    o["num_seqs"] = s.num_seqs;
    o["new_tokens"] = s.new_tokens;
    o["measured_ns"] = s.measured_ns;
    o["ops_ns"] = s.ops_ns;
    o["in_situ_ns"] = s.in_situ_ns;
    o["predicted_ns"] = s.predicted_ns;
    samples.push_back(std::move(o));
  }
  return samples;
}

OJson overhead_json(const StepOverhead& overhead) {
  OJson over;
  // Every op kind that has a table, in op order (fixed layout).
  OJson scales = OJson::object();
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (table_kind(kind) != TableKind::none) scales[std::string(op_name(kind))] = overhead.op_scales[k];
  }
  over["op_scales"] = std::move(scales);
  OJson fixed = OJson::object();
  for (int k = 0; k < kNumTimedOps; ++k) fixed[std::string(kTimedOpNames[k])] = overhead.op_fixed_ns[k];
  over["op_fixed_ns"] = std::move(fixed);
  over["fit"] = fit_json(overhead.fit);
  over["op_scale"] = overhead.op_scale;
  over["base_ns"] = overhead.base_ns;
  over["per_seq_ns"] = overhead.per_seq_ns;
  over["idle_ns"] = overhead.idle_ns;
  over["idle_tau_ns"] = overhead.idle_tau_ns;
  over["samples"] = samples_json(overhead);
  OJson idle = OJson::array();
  for (const IdleSample& s : overhead.idle_samples) {
    OJson o;
    o["gap_ns"] = s.gap_ns;
    o["measured_ns"] = s.measured_ns;
    o["extra_ns"] = s.extra_ns;
    idle.push_back(std::move(o));
  }
  over["idle_samples"] = std::move(idle);
  return over;
}

OJson curves_json(const std::vector<CurveTable>& tables, TableKind kind) {
  OJson a = OJson::array();
  for (const CurveTable& t : tables) {
    OJson o;
    o["op"] = std::string(op_name(t.op));
    o["n"] = t.n;
    if (kind == TableKind::gemm) o["k"] = t.k;
    o["points"] = points_json(t.points, curve_x_key(kind));
    a.push_back(std::move(o));
  }
  return a;
}

OJson attention_json(const std::vector<GridTable>& tables) {
  OJson attn = OJson::array();
  for (const GridTable& t : tables) {
    OJson o;
    o["op"] = std::string(op_name(t.op));
    o["heads"] = t.heads;
    o["head_dim"] = t.head_dim;
    OJson rows = OJson::array();
    for (const GridRow& r : t.rows) {
      OJson row;
      row[row_key_name(t.op)] = r.key;
      row["points"] = points_json(r.points, "context_per_seq");
      rows.push_back(std::move(row));
    }
    o["rows"] = std::move(rows);
    attn.push_back(std::move(o));
  }
  return attn;
}

}  // namespace

// The file's keys in schema order, a section a function.
nlohmann::ordered_json calibrated_profile_json(const CalibratedProfile& p) {
  OJson j;
  j["format"] = kCalibratedProfileFormat;
  j["version"] = kCalibratedProfileVersion;
  j["metadata"] = metadata_json(p.metadata);
  j["step_overhead"] = overhead_json(p.overhead);
  j["gemm"] = curves_json(p.gemm, TableKind::gemm);
  j["elementwise"] = curves_json(p.elementwise, TableKind::elementwise);
  j["attention"] = attention_json(p.attention);
  return j;
}

std::string calibrated_profile_text(const CalibratedProfile& profile) {
  return calibrated_profile_json(profile).dump(1) + "\n";
}

void write_calibrated_profile(const std::string& path, const CalibratedProfile& profile) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  out << calibrated_profile_text(profile);
  out.flush();
  if (!out) throw Error(path + ": write failed");
}

namespace {

void read_metadata(const Reader& r, const Json& meta, ProfileMetadata& m) {
  r.check_keys(meta, "metadata",
               {"model", "dtype", "kv_dtype", "quantization", "backend", "device", "hardware", "cpu_model", "hostname",
                "date", "git_commit", "twinserve_version", "threads", "tp", "block_size", "max_tokens", "repeats",
                "rounds", "quick", "seconds"},
               {"rounds", "hardware", "quantization"});
  m.model = r.string(meta, "metadata", "model");
  m.dtype = r.string(meta, "metadata", "dtype");
  m.kv_dtype = r.string(meta, "metadata", "kv_dtype");
  // Checked here, where the key is known, not first when a cost model
  // adopts them.
  for (const auto& [key, value] : {std::pair{"metadata.dtype", &m.dtype}, std::pair{"metadata.kv_dtype", &m.kv_dtype}}) {
    try {
      (void)parse_dtype(*value);
    } catch (const Error& e) {
      r.fail(key, e.what());
    }
  }
  if (meta.contains("quantization")) {
    m.quantization = r.string(meta, "metadata", "quantization");
    try {
      if (parse_quant_method(m.quantization) == QuantMethod::none) m.quantization.clear();
    } catch (const Error& e) {
      r.fail("metadata.quantization", e.what());
    }
  }
  m.backend = r.string(meta, "metadata", "backend");
  m.device = r.string(meta, "metadata", "device");
  if (meta.contains("hardware")) m.hardware = r.string(meta, "metadata", "hardware");
  m.cpu_model = r.string(meta, "metadata", "cpu_model");
  m.hostname = r.string(meta, "metadata", "hostname");
  m.date = r.string(meta, "metadata", "date");
  m.git_commit = r.string(meta, "metadata", "git_commit");
  m.twinserve_version = r.string(meta, "metadata", "twinserve_version");
  m.threads = r.integer(meta, "metadata", "threads", 0);
  m.tp = r.integer(meta, "metadata", "tp", 1);
  m.block_size = r.integer(meta, "metadata", "block_size", 1);
  m.max_tokens = r.integer(meta, "metadata", "max_tokens", 1);
  m.repeats = r.integer(meta, "metadata", "repeats", 1);
  if (meta.contains("rounds")) m.rounds = r.integer(meta, "metadata", "rounds", 1);  // absent before 0.1's rounds
  m.quick = r.boolean(meta, "metadata", "quick");
  m.seconds = r.non_negative(meta, "metadata", "seconds");
}

// Version 2's per-op scales and fixed times (a kind left out reads as 1, a
// timed op left out as 0; a kind without a table is an error) and the fit.
void read_op_terms(const Reader& r, const Json& over, StepOverhead& o) {
  const Json& scales = over.at("op_scales");
  if (!scales.is_object()) r.fail("step_overhead.op_scales", "expected a JSON object, got " + json_excerpt(scales));
  for (const auto& [name, value] : scales.items()) {
    OpKind kind{};
    try {
      kind = parse_op_kind(name);
    } catch (const UsageError& e) {
      r.fail("step_overhead.op_scales." + name, e.what());
    }
    if (table_kind(kind) == TableKind::none) r.fail("step_overhead.op_scales." + name, "op '" + name + "' has no table");
    o.op_scales[static_cast<std::size_t>(kind)] = r.scale(scales, "step_overhead.op_scales", name.c_str());
  }
  if (over.contains("op_fixed_ns")) {
    const Json& fixed = over.at("op_fixed_ns");
    if (!fixed.is_object()) r.fail("step_overhead.op_fixed_ns", "expected a JSON object, got " + json_excerpt(fixed));
    for (const auto& [name, value] : fixed.items()) {
      int k = 0;
      while (k < kNumTimedOps && kTimedOpNames[k] != name) ++k;
      if (k == kNumTimedOps) r.fail("step_overhead.op_fixed_ns." + excerpt(name, 80), "not one of the runner's timed ops");
      o.op_fixed_ns[static_cast<std::size_t>(k)] = r.non_negative(fixed, "step_overhead.op_fixed_ns", name.c_str());
    }
  }
  const Json& fit = over.at("fit");
  const std::string fp = "step_overhead.fit";
  r.check_keys(fit, fp,
               {"steps", "mean_abs_error", "max_abs_error", "unscaled_ratio_mean", "unscaled_ratio_min",
                "unscaled_ratio_max", "in_situ_ratio_mean"});
  StepFitQuality& q = o.fit;
  q.steps = r.integer(fit, fp, "steps", 0);
  q.mean_abs_error = r.non_negative(fit, fp, "mean_abs_error");
  q.max_abs_error = r.non_negative(fit, fp, "max_abs_error");
  q.unscaled_ratio_mean = r.non_negative(fit, fp, "unscaled_ratio_mean");
  q.unscaled_ratio_min = r.non_negative(fit, fp, "unscaled_ratio_min");
  q.unscaled_ratio_max = r.non_negative(fit, fp, "unscaled_ratio_max");
  q.in_situ_ratio_mean = r.non_negative(fit, fp, "in_situ_ratio_mean");
}

void read_samples(const Reader& r, const Json& over, bool v2, StepOverhead& o) {
  if (over.contains("idle_samples")) {
    const Json& idle = r.array(over, "step_overhead", "idle_samples");
    for (std::size_t i = 0; i < idle.size(); ++i) {
      const std::string path = "step_overhead.idle_samples[" + std::to_string(i) + "]";
      r.check_keys(idle[i], path, {"gap_ns", "measured_ns", "extra_ns"});
      IdleSample s;
      s.gap_ns = r.non_negative(idle[i], path, "gap_ns");
      s.measured_ns = r.non_negative(idle[i], path, "measured_ns");
      s.extra_ns = r.number(idle[i], path, "extra_ns");
      o.idle_samples.push_back(s);
    }
  }
  const Json& samples = r.array(over, "step_overhead", "samples");
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string path = "step_overhead.samples[" + std::to_string(i) + "]";
    if (v2)
      r.check_keys(samples[i], path,
                   {"label", "num_seqs", "new_tokens", "measured_ns", "ops_ns", "in_situ_ns", "predicted_ns"});
    else
      r.check_keys(samples[i], path, {"label", "num_seqs", "new_tokens", "measured_ns", "ops_ns"});
    OverheadSample s;
    s.label = r.string(samples[i], path, "label");
    s.num_seqs = r.non_negative(samples[i], path, "num_seqs");
    s.new_tokens = r.non_negative(samples[i], path, "new_tokens");
    s.measured_ns = r.non_negative(samples[i], path, "measured_ns");
    s.ops_ns = r.non_negative(samples[i], path, "ops_ns");
    if (v2) {
      s.in_situ_ns = r.non_negative(samples[i], path, "in_situ_ns");
      s.predicted_ns = r.non_negative(samples[i], path, "predicted_ns");
    }
    o.samples.push_back(std::move(s));
  }
}

// op_scale, the idle terms and idle_samples came later: a profile without
// them reads as op_scale 1 and no idle warm-up.
void read_overhead(const Reader& r, const Json& over, bool v2, StepOverhead& o) {
  std::set<std::string> over_keys = {"op_scale", "base_ns", "per_seq_ns", "idle_ns", "idle_tau_ns", "samples",
                                     "idle_samples"};
  if (v2) over_keys.insert({"op_scales", "op_fixed_ns", "fit"});
  r.check_keys(over, "step_overhead", over_keys, {"op_scale", "op_fixed_ns", "idle_ns", "idle_tau_ns", "idle_samples"});
  if (v2) read_op_terms(r, over, o);
  if (over.contains("op_scale")) o.op_scale = r.scale(over, "step_overhead", "op_scale");
  o.base_ns = r.number(over, "step_overhead", "base_ns");
  o.per_seq_ns = r.number(over, "step_overhead", "per_seq_ns");
  if (over.contains("idle_ns")) o.idle_ns = r.non_negative(over, "step_overhead", "idle_ns");
  if (over.contains("idle_tau_ns")) o.idle_tau_ns = r.non_negative(over, "step_overhead", "idle_tau_ns");
  read_samples(r, over, v2, o);
}

void read_curves(const Reader& r, const Json& json, const char* section, TableKind kind, std::vector<CurveTable>& out) {
  const Json& a = r.array(json, "", section);
  std::set<std::pair<int, std::pair<std::int64_t, std::int64_t>>> seen;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string path = std::string(section) + "[" + std::to_string(i) + "]";
    if (kind == TableKind::gemm)
      r.check_keys(a[i], path, {"op", "n", "k", "points"});
    else
      r.check_keys(a[i], path, {"op", "n", "points"});
    CurveTable t;
    t.op = r.op(a[i], path, kind);
    t.n = r.integer(a[i], path, "n", 1);
    if (kind == TableKind::gemm) t.k = r.integer(a[i], path, "k", 1);
    if (!seen.insert({static_cast<int>(t.op), {t.n, t.k}}).second) {
      r.fail(path, "a second table for op '" + std::string(op_name(t.op)) + "' at the same shape");
    }
    t.points = r.points(a[i], path, curve_x_key(kind), false);
    out.push_back(std::move(t));
  }
}

void read_attention(const Reader& r, const Json& json, std::vector<GridTable>& out) {
  const Json& attn = r.array(json, "", "attention");
  std::set<std::pair<int, std::pair<std::int64_t, std::int64_t>>> seen;
  for (std::size_t i = 0; i < attn.size(); ++i) {
    const std::string path = "attention[" + std::to_string(i) + "]";
    r.check_keys(attn[i], path, {"op", "heads", "head_dim", "rows"});
    GridTable t;
    t.op = r.op(attn[i], path, TableKind::attention);
    t.heads = r.integer(attn[i], path, "heads", 1);
    t.head_dim = r.integer(attn[i], path, "head_dim", 1);
    if (!seen.insert({static_cast<int>(t.op), {t.heads, t.head_dim}}).second) {
      r.fail(path, "a second table for op '" + std::string(op_name(t.op)) + "' at the same shape");
    }
    const Json& rows = r.array(attn[i], path, "rows");
    if (rows.empty()) r.fail(path + ".rows", "expected at least one row");
    const char* key = row_key_name(t.op);
    for (std::size_t j = 0; j < rows.size(); ++j) {
      const std::string rp = path + ".rows[" + std::to_string(j) + "]";
      r.check_keys(rows[j], rp, {key, "points"});
      GridRow row;
      row.key = r.positive(rows[j], rp, key);
      if (!t.rows.empty() && !(row.key > t.rows.back().key)) r.fail(rp + "." + key, "rows must ascend in " + std::string(key));
      row.points = r.points(rows[j], rp, "context_per_seq", t.op == OpKind::attn_prefill);
      t.rows.push_back(std::move(row));
    }
    out.push_back(std::move(t));
  }
}

}  // namespace

// Every key read and checked in schema order with its error, a section a
// function.
CalibratedProfile parse_calibrated_profile(const nlohmann::json& json, const std::string& origin) {
  const Reader r{origin};
  // fitted_from: what `calibrate --measured --profile` fitted (runs,
  // parameters, residuals); provenance only, accepted and not read.
  r.check_keys(json, "", {"format", "version", "metadata", "step_overhead", "gemm", "elementwise", "attention", "fitted_from"},
               {"fitted_from"});
  if (json.contains("fitted_from") && !json.at("fitted_from").is_object()) {
    r.fail("fitted_from", "expected a JSON object, got " + json_excerpt(json.at("fitted_from")));
  }
  if (r.string(json, "", "format") != kCalibratedProfileFormat) {
    r.fail("format", "expected \"" + std::string(kCalibratedProfileFormat) + "\" (not a calibrated profile?)");
  }
  const std::int64_t version = r.integer(json, "", "version", 0);
  if (version != 1 && version != kCalibratedProfileVersion) {
    r.fail("version", "expected 1 to " + std::to_string(kCalibratedProfileVersion) + ", got " +
                          json_excerpt(json.at("version")));
  }
  // Version 2's keys are required in version 2 and unknown in version 1.
  const bool v2 = version >= 2;
  CalibratedProfile p;
  read_metadata(r, json.at("metadata"), p.metadata);
  read_overhead(r, json.at("step_overhead"), v2, p.overhead);
  read_curves(r, json, "gemm", TableKind::gemm, p.gemm);
  read_curves(r, json, "elementwise", TableKind::elementwise, p.elementwise);
  read_attention(r, json, p.attention);
  return p;
}

CalibratedProfile load_calibrated_profile(const std::string& path) {
  return parse_calibrated_profile(read_json_file(path), path);
}

}  // namespace twin
