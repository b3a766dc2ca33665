#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/error.hpp"
#include "validate/plot_script.hpp"
#include "validate/report.hpp"

namespace fs = std::filesystem;

namespace twin {
namespace {

std::string ms(Time ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string ms(double ns) {
  if (!std::isfinite(ns)) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6f", ns / 1e6);
  return buf;
}

std::string pct(double v) {
  if (!std::isfinite(v)) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

double tpot_ns(const RequestRecord& r) {
  if (r.output_tokens < 2) return std::nan("");
  return static_cast<double>(r.finish - r.first_token) / static_cast<double>(r.output_tokens - 1);
}

void write_requests_dat(const fs::path& path, const LoadResult& l) {
  std::map<RequestId, std::vector<const RequestRecord*>> by_id;  // engine, then each model
  for (const RequestRecord& r : l.engine.requests) {
    if (r.outcome == Outcome::finished) by_id[r.id].push_back(&r);
  }
  for (const ModelResult& m : l.models) {
    for (const RequestRecord& r : m.run.requests) {
      auto it = by_id.find(r.id);
      if (it != by_id.end() && r.outcome == Outcome::finished) it->second.push_back(&r);
    }
  }
  std::ofstream out(path, std::ios::binary);
  out << "# id ttft_measured ttft_calibrated ttft_roofline e2el_measured e2el_calibrated e2el_roofline "
         "tpot_measured tpot_calibrated tpot_roofline (ms)\n";
  for (const auto& [id, recs] : by_id) {
    if (recs.size() != 1 + l.models.size()) continue;  // not finished everywhere
    out << id;
    for (const RequestRecord* r : recs) out << ' ' << ms(r->first_token - r->arrival);
    for (const RequestRecord* r : recs) out << ' ' << ms(r->finish - r->arrival);
    for (const RequestRecord* r : recs) out << ' ' << ms(tpot_ns(*r));
    out << '\n';
  }
  if (!out) throw Error(path.string() + ": write failed");
}

void write_steps_dat(const fs::path& path, const LoadResult& l) {
  std::ofstream out(path, std::ios::binary);
  out << "# batch_size new_tokens composition(0 decode-only 1 prefill-only 2 mixed) measured_ms calibrated_ms "
         "roofline_ms calibrated_error_pct roofline_error_pct\n";
  for (const PricedStep& s : l.priced_steps) {
    out << s.batch_size << ' ' << s.new_tokens << ' ' << static_cast<int>(s.composition) << ' ' << ms(s.measured);
    for (double p : s.predicted_ns) out << ' ' << ms(p);
    const double m = static_cast<double>(s.measured);
    for (double p : s.predicted_ns) out << ' ' << pct((p - m) / m * 100.0);
    out << '\n';
  }
  if (!out) throw Error(path.string() + ": write failed");
}

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

}  // namespace

std::string write_plots(const ValidationResult& result, const fs::path& out_dir, bool run_gnuplot) {
  {
    std::ofstream script(out_dir / "plots.gp", std::ios::binary);
    script << validate_plot_script();
    if (!script) throw Error((out_dir / "plots.gp").string() + ": write failed");
  }
  for (const LoadResult& l : result.loads) {
    write_requests_dat(out_dir / l.folder / "requests.dat", l);
    write_steps_dat(out_dir / l.folder / "steps.dat", l);
  }
  if (!run_gnuplot) return "plots were not requested (--no-plots); the data and plots.gp are in the folder";
  if (!have_gnuplot()) {
    return "gnuplot is not installed (tools/install-deps installs gnuplot-nox), so there are no plots; "
           "the data and plots.gp are in the folder";
  }
  for (const LoadResult& l : result.loads) {
    // The folder names are ours (load_0.30): nothing to quote.
    const std::string cmd = "cd '" + out_dir.string() + "' && gnuplot -e \"dir='" + l.folder + "'\" plots.gp 2>&1";
    if (std::system(cmd.c_str()) != 0) return "gnuplot failed on " + l.folder + " (run: " + cmd + ")";
  }
  return "";
}

}  // namespace twin
