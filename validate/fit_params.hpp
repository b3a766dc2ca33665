#pragma once
// The free parameters `calibrate --measured` fits on a base profile
// (docs/calibrate.md, "Fitting a deployment"): a small table, each entry a
// named value with its bounds and how it is set on the profile. A new
// parameter (a per-op-kind multiplier, a collective curve's scale) is one
// more entry here. A base is a roofline hardware profile (its efficiencies
// and host overhead are fitted) or a calibrated profile, the engine's
// measured op tables (its step model is fitted): each entry fits one kind.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hwprofiles/calibrated_profile.hpp"
#include "hwprofiles/hardware_desc.hpp"

namespace twin {

// What a fit starts from and what it makes: a hardware profile and, for a
// fit on the engine's measured op tables (`calibrate --measured
// --profile`), the calibrated profile that then prices every step (the
// hardware profile only plans the memory).
struct FitProfile {
  FitProfile() = default;
  FitProfile(HardwareDesc h) : hw(std::move(h)) {}  // a roofline base; implicit on purpose
  HardwareDesc hw;
  std::optional<CalibratedProfile> calibrated;
  // The calibrated profile's file (reports and errors); empty for a roofline base.
  std::string calibrated_path;
};

struct FitParam {
  const char* name;
  const char* what;  // one line for the report and the docs
  const char* unit;  // "x" for a scale of the base, "us" for a time
  // Optimised in log(value) (scales; times that span decades) or in value
  // (other times, in ms).
  bool log_space;
  // Identified only by runs with collectives (TP > 1).
  bool needs_collectives;
  // Fits a calibrated profile's step model (true) or a roofline hardware
  // profile (false); asked of the other kind of base, it is refused by name.
  bool calibrated;
  // The value that leaves the base profile as it is, and the bounds: a
  // scale of an efficiency stops where one of the efficiencies it scales
  // would pass 1.
  double (*identity)(const FitProfile& base);
  double (*lower)(const FitProfile& base);
  double (*upper)(const FitProfile& base);
  // Sets the parameter on `p`, a copy of `base`, and says in its source
  // notes what was fitted (a calibrated profile's fitted_from says it).
  void (*apply)(FitProfile& p, const FitProfile& base, double value);
  // Fitted when --fit-params names none (false: only when named, e.g. a
  // finer split of what a default parameter already fits).
  bool by_default = true;
};

// Every parameter, in report order.
const std::vector<FitParam>& fit_params();

// The parameters that fit `base`'s kind (roofline or calibrated), in report order.
std::vector<const FitParam*> fit_params_for(const FitProfile& base);

// What a fit fits when no parameter is named: the `by_default` ones for
// `base`'s kind, those of collectives only when the runs have some (TP > 1).
std::vector<const FitParam*> default_fit_params(const FitProfile& base, bool collectives);

// The entry of that name; UsageError listing the names otherwise.
const FitParam& fit_param(const std::string& name);

// UsageError naming `p` when it fits the other kind of base than `base`,
// with the names that fit this one.
void check_fit_param_base(const FitParam& p, const FitProfile& base);

// `base` with every named value applied in order (names and values paired).
FitProfile apply_fit_params(const FitProfile& base, const std::vector<const FitParam*>& params,
                            const std::vector<double>& values);

}  // namespace twin
