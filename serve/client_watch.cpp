#include "serve/client_watch.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

namespace twin {
namespace {

// The port and numeric address of a socket end, as httplib writes them.
bool endpoint(const sockaddr_storage& a, int& port, std::string& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    port = ntohs(in.sin_port);
    addr = ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text) ? text : "";
    return true;
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    port = ntohs(in6.sin6_port);
    addr = ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text) ? text : "";
    return true;
  }
  return false;
}

}  // namespace

ClientWatch::ClientWatch(int local_port, std::string remote_addr, int remote_port)
    : local_port_(local_port), remote_port_(remote_port), remote_addr_(std::move(remote_addr)) {}

int ClientWatch::find_socket() const {
  if (local_port_ <= 0 || remote_port_ <= 0) return -1;
  int found = -1;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    const int fd = std::atoi(it->path().filename().c_str());
    sockaddr_storage self{}, peer{};
    socklen_t self_len = sizeof self, peer_len = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) != 0) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    int self_port = 0, peer_port = 0;
    std::string self_addr, peer_addr;
    if (!endpoint(self, self_port, self_addr) || !endpoint(peer, peer_port, peer_addr)) continue;
    if (self_port != local_port_ || peer_port != remote_port_) continue;
    if (!remote_addr_.empty() && peer_addr != remote_addr_) continue;
    if (found >= 0) return -1;  // two matches: cannot tell which is ours
    found = fd;
  }
  return found;
}

bool ClientWatch::gone() {
  if (!searched_) {
    fd_ = find_socket();
    searched_ = true;
  }
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (::poll(&p, 1, 0) <= 0) return false;  // nothing happened: still there
  if ((p.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0) return true;
  // Readable: an end of stream (0) means the client closed; bytes are a
  // next request on a kept-alive connection.
  char byte = 0;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace twin
