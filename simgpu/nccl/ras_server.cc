#include "hangwatch/simgpu/nccl/ras_server.h"


#include <cuda_runtime_api.h>
#include <nccl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/debug_log.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"

namespace simnccl {
namespace {

// A thread born detached. std::thread(...).detach() leaves a moment in which the thread exists
// and is not yet detached: a process that exits then (a rank ending while its RAS thread accepts
// a peer) has a finished thread nobody joined, which ThreadSanitizer reports as a leak.
void startDetached(std::function<void()> body) {
  auto* task = new std::function<void()>(std::move(body));
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const int rc = pthread_create(
      &thread, &attr,
      [](void* arg) -> void* {
        std::unique_ptr<std::function<void()>> run(static_cast<std::function<void()>*>(arg));
        (*run)();
        return nullptr;
      },
      task);
  pthread_attr_destroy(&attr);
  if (rc != 0) delete task;  // as std::thread's failure, minus the throw: the service answers nobody
}

using Clock = RasPeerLiveness::Clock;

constexpr const char* kRasDefaultAddr = "localhost:28028";  // NCCL_RAS_CLIENT_PORT
constexpr int kRasProtocol = 2;                              // NCCL_RAS_CLIENT_PROTOCOL
constexpr int kRasLegTimeoutSec = 5;                         // RAS_COLLECTIVE_LEG_TIMEOUT_SEC
constexpr int kRasPeerDeadSec = 60;                          // RAS_PEER_DEAD_TIMEOUT
constexpr size_t kRasMaxLine = 1024;  // NCCL's recvBuffer: a longer line ends the connection
constexpr auto kRasKeepalive = std::chrono::seconds(1);  // RAS_KEEPALIVE_INTERVAL
constexpr auto kRasKeepaliveWarn = std::chrono::seconds(5);  // RAS_KEEPALIVE_TIMEOUT_WARN

long rasEnvLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' ? n : fallback;
}

// The state letter of /proc/<pid>/stat, '\0' when there is no such process.
char rasProcessState(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return '\0';
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '\0' : text[paren + 2];
}

// A gone process (no entry, a zombie) or a stopped one (SIGSTOP, a debugger) has no RAS
// thread running to answer. Every member is on this machine, whatever host name it has (a
// communicator's shared segment spans one machine; simulated nodes differ in name only).
bool rasProcessAnswers(int pid) {
  if (pid <= 0) return true;
  const char s = rasProcessState(pid);
  return s != '\0' && s != 'Z' && s != 'X' && s != 'T' && s != 't';
}

// NCCL_RAS_ADDR's "host:port" or "[v6 address]:port" (ncclSocketGetAddrFromString).
int rasListeningSocket(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) return -1;
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), addr.c_str() + colon + 1, &hints, &found) != 0 || found == nullptr) return -1;
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  bool ok = fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
            ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0 &&
            ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, 16384) == 0;
  ::freeaddrinfo(found);
  if (ok) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

bool rasSendAll(int fd, const std::string& text) {
  for (size_t off = 0; off < text.size();) {
    ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string rasTimestamp() {
  const time_t now = ::time(nullptr);
  tm local{};
  char buf[64] = {};
  ::strftime(buf, sizeof(buf), "%F %T", ::localtime_r(&now, &local));
  return buf;
}

// NCCL's json writers (client_support.cc jsonWriteHeader .. jsonWriteFooter), line for line.
void rasJsonRank(std::string& out, const RasMember& m, bool first) {
  if (!first) out += ",\n";
  fmt::format_to(std::back_inserter(out),
                 "        {{\n"
                 "          \"rank\": {},\n"
                 "          \"host\": \"{}\",\n"
                 "          \"pid\": {},\n"
                 "          \"cuda_dev\": {},\n"
                 "          \"nvml_dev\": {},\n"
                 "          \"status\": {{\n"
                 "            \"init_state\": {},\n"
                 "            \"async_error\": {},\n"
                 "            \"finalize_called\": {},\n"
                 "            \"destroy_flag\": {},\n"
                 "            \"abort_flag\": {}\n"
                 "          }}\n"
                 "        }}",
                 m.rank, m.host, m.pid, m.cuda_dev, m.cuda_dev, 0, m.async_error, false, false, m.abort_flag);
}

void rasJsonMissingRank(std::string& out, const RasMember& m, bool first) {
  if (!first) out += ",\n";
  fmt::format_to(std::back_inserter(out),
                 "        {{\n"
                 "          \"rank\": {},\n"
                 "          \"host\": \"{}\",\n"
                 "          \"pid\": {},\n"
                 "          \"cuda_dev\": {},\n"
                 "          \"nvml_dev\": {},\n"
                 "          \"status\": {{\n"
                 "            \"unresponsive\": {},\n"
                 "            \"considered_dead\": {}\n"
                 "          }}\n"
                 "        }}",
                 m.rank, m.host, m.pid, m.cuda_dev, m.cuda_dev, m.unresponsive, m.considered_dead);
}

void rasJsonCommunicator(std::string& out, const RasComm& c, bool first) {
  const auto answering =
      std::count_if(c.members.begin(), c.members.end(), [](const RasMember& m) { return m.reported; });
  if (!first) out += ",\n";
  fmt::format_to(std::back_inserter(out),
                 "    {{\n"
                 "      \"hash\": \"0x{:x}\",\n"
                 "      \"secondary_hash\": \"0x{:x}:0x{:x}\",\n"
                 "      \"size\": {},\n"
                 "      \"ranks_count\": {},\n"
                 "      \"missing_ranks_count\": {},\n"
                 "      \"ranks\": [\n",
                 c.hash, c.host_hash, c.pid_hash, c.size, answering, c.members.size() - static_cast<size_t>(answering));
  bool first_rank = true;
  for (const RasMember& m : c.members)
    if (m.reported) rasJsonRank(out, m, std::exchange(first_rank, false));
  out += "\n      ],\n      \"missing_ranks\": [\n";
  bool first_missing = true;
  for (const RasMember& m : c.members)
    if (!m.reported) rasJsonMissingRank(out, m, std::exchange(first_missing, false));
  out += "\n      ]\n    }";
}

// The wire between RAS threads: what one process reports of its communicators, one line per
// communicator and per member, as NCCL's RAS_COLL_COMMS response carries it (collectives.cc
// rasCollCommsInit): every member's place from the communicator's table, and for the ranks
// the process holds itself, their status.
constexpr const char* kRasPeerAsk = "COLLECT\n";

std::string rasCommsText(const std::vector<RasComm>& comms) {
  std::string out;
  for (const RasComm& c : comms) {
    fmt::format_to(std::back_inserter(out), "C {} {} {} {} {}\n", c.hash, c.host_hash, c.pid_hash, c.size,
                   c.members.size());
    for (const RasMember& m : c.members)
      fmt::format_to(std::back_inserter(out), "M {} {} {} {} {} {} {}\n", m.rank, m.pid, m.cuda_dev, int{m.reported},
                     m.async_error, int{m.abort_flag}, m.host.empty() ? "-" : m.host);
  }
  return out + "E\n";
}

// Nothing when the text is cut short or malformed: that process's answer did not come.
std::optional<std::vector<RasComm>> rasCommsParse(const std::string& text) {
  std::istringstream in(text);
  std::vector<RasComm> comms;
  std::string tag;
  while (in >> tag) {
    if (tag == "E") return comms;
    size_t members = 0;
    RasComm c;
    if (tag != "C" || !(in >> c.hash >> c.host_hash >> c.pid_hash >> c.size >> members)) return std::nullopt;
    for (size_t i = 0; i < members; ++i) {
      RasMember m;
      int reported = 0;
      int abort_flag = 0;
      if (!(in >> tag >> m.rank >> m.pid >> m.cuda_dev >> reported >> m.async_error >> abort_flag >> m.host) ||
          tag != "M")
        return std::nullopt;
      m.reported = reported != 0;
      m.abort_flag = abort_flag != 0;
      if (m.host == "-") m.host.clear();
      c.members.push_back(std::move(m));
    }
    comms.push_back(std::move(c));
  }
  return std::nullopt;
}

// NCCL's rasCollCommsMerge: communicators by id; a rank any process reported is reported.
void rasMerge(std::map<uint64_t, RasComm>& into, std::vector<RasComm> comms) {
  for (RasComm& c : comms) {
    auto [it, fresh] = into.try_emplace(c.hash, c);
    if (fresh) continue;
    for (const RasMember& m : c.members)
      if (m.reported && static_cast<size_t>(m.rank) < it->second.members.size())
        it->second.members[static_cast<size_t>(m.rank)] = m;
  }
}

sockaddr_un rasPeerAddress(int pid, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = fmt::format("simnccl-ras-peer.{}", pid);  // abstract: a leading NUL
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

int rasPeerListeningSocket() {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  const sockaddr_un a = rasPeerAddress(static_cast<int>(::getpid()), &len);
  if (fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&a), len) == 0 && ::listen(fd, 256) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// One round of the flood: asks every process of `pids` at once. Those that answer by
// `deadline` are in the map; a gone one refuses at once; `timed_out` counts the others
// (NCCL's nLegTimeouts, "timeouts_count").
std::map<int, std::vector<RasComm>> rasAskPeers(const std::vector<int>& pids, Clock::time_point deadline,
                                                int& timed_out) {
  struct Ask {
    int pid;
    hangwatch::ScopedFd fd;
    std::string got;
  };
  std::vector<Ask> asks;
  for (int pid : pids) {
    hangwatch::ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    socklen_t len = 0;
    const sockaddr_un a = rasPeerAddress(pid, &len);
    if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
      if (errno == EAGAIN) ++timed_out;  // its backlog is full: it is not taking questions
      continue;
    }
    if (rasSendAll(fd.get(), kRasPeerAsk)) asks.push_back(Ask{pid, std::move(fd), {}});
  }
  std::map<int, std::vector<RasComm>> answers;
  size_t open = asks.size();
  while (open > 0 && Clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (const Ask& a : asks) pfds.push_back(pollfd{a.fd.valid() ? a.fd.get() : -1, POLLIN, 0});
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(wait.count(), 0))) <= 0) continue;
    for (size_t i = 0; i < asks.size(); ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(asks[i].fd.get(), buf, sizeof(buf), 0);
      if (n > 0) {
        asks[i].got.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (auto comms = rasCommsParse(asks[i].got)) answers[asks[i].pid] = std::move(*comms);
      asks[i].fd.close();
      --open;
    }
  }
  timed_out += static_cast<int>(open);
  return answers;
}

// One client connection: its settings (client_support.cc struct rasClient).
struct RasClientSession {
  bool json = false;  // NCCL starts a client in text format
  Clock::duration timeout;
  bool finished = false;  // STATUS answered: the connection ends
};

// The process's server: one listening thread, one thread per client or asking peer. Leaked
// on purpose: nothing of it is destroyed at exit while a thread may still use it.
class RasService {
 public:
  RasService(int fd, int peer_fd);
  void add(const Communicator* comm, SharedSegment* segment, uint64_t hash);
  void remove(const Communicator* comm);
  int fd() const { return fd_; }
  int peerFd() const { return peer_fd_; }

 private:
  struct Registered {
    SharedSegment* segment;
    uint64_t hash;
  };
  void listenLoop();
  void keepaliveLook(Clock::time_point now);
  std::vector<RasComm> localComms();
  void servePeer(int fd);
  void serveClient(int fd);
  std::string answer(RasClientSession& session, const std::string& cmd);
  RasStatus gather(Clock::duration timeout);
  std::string status(Clock::duration timeout);

  const int fd_;
  const int peer_fd_;
  const int factor_ = rasTimeoutFactor();
  int cuda_runtime_ = 0;
  int cuda_driver_ = 0;
  std::mutex mutex_;
  std::map<const Communicator*, Registered> comms_;
  RasPeerLiveness liveness_{std::chrono::seconds(kRasPeerDeadSec) * factor_};
};

RasService::RasService(int fd, int peer_fd) : fd_(fd), peer_fd_(peer_fd) {
  cudaRuntimeGetVersion(&cuda_runtime_);
  cudaDriverGetVersion(&cuda_driver_);
  startDetached([this] { listenLoop(); });
}

void RasService::add(const Communicator* comm, SharedSegment* segment, uint64_t hash) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_[comm] = Registered{segment, hash};
}

void RasService::remove(const Communicator* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  comms_.erase(comm);
}

void RasService::listenLoop() {
  pthread_setname_np(pthread_self(), "simnccl-ras");
  auto next_look = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    if (now >= next_look) {
      keepaliveLook(now);
      next_look = now + kRasKeepalive * factor_;
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_look - Clock::now());
    pollfd pfds[2] = {{fd_, POLLIN, 0}, {peer_fd_, POLLIN, 0}};
    if (::poll(pfds, 2, static_cast<int>(std::max<int64_t>(wait.count(), 0))) <= 0) continue;
    if (pfds[0].revents != 0)
      if (const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC); client >= 0)
        startDetached([this, client] { serveClient(client); });
    if (pfds[1].revents != 0)
      if (const int peer = ::accept4(peer_fd_, nullptr, nullptr, SOCK_CLOEXEC); peer >= 0)
        startDetached([this, peer] { servePeer(peer); });
  }
}

// The RAS thread's keepalive, as far as liveness goes: whether each member process of this
// process's communicators runs to answer (gone or stopped: it sends no keepalive).
void RasService::keepaliveLook(Clock::time_point now) {
  const std::vector<RasComm> comms = localComms();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const RasComm& c : comms)
    for (const RasMember& m : c.members)
      liveness_.look({m.host, m.pid}, m.pid == ::getpid() || rasProcessAnswers(m.pid), now);
}

// What this process reports of its communicators while none of them can go: every member's
// place from the shared table, the status of the ranks it holds.
std::vector<RasComm> RasService::localComms() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<uint64_t, RasComm> by_hash;
  for (const auto& [comm, reg] : comms_) {
    RasComm& out = by_hash[reg.hash];
    if (out.members.empty()) {
      const RankRecord& first = reg.segment->rank(0);
      out = RasComm{reg.hash, communicatorId(first.host), static_cast<uint64_t>(first.pid), comm->nranks(), {}};
      for (int r = 0; r < comm->nranks(); ++r) {
        const RankRecord& rec = reg.segment->rank(r);
        RasMember m{r, rec.host, rec.pid, rec.device};
        m.reported = false;
        out.members.push_back(std::move(m));
      }
    }
    RasMember& me = out.members[static_cast<size_t>(comm->rank())];
    me.reported = true;
    me.async_error = static_cast<int>(comm->async_error.load());
    me.abort_flag = comm->aborted();
  }
  std::vector<RasComm> comms;
  for (auto& [hash, c] : by_hash) comms.push_back(std::move(c));
  return comms;
}

// Another process's RAS thread asking, as NCCL's collective request arrives over a link.
void RasService::servePeer(int fd) {
  pthread_setname_np(pthread_self(), "simnccl-raspeer");
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string ask;
  char c = 0;
  while (ask.size() < kRasMaxLine && ::recv(fd, &c, 1, 0) == 1 && c != '\n') ask += c;
  if (ask + "\n" == kRasPeerAsk) rasSendAll(fd, rasCommsText(localComms()));
  ::close(fd);
}

// NCCL's RAS_COLL_COMMS collective from this process: its own communicators, then every
// process they name, and every process those name, each asked once; the merge of what came
// back by the timeout.
RasStatus RasService::gather(Clock::duration timeout) {
  const auto now = Clock::now();
  const auto deadline = now + timeout;
  const int self = static_cast<int>(::getpid());
  std::map<uint64_t, RasComm> merged;
  rasMerge(merged, localComms());
  std::set<int> asked{self};
  std::set<int> answered{self};
  int timed_out = 0;
  for (;;) {
    std::vector<int> round;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [hash, c] : merged)
        for (const RasMember& m : c.members) {
          if (m.pid <= 0 || !asked.insert(m.pid).second) continue;
          // Silent for longer than RAS_KEEPALIVE_TIMEOUT_WARN: its link is "experiencing
          // delays" and the collective is not sent there (collectives.cc).
          if (liveness_.silentFor({m.host, m.pid}) < kRasKeepaliveWarn * factor_) round.push_back(m.pid);
        }
    }
    if (round.empty()) break;
    for (auto& [pid, comms] : rasAskPeers(round, deadline, timed_out)) {
      answered.insert(pid);
      rasMerge(merged, std::move(comms));
    }
  }
  RasStatus st{cuda_runtime_, cuda_driver_, rasTimestamp(), {}, 0, timed_out};
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [hash, c] : merged) {
    for (RasMember& m : c.members) {
      if (m.reported) continue;
      m.unresponsive = answered.count(m.pid) == 0;
      m.considered_dead = m.unresponsive && liveness_.consideredDead({m.host, m.pid});
    }
    st.comms.push_back(std::move(c));
  }
  st.collection_time_sec = std::chrono::duration<double>(Clock::now() - now).count();
  return st;
}

std::string RasService::status(Clock::duration timeout) { return rasStatusJson(gather(timeout)); }

// One command line (client_support.cc rasClientProcessInput).
std::string RasService::answer(RasClientSession& session, const std::string& cmd) {
  const char* c = cmd.c_str();
  if (strncasecmp(c, "client protocol ", 16) == 0) return fmt::format("SERVER PROTOCOL {}\n", kRasProtocol);
  if (strncasecmp(c, "timeout ", 8) == 0) {
    char* end = nullptr;
    const long t = std::strtol(c + 8, &end, 10);
    if (t < 0 || end == nullptr || *end != '\0') return fmt::format("ERROR: Invalid timeout value {}\n", c + 8);
    session.timeout = std::chrono::seconds(t);
    return "OK\n";
  }
  if (strncasecmp(c, "set format ", 11) == 0) {
    if (strcasecmp(c + 11, "text") != 0 && strcasecmp(c + 11, "json") != 0)
      return fmt::format("ERROR: Invalid format {}\n", c + 11);
    session.json = strcasecmp(c + 11, "json") == 0;
    return "OK\n";
  }
  if (strcasecmp(c, "status") == 0 || strcasecmp(c, "verbose status") == 0) {
    session.finished = true;
    if (!session.json) return "ERROR: simnccl's RAS renders STATUS in JSON only (SET FORMAT json)\n";
    return status(session.timeout);
  }
  return fmt::format("ERROR: Unknown command {}\n", cmd);
}

void RasService::serveClient(int fd) {
  pthread_setname_np(pthread_self(), "simnccl-rascli");
  RasClientSession session{false, std::chrono::seconds(kRasLegTimeoutSec) * factor_, false};
  std::string input;
  char chunk[512];
  while (!session.finished && input.size() < kRasMaxLine) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    input.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; !session.finished && (nl = input.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string cmd = input.substr(start, nl - start);
      if (!cmd.empty() && cmd.back() == '\r') cmd.pop_back();
      if (!rasSendAll(fd, answer(session, cmd))) session.finished = true;
    }
    input.erase(0, start);
  }
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

// The process's service; reset in a forked child, whose threads did not survive the fork.
std::mutex g_ras_mutex;
RasService* g_ras = nullptr;
RasService* g_ras_of_parent = nullptr;  // still reachable for leak checkers in a forked child
bool g_ras_tried = false;  // NCCL initializes RAS once per process: a failed bind is not retried

void rasAtforkPrepare() { g_ras_mutex.lock(); }
void rasAtforkParent() { g_ras_mutex.unlock(); }
void rasAtforkChild() {
  if (g_ras != nullptr) {  // the parent's; the object stays leaked
    ::close(g_ras->fd());
    ::close(g_ras->peerFd());
    g_ras_of_parent = g_ras;
  }
  g_ras = nullptr;
  g_ras_tried = false;
  g_ras_mutex.unlock();
}

RasService* rasServiceStarted() {
  static const bool atfork = ::pthread_atfork(rasAtforkPrepare, rasAtforkParent, rasAtforkChild) == 0;
  (void)atfork;
  std::lock_guard<std::mutex> lock(g_ras_mutex);
  if (g_ras_tried) return g_ras;
  g_ras_tried = true;
  const char* env = std::getenv("NCCL_RAS_ADDR");
  const std::string addr = env != nullptr && *env != '\0' ? env : kRasDefaultAddr;
  const int fd = rasListeningSocket(addr);
  if (fd < 0) {
    debugLog(kLogInfo, subsys::kInit | subsys::kRas, __func__, __LINE__,
             "RAS failed to establish a client listening socket at %s", addr.c_str());  // src/ras/client_support.cc:185
    return nullptr;
  }
  debugLog(kLogInfo, subsys::kInit | subsys::kRas, __func__, __LINE__, "RAS client listening socket at %s",
           addr.c_str());  // src/ras/client_support.cc:181
  const int peer_fd = rasPeerListeningSocket();
  if (peer_fd < 0) {
    ::close(fd);
    return nullptr;
  }
  g_ras = new RasService(fd, peer_fd);
  return g_ras;
}

}  // namespace

std::string rasStatusJson(const RasStatus& status) {
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "{{\n"
                 "  \"nccl_version\": \"{}.{}.{}{}\",\n"
                 "  \"cuda_runtime_version\": {},\n"
                 "  \"cuda_driver_version\": {},\n"
                 "  \"timestamp\": \"{}\",\n"
                 "  \"communicators_count\": {},\n"
                 "  \"communicators\": [\n",
                 NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, status.cuda_runtime_version,
                 status.cuda_driver_version, status.timestamp, status.comms.size());
  for (size_t i = 0; i < status.comms.size(); ++i) rasJsonCommunicator(out, status.comms[i], i == 0);
  fmt::format_to(std::back_inserter(out),
                 "\n  ],\n"
                 "  \"ras\": {{\n"
                 "    \"collection_time_sec\": {:.3f},\n"
                 "    \"timeouts_count\": {}\n"
                 "  }}\n"
                 "}}\n",
                 status.collection_time_sec, status.timeouts_count);
  return out;
}

int rasTimeoutFactor() { return static_cast<int>(std::max(1L, rasEnvLong("NCCL_RAS_TIMEOUT_FACTOR", 1))); }

void RasPeerLiveness::look(const Peer& peer, bool answers, Clock::time_point now) {
  if (answers) {
    unanswering_.erase(peer);
    return;
  }
  auto [it, fresh] = unanswering_.try_emplace(peer, Unanswering{now, now});
  if (!fresh) it->second.last = now;
}

RasPeerLiveness::Clock::duration RasPeerLiveness::silentFor(const Peer& peer) const {
  auto it = unanswering_.find(peer);
  return it == unanswering_.end() ? Clock::duration::zero() : it->second.last - it->second.first;
}

bool RasPeerLiveness::consideredDead(const Peer& peer) const {
  auto it = unanswering_.find(peer);
  return it != unanswering_.end() && it->second.last - it->second.first >= dead_after_;
}

void RasServer::registerComm(const Communicator* comm, SharedSegment* segment, uint64_t hash) {
  if (rasEnvLong("NCCL_RAS_ENABLE", 1) == 0) return;  // bootstrap.cc: the comm takes no part in RAS
  if (RasService* service = rasServiceStarted()) service->add(comm, segment, hash);
}

void RasServer::unregisterComm(const Communicator* comm) {
  RasService* service = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_ras_mutex);
    service = g_ras;
  }
  if (service != nullptr) service->remove(comm);
}

}  // namespace simnccl
