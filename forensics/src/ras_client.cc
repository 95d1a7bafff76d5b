#include "hangwatch/forensics/ras_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hangwatch/common/rank_identity.h"
#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/forensics/proc_snapshot.h"

namespace hangwatch::forensics {
namespace {

using RasClock = std::chrono::steady_clock;

double rasWallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int rasMsLeft(RasClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RasClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

// "host:port" or "[v6]:port", as NCCL's ncclSocketGetAddrFromString takes them.
Expected<std::pair<std::string, std::string>> rasSplitAddress(const std::string& address) {
  std::string host, port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find("]:");
    if (close == std::string::npos) return Error{"'" + address + "': expected [address]:port"};
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) return Error{"'" + address + "': expected host:port"};
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return Error{"'" + address + "': expected host:port"};
  return std::make_pair(host, port);
}

// The addresses of `host`: numeric as it is, "localhost" as NCCL's default means it, else the
// names /etc/hosts gives. The collector is linked statically, where glibc's resolver (NSS)
// cannot be used; a RAS address is a local one.
std::vector<sockaddr_storage> rasResolveHost(const std::string& host, uint16_t port) {
  std::vector<std::string> numeric;
  if (host == "localhost") numeric = {"127.0.0.1", "::1"};
  else numeric = {host};
  std::ifstream hosts("/etc/hosts");
  for (std::string line; host != "localhost" && std::getline(hosts, line);) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string addr, name;
    words >> addr;
    while (words >> name)
      if (name == host) numeric.push_back(addr);
  }
  std::vector<sockaddr_storage> out;
  for (const std::string& n : numeric) {
    sockaddr_storage ss{};
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (::inet_pton(AF_INET, n.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(port);
    } else if (::inet_pton(AF_INET6, n.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(port);
    } else {
      continue;
    }
    out.push_back(ss);
  }
  return out;
}

// A connected, non-blocking socket to the first of the address's hosts that accepts.
Expected<ScopedFd> rasConnectTo(const std::string& address, RasClock::time_point deadline) {
  auto parts = rasSplitAddress(address);
  if (!parts) return Error{parts.error()};
  char* end = nullptr;
  const long port = std::strtol(parts->second.c_str(), &end, 10);
  if (*end != '\0' || port < 1 || port > 65535) return Error{"'" + address + "': the port is not a number"};
  const auto targets = rasResolveHost(parts->first, static_cast<uint16_t>(port));
  if (targets.empty()) return Error{fmt::format("{}: '{}' is neither numeric nor in /etc/hosts", address, parts->first)};
  std::string why = "no address";
  for (const sockaddr_storage& t : targets) {
    ScopedFd fd(::socket(t.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) continue;
    const socklen_t len = t.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&t), len) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      continue;
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int err = 0;
    socklen_t elen = sizeof err;
    if (::poll(&p, 1, rasMsLeft(deadline)) != 1 || ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err) {
      why = err ? std::strerror(err) : "timed out";
      continue;
    }
    return fd;
  }
  return Error{fmt::format("cannot connect to {}: {}", address, why)};
}

// A few bytes in one send (a fresh connection's socket buffer takes them whole): "" when sent,
// else why not.
std::string rasSendLine(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size())) return "";
  return std::string("send: ") + std::strerror(errno);
}

// Reads until the server closes (it does once STATUS is answered).
Expected<std::string> rasReadToClose(int fd, RasClock::time_point deadline) {
  std::string reply;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, rasMsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return Error{fmt::format("no complete answer within the bound ({} bytes came)", reply.size())};
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return reply;
    if (n < 0 && errno != EAGAIN && errno != EINTR) return Error{std::string("recv: ") + std::strerror(errno)};
    if (n > 0) reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > (size_t{64} << 20)) return Error{"answer over 64 MiB"};
  }
}

template <typename T>
T rasValueOr(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

RasMember rasMemberFrom(const nlohmann::json& j) {
  RasMember m;
  m.rank = rasValueOr<int>(j, "rank", -1);
  m.host = rasValueOr<std::string>(j, "host", "");
  m.pid = rasValueOr<int64_t>(j, "pid", -1);
  m.cuda_dev = rasValueOr<int>(j, "cuda_dev", -1);
  if (auto st = j.find("status"); st != j.end() && st->is_object()) {
    m.unresponsive = rasValueOr<bool>(*st, "unresponsive", false);
    m.considered_dead = rasValueOr<bool>(*st, "considered_dead", false);
  }
  return m;
}

}  // namespace

Expected<std::string> rasAddressOf(const std::map<std::string, std::string>& environment) {
  if (environment.empty()) return Error{"the process's environment is not readable"};
  if (auto on = environment.find("NCCL_RAS_ENABLE"); on != environment.end() && std::atoi(on->second.c_str()) == 0)
    return Error{"NCCL's RAS is off in the process (NCCL_RAS_ENABLE=" + on->second + ")"};
  auto addr = environment.find("NCCL_RAS_ADDR");
  return addr == environment.end() || addr->second.empty() ? std::string(kRasDefaultAddress) : addr->second;
}

Expected<std::vector<RasComm>> parseRasCommunicators(const std::string& json_text) {
  try {
    const nlohmann::json doc = nlohmann::json::parse(json_text);
    std::vector<RasComm> comms;
    for (const nlohmann::json& c : doc.at("communicators")) {
      RasComm comm;
      comm.hash = c.at("hash").get<std::string>();
      comm.size = rasValueOr<int>(c, "size", 0);
      for (const nlohmann::json& r : c.value("ranks", nlohmann::json::array())) comm.ranks.push_back(rasMemberFrom(r));
      for (const nlohmann::json& r : c.value("missing_ranks", nlohmann::json::array()))
        comm.missing.push_back(rasMemberFrom(r));
      comms.push_back(std::move(comm));
    }
    return comms;
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("not RAS's JSON: {}", e.what())};
  }
}

Expected<std::vector<RasComm>> parseRasReply(const std::string& reply) {
  size_t at = 0;
  while (at < reply.size()) {
    if (reply[at] == '{') return parseRasCommunicators(reply.substr(at));
    size_t end = reply.find('\n', at);
    const std::string line = reply.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind("ERROR", 0) == 0) return Error{"RAS answered \"" + line + "\""};
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return Error{reply.empty() ? "RAS closed the connection without an answer" : "RAS's answer holds no JSON"};
}

namespace {

// Reads until a whole line came; what followed it stays in `buffer`.
Expected<std::string> rasReadLine(int fd, std::string& buffer, RasClock::time_point deadline) {
  char buf[4096];
  for (;;) {
    if (size_t nl = buffer.find('\n'); nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, rasMsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return Error{"no reply"};
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return Error{"closed"};
    if (n < 0 && errno != EAGAIN && errno != EINTR) return Error{std::string("recv: ") + std::strerror(errno)};
    if (n > 0) buffer.append(buf, static_cast<size_t>(n));
  }
}

constexpr int kRasAskAgain = 3;  // a STATUS answer cut short: asked again at most this often

// No JSON and no ERROR line: the answering process went before it answered.
bool rasAnswerCutShort(const std::string& reply) {
  if (reply.find('{') != std::string::npos) return false;
  for (size_t at = 0; at < reply.size();) {
    if (reply.compare(at, 5, "ERROR") == 0) return false;
    const size_t end = reply.find('\n', at);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return true;
}

// A connection whose RAS thread answers the protocol line at once. Every process of a node
// listens on the same port (SO_REUSEPORT) and the kernel picks one per connection: one whose
// threads are stopped (a debugger holds it, or SIGSTOP) would hold the question until it
// runs again, so another connection is tried, which the kernel may give to another process.
Expected<ScopedFd> rasConnectAnswering(const std::string& address, RasClock::time_point deadline, std::string& rest) {
  std::string why;
  for (int attempt = 0; attempt < 8 && RasClock::now() < deadline; ++attempt) {
    auto fd = rasConnectTo(address, deadline);
    if (!fd && attempt == 0) return Error{fd.error()};
    if (!fd) break;  // the bound ran out while connecting again: say why the earlier ones failed
    why = rasSendLine(fd->get(), "CLIENT PROTOCOL 2\n");
    if (!why.empty()) continue;
    rest.clear();
    auto line = rasReadLine(fd->get(), rest, std::min(deadline, RasClock::now() + std::chrono::seconds(1)));
    if (line && line->rfind("SERVER PROTOCOL", 0) == 0) return std::move(*fd);
    why = line ? "it answered \"" + *line + "\"" : "its RAS thread did not answer within 1 s";
  }
  return Error{fmt::format("{}: no NCCL RAS answered ({})", address, why)};
}

}  // namespace

RasStatus askRas(const std::string& address, double bound_s, const std::function<void()>& asked) {
  RasStatus s;
  s.address = address;
  s.time_unix_s = rasWallNow();
  const auto start = RasClock::now();
  const auto deadline = start + std::chrono::duration_cast<RasClock::duration>(std::chrono::duration<double>(bound_s));
  bool told = false;
  auto finish = [&](std::string error) {
    s.seconds = std::chrono::duration<double>(RasClock::now() - start).count();
    s.error = std::move(error);
    if (!told && asked) asked();
    return s;
  };
  // NCCL's server answers STATUS with its JSON or an ERROR line. A connection closed with
  // neither was taken by a process that ended meanwhile (a launcher ending every rank once one
  // died): the node's other processes listen on the same port, so it is asked again.
  for (int attempt = 0;; ++attempt) {
    std::string rest;
    auto fd = rasConnectAnswering(address, deadline, rest);
    if (!fd) return finish(fd.error());
    if (std::string why = rasSendLine(fd->get(), "SET FORMAT json\nSTATUS\n"); !why.empty()) return finish(why);
    if (asked && !told) asked();
    told = true;
    auto reply = rasReadToClose(fd->get(), deadline);
    if (!reply) return finish(reply.error());
    const std::string text = rest + *reply;
    if (attempt < kRasAskAgain && rasAnswerCutShort(text) && RasClock::now() < deadline) continue;
    auto comms = parseRasReply(text);
    if (!comms) return finish(comms.error());
    s.communicators = std::move(*comms);
    return finish("");
  }
}

RasAnswer askRasForProcess(pid_t pid, std::optional<int> rank, double bound_s) {
  RasAnswer a;
  a.rank = rank.value_or(-1);
  a.pid = pid;
  a.host = hostName();
  a.ras.asked_by = "ras-command";
  a.ras.time_unix_s = rasWallNow();
  Expected<ProcSnapshot> proc = readProcSnapshot(pid);
  if (!proc) {
    a.ras.error = fmt::format("process {} is gone: {}", pid, proc.error());
    return a;
  }
  if (!proc->mapsObject("libnccl.so") && !proc->mapsObject("libsimnccl")) {
    a.ras.error = fmt::format("process {} has no NCCL loaded: no RAS to ask", pid);
    return a;
  }
  Expected<std::string> address = rasAddressOf(readProcEnvironment(pid));
  if (!address) {
    a.ras.error = address.error();
    return a;
  }
  a.ras = askRas(*address, bound_s);
  a.ras.asked_by = "ras-command";
  return a;
}

std::unique_ptr<RasQuestion> RasQuestion::ask(const std::string& address, double bound_s) {
  std::unique_ptr<RasQuestion> q(new RasQuestion());
  RasQuestion* self = q.get();
  self->thread_ = std::thread([self, address, bound_s] {
    RasStatus answer = askRas(address, bound_s, [self] {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->asked_ = true;
      self->changed_.notify_all();
    });
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->answer_ = std::move(answer);
  });
  std::unique_lock<std::mutex> lock(self->mutex_);
  self->changed_.wait(lock, [self] { return self->asked_; });  // askRas tells on every path
  return q;
}

RasStatus RasQuestion::wait() {
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  return answer_;
}

RasQuestion::~RasQuestion() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace hangwatch::forensics
