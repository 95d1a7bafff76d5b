#include "hangwatch/simgpu/nccl/ras_server.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "hangwatch/simgpu/nccl/communicator.h"
#include "hangwatch/simgpu/nccl/profiler_hooks.h"
#include "hangwatch/simgpu/nccl/shared_segment.h"

namespace simnccl {
namespace {

using Clock = RasPeerLiveness::Clock;

constexpr const char* kRasDefaultAddr = "localhost:28028";  // NCCL_RAS_CLIENT_PORT
constexpr int kRasProtocol = 2;                              // NCCL_RAS_CLIENT_PROTOCOL
constexpr int kRasLegTimeoutSec = 5;                         // RAS_COLLECTIVE_LEG_TIMEOUT_SEC
constexpr int kRasPeerDeadSec = 60;                          // RAS_PEER_DEAD_TIMEOUT
constexpr size_t kRasMaxLine = 1024;  // NCCL's recvBuffer: a longer line ends the connection
constexpr auto kRasKeepalive = std::chrono::seconds(1);  // RAS_KEEPALIVE_INTERVAL
constexpr auto kRasRecheck = std::chrono::milliseconds(100);

long rasEnvLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' ? n : fallback;
}

// NCCL logs RAS setup at INFO (src/debug.cc: INFO and TRACE print it).
bool rasInfoPrinted() {
  const char* v = std::getenv("NCCL_DEBUG");
  return v != nullptr && (strcasecmp(v, "INFO") == 0 || strcasecmp(v, "TRACE") == 0);
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

int rasUnanswering(const std::vector<RasComm>& comms) {
  std::set<std::pair<std::string, int>> peers;
  for (const RasComm& c : comms)
    for (const RasMember& m : c.members)
      if (!m.answers) peers.emplace(m.host, m.pid);
  return static_cast<int>(peers.size());
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
                 m.rank, m.host, m.pid, m.cuda_dev, m.cuda_dev, !m.answers, m.considered_dead);
}

void rasJsonCommunicator(std::string& out, const RasComm& c, bool first) {
  const auto answering =
      std::count_if(c.members.begin(), c.members.end(), [](const RasMember& m) { return m.answers; });
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
    if (m.answers) rasJsonRank(out, m, std::exchange(first_rank, false));
  out += "\n      ],\n      \"missing_ranks\": [\n";
  bool first_missing = true;
  for (const RasMember& m : c.members)
    if (!m.answers) rasJsonMissingRank(out, m, std::exchange(first_missing, false));
  out += "\n      ]\n    }";
}

// One client connection: its settings (client_support.cc struct rasClient).
struct RasClientSession {
  bool json = false;  // NCCL starts a client in text format
  Clock::duration timeout;
  bool finished = false;  // STATUS answered: the connection ends
};

// The process's server: one listening thread, one thread per client. Leaked on purpose:
// nothing of it is destroyed at exit while a thread may still use it.
class RasService {
 public:
  explicit RasService(int fd);
  void add(const Communicator* comm, SharedSegment* segment, uint64_t hash);
  void remove(const Communicator* comm);
  int fd() const { return fd_; }

 private:
  struct Registered {
    SharedSegment* segment;
    uint64_t hash;
  };
  void listenLoop();
  void keepaliveLook(Clock::time_point now);
  std::vector<RasComm> collect();
  void markAnswers(std::vector<RasComm>& comms) const;
  void serveClient(int fd);
  std::string answer(RasClientSession& session, const std::string& cmd);
  std::string status(Clock::duration timeout);

  const int fd_;
  const int factor_ = rasTimeoutFactor();
  int cuda_runtime_ = 0;
  int cuda_driver_ = 0;
  std::mutex mutex_;
  std::map<const Communicator*, Registered> comms_;
  RasPeerLiveness liveness_{std::chrono::seconds(kRasPeerDeadSec) * factor_};
};

RasService::RasService(int fd) : fd_(fd) {
  cudaRuntimeGetVersion(&cuda_runtime_);
  cudaDriverGetVersion(&cuda_driver_);
  std::thread([this] { listenLoop(); }).detach();
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
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(wait.count(), 0))) <= 0) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client >= 0) std::thread([this, client] { serveClient(client); }).detach();
  }
}

// The RAS thread's keepalive, as far as liveness goes: a look at every member's process.
void RasService::keepaliveLook(Clock::time_point now) {
  std::vector<RasComm> comms = collect();
  markAnswers(comms);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const RasComm& c : comms)
    for (const RasMember& m : c.members) liveness_.look({m.host, m.pid}, m.answers, now);
}

// Copies what a report needs while no registered communicator can go; this process's own
// ranks publish their async error to the segment for the other members' servers.
std::vector<RasComm> RasService::collect() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<uint64_t, RasComm> by_hash;
  for (const auto& [comm, reg] : comms_) {
    RankRecord& own = reg.segment->rank(comm->rank());
    own.async_error.store(static_cast<int32_t>(comm->async_error.load()), std::memory_order_relaxed);
    RasComm& out = by_hash[reg.hash];
    if (out.members.empty()) {
      const RankRecord& first = reg.segment->rank(0);
      out = RasComm{reg.hash, communicatorId(first.host), static_cast<uint64_t>(first.pid), comm->nranks(), {}};
      for (int r = 0; r < comm->nranks(); ++r) {
        const RankRecord& rec = reg.segment->rank(r);
        out.members.push_back(
            RasMember{r, rec.host, rec.pid, rec.device, rec.async_error.load(std::memory_order_relaxed), false});
      }
    }
    RasMember& me = out.members[static_cast<size_t>(comm->rank())];
    me.async_error = static_cast<int>(comm->async_error.load());
    me.abort_flag = comm->aborted();
  }
  std::vector<RasComm> comms;
  for (auto& [hash, c] : by_hash) comms.push_back(std::move(c));
  return comms;
}

void RasService::markAnswers(std::vector<RasComm>& comms) const {
  for (RasComm& c : comms)
    for (RasMember& m : c.members) m.answers = m.pid == ::getpid() || rasProcessAnswers(m.pid);
}

// NCCL's collective waits out its leg timeout for processes that do not respond; one that
// answers meanwhile is reported with the others.
std::string RasService::status(Clock::duration timeout) {
  const auto start = Clock::now();
  RasStatus st{cuda_runtime_, cuda_driver_, "", collect(), 0, 0};
  markAnswers(st.comms);
  while (rasUnanswering(st.comms) > 0 && Clock::now() < start + timeout) {
    std::this_thread::sleep_for(std::min<Clock::duration>(kRasRecheck, start + timeout - Clock::now()));
    st.comms = collect();
    markAnswers(st.comms);
  }
  st.timeouts_count = rasUnanswering(st.comms);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (RasComm& c : st.comms)
      for (RasMember& m : c.members) m.considered_dead = !m.answers && liveness_.consideredDead({m.host, m.pid});
  }
  st.timestamp = rasTimestamp();
  st.collection_time_sec = std::chrono::duration<double>(Clock::now() - start).count();
  return rasStatusJson(st);
}

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
  if (g_ras != nullptr) ::close(g_ras->fd());  // the parent's; the object stays leaked
  if (g_ras != nullptr) g_ras_of_parent = g_ras;
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
    if (rasInfoPrinted())
      std::fprintf(stderr, "simnccl: NCCL INFO RAS failed to establish a client listening socket at %s\n",
                   addr.c_str());
    return nullptr;
  }
  if (rasInfoPrinted()) std::fprintf(stderr, "simnccl: NCCL INFO RAS client listening socket at %s\n", addr.c_str());
  g_ras = new RasService(fd);
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
