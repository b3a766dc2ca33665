#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "validate/report.hpp"
#include "validate/report_numbers.hpp"

namespace twin {
namespace {

std::string f(double v, int decimals = 3) { return fixed_or(v, decimals, "–"); }

std::string signed_pct(double v) { return signed_pct_or(v, "–"); }

// Issue 44: measured (the engine's counter) beside each model's prediction.
std::string energy_text(const LoadResult& l) {
  const std::optional<MeasuredEnergy>& m = l.engine.summary.measured_energy;
  std::string text = "measured ";
  if (m && m->known) {
    text += f(m->joules, 1) + " J (" + m->source + ", " + f(m->average_power_w, 1) + " W)";
  } else {
    text += "not known (" + (m ? m->reason : std::string("no counter read")) + ")";
  }
  for (const ModelResult& model : l.models) {
    const EnergySummary& e = model.run.summary.energy;
    text += "; " + model.name + " " + (e.known ? f(static_cast<double>(e.total_uj) * 1e-6, 1) + " J" : "not known");
  }
  return text;
}

std::string parity_text(const LoadResult& l) {
  if (!l.parity_error.empty()) return "FAILED: " + l.parity_error;
  if (l.parity.exact()) return "exact (max |error| 0 ns over " + std::to_string(l.parity.requests) + " requests)";
  return "FAILED: " + std::to_string(l.parity.mismatched) + " requests differ, max |error| " +
         std::to_string(l.parity.max_abs_ns) + " ns; first: " + l.parity.first_mismatch;
}

// The two op kinds the model spends most of a composition's predicted time on.
std::string top_ops(const CompositionError& c) {
  int best = -1, second = -1;
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (best < 0 || c.op_ms_mean[k] > c.op_ms_mean[best]) {
      second = best;
      best = k;
    } else if (second < 0 || c.op_ms_mean[k] > c.op_ms_mean[second]) {
      second = k;
    }
  }
  std::string out;
  for (int k : {best, second}) {
    if (k < 0 || c.op_ms_mean[k] <= 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(op_name(static_cast<OpKind>(k))) + " " + f(c.op_ms_mean[k], 3);
  }
  return out.empty() ? "–" : out;
}

// Which ops each model gets wrong: the runner's own op times inside the
// engine's steps against each model's price of the same steps.
void write_op_table(std::ostream& out, const LoadResult& l) {
  out << "\nPer op, inside the engine's steps (ms per step over its " << l.engine.steps.size()
      << " steps; the engine timed each op as it ran):\n\n| op | measured |";
  for (const ModelResult& m : l.models) out << ' ' << m.name << " | error |";
  out << "\n|---|---:|";
  for (std::size_t m = 0; m < l.models.size(); ++m) out << "---:|---:|";
  out << "\n";
  const std::vector<OpTimeError>& base = l.models.front().op_errors;
  for (std::size_t i = 0; i < base.size(); ++i) {
    out << "| " << base[i].op << " | " << f(base[i].measured_ms) << " |";
    for (const ModelResult& m : l.models) {
      if (i < m.op_errors.size()) out << ' ' << f(m.op_errors[i].predicted_ms) << " | " << signed_pct(m.op_errors[i].error_pct) << " |";
    }
    out << "\n";
  }
  out << "\nLargest misses (ms per step):";
  for (const ModelResult& m : l.models) {
    const OpTimeError* worst = nullptr;
    for (const OpTimeError& e : m.op_errors) {
      if (worst == nullptr || std::abs(e.predicted_ms - e.measured_ms) > std::abs(worst->predicted_ms - worst->measured_ms)) {
        worst = &e;
      }
    }
    if (worst == nullptr) continue;
    const double diff = worst->predicted_ms - worst->measured_ms;
    out << ' ' << m.name << ": " << worst->op << " (" << (diff >= 0 ? "+" : "") << f(diff) << ", "
        << signed_pct(worst->error_pct) << ")" << (&m == &l.models.back() ? "." : ";");
  }
  out << "\n";
}

void write_header(std::ostream& out, const ValidationResult& r, const std::string& plot_note) {
  out << "# Validation: " << r.model << "\n\n";
  out << "- trace: `" << r.trace << "`, " << r.requests << " requests (" << f(r.trace_rate_rps) << " req/s as recorded)\n";
  out << "- calibrated profile: `" << r.profile << "`\n";
  out << "- engine: " << r.engine_description << "\n";
  out << "- roofline priced with hardware profile: " << r.roofline_hardware << "\n";
  if (const std::string caveat = r.roofline_caveat(); !caveat.empty()) out << "- note: " << caveat << "\n";
  out << "- predicted capacity (calibrated model, every request at t=0): **" << f(r.capacity_rps) << " req/s**\n";
  out << "- replay parity: **" << (r.parity_exact() ? "exact at every load" : "FAILED") << "**\n";
  if (r.interrupted) {
    out << "- **interrupted**: only the " << r.loads.size() << " loads below finished"
        << (r.interrupted->empty() ? std::string() : "; the engine run of `" + *r.interrupted + "/` was stopped")
        << "\n";
  }
  out << "\n";
  out << "Errors are (predicted − measured) / measured. The replay run feeds the engine's own step times to the "
         "simulator: it must reproduce every request exactly, so any error left in a prediction is its cost "
         "model's. Folders per load hold the engine's and each simulation's requests.csv, steps.csv and "
         "summary.json.\n\n";
  if (!plot_note.empty()) out << "**Plots:** " << plot_note << ".\n\n";
}

// One load's metrics, measured against each model's prediction.
void write_metric_table(std::ostream& out, const LoadResult& l) {
  out << "| metric | measured |";
  for (const ModelResult& m : l.models) out << ' ' << m.name << " | error |";
  out << "\n|---|---:|";
  for (std::size_t m = 0; m < l.models.size(); ++m) out << "---:|---:|";
  out << "\n";
  const std::size_t rows = l.models.front().metrics.size();
  for (std::size_t i = 0; i < rows; ++i) {
    const MetricComparison& base = l.models.front().metrics[i];
    out << "| " << base.metric << (base.stat == "value" ? "" : " " + base.stat) << " | " << f(base.measured) << " |";
    for (const ModelResult& m : l.models) {
      out << ' ' << f(m.metrics[i].predicted) << " | " << signed_pct(m.metrics[i].error_pct) << " |";
    }
    out << "\n";
  }
}

// The engine's repeated runs against its first: the machine's noise.
void write_repeat_table(std::ostream& out, const LoadResult& l) {
  out << "\nThe engine against itself (" << l.engine_repeats.size() + 1
      << " runs of the same requests; run k vs run 1): differences this size are the machine's noise, and no "
         "prediction can be checked more finely.\n\n| metric | run 1 |";
  for (std::size_t k = 0; k < l.engine_repeats.size(); ++k) out << " run " << k + 2 << " | diff |";
  out << "\n|---|---:|";
  for (std::size_t k = 0; k < l.engine_repeats.size(); ++k) out << "---:|---:|";
  out << "\n";
  for (std::size_t i = 0; i < l.engine_repeats.front().size(); ++i) {
    const MetricComparison& base = l.engine_repeats.front()[i];
    out << "| " << base.metric << (base.stat == "value" ? "" : " " + base.stat) << " | " << f(base.measured) << " |";
    for (const auto& repeat : l.engine_repeats) {
      out << ' ' << f(repeat[i].predicted) << " | " << signed_pct(repeat[i].error_pct) << " |";
    }
    out << "\n";
  }
}

// Per-request errors, then step times by batch composition.
void write_error_tables(std::ostream& out, const LoadResult& l) {
  out << "\nPer-request error (signed %, requests finished in both runs):\n\n";
  out << "| model | metric | requests | p10 | p50 | p90 | mean abs |\n|---|---|---:|---:|---:|---:|---:|\n";
  for (const ModelResult& m : l.models) {
    for (const RequestErrorStats& e : m.request_errors) {
      out << "| " << m.name << " | " << e.metric << " | " << e.count << " | " << signed_pct(e.p10) << " | "
          << signed_pct(e.p50) << " | " << signed_pct(e.p90) << " | " << f(e.mean_abs, 1) << "% |\n";
    }
  }
  out << "\nStep time on the engine's own steps, by batch composition (each model prices exactly the steps the "
         "engine ran; op columns: where the model puts its predicted time, ms per step):\n\n";
  out << "| model | composition | steps | measured ms | predicted ms | error of total | mean abs | p90 abs | top "
         "predicted ops |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n";
  for (const ModelResult& m : l.models) {
    for (const CompositionError& c : m.step_errors) {
      out << "| " << m.name << " | " << composition_name(c.composition) << " | " << c.steps << " | "
          << f(c.measured_ms_mean) << " | " << f(c.predicted_ms_mean) << " | " << signed_pct(c.error_pct_of_total)
          << " | " << f(c.mean_abs_error_pct, 1) << "% | " << f(c.p90_abs_error_pct, 1) << "% | " << top_ops(c)
          << " |\n";
    }
  }
}

void write_load(std::ostream& out, const LoadResult& l, const std::string& plot_note) {
  out << "## Load " << f(l.load, 2) << " (" << f(l.rate_rps) << " req/s) — [`" << l.folder << "/`](" << l.folder
      << "/)\n\n";
  out << "Replay parity: " << parity_text(l) << ".\n\n";
  out << "Energy: " << energy_text(l) << ".\n\n";
  if (!l.engine_repeats.empty()) {
    out << "Measured: the median of the " << l.engine_repeats.size() + 1
        << " engine runs for each metric (of two, their mean); the per-request and step tables use run 1.\n\n";
  }
  write_metric_table(out, l);
  if (!l.engine_repeats.empty()) write_repeat_table(out, l);
  write_error_tables(out, l);
  if (!l.models.empty() && !l.models.front().op_errors.empty()) write_op_table(out, l);
  if (plot_note.empty()) {
    out << "\n![predicted vs measured](" << l.folder << "/scatter.svg)\n";
    out << "![latency CDFs](" << l.folder << "/cdf.svg)\n";
    out << "![step-time error vs batch size](" << l.folder << "/step_error.svg)\n";
  }
  out << "\n";
}

}  // namespace

void write_report_markdown(std::ostream& out, const ValidationResult& r, const std::string& plot_note) {
  write_header(out, r, plot_note);
  for (const LoadResult& l : r.loads) write_load(out, l, plot_note);
}

void print_validation_table(std::ostream& out, const ValidationResult& r) {
  out << "Predicted capacity " << f(r.capacity_rps) << " req/s (" << r.requests << " requests)\n";
  const bool noise = !r.loads.empty() && !r.loads.front().engine_repeats.empty();
  if (noise) {
    out << "measured: each metric's median over the engine runs; noise: the largest difference of a run from run 1\n";
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-6s %-9s %-4s %12s %12s %9s %12s %9s%s\n", "load", "metric", "stat", "measured",
                "calibrated", "error", "roofline", "error", noise ? "     noise" : "");
  out << line;
  for (const LoadResult& l : r.loads) {
    const auto& cal = l.models.front().metrics;
    for (std::size_t i = 0; i < cal.size(); ++i) {
      const MetricComparison& c = cal[i];
      if (c.stat == "p99" || c.metric == "itl_ms") continue;  // the compact view; report.md has all
      const MetricComparison& roof = l.models.size() > 1 ? l.models[1].metrics[i] : c;
      // The engine against itself: the largest difference of a repeat run.
      std::string spread;
      if (!l.engine_repeats.empty()) {
        double worst = 0;
        for (const auto& repeat : l.engine_repeats) {
          if (std::isfinite(repeat[i].error_pct)) worst = std::max(worst, std::abs(repeat[i].error_pct));
        }
        char buf[32];
        std::snprintf(buf, sizeof buf, " %9s", ("±" + f(worst, 1) + "%").c_str());
        spread = buf;
      }
      std::snprintf(line, sizeof line, "%-6s %-9s %-4s %12s %12s %9s %12s %9s%s\n", f(l.load, 2).c_str(),
                    c.metric.c_str(), c.stat == "value" ? "" : c.stat.c_str(), f(c.measured).c_str(),
                    f(c.predicted).c_str(), signed_pct(c.error_pct).c_str(), f(roof.predicted).c_str(),
                    signed_pct(roof.error_pct).c_str(), spread.c_str());
      out << line;
    }
    out << "       replay parity: " << parity_text(l) << "\n";
    out << "       energy: " << energy_text(l) << "\n";
  }
}

}  // namespace twin
