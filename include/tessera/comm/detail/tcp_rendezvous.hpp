// tessera/comm/detail/tcp_rendezvous.hpp: hands a small blob (an ncclUniqueId) from rank 0
// to every other rank over TCP, as torchrun's MASTER_ADDR / MASTER_PORT rendezvous does.
// POSIX sockets only; used by the nccl backend's environment bootstrap.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <tessera/comm/types.hpp>
#include <thread>
#include <vector>

namespace tessera::comm::detail {

class fd_guard {
 public:
  explicit fd_guard(int fd) : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() { if (fd_ >= 0) ::close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

inline void write_all(int fd, const void* p, std::size_t n, const std::string& who) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) throw error(who + ": sending the rendezvous blob failed: " + std::strerror(errno));
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}
inline void read_all(int fd, void* p, std::size_t n, const std::string& who) {
  char* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) throw error(who + ": receiving the rendezvous blob failed (rank 0 closed the connection)");
    c += r;
    n -= static_cast<std::size_t>(r);
  }
}

/// Rank 0 (`blob` given) listens on `port` and sends `blob` to `ranks - 1` peers; every
/// other rank connects to addr:port (retrying until `timeout`) and receives it.
inline std::vector<char> tcp_rendezvous(int rank, int ranks, const std::string& addr, int port,
                                        std::vector<char> blob, std::size_t blob_size,
                                        std::chrono::milliseconds timeout) {
  const std::string who = "tessera::comm rendezvous: rank " + std::to_string(rank) + " of " +
                          std::to_string(ranks) + " at " + addr + ":" + std::to_string(port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (rank == 0) {
    fd_guard s(::socket(AF_INET, SOCK_STREAM, 0));
    if (s.get() < 0) throw error(who + ": socket() failed: " + std::strerror(errno));
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw error(who + ": cannot listen on port " + std::to_string(port) + " (" + std::strerror(errno) +
                  "); choose a free MASTER_PORT");
    ::listen(s.get(), ranks);
    for (int i = 1; i < ranks; ++i) {
      for (;;) {
        timeval tv{0, 100000};
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(s.get(), &fs);
        if (::select(s.get() + 1, &fs, nullptr, nullptr, &tv) > 0) break;
        if (std::chrono::steady_clock::now() > deadline)
          throw error(who + ": timed out after " + std::to_string(timeout.count()) + " ms with " +
                      std::to_string(i - 1) + " of " + std::to_string(ranks - 1) +
                      " ranks connected; check WORLD_SIZE and that every rank was started");
      }
      fd_guard c(::accept(s.get(), nullptr, nullptr));
      if (c.get() < 0) throw error(who + ": accept() failed: " + std::strerror(errno));
      write_all(c.get(), blob.data(), blob_size, who);
      char ack = 0;
      read_all(c.get(), &ack, 1, who);
    }
    return blob;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    throw error(who + ": cannot resolve MASTER_ADDR \"" + addr + "\"");
  std::vector<char> out(blob_size);
  for (;;) {
    fd_guard c(::socket(AF_INET, SOCK_STREAM, 0));
    if (::connect(c.get(), res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      read_all(c.get(), out.data(), blob_size, who);
      const char ack = 1;
      write_all(c.get(), &ack, 1, who);
      return out;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::freeaddrinfo(res);
      throw error(who + ": timed out after " + std::to_string(timeout.count()) +
                  " ms connecting to rank 0; check MASTER_ADDR/MASTER_PORT and that rank 0 runs");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tessera::comm::detail
