#pragma once
// Typed reads of JSON fields with errors that name the file and the key, shared
// by the model and hardware loaders.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace twin {

// Parses a whole file's text; a syntax error becomes twin::Error naming `origin`.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);

// Reads a file and parses it; missing or unreadable files are twin::Error.
nlohmann::json read_json_file(const std::string& path);

// The JSON object at `j[key]`; a missing key or a value of the wrong type is
// twin::Error "<origin>: key '<key>': expected ...".
int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin);
double json_number(const nlohmann::json& j, const char* key, const std::string& origin);
bool json_bool(const nlohmann::json& j, const char* key, const std::string& origin);
std::string json_string(const nlohmann::json& j, const char* key, const std::string& origin);

// Throws twin::Error naming origin and key with `what_expected`.
[[noreturn]] void json_field_error(const std::string& origin, const std::string& key,
                                   const std::string& what_expected);

}  // namespace twin
