#include "bootstrap.h"

#include <arpa/inet.h>
#include <mpi.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

class MpiBootstrap : public Bootstrap {
 public:
  MpiBootstrap() {
    kind_ = "mpi";
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }
  void share(const std::vector<int>& members, void* data, size_t bytes) override {
    // Every rank takes part in the split; ranks outside `members` land in groups of their own.
    bool in = false;
    for (int m : members) in = in || m == rank_;
    MPI_Comm group;
    MPI_Comm_split(MPI_COMM_WORLD, in ? members.front() : size_ + rank_, rank_, &group);
    if (in) MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, group);
    MPI_Comm_free(&group);
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }
  void finalize() override { MPI_Finalize(); }
};

// One request per connection, text header then raw bytes:
//   SET key n\n<n bytes>  -> OK\n        GET key\n -> n\n<n bytes> (once the key exists)
//   ADD key\n -> value\n                  WAIT key n\n -> OK\n (once the counter reaches n)
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 256) != 0)
      throw std::runtime_error(fmt::format("cannot listen on port {}: {}", port, std::strerror(errno)));
    std::thread([this] { acceptLoop(); }).detach();
  }

 private:
  void acceptLoop() {
    for (;;) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::thread([this, c] { serve(c); }).detach();
    }
  }
  static bool readLine(int fd, std::string& line) {
    line.clear();
    char ch;
    while (::read(fd, &ch, 1) == 1) {
      if (ch == '\n') return true;
      line += ch;
    }
    return false;
  }
  static void writeAll(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::write(fd, s.data() + off, s.size() - off);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  void serve(int c) {
    std::string line;
    if (readLine(c, line)) {
      char op[8] = {}, key[256] = {};
      long n = 0;
      std::sscanf(line.c_str(), "%7s %255s %ld", op, key, &n);
      std::unique_lock<std::mutex> lock(mutex_);
      if (std::strcmp(op, "SET") == 0) {
        std::string value(static_cast<size_t>(n), '\0');
        lock.unlock();
        size_t got = 0;
        while (got < value.size()) {
          ssize_t r = ::read(c, value.data() + got, value.size() - got);
          if (r <= 0) break;
          got += static_cast<size_t>(r);
        }
        lock.lock();
        values_[key] = value;
        changed_.notify_all();
        lock.unlock();
        writeAll(c, "OK\n");
      } else if (std::strcmp(op, "GET") == 0) {
        changed_.wait(lock, [&] { return values_.count(key) > 0; });
        std::string v = values_[key];
        lock.unlock();
        writeAll(c, fmt::format("{}\n{}", v.size(), v));
      } else if (std::strcmp(op, "ADD") == 0) {
        long v = ++counters_[key];
        changed_.notify_all();
        lock.unlock();
        writeAll(c, fmt::format("{}\n", v));
      } else if (std::strcmp(op, "WAIT") == 0) {
        changed_.wait(lock, [&] { return counters_[key] >= n; });
        lock.unlock();
        writeAll(c, "OK\n");
      }
    }
    ::close(c);
  }

  int fd_ = -1;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::map<std::string, long> counters_;
};

class EnvBootstrap : public Bootstrap {
 public:
  EnvBootstrap() {
    kind_ = "env";
    rank_ = envInt("RANK", envInt("SLURM_PROCID", 0));
    size_ = envInt("WORLD_SIZE", envInt("SLURM_NTASKS", 1));
    local_rank_ = envInt("LOCAL_RANK", envInt("SLURM_LOCALID", rank_));
    addr_ = std::getenv("MASTER_ADDR");
    port_ = envInt("MASTER_PORT", 29500);
    if (rank_ == 0) server_ = std::make_unique<TcpStoreServer>(port_);
  }
  void share(const std::vector<int>& members, void* data, size_t bytes) override {
    std::string key = fmt::format("share/{}/{}", generation_++, members.front());
    bool in = false;
    for (int m : members) in = in || m == rank_;
    if (!in) return;
    if (rank_ == members.front()) {
      request(fmt::format("SET {} {}\n{}", key, bytes, std::string_view(static_cast<char*>(data), bytes)));
    } else {
      std::string v = request("GET " + key + "\n", true);
      std::memcpy(data, v.data(), std::min(bytes, v.size()));
    }
  }
  void barrier() override {
    std::string key = fmt::format("barrier/{}", barriers_++);
    request("ADD " + key + "\n");
    request(fmt::format("WAIT {} {}\n", key, size_));
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    ::_exit(code);
  }
  void finalize() override {
    // Rank 0 serves the store: it leaves only after everyone has had its last answer.
    request("ADD finalize\n");
    if (rank_ == 0) request(fmt::format("WAIT finalize {}\n", size_));
  }

 private:
  // Sends one request; returns the reply (for GET, its value). Retries while rank 0 starts.
  std::string request(const std::string& text, bool value = false) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
      int fd = connectToStore();
      if (fd >= 0) {
        size_t off = 0;
        while (off < text.size()) {
          ssize_t n = ::write(fd, text.data() + off, text.size() - off);
          if (n <= 0) break;
          off += static_cast<size_t>(n);
        }
        std::string reply;
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) reply.append(buf, static_cast<size_t>(n));
        ::close(fd);
        if (!reply.empty()) {
          if (!value) return reply;
          size_t nl = reply.find('\n');
          return reply.substr(nl + 1);
        }
      }
      if (std::chrono::steady_clock::now() > give_up) {
        std::fprintf(stderr, "bootstrap: no store at %s:%d\n", addr_ ? addr_ : "?", port_);
        abort(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int connectToStore() {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(addr_ ? addr_ : "127.0.0.1", fmt::format("{}", port_).c_str(), &hints, &res) != 0) return -1;
    int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(res);
    return fd;
  }

  const char* addr_ = nullptr;
  int port_ = 29500;
  int generation_ = 0;
  int barriers_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
};

bool mpiLauncher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

}  // namespace

std::unique_ptr<Bootstrap> startBootstrap(int* argc, char*** argv) {
  bool env = !mpiLauncher() && std::getenv("MASTER_ADDR") && (std::getenv("RANK") || std::getenv("SLURM_PROCID"));
  if (env) return std::make_unique<EnvBootstrap>();
  MPI_Init(argc, argv);
  return std::make_unique<MpiBootstrap>();
}

std::unique_ptr<Bootstrap> mpiBootstrap() { return std::make_unique<MpiBootstrap>(); }
