#pragma once
// The free parameters `calibrate --measured` fits on a base hardware
// profile (docs/calibrate.md, "Fitting a deployment"): a small table, each
// entry a named value with its bounds and how it is set on a HardwareDesc.
// A new parameter (a per-op-kind multiplier, a collective curve's scale) is
// one more entry here.
#include <string>
#include <vector>

#include "hwprofiles/hardware_desc.hpp"

namespace twin {

struct FitParam {
  const char* name;
  const char* what;  // one line for the report and the docs
  const char* unit;  // "x" for a scale of the base, "us" for a time
  // Optimised in log(value) (scales) or in value (times).
  bool log_space;
  // Identified only by runs with collectives (TP > 1).
  bool needs_collectives;
  // The value that leaves the base profile as it is, and the bounds: a
  // scale of an efficiency stops where one of the efficiencies it scales
  // would pass 1.
  double (*identity)(const HardwareDesc& base);
  double (*lower)(const HardwareDesc& base);
  double (*upper)(const HardwareDesc& base);
  // Sets the parameter on `hw`, a copy of `base`, and says in its source
  // notes what was fitted.
  void (*apply)(HardwareDesc& hw, const HardwareDesc& base, double value);
};

// Every parameter, in report order.
const std::vector<FitParam>& fit_params();

// The entry of that name; UsageError listing the names otherwise.
const FitParam& fit_param(const std::string& name);

// `base` with every named value applied in order (names and values paired).
HardwareDesc apply_fit_params(const HardwareDesc& base, const std::vector<const FitParam*>& params,
                              const std::vector<double>& values);

}  // namespace twin
