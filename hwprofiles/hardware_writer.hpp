#pragma once
// A hardware profile back to JSON in the format load_hardware_file reads
// (docs/hardware.md): what `calibrate --measured` writes its fitted profile
// with. Every number keeps its source note; a profile loaded and written
// back loads to the same numbers.
#include <nlohmann/json.hpp>

#include "hwprofiles/hardware_desc.hpp"

namespace twin {

nlohmann::ordered_json hardware_json(const HardwareDesc& hw);

}  // namespace twin
