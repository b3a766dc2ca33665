#include "engine/backend/rope.hpp"

#include <cmath>
#include <numbers>

namespace twin {

namespace {

// Llama 3.1's rule: a pair whose wavelength (2 pi / frequency, in positions)
// fits many times in the original context keeps its frequency; one longer
// than the original context / low_freq_factor is stretched by factor; in
// between, the two are blended linearly in original / wavelength.
double llama3(double inv_freq, const RopeConfig& r) {
  const double wavelen = 2.0 * std::numbers::pi / inv_freq;
  const double high_freq_wavelen = r.original_max_position / r.high_freq_factor;
  const double low_freq_wavelen = r.original_max_position / r.low_freq_factor;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / r.factor;
  const double smooth =
      (r.original_max_position / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return (1.0 - smooth) * inv_freq / r.factor + smooth * inv_freq;
}

}  // namespace

std::vector<double> rope_inv_freq(const RopeConfig& rope) {
  const int rot = rope.rotary_dim > 0 ? rope.rotary_dim : rope.head_dim;
  std::vector<double> out(static_cast<std::size_t>(rot / 2));
  for (int i = 0; i < rot / 2; ++i) {
    const double f = std::pow(static_cast<double>(rope.theta), -2.0 * i / rot);
    switch (rope.scaling) {
      case RopeScaling::none: out[static_cast<std::size_t>(i)] = f; break;
      case RopeScaling::linear: out[static_cast<std::size_t>(i)] = f / rope.factor; break;
      case RopeScaling::llama3: out[static_cast<std::size_t>(i)] = llama3(f, rope); break;
    }
  }
  return out;
}

}  // namespace twin
