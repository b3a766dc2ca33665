#pragma once
// The OpenAI-compatible HTTP front end of `twinserve serve` (cpp-httplib):
// POST /v1/completions and /v1/chat/completions (streamed as server-sent
// events or whole), GET /v1/models, /health and /metrics. Each connection
// is served on one of a bounded pool of threads; a request goes into the
// inbox and its handler waits on the request's TokenStream. Errors are
// OpenAI's JSON shape: 400 bad input, 404 unknown model or route, 503 queue
// full or shutting down, 500 a server fault.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "serve/byte_tokenizer.hpp"
#include "serve/guarded_server.hpp"
#include "serve/openai_request.hpp"
#include "serve/request_inbox.hpp"
#include "serve/serve_metrics.hpp"

namespace twin {

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 8000;            // 0: any free port (bind() says which)
  std::int32_t threads = 64;  // HTTP worker threads: each open stream holds one
  ApiLimits limits;
  // Guards against clients that would hold a thread or the memory.
  std::size_t max_request_bytes = std::size_t{32} << 20;  // a larger body is a 413, never read whole
  ConnectionLimits connection;
};

class HttpFront {
 public:
  HttpFront(RequestInbox& inbox, ServeMetrics& metrics, const ByteTokenizer& tokenizer, HttpFrontOptions options);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds the socket; returns the port. Throws twin::Error when it cannot.
  int bind();
  // Serves on a thread of its own until stop().
  void start();
  void stop();

  // One connection's bytes through the routes without a socket (the fuzzer).
  std::string serve_bytes(const std::string& input) { return server_->serve_bytes(input); }

 private:
  void add_info_routes();
  void add_body_guards();
  // Reads a POST body of at most options_.max_request_bytes into `body`;
  // otherwise answers the error and returns false.
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                 std::string& body);
  // POST /v1/completions and /v1/chat/completions: parse, submit, then the
  // verdict, and the answer whole or streamed.
  void serve_completion(const httplib::Request& req, httplib::Response& res, std::string body, bool chat);

  RequestInbox& inbox_;
  ServeMetrics& metrics_;
  ByteTokenizer tokenizer_;
  HttpFrontOptions options_;
  std::unique_ptr<GuardedServer> server_;
  std::thread thread_;
  std::int64_t created_ = 0;  // unix seconds at start, for /v1/models
};

}  // namespace twin
