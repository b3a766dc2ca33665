#pragma once
// One streaming completion request over one kept-alive HTTP connection to
// an OpenAI-compatible server (cpp-httplib's client): the body is sent, the
// server-sent events are read as they come, and the instant of each chunk
// that carries a token (a non-empty `choices`, other than a closing chunk
// with a finish_reason and no text or a chat role delta with no content)
// is kept, with the usage counts when the server gives them
// (`stream_options.include_usage`) and the server's own record of the
// request when it is twinserve serve's (the `twinserve` key of the last
// chunk). docs/bench.md.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/types.hpp"

namespace httplib {
class Client;
}

namespace twin::cli {

// http://host[:port][/prefix]: the prefix goes before every endpoint.
struct BaseUrl {
  std::string scheme_host_port;  // what httplib::Client takes
  std::string prefix;            // "" or "/prefix", no trailing slash
};
// UsageError naming the URL for one that is not http(s)://host[:port][/path].
BaseUrl parse_base_url(const std::string& url);

struct StreamResult {
  Time sent = 0;
  std::vector<Time> token_chunks;  // when each chunk with a token arrived
  std::optional<std::int32_t> completion_tokens, prompt_tokens;  // usage, when given
  // The server's TTFT of this request by its own record (twinserve serve's
  // `twinserve` key: first_token_s - arrival_s), when it sends one.
  std::optional<Time> server_ttft;
  int http_status = 0;
  // Empty on success (a 200 with at least one token chunk); otherwise what
  // went wrong, naming the URL.
  std::string error;
  bool refused = false;  // the server turned it away (429 or 503) before any token
};

class CompletionClient {
 public:
  // `now` is the bench's clock; `timeout_s` the longest wait for the next
  // bytes of a response (and to connect).
  CompletionClient(const BaseUrl& url, std::string endpoint, double timeout_s);
  ~CompletionClient();
  CompletionClient(const CompletionClient&) = delete;
  CompletionClient& operator=(const CompletionClient&) = delete;

  // POSTs `body` and reads its stream to the end. `stop` is asked as bytes
  // arrive: true cancels the stream (the connection is closed, which a
  // server takes as the client leaving).
  StreamResult stream(const std::string& body, const std::function<Time()>& now, const std::function<bool()>& stop);

  // GET: the body of a 200, or nullopt with `error` set (naming the URL).
  std::optional<std::string> get(const std::string& path, std::string& error);

 private:
  std::string url_of(const std::string& path) const;
  BaseUrl url_;
  std::string endpoint_;
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace twin::cli
