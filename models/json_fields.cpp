#include "models/json_fields.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.hpp"

namespace twin {

void json_field_error(const std::string& origin, const std::string& key,
                      const std::string& what_expected) {
  throw Error(origin + ": key '" + excerpt(key) + "': " + what_expected);
}

namespace {

using Json = nlohmann::json;

// Builds the DOM as nlohmann's own parser does, but knows at every event
// where it is (the key path) and refuses nesting past the limit before the
// value is built.
class GuardedBuilder {
 public:
  GuardedBuilder(Json& root, const JsonLimits& limits)
      : root_(root), max_depth_(limits.max_depth), max_values_(limits.max_values) {}

  bool null() { return put(Json(nullptr)) != nullptr; }
  bool boolean(bool b) { return put(Json(b)) != nullptr; }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)) != nullptr; }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)) != nullptr; }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return put(Json(v)) != nullptr; }
  bool string(Json::string_t& v) { return put(Json(std::move(v))) != nullptr; }
  bool binary(Json::binary_t& v) { return put(Json::binary(std::move(v))) != nullptr; }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    const bool repeated = f.value->contains(k);
    f.key = std::move(k);
    if (repeated) {  // nlohmann keeps the last silently: "count":1,"count":100000
      error_ = "given twice in one object (a duplicate key)";
      failed_at_ = path();
      return false;
    }
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool parse_error(std::size_t, const std::string& last_token, const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {  // out_of_range.406: the number does not fit a double
      error_ = "number out of range: " + excerpt(last_token);
    } else {
      // nlohmann's message quotes the token it stopped at, which may be a
      // whole megabyte string: keep only its beginning.
      std::string what = ex.what();
      if (const auto bracket = what.find("] "); what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
        what.erase(0, bracket + 2);
      if (last_token.size() > 200) {
        if (const auto at = what.find(last_token); at != std::string::npos)
          what.replace(at, last_token.size(), excerpt(last_token));
      }
      error_ = "not valid JSON: " + excerpt(what, 400);
    }
    failed_at_ = path();
    return false;
  }

  // Empty when parsing succeeded.
  const std::string& error() const { return error_; }
  const std::string& failed_at() const { return failed_at_; }

 private:
  struct Frame {
    Json* value;
    std::string key;        // objects: the key being read
    std::size_t count = 0;  // arrays: elements started
  };

  // Where the parser stopped: the innermost frame's next element (the one
  // that failed) has not started, the outer frames' current one has.
  std::string path() const {
    std::string out;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      const bool innermost = i + 1 == frames_.size();
      if (f.value->is_object()) {
        if (innermost && f.key.empty()) break;  // no key read yet
        if (!out.empty()) out += '.';
        out += excerpt(f.key, 64);
      } else {
        const std::size_t index = innermost ? f.count : f.count - 1;
        out += '[';
        out += std::to_string(index);
        out += ']';
      }
    }
    return excerpt(out);
  }

  Json* put(Json&& v) {
    if (++values_ > max_values_) {
      error_ = "more than " + std::to_string(max_values_) + " values";
      failed_at_ = path();
      return nullptr;
    }
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      ++f.count;
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    Json& slot = (*f.value)[f.key];
    slot = std::move(v);
    return &slot;
  }

  bool open(Json&& empty) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      error_ = "nested deeper than " + std::to_string(max_depth_) + " levels";
      failed_at_ = path();
      return false;
    }
    // The parent is not touched again until this child closes, so the
    // pointer stays valid (as in nlohmann's own DOM parser).
    Json* child = put(std::move(empty));
    if (child == nullptr) return false;
    frames_.push_back({child, {}, 0});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  Json& root_;
  int max_depth_;
  std::size_t max_values_;
  std::size_t values_ = 0;
  std::vector<Frame> frames_;
  std::string error_, failed_at_;
};

void append_excerpt(std::string& out, const Json& v, std::size_t max_chars, int depth) {
  if (out.size() > max_chars) return;
  constexpr int kMaxDepth = 16;  // values built in code have no parse limit
  auto text = [](const Json& scalar) { return scalar.dump(-1, ' ', false, Json::error_handler_t::replace); };
  switch (v.type()) {
    case Json::value_t::object:
    case Json::value_t::array: {
      const bool is_object = v.is_object();
      out += is_object ? '{' : '[';
      if (depth >= kMaxDepth && !v.empty()) out += "...";
      bool first = true;
      for (auto it = v.begin(); it != v.end() && depth < kMaxDepth; ++it) {
        if (out.size() > max_chars) break;
        if (!first) out += ',';
        first = false;
        if (is_object) out += text(Json(excerpt(it.key(), max_chars))) + ':';
        append_excerpt(out, *it, max_chars, depth + 1);
      }
      out += is_object ? '}' : ']';
      break;
    }
    case Json::value_t::string: {
      const auto& s = v.get_ref<const Json::string_t&>();
      // Cut before escaping: dump() of a megabyte string is a megabyte.
      out += text(Json(s.substr(0, std::min(s.size(), max_chars + 1))));
      break;
    }
    default:
      out += text(v);
  }
}

}  // namespace

std::string json_excerpt(const nlohmann::json& v, std::size_t max_chars) {
  std::string out;
  append_excerpt(out, v, max_chars, 0);
  if (out.size() <= max_chars) return out;
  out.resize(max_chars);
  return out + "... (cut)";
}

nlohmann::json parse_json_guarded(std::string_view text, const std::string& origin, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    throw JsonError(origin + ": " + std::to_string(text.size()) + " bytes of JSON, more than the " +
                        std::to_string(limits.max_bytes) + " allowed",
                    "");
  }
  Json root;
  GuardedBuilder builder(root, limits);
  const bool ok = Json::sax_parse(text.data(), text.data() + text.size(), &builder);
  if (!ok || !builder.error().empty()) {
    const std::string at = builder.failed_at().empty() ? "" : "key '" + builder.failed_at() + "': ";
    throw JsonError(origin + ": " + at + (builder.error().empty() ? "not valid JSON" : builder.error()),
                    builder.failed_at());
  }
  return root;
}

nlohmann::json parse_json_text(const std::string& text, const std::string& origin) {
  auto j = parse_json_guarded(text, origin);
  if (!j.is_object()) throw Error(origin + ": expected a JSON object at the top level");
  return j;
}

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": expected a JSON file, got a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  // Read at most one byte past the cap (a FIFO or /dev/zero has no size to
  // check first), so an oversized file costs no more memory than the cap.
  const JsonLimits limits;
  std::string text;
  std::vector<char> chunk(std::size_t{1} << 16);
  while (in && text.size() <= limits.max_bytes) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(path + ": read error");
  if (text.size() > limits.max_bytes) {
    throw Error(path + ": more than the " + std::to_string(limits.max_bytes) + " bytes allowed for a JSON file");
  }
  return parse_json_text(text, path);
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
  json_field_error(origin, key, "expected an integer, got " + json_excerpt(v));
}

double json_number(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_number()) json_field_error(origin, key, "expected a number, got " + json_excerpt(v));
  return v.get<double>();
}

bool json_bool(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_boolean()) json_field_error(origin, key, "expected true or false, got " + json_excerpt(v));
  return v.get<bool>();
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& origin) {
  const auto& v = field(j, key, origin);
  if (!v.is_string()) json_field_error(origin, key, "expected a string, got " + json_excerpt(v));
  return v.get<std::string>();
}

}  // namespace twin
