#pragma once
// The one guarded way the program reads JSON from outside (model configs,
// hardware and calibrated profiles, cluster configs, search files,
// safetensors headers), and typed reads of its fields with errors that name
// the file and the key.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.hpp"

namespace twin {

// What one JSON document may hold. Nesting is capped while parsing, so no
// later recursion over the value (dump(), copies, comparisons) can overflow
// the stack; the size cap keeps one file from exhausting memory.
struct JsonLimits {
  std::size_t max_bytes = std::size_t{64} << 20;
  int max_depth = 64;
  // Values (scalars, arrays, objects) in the document: each costs ~16 bytes
  // in the DOM for as little as 2 bytes of text ("1,"), so a reader that
  // knows how much it can use caps memory at a small multiple of the text.
  std::size_t max_values = static_cast<std::size_t>(-1);
};

// What parse_json_guarded throws: the message names origin and key path;
// key_path alone (e.g. `max_tokens`, empty at the top level) for callers that
// report the key in a field of their own (the OpenAI error's `param`).
struct JsonError : Error {
  JsonError(const std::string& message, std::string path) : Error(message), key_path(std::move(path)) {}
  std::string key_path;
};

// Parses any JSON value. Every failure is twin::Error naming `origin` and,
// where it has one, the key path of the offending value
// (e.g. `groups[1].scheduler.max_num_seqs`): syntax errors, nesting past
// limits.max_depth, text past limits.max_bytes, more than limits.max_values
// values, numbers beyond a double (1e309), a key given twice in one object:
// a JsonError. Quoted input is cut to ~200 characters.
nlohmann::json parse_json_guarded(std::string_view text, const std::string& origin, const JsonLimits& limits = {});

// As parse_json_guarded, and the top level must be an object.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);

// Reads a file and parses it as parse_json_text; missing, unreadable or
// oversized files are twin::Error.
nlohmann::json read_json_file(const std::string& path);

// A compact rendering of `v` for an error message: at most about max_chars,
// however long or deep v is.
std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars = 200);

// The JSON object at `j[key]`; a missing key or a value of the wrong type is
// twin::Error "<origin>: key '<key>': expected ...".
int64_t json_int(const nlohmann::json& j, const char* key, const std::string& origin);
double json_number(const nlohmann::json& j, const char* key, const std::string& origin);
bool json_bool(const nlohmann::json& j, const char* key, const std::string& origin);
std::string json_string(const nlohmann::json& j, const char* key, const std::string& origin);

// Throws twin::Error naming origin and key (cut to ~200 characters) with
// `what_expected`.
[[noreturn]] void json_field_error(const std::string& origin, const std::string& key,
                                   const std::string& what_expected);

}  // namespace twin
