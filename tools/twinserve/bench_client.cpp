#include "tools/twinserve/bench_client.hpp"

#include <httplib.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "tools/twinserve/sse_stream.hpp"

namespace twin::cli {
namespace {

constexpr std::size_t kErrorBodyBytes = 2048;  // of a refusal's body, for the record's reason

std::string reason_of(const std::string& body) {
  // OpenAI's error shape {"error": {"message": ...}} when the server uses it.
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.is_object() && j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
      if (e.is_string()) return e.get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  return excerpt(body, 200);
}

bool has_text(const nlohmann::json& object, const char* key) {
  const auto v = object.find(key);
  return v != object.end() && v->is_string() && !v->get_ref<const std::string&>().empty();
}

// A chunk carries a token unless every choice in it only ends the stream
// or only opens it: a finish_reason with no text (OpenAI's closing chunk,
// which twinserve serve also sends) is the end, and a chat delta with the
// role and no content the start (OpenAI sends it at once, vLLM and
// twinserve serve with the first token), not a token. A token's chunk may
// have empty text (a character not complete yet).
bool carries_token(const nlohmann::json& choices) {
  for (const auto& c : choices) {
    if (!c.is_object()) return true;
    const auto delta = c.find("delta");
    const bool role_only = delta != c.end() && delta->is_object() && delta->contains("role") && !has_text(*delta, "content");
    const auto finish = c.find("finish_reason");
    if ((finish == c.end() || finish->is_null()) && !role_only) return true;
    if (has_text(c, "text")) return true;
    if (delta != c.end() && delta->is_object() && has_text(*delta, "content")) return true;
  }
  return false;
}

// twinserve serve's record of the request (its last chunk's `twinserve`
// key): the server's TTFT, when the request has a first token.
std::optional<Time> server_ttft_of(const nlohmann::json& chunk) {
  const auto record = chunk.find("twinserve");
  if (record == chunk.end() || !record->is_object()) return std::nullopt;
  const auto arrival = record->find("arrival_s");
  const auto first = record->find("first_token_s");
  if (arrival == record->end() || first == record->end() || !arrival->is_number() || !first->is_number()) {
    return std::nullopt;
  }
  const double ttft_s = first->get<double>() - arrival->get<double>();
  if (!std::isfinite(ttft_s) || ttft_s < 0) return std::nullopt;
  return static_cast<Time>(std::llround(ttft_s * 1e9));
}

// A usage count ("completion_tokens", "prompt_tokens"), when the server
// sent a non-negative integer (clipped to int32).
std::optional<std::int32_t> usage_count(const nlohmann::json& usage, const char* key) {
  const auto v = usage.find(key);
  if (v == usage.end() || !v->is_number_integer() || v->get<std::int64_t>() < 0) return std::nullopt;
  return static_cast<std::int32_t>(std::min<std::int64_t>(v->get<std::int64_t>(), std::numeric_limits<std::int32_t>::max()));
}

// One server-sent event of a completion stream into `out`: a token's
// arrival time, the server's TTFT and usage counts, or the error that ends
// the stream (`where` names the endpoint). "[DONE]" sets `done`.
void take_event(const std::string& data, const std::string& where, const std::function<Time()>& now,
                StreamResult& out, bool& done) {
  if (done || !out.error.empty()) return;
  if (data == "[DONE]") {
    done = true;
    return;
  }
  nlohmann::json chunk;
  try {
    chunk = nlohmann::json::parse(data);
  } catch (const nlohmann::json::exception&) {
    out.error = where + ": a streamed event is not JSON: " + excerpt(data, 80);
    return;
  }
  if (!chunk.is_object()) return;
  if (chunk.contains("error")) {
    out.error = where + ": the server ended the stream with an error: " + reason_of(data);
    return;
  }
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty() && carries_token(*choices)) {
    out.token_chunks.push_back(now());
  }
  if (auto t = server_ttft_of(chunk)) out.server_ttft = t;
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    if (auto c = usage_count(*usage, "completion_tokens")) out.completion_tokens = c;
    if (auto p = usage_count(*usage, "prompt_tokens")) out.prompt_tokens = p;
  }
}

}  // namespace

BaseUrl parse_base_url(const std::string& url) {
  const std::size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    throw UsageError("--base-url " + url + ": expected http://HOST[:PORT][/PATH] (or https://)");
  }
  const std::size_t host_start = scheme_end + 3;
  const std::size_t path_start = url.find('/', host_start);
  BaseUrl out;
  out.scheme_host_port = url.substr(0, path_start);
  if (out.scheme_host_port.size() <= host_start) throw UsageError("--base-url " + url + ": no host");
  if (path_start != std::string::npos) out.prefix = url.substr(path_start);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  return out;
}

CompletionClient::CompletionClient(const BaseUrl& url, std::string endpoint, double timeout_s)
    : url_(url), endpoint_(std::move(endpoint)), http_(std::make_unique<httplib::Client>(url.scheme_host_port)) {
  const auto timeout = std::chrono::microseconds(static_cast<std::int64_t>(std::ceil(timeout_s * 1e6)));
  http_->set_keep_alive(true);
  // Nagle's algorithm off: cpp-httplib writes a request's headers and body
  // as two writes, and with it on the body waits for the server's delayed
  // ACK of the headers (40 ms on Linux) on a kept-alive connection.
  http_->set_tcp_nodelay(true);
  http_->set_connection_timeout(timeout);
  http_->set_read_timeout(timeout);
  http_->set_write_timeout(timeout);
}

CompletionClient::~CompletionClient() = default;

std::string CompletionClient::url_of(const std::string& path) const { return url_.scheme_host_port + url_.prefix + path; }

std::optional<std::string> CompletionClient::get(const std::string& path, std::string& error) {
  const httplib::Result res = http_->Get((url_.prefix + path).c_str());
  if (!res) {
    error = "cannot reach " + url_of(path) + ": " + httplib::to_string(res.error()) + " error (is the server running?)";
    return std::nullopt;
  }
  if (res->status != 200) {
    error = url_of(path) + ": HTTP " + std::to_string(res->status) + ": " + reason_of(res->body);
    return std::nullopt;
  }
  return res->body;
}

StreamResult CompletionClient::stream(const std::string& body, const std::function<Time()>& now,
                                      const std::function<bool()>& stop) {
  StreamResult out;
  std::string error_body;
  bool done = false;
  const std::string where = url_of(endpoint_);
  SseParser parser([&](const std::string& data) { take_event(data, where, now, out, done); });

  httplib::Request req;
  req.method = "POST";
  req.path = url_.prefix + endpoint_;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  req.body = body;
  req.response_handler = [&](const httplib::Response& res) {
    out.http_status = res.status;
    return true;
  };
  bool parse_failed = false;
  req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
    if (stop && stop()) return false;
    if (out.http_status != 200) {
      if (error_body.size() < kErrorBodyBytes) error_body.append(data, std::min(len, kErrorBodyBytes - error_body.size()));
      return true;
    }
    try {
      parser.feed(std::string_view(data, len));
    } catch (const Error& e) {
      out.error = url_of(endpoint_) + ": " + e.what();
      parse_failed = true;
      return false;
    }
    return out.error.empty();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  out.sent = now();
  const bool ok = http_->send(req, res, err);
  if (!out.error.empty()) return out;
  if (!ok && out.http_status == 0) {
    out.error = "cannot reach " + url_of(endpoint_) + ": " + httplib::to_string(err) + " error";
    return out;
  }
  if (stop && stop() && err == httplib::Error::Canceled) {
    out.error = "interrupted";
    return out;
  }
  if (out.http_status != 200) {
    out.refused = out.http_status == 429 || out.http_status == 503;
    out.error = url_of(endpoint_) + ": HTTP " + std::to_string(out.http_status) + ": " + reason_of(error_body);
    return out;
  }
  if (!ok) {
    out.error = url_of(endpoint_) + ": the stream broke off: " + httplib::to_string(err) + " error";
    return out;
  }
  if (!parse_failed) parser.finish();
  if (out.error.empty() && out.token_chunks.empty()) {
    out.error = url_of(endpoint_) + ": the stream ended without a token";
  }
  return out;
}

}  // namespace twin::cli
