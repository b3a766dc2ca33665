#pragma once
// A JSON descriptor compiled into the binary (see embed_json.cmake), so
// bundled models and hardware profiles need no source tree at run time.
#include <span>
#include <string_view>

namespace twin {

struct EmbeddedFile {
  std::string_view name;  // file stem, e.g. "llama-2-7b"
  std::string_view text;  // the JSON text
};

std::span<const EmbeddedFile> bundled_model_files();     // models/descriptors/*.json
std::span<const EmbeddedFile> bundled_hardware_files();  // hwprofiles/profiles/*.json

}  // namespace twin
