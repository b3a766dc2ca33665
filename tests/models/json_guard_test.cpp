// The guarded JSON path every reader shares (models/json_fields.hpp): nesting,
// size and number limits, key paths and bounded quotes in its errors.
#include <catch2/catch.hpp>

#include "tests/support/error_of.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

#include "base/error.hpp"
#include "models/json_fields.hpp"
#include "models/model_desc.hpp"

using namespace twin;

using twin::test::error_of;

namespace {

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("twin_json_guard_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("json guard: 100,000 nested arrays are refused while parsing, naming the file and key") {
  const std::string text = R"({"a": {"b": [1, )" + nested_arrays(100000) + "]}}";
  const std::string e = error_of([&] { (void)parse_json_guarded(text, "deep.json"); });
  CHECK_THAT(e, Catch::StartsWith("deep.json: key 'a.b[1][0][0]"));
  CHECK_THAT(e, Catch::Contains("nested deeper than 64 levels"));
  CHECK(e.size() < 400);
  // At the top level too, and through every file reader.
  CHECK_THAT(error_of([&] { (void)parse_json_guarded(nested_arrays(100000), "top.json"); }),
             Catch::Contains("top.json: key '[0][0]"));
  const auto path = temp_file("deep_config.json", R"({"hidden_size": )" + nested_arrays(100000) + "}").string();
  CHECK_THAT(error_of([&] { (void)load_model_file(path); }), Catch::StartsWith(path + ": key 'hidden_size[0]"));
  // The limit itself is allowed.
  CHECK(parse_json_guarded(nested_arrays(64), "ok.json").is_array());
}

TEST_CASE("json guard: a number beyond a double names its key, not nlohmann's error code") {
  const std::string e =
      error_of([] { (void)parse_json_guarded(R"({"groups": [{}, {"scheduler": {"max_num_seqs": 1e309}}]})", "c.json"); });
  CHECK(e == "c.json: key 'groups[1].scheduler.max_num_seqs': number out of range: 1e309");
  CHECK_THAT(error_of([] { (void)parse_json_guarded("[1, 2, -1e400]", "l.json"); }),
             Catch::StartsWith("l.json: key '[2]': number out of range"));
}

TEST_CASE("json guard: a key given twice is refused naming its path, in every file reader") {
  // Before: last wins, "count":1,"count":100000 gave 100,000 replicas.
  CHECK(error_of([] { (void)parse_json_guarded(R"({"groups": [{"count": 1, "count": 100000}]})", "c.json"); }) ==
        "c.json: key 'groups[0].count': given twice in one object (a duplicate key)");
  CHECK_THAT(error_of([] { (void)parse_json_guarded(R"({"a": 1, "b": {"x": 1}, "a": 2})", "top.json"); }),
             Catch::StartsWith("top.json: key 'a': given twice"));
  // The same key in two objects is no duplicate.
  CHECK(parse_json_guarded(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})", "ok.json").is_object());
  const auto path = temp_file("twice_config.json", R"({"hidden_size": 64, "hidden_size": 4096})").string();
  CHECK_THAT(error_of([&] { (void)load_model_file(path); }),
             Catch::StartsWith(path + ": key 'hidden_size': given twice"));
}

TEST_CASE("json guard: megabyte values and keys are quoted in at most ~200 characters") {
  const std::string mb(1 << 20, 'x');
  // A field of the wrong type.
  const auto path = temp_file("mb_config.json", R"({"hidden_size": ")" + mb + R"("})").string();
  std::string e = error_of([&] { (void)load_model_file(path); });
  CHECK_THAT(e, Catch::Contains("key 'hidden_size': expected an integer"));
  CHECK(e.size() < path.size() + 300);
  // A syntax error whose last token is the whole string.
  e = error_of([&] { (void)parse_json_guarded(R"({"k": ")" + mb, "u.json"); });
  CHECK_THAT(e, Catch::StartsWith("u.json: key 'k': not valid JSON"));
  CHECK(e.size() < 600);
  // A megabyte key.
  e = error_of([&] { json_field_error("k.json", mb, "unknown field"); });
  CHECK(e.size() < 300);
  // Deep or wide values built in code.
  nlohmann::json wide = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) wide.push_back(mb.substr(0, 10));
  CHECK(json_excerpt(wide).size() < 220);
  CHECK(json_excerpt(nlohmann::json(mb)).size() < 220);
  CHECK(json_excerpt(nlohmann::json::parse(R"({"a": [1, 2.5, true, null]})")) == R"({"a":[1,2.5,true,null]})");
}

TEST_CASE("json guard: size limit and syntax errors") {
  JsonLimits small;
  small.max_bytes = 10;
  CHECK_THAT(error_of([&] { (void)parse_json_guarded(R"({"a": 12345678})", "s.json", small); }),
             Catch::Contains("more than the 10 allowed"));
  CHECK_THAT(error_of([] { (void)parse_json_text("[1]", "arr.json"); }),
             Catch::Contains("arr.json: expected a JSON object at the top level"));
  CHECK_THAT(error_of([] { (void)parse_json_guarded(R"({"a": [1, }")", "bad.json"); }),
             Catch::StartsWith("bad.json: key 'a[1]': not valid JSON: parse error"));
  // Parsed values are what nlohmann's own parser builds.
  const std::string doc = R"({"a": [1, -2, 3.5, "s", {"b": null, "c": [true, false]}], "d": {}, "u": 18446744073709551615})";
  CHECK(parse_json_guarded(doc, "ok.json") == nlohmann::json::parse(doc));
}
