#include "models/json_fields.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.hpp"

namespace twin {

void json_field_error(const std::string& origin, const std::string& key,
                      const std::string& what_expected) {
  throw Error(origin + ": key '" + key + "': " + what_expected);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& origin) {
  try {
    auto j = nlohmann::json::parse(text);
    if (!j.is_object()) throw Error(origin + ": expected a JSON object at the top level");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(origin + ": not valid JSON: " + e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": expected a JSON file, got a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": read error");
  return parse_json_text(text.str(), path);
}

static const nlohmann::json& field(const nlohmann::json& j, const char* key,
                                   const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end()) json_field_error(origin, key, "missing required field");
  return *it;
}

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    // 4096.0 is accepted; 4096.5 is not.
    if (d == static_cast<double>(static_cast<int64_t>(d)) && d > -9e18 && d < 9e18)
      return static_cast<int64_t>(d);
  }
  json_field_error(origin, key, "expected an integer, got " + v.dump());
}

double json_number(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_number()) json_field_error(origin, key, "expected a number, got " + v.dump());
  return v.get<double>();
}

bool json_bool(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_boolean()) json_field_error(origin, key, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_string()) json_field_error(origin, key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

}  // namespace twin
