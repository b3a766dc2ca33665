#include "traces/length_dist.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "base/error.hpp"
#include "traces/trace_reader.hpp"

namespace twin {

const char* length_spec_help() {
  return "fixed:N | uniform:LO:HI | lognormal:median=M:sigma=S[:max=N] | lognormal:mean=M:sigma=S[:max=N] | "
         "zipf:max=N:s=A | trace:PATH:prompt|output";
}

namespace {

struct SpecParts {
  std::string name;
  std::vector<std::string> positional;
  std::map<std::string, std::string> named;
};

SpecParts split_spec(std::string_view spec) {
  SpecParts parts;
  std::size_t pos = 0;
  bool first = true;
  for (;;) {
    const std::size_t colon = spec.find(':', pos);
    std::string token(spec.substr(pos, colon == std::string_view::npos ? spec.npos : colon - pos));
    if (first) {
      parts.name = token;
      first = false;
    } else if (auto eq = token.find('='); eq != std::string::npos) {
      parts.named[token.substr(0, eq)] = token.substr(eq + 1);
    } else {
      parts.positional.push_back(token);
    }
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  return parts;
}

}  // namespace

// Reads one spec for LengthDist::parse; its errors name the flag (`what`),
// the spec and the forms expected.
struct LengthDist::Parser {
  std::string_view spec, what;

  UsageError fail(const std::string& why) const {
    return UsageError(std::string(what) + " '" + excerpt(spec, 80) + "': " + why + " (expected " +
                      length_spec_help() + ")");
  }

  std::int32_t to_int(const std::string& text, const char* name) const {
    std::int32_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v < 1 || v > kMaxSpecLength)
      throw fail(std::string(name) + " must be an integer from 1 to " + std::to_string(kMaxSpecLength) + ", got '" +
                 excerpt(text, 40) + "'");
    return v;
  }

  double to_double(const std::string& text, const char* name) const {
    double v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v))
      throw fail(std::string(name) + " must be a number, got '" + excerpt(text, 40) + "'");
    return v;
  }

  void allow(const SpecParts& parts, std::size_t positional, std::initializer_list<const char*> names) const {
    if (parts.positional.size() != positional)
      throw fail("expected " + std::to_string(positional) + " plain value(s) after '" + excerpt(parts.name, 40) + ":'");
    for (const auto& [k, v] : parts.named) {
      bool ok = false;
      for (const char* n : names) ok = ok || k == n;
      if (!ok) throw fail("unknown key '" + excerpt(k, 40) + "'");
    }
  }

  // trace:PATH:prompt|output: the column's lengths, sampled as they are.
  void trace(LengthDist& d) const {
    const std::string_view rest = spec.substr(6);
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) throw fail("missing ':prompt' or ':output'");
    const std::string path(rest.substr(0, colon));
    const std::string_view column = rest.substr(colon + 1);
    if (column != "prompt" && column != "output") throw fail("the column must be 'prompt' or 'output'");
    // The trace's own errors name the file and line; the flag goes in front.
    try {
      TraceReader reader(path);
      Request r;
      while (reader.next(r)) {
        const std::int32_t v = column == "prompt" ? r.prompt_len : r.output_len;
        d.values_.push_back(std::max(v, 1));
      }
    } catch (const UsageError& e) {
      throw UsageError(std::string(what) + ": " + e.what());
    } catch (const Error& e) {
      throw Error(std::string(what) + ": " + e.what());
    }
    if (d.values_.empty()) throw fail("the trace holds no requests");
    d.kind_ = Kind::samples;
  }

  void lognormal(const SpecParts& parts, LengthDist& d) const {
    allow(parts, 0, {"median", "mean", "sigma", "max"});
    const bool has_median = parts.named.count("median") > 0;
    const bool has_mean = parts.named.count("mean") > 0;
    if (has_median == has_mean) throw fail("give exactly one of median= and mean=");
    if (!parts.named.count("sigma")) throw fail("missing sigma=");
    d.kind_ = Kind::lognormal;
    d.sigma_ = to_double(parts.named.at("sigma"), "sigma");
    if (d.sigma_ < 0) throw fail("sigma must be >= 0");
    const double m = to_double(parts.named.at(has_median ? "median" : "mean"), has_median ? "median" : "mean");
    if (m <= 0) throw fail("median/mean must be > 0");
    // E[exp(N(mu, s))] = exp(mu + s^2 / 2).
    d.mu_ = has_median ? std::log(m) : std::log(m) - d.sigma_ * d.sigma_ / 2;
    d.hi_ = parts.named.count("max") ? to_int(parts.named.at("max"), "max") : kMaxSpecLength;
  }

  void zipf(const SpecParts& parts, LengthDist& d) const {
    allow(parts, 0, {"max", "s"});
    if (!parts.named.count("max") || !parts.named.count("s")) throw fail("zipf needs max= and s=");
    const std::int32_t n = to_int(parts.named.at("max"), "max");
    if (n > 10'000'000) throw fail("max must be <= 10000000");
    const double s = to_double(parts.named.at("s"), "s");
    if (s <= 0) throw fail("s must be > 0");
    d.kind_ = Kind::zipf;
    d.cdf_.resize(static_cast<std::size_t>(n));
    double total = 0;
    for (std::int32_t k = 1; k <= n; ++k) {
      total += std::pow(static_cast<double>(k), -s);
      d.cdf_[static_cast<std::size_t>(k - 1)] = total;
    }
    for (double& c : d.cdf_) c /= total;
  }
};

LengthDist LengthDist::parse(std::string_view spec, std::string_view what) {
  const Parser p{spec, what};
  LengthDist d;
  d.spec_ = std::string(spec);
  if (spec.substr(0, 6) == "trace:") {
    p.trace(d);
    return d;
  }
  const SpecParts parts = split_spec(spec);
  if (parts.name == "fixed") {
    p.allow(parts, 1, {});
    d.kind_ = Kind::fixed;
    d.lo_ = d.hi_ = p.to_int(parts.positional[0], "N");
  } else if (parts.name == "uniform") {
    p.allow(parts, 2, {});
    d.kind_ = Kind::uniform;
    d.lo_ = p.to_int(parts.positional[0], "LO");
    d.hi_ = p.to_int(parts.positional[1], "HI");
    if (d.hi_ < d.lo_) throw p.fail("HI must be >= LO");
  } else if (parts.name == "lognormal") {
    p.lognormal(parts, d);
  } else if (parts.name == "zipf") {
    p.zipf(parts, d);
  } else {
    throw p.fail("unknown distribution '" + excerpt(parts.name, 40) + "'");
  }
  return d;
}

std::int32_t LengthDist::sample(Rng& rng) const {
  switch (kind_) {
    case Kind::fixed:
      return lo_;
    case Kind::uniform:
      return lo_ + static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(hi_ - lo_) + 1));
    case Kind::lognormal: {
      const double v = std::exp(mu_ + sigma_ * rng.normal());
      if (!(v < static_cast<double>(hi_))) return hi_;
      return std::max<std::int32_t>(1, static_cast<std::int32_t>(std::llround(v)));
    }
    case Kind::zipf: {
      const double u = rng.uniform();
      const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
      const auto k = static_cast<std::int32_t>(it - cdf_.begin()) + 1;
      return std::min<std::int32_t>(k, static_cast<std::int32_t>(cdf_.size()));
    }
    case Kind::samples:
      return values_[rng.below(values_.size())];
  }
  return 1;
}

}  // namespace twin
