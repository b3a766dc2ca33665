#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

#include "base/error.hpp"
#include "hwprofiles/hardware_desc.hpp"
#include "models/embedded_file.hpp"
#include "models/json_fields.hpp"
#include "models/step_ops.hpp"

namespace twin {

namespace {

enum class Rule { positive, non_negative, fraction };

struct ScalarField {
  const char* key;
  double HardwareDesc::*member;
  Rule rule;
};

constexpr ScalarField kScalars[] = {
    {"memory_bandwidth_gbps", &HardwareDesc::memory_bandwidth_gbps, Rule::positive},
    {"nvlink_bandwidth_gbps", &HardwareDesc::nvlink_bandwidth_gbps, Rule::positive},
    {"nvlink_latency_us", &HardwareDesc::nvlink_latency_us, Rule::non_negative},
    {"pcie_bandwidth_gbps", &HardwareDesc::pcie_bandwidth_gbps, Rule::positive},
    {"pcie_latency_us", &HardwareDesc::pcie_latency_us, Rule::non_negative},
    {"nic_bandwidth_gbps", &HardwareDesc::nic_bandwidth_gbps, Rule::positive},
    {"nic_latency_us", &HardwareDesc::nic_latency_us, Rule::non_negative},
    {"kernel_launch_us", &HardwareDesc::kernel_launch_us, Rule::non_negative},
    {"step_overhead_us", &HardwareDesc::step_overhead_us, Rule::non_negative},
    {"price_per_gpu_hour", &HardwareDesc::price_per_gpu_hour, Rule::non_negative},
};

constexpr ScalarField kEfficiencies[] = {
    {"compute", &HardwareDesc::compute_efficiency, Rule::fraction},
    {"memory", &HardwareDesc::memory_efficiency, Rule::fraction},
    {"allreduce", &HardwareDesc::allreduce_efficiency, Rule::fraction},
    {"pcie", &HardwareDesc::pcie_efficiency, Rule::fraction},
};

struct PeakField {
  const char* key;
  double PeakTflops::*member;
};

constexpr PeakField kPeaks[] = {
    {"fp32", &PeakTflops::fp32}, {"tf32", &PeakTflops::tf32}, {"bf16", &PeakTflops::bf16},
    {"fp16", &PeakTflops::fp16}, {"fp8", &PeakTflops::fp8},   {"int8", &PeakTflops::int8},
    {"fp4", &PeakTflops::fp4},  // issue 41: optional like the others
};

constexpr const char* kTopKeys[] = {
    "name", "kind", "peak_tflops", "memory_bytes", "memory_mib", "memory_gib", "memory_gb",
    "memory_bandwidth_gbps", "nvlink_bandwidth_gbps", "nvlink_latency_us", "gpus_per_node",
    "host_speed", "host_per_seq_us", "host_per_token_us", "host_per_sample_us", "host_exposed_us",
    "pcie_bandwidth_gbps", "pcie_latency_us", "nic_bandwidth_gbps", "nic_latency_us", "kernel_launch_us",
    "step_overhead_us", "interconnect", "runtime_reserve_mib", "collective_reserve_mib", "efficiency", "price_per_gpu_hour",
    "sources", "pcie_p2p", "collectives", "compute_capability", "mixed_attention_block_ns",
    "vendor",  // issue 41
    "fitted_from",
    "power"};  // issue 44

// The units a device's memory may be given in; exactly one appears. Binary
// units are what the driver reports; "memory_gb" (1e9 bytes, the marketing
// figure) is kept for older files.
struct MemoryUnit {
  const char* key;
  double bytes;
  const char* unit;
};
constexpr MemoryUnit kMemoryUnits[] = {
    {"memory_bytes", 1.0, "bytes"},
    {"memory_mib", 1024.0 * 1024.0, "MiB"},
    {"memory_gib", 1024.0 * 1024.0 * 1024.0, "GiB"},
    {"memory_gb", 1e9, "GB"},
};

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// Reads and checks one number; `path` is the dotted field name for messages.
double read_number(const nlohmann::json& obj, const char* key, const std::string& path, Rule rule,
                   const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end()) json_field_error(origin, path, "missing required field");
  if (!it->is_number()) json_field_error(origin, path, "expected a number, got " + json_excerpt(*it));
  const double v = it->get<double>();
  if (!std::isfinite(v)) json_field_error(origin, path, "expected a finite number");
  switch (rule) {
    case Rule::positive:
      if (!(v > 0)) json_field_error(origin, path, "expected a positive number, got " + json_excerpt(*it));
      break;
    case Rule::non_negative:
      if (v < 0) json_field_error(origin, path, "expected a non-negative number, got " + json_excerpt(*it));
      break;
    case Rule::fraction:
      if (!(v > 0 && v <= 1))
        json_field_error(origin, path, "expected an efficiency in (0, 1], got " + json_excerpt(*it));
      break;
  }
  return v;
}

const nlohmann::json& read_object(const nlohmann::json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end()) json_field_error(origin, key, "missing required field");
  if (!it->is_object()) json_field_error(origin, key, "expected an object");
  return *it;
}

template <typename Range, typename KeyOf>
void reject_unknown_keys(const nlohmann::json& obj, const Range& known, KeyOf key_of,
                         const std::string& prefix, const std::string& origin) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    std::string list;
    for (const auto& k : known) {
      const std::string name = key_of(k);
      ok = ok || name == it.key();
      list += (list.empty() ? "" : ", ") + name;
    }
    if (!ok) json_field_error(origin, prefix + it.key(), "unknown field; known: " + list);
  }
}

// Issue 44: the optional "power" object, watts per device. The draws at the
// two roofs lie between idle and the board's cap.
PowerDesc read_power(const nlohmann::json& j, const std::string& origin, std::set<std::string>& numeric_fields) {
  PowerDesc p;
  auto it = j.find("power");
  if (it == j.end()) return p;
  if (!it->is_object()) json_field_error(origin, "power", "expected an object");
  const std::pair<const char*, double PowerDesc::*> keys[] = {
      {"idle_w", &PowerDesc::idle_w}, {"memory_w", &PowerDesc::memory_w},
      {"compute_w", &PowerDesc::compute_w}, {"max_w", &PowerDesc::max_w}};
  reject_unknown_keys(*it, keys, [](const auto& k) { return std::string(k.first); }, "power.", origin);
  for (const auto& [key, member] : keys) {
    const std::string path = std::string("power.") + key;
    p.*member = read_number(*it, key, path, Rule::positive, origin);
    numeric_fields.insert(path);
  }
  for (const auto& [key, member] : {std::pair{"memory_w", &PowerDesc::memory_w}, std::pair{"compute_w", &PowerDesc::compute_w}}) {
    if (p.*member < p.idle_w || p.*member > p.max_w)
      json_field_error(origin, std::string("power.") + key, "expected a draw from idle_w to max_w");
  }
  p.known = true;
  return p;
}

std::vector<GemmCurvePoint> read_curve(const nlohmann::json& eff, const std::string& origin) {
  const std::string path = "efficiency.gemm_curve";
  auto it = eff.find("gemm_curve");
  if (it == eff.end()) json_field_error(origin, path, "missing required field");
  if (!it->is_array() || it->empty())
    json_field_error(origin, path, "expected a non-empty array of [flops, efficiency] pairs");
  std::vector<GemmCurvePoint> curve;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& p = (*it)[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      json_field_error(origin, at, "expected [flops, efficiency], got " + json_excerpt(p));
    const double f = p[0].get<double>(), e = p[1].get<double>();
    if (!(f > 0) || !std::isfinite(f)) json_field_error(origin, at, "expected positive flops");
    if (!(e > 0 && e <= 1)) json_field_error(origin, at, "expected an efficiency in (0, 1]");
    if (!curve.empty() && !(f > curve.back().flops))
      json_field_error(origin, at, "flops must increase along the curve");
    curve.push_back({f, e});
  }
  return curve;
}

std::string string_at(const nlohmann::json& obj, const char* key, const std::string& path, const std::string& origin) {
  auto it = obj.find(key);
  if (it == obj.end()) json_field_error(origin, path, "missing required field");
  if (!it->is_string()) json_field_error(origin, path, "expected a string, got " + json_excerpt(*it));
  return it->get<std::string>();
}

// An axis name of a curve ("x" or "y"); a usage error names the field.
CurveAxis read_axis(const nlohmann::json& c, const char* key, const std::string& path, const std::string& origin) {
  const std::string axis = string_at(c, key, path, origin);
  if (axis == "flops") return CurveAxis::flops;
  if (axis == "bytes") return CurveAxis::bytes;
  if (axis == "intensity") return CurveAxis::intensity;
  if (axis == "tokens") return CurveAxis::tokens;
  if (axis == "context_share") return CurveAxis::context_share;
  json_field_error(origin, path,
                   "expected \"flops\", \"bytes\", \"intensity\", \"tokens\" or \"context_share\", got \"" +
                       excerpt(axis) + "\"");
}

// [[x, efficiency], ...]: x positive and ascending, efficiency in (0, 1].
std::vector<std::pair<double, double>> read_points(const nlohmann::json& c, const std::string& path,
                                                   const std::string& origin) {
  auto pts = c.find("points");
  if (pts == c.end() || !pts->is_array() || pts->empty())
    json_field_error(origin, path + ".points", "expected a non-empty array of [x, efficiency] pairs");
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < pts->size(); ++i) {
    const auto& p = (*pts)[i];
    const std::string at = path + ".points[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      json_field_error(origin, at, "expected [x, efficiency], got " + json_excerpt(p));
    const double x = p[0].get<double>(), e = p[1].get<double>();
    if (!(x > 0) || !std::isfinite(x)) json_field_error(origin, at, "expected a positive x");
    if (!(e > 0 && e <= 1)) json_field_error(origin, at, "expected an efficiency in (0, 1]");
    if (!out.empty() && !(x > out.back().first)) json_field_error(origin, at, "x must increase along the curve");
    out.emplace_back(x, e);
  }
  return out;
}

// efficiency.curves: {"NAME": {"roof": "compute"|"memory", "x": AXIS,
// "points": [[x, efficiency], ...], "ops": ["qkv_proj", ...]}, ...}, or with
// a second axis "y": AXIS and "rows": [{"y": Y, "points": [...]}, ...] (y
// ascending) instead of "points". An op kind may be priced by at most one
// curve per roof.
std::vector<EfficiencyCurveDesc> read_named_curves(const nlohmann::json& eff, const std::string& origin) {
  std::vector<EfficiencyCurveDesc> out;
  auto it = eff.find("curves");
  if (it == eff.end()) return out;
  if (!it->is_object()) json_field_error(origin, "efficiency.curves", "expected an object of named curves");
  std::set<std::pair<int, std::string>> claimed;  // (roof, op + "/" + dtype)
  for (auto c = it->begin(); c != it->end(); ++c) {
    const std::string path = "efficiency.curves." + c.key();
    if (!c->is_object()) json_field_error(origin, path, "expected an object with roof, x, points and ops");
    reject_unknown_keys(*c, std::vector<std::string>{"roof", "x", "y", "points", "rows", "ops", "dtype"},
                        [](const std::string& k) { return k; }, path + ".", origin);
    EfficiencyCurveDesc d;
    d.name = c.key();
    const std::string roof = string_at(*c, "roof", path + ".roof", origin);
    if (roof == "compute") d.roof = CurveRoof::compute;
    else if (roof == "memory") d.roof = CurveRoof::memory;
    else json_field_error(origin, path + ".roof", "expected \"compute\" or \"memory\", got \"" + excerpt(roof) + "\"");
    d.axis = read_axis(*c, "x", path + ".x", origin);
    if (c->contains("dtype")) {
      d.dtype = string_at(*c, "dtype", path + ".dtype", origin);
      if (d.dtype != "fp8" && d.dtype != "int8")
        json_field_error(origin, path + ".dtype", "expected \"fp8\" or \"int8\", got \"" + excerpt(d.dtype) + "\"");
      if (d.roof != CurveRoof::compute)
        json_field_error(origin, path + ".dtype", "only a compute curve prices a GEMM format");
    }
    d.has_y = c->contains("y");
    if (!d.has_y) {
      if (c->contains("rows")) json_field_error(origin, path + ".rows", "rows need a y axis (\"y\")");
      d.points = read_points(*c, path, origin);
    } else {
      d.y_axis = read_axis(*c, "y", path + ".y", origin);
      if (c->contains("points")) json_field_error(origin, path + ".points", "a curve with a y axis has rows, not points");
      auto rows = c->find("rows");
      if (rows == c->end() || !rows->is_array() || rows->empty())
        json_field_error(origin, path + ".rows", "expected a non-empty array of {\"y\": Y, \"points\": [...]}");
      for (size_t i = 0; i < rows->size(); ++i) {
        const auto& r = (*rows)[i];
        const std::string at = path + ".rows[" + std::to_string(i) + "]";
        if (!r.is_object()) json_field_error(origin, at, "expected {\"y\": Y, \"points\": [...]}");
        reject_unknown_keys(r, std::vector<std::string>{"y", "points"}, [](const std::string& k) { return k; },
                            at + ".", origin);
        auto y = r.find("y");
        if (y == r.end() || !y->is_number() || !std::isfinite(y->get<double>()) || y->get<double>() < 0)
          json_field_error(origin, at + ".y", "expected a number >= 0");
        if (!d.rows.empty() && !(y->get<double>() > d.rows.back().y))
          json_field_error(origin, at + ".y", "y must increase along the rows");
        d.rows.push_back({y->get<double>(), read_points(r, at, origin)});
      }
    }
    auto ops = c->find("ops");
    if (ops == c->end() || !ops->is_array() || ops->empty())
      json_field_error(origin, path + ".ops", "expected a non-empty array of op names");
    for (size_t i = 0; i < ops->size(); ++i) {
      const std::string at = path + ".ops[" + std::to_string(i) + "]";
      if (!(*ops)[i].is_string()) json_field_error(origin, at, "expected an op name");
      const std::string op = (*ops)[i].get<std::string>();
      try {
        (void)parse_op_kind(op);
      } catch (const UsageError& e) {
        json_field_error(origin, at, e.what());
      }
      if (!claimed.insert({static_cast<int>(d.roof), op + "/" + d.dtype}).second)
        json_field_error(origin, at, "op '" + excerpt(op) + "' already has a " + roof + " curve" +
                                         (d.dtype.empty() ? std::string() : " for " + d.dtype));
      d.ops.push_back(op);
    }
    out.push_back(std::move(d));
  }
  return out;
}

// efficiency.dtype_ratio: {"fp8": r, "int8": r}, each positive.
std::map<std::string, double> read_dtype_ratio(const nlohmann::json& eff, const std::string& origin) {
  std::map<std::string, double> out;
  auto it = eff.find("dtype_ratio");
  if (it == eff.end()) return out;
  const std::string path = "efficiency.dtype_ratio";
  if (!it->is_object()) json_field_error(origin, path, "expected an object like {\"fp8\": 0.95}");
  reject_unknown_keys(*it, std::vector<std::string>{"fp8", "int8"}, [](const std::string& k) { return k; },
                      path + ".", origin);
  for (auto r = it->begin(); r != it->end(); ++r)
    out[r.key()] = read_number(*it, r.key().c_str(), path + "." + r.key(), Rule::positive, origin);
  return out;
}

CollectiveKind read_collective_kind(const nlohmann::json& c, const std::string& path, const std::string& origin) {
  const std::string k = string_at(c, "kind", path + ".kind", origin);
  for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::all_to_all,
                              CollectiveKind::custom_all_reduce})
    if (k == collective_kind_name(kind)) return kind;
  json_field_error(origin, path + ".kind",
                   "expected \"all_reduce\", \"all_gather\", \"all_to_all\" or \"custom_all_reduce\", got \"" +
                       excerpt(k) + "\"");
}

CollectiveLink read_collective_link(const nlohmann::json& c, const std::string& path, const std::string& origin) {
  const std::string l = string_at(c, "link", path + ".link", origin);
  for (CollectiveLink link : {CollectiveLink::nvswitch, CollectiveLink::nvlink_bridge, CollectiveLink::pcie_p2p,
                              CollectiveLink::pcie_host})
    if (l == collective_link_name(link)) return link;
  json_field_error(origin, path + ".link",
                   "expected \"nvswitch\", \"nvlink_bridge\", \"pcie_p2p\" or \"pcie_host\", got \"" +
                       excerpt(l) + "\"");
}

// collectives: {"NAME": {"kind": K, "link": L, "gpus": N, "points": [[bytes,
// us], ...]}}: bytes positive and ascending, times positive; one curve per
// (kind, link, gpus).
std::vector<CollectiveCurveDesc> read_collectives(const nlohmann::json& j, const std::string& origin) {
  std::vector<CollectiveCurveDesc> out;
  auto it = j.find("collectives");
  if (it == j.end()) return out;
  if (!it->is_object()) json_field_error(origin, "collectives", "expected an object of named curves");
  for (auto c = it->begin(); c != it->end(); ++c) {
    const std::string path = "collectives." + c.key();
    if (!c->is_object()) json_field_error(origin, path, "expected an object with kind, link, gpus and points");
    reject_unknown_keys(*c, std::vector<std::string>{"kind", "link", "gpus", "points"},
                        [](const std::string& k) { return k; }, path + ".", origin);
    CollectiveCurveDesc d;
    d.name = c.key();
    d.kind = read_collective_kind(*c, path, origin);
    d.link = read_collective_link(*c, path, origin);
    const double gpus = read_number(*c, "gpus", path + ".gpus", Rule::positive, origin);
    if (gpus != std::floor(gpus) || gpus < 2 || gpus > 1024)
      json_field_error(origin, path + ".gpus", "expected a whole number from 2 to 1024");
    d.gpus = static_cast<int>(gpus);
    auto pts = c->find("points");
    if (pts == c->end() || !pts->is_array() || pts->empty())
      json_field_error(origin, path + ".points", "expected a non-empty array of [bytes, microseconds] pairs");
    for (size_t i = 0; i < pts->size(); ++i) {
      const auto& p = (*pts)[i];
      const std::string at = path + ".points[" + std::to_string(i) + "]";
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
        json_field_error(origin, at, "expected [bytes, microseconds], got " + json_excerpt(p));
      const double b = p[0].get<double>(), us = p[1].get<double>();
      if (!(b > 0) || !std::isfinite(b)) json_field_error(origin, at, "expected positive bytes");
      if (!(us > 0) || !std::isfinite(us)) json_field_error(origin, at, "expected a positive time in microseconds");
      if (!d.points.empty() && !(b > d.points.back().first))
        json_field_error(origin, at, "bytes must increase along the curve");
      d.points.emplace_back(b, us);
    }
    for (const auto& other : out)
      if (other.kind == d.kind && other.link == d.link && other.gpus == d.gpus)
        json_field_error(origin, path, "the curve '" + other.name + "' is already " + collective_kind_name(d.kind) +
                                            " over " + collective_link_name(d.link) + " on " +
                                            std::to_string(d.gpus) + " GPUs");
    out.push_back(std::move(d));
  }
  return out;
}

// The optional per-format GEMM ratios, P2P claim, compute capability, mixed
// attention block time and collective curves; each needs a source note like any number
// (`numeric_fields`).
void read_formats_and_collectives(const nlohmann::json& j, const nlohmann::json& eff, const std::string& origin,
                                  HardwareDesc& hw, std::set<std::string>& numeric_fields) {
  hw.gemm_dtype_ratio = read_dtype_ratio(eff, origin);
  for (const auto& [dtype, ratio] : hw.gemm_dtype_ratio) numeric_fields.insert("efficiency.dtype_ratio." + dtype);
  if (j.contains("pcie_p2p")) {
    if (!j["pcie_p2p"].is_boolean()) json_field_error(origin, "pcie_p2p", "expected true or false");
    hw.pcie_p2p = j["pcie_p2p"].get<bool>();
    numeric_fields.insert("pcie_p2p");  // a claim about the device: it needs its source too
  }
  // Optional numbers in [lo, hi), each a claim with its source.
  const auto optional_number = [&](const char* key, double lo, double hi, const char* expected, double& to) {
    if (!j.contains(key)) return;
    const auto& v = j[key];
    if (!v.is_number() || !(v.get<double>() >= lo && v.get<double>() < hi)) json_field_error(origin, key, expected);
    to = v.get<double>();
    numeric_fields.insert(key);
  };
  optional_number("compute_capability", 1.0, 100.0, "expected a CUDA compute capability such as 8.9 or 12.0",
                  hw.compute_capability);
  optional_number("mixed_attention_block_ns", 0.0, 1e6, "expected nanoseconds >= 0 per grid block",
                  hw.mixed_attention_block_ns);
  hw.collectives = read_collectives(j, origin);
  for (const auto& c : hw.collectives) numeric_fields.insert("collectives." + c.name);
}

namespace {

using FieldSet = std::set<std::string>;  // every number read, to match against sources

void read_peaks(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw, FieldSet& numeric_fields) {
  const auto& peaks = read_object(j, "peak_tflops", origin);
  reject_unknown_keys(peaks, kPeaks, [](const PeakField& p) { return std::string(p.key); },
                      "peak_tflops.", origin);
  for (const auto& p : kPeaks) {
    if (!peaks.contains(p.key)) continue;  // absent: unsupported on this device
    const std::string path = std::string("peak_tflops.") + p.key;
    hw.peak_tflops.*p.member = read_number(peaks, p.key, path, Rule::positive, origin);
    numeric_fields.insert(path);
  }
  if (peaks.empty()) json_field_error(origin, "peak_tflops", "expected at least one dtype");
}

// The named choices: how the node's GPUs are joined, and whose they are.
void read_interconnect_and_vendor(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw) {
  if (j.contains("interconnect")) {
    hw.interconnect = json_string(j, "interconnect", origin);
    if (hw.interconnect != "nvswitch" && hw.interconnect != "nvlink_pairs" && hw.interconnect != "pcie" &&
        hw.interconnect != "xgmi_mesh") {
      json_field_error(origin, "interconnect", "expected \"nvswitch\", \"nvlink_pairs\", \"pcie\" or \"xgmi_mesh\", got \"" +
                                                   excerpt(hw.interconnect) + "\"");
    }
  }
  if (j.contains("vendor")) {
    hw.vendor = json_string(j, "vendor", origin);
    if (hw.vendor != "nvidia" && hw.vendor != "amd")
      json_field_error(origin, "vendor", "expected \"nvidia\" or \"amd\", got \"" + excerpt(hw.vendor) + "\"");
  }
}

void read_memory(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw, FieldSet& numeric_fields) {
  const MemoryUnit* memory_unit = nullptr;
  for (const auto& u : kMemoryUnits) {
    if (!j.contains(u.key)) continue;
    if (memory_unit) {
      json_field_error(origin, u.key, std::string("give the memory once; ") + memory_unit->key + " is already set");
    }
    memory_unit = &u;
    const double v = read_number(j, u.key, u.key, Rule::positive, origin);
    hw.memory_capacity_bytes = v * u.bytes;
    hw.memory_reported = number_text(v) + " " + u.unit;
    numeric_fields.insert(u.key);
  }
  if (!memory_unit) {
    json_field_error(origin, "memory_mib", "missing required field (or memory_bytes / memory_gib / memory_gb)");
  }
}

// The host-work figures, the memory reserves and the node's GPU count.
void read_host_and_node(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw,
                        FieldSet& numeric_fields) {
  // Optional host-work figures (hardware_desc.hpp): absent keeps the
  // default (host_speed 1, the engine's per-item figures).
  for (const auto& [key, member, rule] :
       {std::tuple{"host_speed", &HardwareDesc::host_speed, Rule::positive},
        std::tuple{"host_per_seq_us", &HardwareDesc::host_per_seq_us, Rule::non_negative},
        std::tuple{"host_per_token_us", &HardwareDesc::host_per_token_us, Rule::non_negative},
        std::tuple{"host_per_sample_us", &HardwareDesc::host_per_sample_us, Rule::non_negative},
        std::tuple{"host_exposed_us", &HardwareDesc::host_exposed_us, Rule::non_negative}}) {
    if (!j.contains(key)) continue;
    hw.*member = read_number(j, key, key, rule, origin);
    numeric_fields.insert(key);
  }
  // Optional: a profile without them gets the defaults in hardware_desc.hpp.
  for (const auto& [key, member] : {std::pair{"runtime_reserve_mib", &HardwareDesc::runtime_reserve_bytes},
                                    std::pair{"collective_reserve_mib", &HardwareDesc::collective_reserve_bytes}}) {
    if (!j.contains(key)) continue;
    hw.*member = read_number(j, key, key, Rule::non_negative, origin) * 1024.0 * 1024.0;
    numeric_fields.insert(key);
  }
  const double gpn = read_number(j, "gpus_per_node", "gpus_per_node", Rule::positive, origin);
  if (gpn != std::floor(gpn) || gpn > 1024)
    json_field_error(origin, "gpus_per_node", "expected a whole number from 1 to 1024");
  hw.gpus_per_node = static_cast<int>(gpn);
  numeric_fields.insert("gpus_per_node");

}

void read_efficiency(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw, FieldSet& numeric_fields) {
  const auto& eff = read_object(j, "efficiency", origin);
  std::vector<std::string> eff_keys{"gemm_curve", "curves", "dtype_ratio"};
  for (const auto& f : kEfficiencies) eff_keys.emplace_back(f.key);
  reject_unknown_keys(eff, eff_keys, [](const std::string& k) { return k; }, "efficiency.", origin);
  for (const auto& f : kEfficiencies) {
    const std::string path = std::string("efficiency.") + f.key;
    hw.*f.member = read_number(eff, f.key, path, f.rule, origin);
    numeric_fields.insert(path);
  }
  hw.gemm_curve = read_curve(eff, origin);
  numeric_fields.insert("efficiency.gemm_curve");
  hw.curves = read_named_curves(eff, origin);
  for (const auto& c : hw.curves) numeric_fields.insert("efficiency.curves." + c.name);
  read_formats_and_collectives(j, eff, origin, hw, numeric_fields);

}

void read_sources(const nlohmann::json& j, const std::string& origin, HardwareDesc& hw,
                  const FieldSet& numeric_fields) {
  // Every number says where it came from; every note belongs to a number.
  const auto& sources = read_object(j, "sources", origin);
  for (auto it = sources.begin(); it != sources.end(); ++it) {
    if (!numeric_fields.count(it.key()))
      json_field_error(origin, "sources." + it.key(), "names no field present in this profile");
    if (!it->is_string() || it->get<std::string>().empty())
      json_field_error(origin, "sources." + it.key(), "expected a non-empty note");
    hw.sources[it.key()] = it->get<std::string>();
  }
  for (const auto& f : numeric_fields)
    if (!hw.sources.count(f)) json_field_error(origin, "sources." + f, "missing source note for " + f);
}

}  // namespace

HardwareDesc hardware_from_json(const nlohmann::json& j, const std::string& origin,
                                const std::string& default_name) {
  auto key_of_cstr = [](const char* k) { return std::string(k); };
  reject_unknown_keys(j, kTopKeys, key_of_cstr, "", origin);
  HardwareDesc hw;
  hw.name = j.contains("name") ? json_string(j, "name", origin) : default_name;
  if (hw.name.empty()) json_field_error(origin, "name", "expected a non-empty string");
  const std::string kind = json_string(j, "kind", origin);
  if (kind == "gpu")
    hw.kind = DeviceKind::gpu;
  else if (kind == "cpu")
    hw.kind = DeviceKind::cpu;
  else
    json_field_error(origin, "kind", "expected \"gpu\" or \"cpu\", got \"" + excerpt(kind) + "\"");

  // `calibrate --measured`'s record of the fit (runs, residuals, intervals):
  // for people and tools reading the file; the profile is its numbers.
  if (j.contains("fitted_from") && !j.at("fitted_from").is_object())
    json_field_error(origin, "fitted_from", "expected an object (written by calibrate --measured)");
  std::set<std::string> numeric_fields;  // every number read, to match against sources
  read_peaks(j, origin, hw, numeric_fields);

  for (const auto& f : kScalars) {
    hw.*f.member = read_number(j, f.key, f.key, f.rule, origin);
    numeric_fields.insert(f.key);
  }
  read_interconnect_and_vendor(j, origin, hw);
  read_memory(j, origin, hw, numeric_fields);
  read_host_and_node(j, origin, hw, numeric_fields);

  read_efficiency(j, origin, hw, numeric_fields);

  hw.power = read_power(j, origin, numeric_fields);

  read_sources(j, origin, hw, numeric_fields);
  return hw;
}

// `part` occurs in `text` as a whole word (not inside a longer run of
// letters and digits): "h20" is in "nvidia h20" but not in "nvidia h200",
// "b200" not in "nvidia gb200".
bool contains_word(const std::string& text, const std::string& part) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    const std::size_t end = at + part.size();
    if ((at == 0 || !alnum(text[at - 1])) && (end == text.size() || !alnum(text[end]))) return true;
  }
  return false;
}

std::string known_names_text() {
  std::string out;
  for (const auto& n : hardware_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

HardwareDesc parse_hardware_json(const std::string& text, const std::string& origin,
                                 const std::string& default_name) {
  return hardware_from_json(parse_json_text(text, origin), origin, default_name);
}

std::vector<std::string> hardware_names() {
  std::vector<std::string> names;
  for (const auto& f : bundled_hardware_files()) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

HardwareDesc load_hardware_file(const std::string& path) {
  return hardware_from_json(read_json_file(path), path, std::filesystem::path(path).stem().string());
}

HardwareDesc resolve_hardware(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return load_hardware_file(name_or_path);
  for (const auto& f : bundled_hardware_files())
    if (f.name == name_or_path)
      return parse_hardware_json(std::string(f.text), "bundled hardware " + std::string(f.name),
                                 std::string(f.name));
  // A device's name as the GPU reports it (nvidia-smi, torch, a vLLM run's
  // metadata: "NVIDIA GeForce RTX 4090"): the profile whose every part it
  // names, as calibrate picks one; none, or a name like "NVIDIA H100" that
  // more than one could be, is refused below.
  if (name_or_path.find(' ') != std::string::npos) {
    try {
      return resolve_hardware(hardware_for_device("cuda", name_or_path));
    } catch (const UsageError&) {
    }
  }
  throw UsageError("unknown hardware '" + excerpt(name_or_path) +
                   "' (not a bundled name, a device name one profile matches, or a file); known hardware: " +
                   known_names_text());
}

std::string hardware_for_device(const std::string& backend, const std::string& device_name) {
  if (backend == "cpu") return "cpu";
  auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  const std::string device = lower(device_name);
  // A rack's GPUs report the superchip's name ("NVIDIA GB200"); the rack is
  // the profile (its NVLink domain is the node).
  for (const auto& [chip, profile] : {std::pair{"gb200", "gb200-nvl72"}, std::pair{"gb300", "gb300-nvl72"}})
    if (contains_word(device, chip)) return profile;
  std::string best;
  std::size_t best_parts = 0;
  for (const std::string& name : hardware_names()) {
    if (name == "cpu") continue;
    std::size_t parts = 0;
    bool all = true;
    for (std::size_t at = 0; at <= name.size();) {
      const std::size_t dash = std::min(name.find('-', at), name.size());
      const std::string part = name.substr(at, dash - at);
      if (!part.empty() && !contains_word(device, part)) all = false;
      ++parts;
      at = dash + 1;
    }
    if (all && parts > best_parts) {
      best = name;
      best_parts = parts;
    }
  }
  if (best.empty()) {
    throw UsageError("no bundled hardware profile matches the device '" + device_name +
                     "'; give one with --hw (known hardware: " + known_names_text() + ")");
  }
  return best;
}

}  // namespace twin
