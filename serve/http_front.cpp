#include "serve/http_front.hpp"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "serve/client_watch.hpp"
#include "serve/token_stream.hpp"

namespace twin {
namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

constexpr auto kWaitSlice = std::chrono::seconds(1);

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(api_error_json(e), "application/json");
}

ApiError error_of(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// The error for a request the core did not serve to its end.
ApiError unserved_error(const StreamEnd& end) {
  if (end.outcome == Outcome::rejected) {
    if (end.reason == "queue full" || end.reason == "queue timeout") {
      return error_of(503, "the server is overloaded (" + end.reason + "); retry later", "server_error",
                      end.reason == "queue full" ? "queue_full" : "queue_timeout");
    }
    return error_of(400, "the request cannot be served: " + end.reason, "invalid_request_error", "cannot_serve");
  }
  if (end.reason == "interrupted") {
    return error_of(503, "the server is shutting down; the request was aborted", "server_error", "shutting_down");
  }
  return error_of(500, "the request was aborted: " + end.reason, "server_error", "aborted");
}

// The server's record of a request (requests.csv's id, arrival_s,
// first_token_s, finish_s; null where the request has none): what a client
// such as `twinserve bench` compares its own timing with.
json server_record(const StreamEnd& end) {
  const auto seconds = [](Time t) { return t == kNoTime ? json(nullptr) : json(to_seconds(t)); };
  return {{"id", end.id},
          {"arrival_s", seconds(end.arrival)},
          {"first_token_s", seconds(end.first_token)},
          {"finish_s", seconds(end.finish)}};
}

json usage_json(const StreamEnd& end) {
  return {{"prompt_tokens", end.prompt_tokens},
          {"completion_tokens", end.completion_tokens},
          {"total_tokens", end.prompt_tokens + end.completion_tokens}};
}

// One streamed response's fixed parts.
struct ChunkMaker {
  bool chat = false;
  std::string id;
  std::int64_t created = 0;
  std::string model;
  bool include_usage = false;

  json base() const {
    json j = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
              {"model", model}};
    return j;
  }
  std::string event(const json& j) const { return "data: " + dump(j) + "\n\n"; }
  json piece_json(const std::string& text, const json& finish_reason) const {
    json j = base();
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
    if (chat) {
      choice["delta"] = finish_reason.is_null() || !text.empty() ? json{{"content", text}} : json::object();
    } else {
      choice["text"] = text;
    }
    j["choices"] = json::array({choice});
    if (include_usage) j["usage"] = nullptr;
    return j;
  }
  std::string piece(const std::string& text, const json& finish_reason) const {
    return event(piece_json(text, finish_reason));
  }
  std::string role() const {
    json j = base();
    j["choices"] = json::array({{{"index", 0},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
    if (include_usage) j["usage"] = nullptr;
    return event(j);
  }
  // The end of a stream: the last text with its finish reason (vLLM's
  // "abort" for a request ended before its length) carrying the server's
  // record, the usage when asked for, and [DONE].
  std::string closing(const StreamEnd& end) const {
    json j = end.outcome == Outcome::finished ? piece_json(end.tail, end.finish_reason) : piece_json("", "abort");
    if (end.id >= 0) j["twinserve"] = server_record(end);
    std::string out = event(j);
    if (include_usage) out += usage(end);
    return out + "data: [DONE]\n\n";
  }
  std::string usage(const StreamEnd& end) const {
    json j = base();
    j["choices"] = json::array();
    j["usage"] = usage_json(end);
    return event(j);
  }
};

// cpp-httplib 0.11 listens with a backlog of 5: with dozens of clients
// reconnecting per request, the accept queue overflows and connections are
// reset. Listening again on the same socket raises the backlog (Linux); the
// library does not expose its socket, so it is found among ours by port.
void raise_backlog(int port) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The answer of a request not streamed: its pieces gathered as they come,
// one JSON body at the end. A client that gave up (its timeout) cancels the
// request at the engine's next step, as a streamed one does at its failed
// write: an unbounded max_tokens (the context left, vLLM's default) would
// otherwise keep the engine busy for nobody.
template <class ClientLeft>
void answer_whole(httplib::Response& res, TokenStream& stream, StreamNews& news, const ChunkMaker& maker,
                  ClientLeft&& client_left, RequestInbox& inbox, RequestId id) {
  const bool chat = maker.chat;
  std::string text;
  std::size_t seen = 0;
  while (true) {
    for (const std::string& piece : news.pieces) text += piece;
    seen += news.pieces.size();
    if (news.ended) break;
    if (client_left()) {
      inbox.cancel(id);
      return;
    }
    stream.wait(seen, false, Steady::now() + kWaitSlice, news);
  }
  const StreamEnd& end = news.end;
  if (end.outcome != Outcome::finished) {
    send_error(res, unserved_error(end));
    return;
  }
  text += end.tail;
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", end.finish_reason}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  json body = {{"id", maker.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", maker.created},
               {"model", maker.model},
               {"choices", json::array({choice})},
               {"usage", usage_json(end)},
               {"twinserve", server_record(end)}};
  res.set_content(dump(body), "application/json");
}

// The answer streamed: one event per token as its step completes, then the end.
// A client that goes while nothing is written (its request still queued, or
// between slow tokens) is found by `client` at each wait slice: the stream
// fails and the releaser cancels, so a queued request is cancelled before
// it starts, not after its first write fails.
void answer_streamed(httplib::Response& res, std::shared_ptr<TokenStream> stream, const ChunkMaker& maker,
                     RequestInbox& inbox, RequestId id, std::shared_ptr<ClientWatch> client) {
  struct State {
    std::size_t seen = 0;
    bool role_sent = false;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream, state, maker, client](std::size_t, httplib::DataSink& sink) {
        StreamNews n;
        stream->wait(state->seen, false, Steady::now() + kWaitSlice, n);
        if (n.pieces.empty() && !n.ended) return !client->gone();
        // What one wake-up has is one write: with TCP_NODELAY every
        // write is a segment of its own.
        std::string out;
        // A chat stream's role delta goes out with its first token, as
        // vLLM's does, not at arrival: a client timing the first chunk
        // then times the first token.
        if (maker.chat && !state->role_sent) {
          state->role_sent = true;
          out = maker.role();
        }
        for (const std::string& piece : n.pieces) out += maker.piece(piece, nullptr);
        if (n.ended) out += maker.closing(n.end);
        // A failed write: the client has gone; the releaser cancels.
        if (!sink.write(out.data(), out.size())) return false;
        state->seen += n.pieces.size();
        if (!n.ended) return true;
        state->done = true;
        sink.done();
        return true;
      },
      [&inbox, id, state](bool success) {
        if (!success && !state->done) inbox.cancel(id);
      });
}

// OpenAI-shaped errors for what no route answered and for a fault.
void add_error_handlers(httplib::Server& s) {
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = excerpt(req.method, 20) + " " + excerpt(req.path, 100);
    if (res.status == 404) {
      send_error(res, error_of(404, "no route " + what + " (routes: POST /v1/completions, POST /v1/chat/completions, "
                                    "GET /v1/models, /health, /metrics)",
                               "invalid_request_error", "not_found"));
    } else {
      send_error(res, error_of(res.status, "HTTP " + std::to_string(res.status) + " for " + what,
                               res.status < 500 ? "invalid_request_error" : "server_error", ""));
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    send_error(res, error_of(500, message, "server_error", ""));
  });
}

// A body the server will not read: its error, and the connection closes
// (the bytes left unread are no next request).
void refuse_body(httplib::Response& res, const ApiError& e) {
  send_error(res, e);
  res.set_header("Connection", "close");
  GuardedServer::close_after_response();
}

std::string too_large(std::size_t max_bytes) {
  return "the request body is larger than the " + std::to_string(max_bytes) +
         " bytes allowed (twinserve serve --max-request-bytes)";
}

}  // namespace

HttpFront::HttpFront(RequestInbox& inbox, ServeMetrics& metrics, const ByteTokenizer& tokenizer,
                     HttpFrontOptions options)
    : inbox_(inbox),
      metrics_(metrics),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      server_(std::make_unique<GuardedServer>(options_.connection)),
      created_(unix_now()) {
  httplib::Server& s = *server_;
  const auto threads = static_cast<std::size_t>(options_.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Bodies the routes do not read themselves (a GET's) are capped by the
  // library; the completion routes read theirs (read_body).
  s.set_payload_max_length(options_.max_request_bytes);
  s.set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(options_.connection.keep_alive_timeout).count());
  // Nagle's algorithm off: a streamed token is a small write after the
  // headers or the previous token; with it on, the write waits for the
  // client's (delayed, up to 40 ms) ACK of the one before.
  s.set_tcp_nodelay(true);
  // cpp-httplib closes a kept-alive connection after 5 requests; a client
  // then reconnects (a handshake and an accept, ~0.2 ms on loopback) in
  // front of every fifth request's TTFT. Uvicorn (vLLM) sets no limit.
  s.set_keep_alive_max_count(std::numeric_limits<std::size_t>::max());

  add_info_routes();
  add_body_guards();
  for (const bool chat : {false, true}) {
    s.Post(chat ? "/v1/chat/completions" : "/v1/completions",
           [this, chat](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
             std::string body;
             if (read_body(req, res, reader, body)) serve_completion(req, res, std::move(body), chat);
           });
  }
  // Any other POST: its body read within the limit too, then the 404.
  s.Post(".*", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string body;
    if (read_body(req, res, reader, body)) res.status = 404;
  });
  add_error_handlers(s);
}

void HttpFront::add_info_routes() {
  httplib::Server& s = *server_;
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (inbox_.is_closed()) {
      send_error(res, error_of(503, "the server is shutting down", "server_error", "shutting_down"));
      return;
    }
    res.status = 200;
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options_.limits.model_name},     {"object", "model"},
                        {"created", created_},                 {"owned_by", "twinserve"},
                        {"root", options_.limits.model_name},   {"max_model_len", options_.limits.max_model_len}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
}

void HttpFront::add_body_guards() {
  // Runs once the head is read: from here the request reads its body. A
  // body the library would read whole without a limit (chunked, outside
  // the POST routes) or that is declared too large is refused unread.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    GuardedServer::head_complete();
    const bool chunked = req.get_header_value("Transfer-Encoding") == "chunked";
    if (req.get_header_value<std::uint64_t>("Content-Length") > options_.max_request_bytes) {
      refuse_body(res, error_of(413, too_large(options_.max_request_bytes), "invalid_request_error",
                                "request_too_large"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (chunked && req.method != "POST") {
      refuse_body(res, error_of(400, "a chunked request body is accepted on POST only", "invalid_request_error", ""));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

bool HttpFront::read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                          std::string& body) {
  const std::size_t cap = options_.max_request_bytes;
  if (req.is_multipart_form_data()) {
    refuse_body(res, error_of(415, "multipart bodies are not accepted; send JSON", "invalid_request_error", ""));
    return false;
  }
  // Sized once from the declared length (checked against the cap before
  // routing): no doubling while it arrives.
  body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(req.get_header_value<std::uint64_t>("Content-Length"), cap)));
  bool over = false;
  const bool ok = reader([&](const char* data, std::size_t n) {
    if (n > cap - body.size()) return !(over = true);
    body.append(data, n);
    return true;
  });
  if (over) {
    refuse_body(res, error_of(413, too_large(cap), "invalid_request_error", "request_too_large"));
    return false;
  }
  if (!ok) {
    refuse_body(res, error_of(400, "the request body could not be read (cut short, too slow, or a bad encoding)",
                              "invalid_request_error", ""));
    return false;
  }
  return true;
}

void HttpFront::serve_completion(const httplib::Request& req, httplib::Response& res, std::string body, bool chat) {
  CompletionParams p;
  try {
    p = parse_completion_request(body, chat, options_.limits, tokenizer_);
  } catch (const ApiException& e) {
    send_error(res, e.error());
    return;
  }
  // The body is not needed while the request is served (minutes for a stream).
  std::string().swap(body);
  Request r;
  r.prompt_len = static_cast<std::int32_t>(p.prompt.size());
  r.output_len = p.max_tokens;
  r.prompt_tokens = std::move(p.prompt);
  RequestExtras x;
  x.temperature = p.temperature;
  x.top_k = p.top_k;
  x.top_p = p.top_p;
  x.seed = p.seed.value_or(0);
  x.seed_given = p.seed.has_value();
  x.stop = p.stop;
  x.ignore_eos = p.ignore_eos;
  auto stream = std::make_shared<TokenStream>();
  x.stream = stream;
  const RequestId id = inbox_.submit(std::move(r), std::move(x));
  if (id < 0) {
    send_error(res, error_of(503, "the server is shutting down", "server_error", "shutting_down"));
    return;
  }
  // The verdict first: a rejection (queue full, too long) is an HTTP error, not a stream.
  StreamNews news;
  // Whether the client has gone, asked at most once a wait slice (a
  // request that ends sooner never looks for its socket).
  auto client = std::make_shared<ClientWatch>(req.local_port, req.remote_addr, req.remote_port);
  auto next_look = Steady::now() + kWaitSlice;
  const auto client_left = [&client, &next_look] {
    if (Steady::now() < next_look) return false;
    next_look = Steady::now() + kWaitSlice;
    return client->gone();
  };
  while (!stream->wait(0, true, Steady::now() + kWaitSlice, news)) {
    if (client_left()) {
      inbox_.cancel(id);
      return;
    }
  }
  if (news.ended && news.end.outcome == Outcome::rejected) {
    send_error(res, unserved_error(news.end));
    return;
  }
  ChunkMaker maker{chat, (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id), unix_now(), options_.limits.model_name,
                   p.include_usage};
  if (!p.stream) {
    answer_whole(res, *stream, news, maker, client_left, inbox_, id);
    return;
  }
  answer_streamed(res, std::move(stream), maker, inbox_, id, std::move(client));
}

HttpFront::~HttpFront() { stop(); }

int HttpFront::bind() {
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) throw Error("serve: cannot bind " + options_.host + " to a free port");
  } else if (!server_->bind_to_port(options_.host, port)) {
    throw Error("serve: cannot bind " + options_.host + ":" + std::to_string(port) +
                " (in use, or not an address of this machine)");
  }
  raise_backlog(port);
  return port;
}

void HttpFront::start() {
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

void HttpFront::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace twin
