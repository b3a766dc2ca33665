#pragma once
// The rotary frequencies of a RopeConfig, computed once on the host for
// every backend (the CUDA backend stages them), so both rotate by the same
// angles whatever the scaling.
#include <vector>

#include "engine/backend/op_args.hpp"

namespace twin {

// inv_freq[i] for the rotated pairs i in [0, rotary_dim / 2): theta^(-2i /
// rotary_dim) in double, then the config's scaling. The config must have
// passed check_rotary.
std::vector<double> rope_inv_freq(const RopeConfig& rope);

}  // namespace twin
