#include "serve/guarded_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

namespace twin {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What a handler on this thread can say about its connection.
struct ConnectionState {
  bool close = false;
  bool in_head = true;
  std::size_t head_bytes = 0;
};
thread_local ConnectionState* current_connection = nullptr;

// Counts the head's bytes; false once past the cap.
bool count_head(ConnectionState& state, std::size_t n, std::size_t cap) {
  if (!state.in_head) return true;
  state.head_bytes += n;
  return state.head_bytes <= cap;
}

int poll_ms(milliseconds d) { return static_cast<int>(std::clamp<milliseconds::rep>(d.count(), 0, 1 << 30)); }

// Whether fd has `events` (or an error or hang-up, which the next call
// reports) within `wait`.
bool wait_for(int fd, short events, milliseconds wait) {
  const auto until = Steady::now() + wait;
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, poll_ms(std::chrono::duration_cast<milliseconds>(until - Steady::now())));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len)) != 0) return;
  char host[NI_MAXHOST];
  if (::getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) ip = host;
  if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  } else if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
}

// A connection's socket with the request deadline: every read of a request
// (its head, and its body as the handler reads it) must come before the
// deadline set when the request's first byte arrived, whatever the pace.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, ConnectionState& state, const ConnectionLimits& limits, milliseconds read_timeout,
                 milliseconds write_timeout)
      : fd_(fd), state_(state), limits_(limits), read_timeout_(read_timeout), write_timeout_(write_timeout),
        buffer_(16384) {}

  // Waits, up to the keep-alive timeout, for the next request's first byte.
  bool wait_for_request(const std::function<bool()>& serving) {
    if (off_ < size_) return true;
    const auto until = Steady::now() + limits_.keep_alive_timeout;
    // Slices, so that a stopped server does not wait out idle connections.
    while (serving()) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - Steady::now());
      if (left.count() <= 0) return false;
      if (wait_for(fd_, POLLIN, std::min(left, milliseconds(100)))) return true;
    }
    return false;
  }

  void start_request() {
    deadline_ = Steady::now() + limits_.request_read_timeout;
    state_ = ConnectionState{};
  }

  bool is_readable() const override { return off_ < size_ || wait_for(fd_, POLLIN, read_wait()); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_) && alive(); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == size_) {
      if (!wait_for(fd_, POLLIN, read_wait()) || Steady::now() >= deadline_) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      size_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, size_ - off_);
    if (!count_head(state_, n, limits_.max_head_bytes)) return -1;
    std::memcpy(ptr, buffer_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // The library's per-read timeout, cut to the request's deadline.
  milliseconds read_wait() const {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Steady::now());
    return std::max(milliseconds(0), std::min(left, read_timeout_));
  }

  // As the library's check before each write: a client that closed its end
  // reads as end of file.
  bool alive() const {
    if (!wait_for(fd_, POLLIN, milliseconds(0))) return true;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

  int fd_;
  ConnectionState& state_;
  const ConnectionLimits& limits_;
  milliseconds read_timeout_, write_timeout_;
  Steady::time_point deadline_{};
  std::vector<char> buffer_;
  std::size_t off_ = 0, size_ = 0;
};

// Bytes in, bytes out: a connection without a socket.
class MemoryStream final : public httplib::Stream {
 public:
  MemoryStream(const std::string& input, ConnectionState& state, const ConnectionLimits& limits,
               std::size_t max_output)
      : input_(input), state_(state), limits_(limits), max_output_(max_output) {}

  bool has_input() const { return off_ < input_.size(); }
  const std::string& output() const { return output_; }

  bool is_readable() const override { return has_input(); }
  bool is_writable() const override { return output_.size() < max_output_; }
  ssize_t read(char* ptr, size_t size) override {
    const std::size_t n = std::min(size, input_.size() - off_);
    if (!count_head(state_, n, limits_.max_head_bytes)) return -1;
    std::memcpy(ptr, input_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    output_.append(ptr, std::min(size, max_output_ - output_.size()));
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 1; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 2; }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  const std::string& input_;
  ConnectionState& state_;
  const ConnectionLimits& limits_;
  std::size_t max_output_;
  std::size_t off_ = 0;
  std::string output_;
};

milliseconds timeout_of(time_t sec, time_t usec) {
  return milliseconds(static_cast<milliseconds::rep>(sec) * 1000 + static_cast<milliseconds::rep>(usec) / 1000);
}

}  // namespace

void GuardedServer::close_after_response() {
  if (current_connection) current_connection->close = true;
}

void GuardedServer::head_complete() {
  if (current_connection) current_connection->in_head = false;
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  ConnectionState state;
  current_connection = &state;
  DeadlineStream strm(sock, state, limits_, timeout_of(read_timeout_sec_, read_timeout_usec_),
                      timeout_of(write_timeout_sec_, write_timeout_usec_));
  const auto serving = [this] { return svr_sock_ != INVALID_SOCKET; };
  bool ret = false;
  for (std::size_t count = keep_alive_max_count_; count > 0 && serving(); --count) {
    if (!strm.wait_for_request(serving)) break;
    strm.start_request();
    bool connection_closed = false;
    ret = process_request(strm, count == 1, connection_closed, nullptr);
    if (!ret || connection_closed || state.close) break;
  }
  current_connection = nullptr;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

std::string GuardedServer::serve_bytes(const std::string& input, std::size_t max_output) {
  ConnectionState state;
  ConnectionState* saved = current_connection;
  current_connection = &state;
  MemoryStream strm(input, state, limits_, max_output);
  for (int requests = 0; requests < 64 && strm.has_input(); ++requests) {
    state = ConnectionState{};
    bool connection_closed = false;
    if (!process_request(strm, false, connection_closed, nullptr) || connection_closed || state.close) break;
  }
  current_connection = saved;
  return strm.output();
}

}  // namespace twin
