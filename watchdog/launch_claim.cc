#include "hangwatch/watchdog/launch_claim.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/watchdog/node_share.h"

namespace hangwatch::watchdog {

namespace claim_board {

constexpr uint32_t kMagic = 0x6877434c;  // "hwCL"
constexpr uint32_t kVersion = 1;
constexpr int kOpen = 0;      // nobody claims: the next rank does
constexpr int kClaiming = 1;  // claimer_* is at it
constexpr int kClaimed = 2;   // dir, record and gave_up hold the claim
constexpr auto kPoll = std::chrono::milliseconds(10);

}  // namespace claim_board

struct LaunchClaim::Layout {
  std::atomic<uint32_t> magic;  // stored last when a board is made
  uint32_t version;
  pthread_mutex_t lock;  // robust and process-shared: a rank may die holding it
  int32_t state;
  int32_t claimer_pid;
  uint64_t claimer_start;
  int32_t parent_pid;  // the launch's process on this node: the board is stale once it is gone
  uint64_t parent_start;
  char dir[1024];
  char record[3072];  // ATTEMPT.json's record, as JSON
  char gave_up[512];
};

namespace claim_board {

using Layout = LaunchClaim::Layout;

class BoardLock {
 public:
  explicit BoardLock(Layout* l) : l_(l) {
    if (pthread_mutex_lock(&l_->lock) == EOWNERDEAD) pthread_mutex_consistent(&l_->lock);
  }
  ~BoardLock() { pthread_mutex_unlock(&l_->lock); }
  BoardLock(const BoardLock&) = delete;
  BoardLock& operator=(const BoardLock&) = delete;

 private:
  Layout* l_;
};

void initLayout(Layout* l, pid_t parent) {
  new (l) Layout();
  l->version = kVersion;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&l->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  l->state = kOpen;
  l->claimer_pid = 0;
  l->claimer_start = 0;
  l->parent_pid = parent;
  l->parent_start = processStartTicks(parent);
  l->dir[0] = l->record[0] = l->gave_up[0] = '\0';
  l->magic.store(kMagic, std::memory_order_release);
}

bool running(pid_t pid, uint64_t started) { return pid > 0 && started != 0 && processStartTicks(pid) == started; }

Layout* mapLayout(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Layout)) return nullptr;
  void* p = ::mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* l = static_cast<Layout*>(p);
  if (l->magic.load(std::memory_order_acquire) != kMagic || l->version != kVersion) {
    ::munmap(p, sizeof(Layout));
    return nullptr;
  }
  return l;
}

std::string boardPrefix() { return fmt::format("hwclaim-{}-", ::getuid()); }

// Boards whose launch is over (its process on the node gone): a bounded number per new board.
void sweepEndedBoards(const std::string& shm_dir, const std::string& keep) {
  constexpr int kMaxLooked = 64;
  const std::string prefix = boardPrefix();
  DIR* dir = ::opendir(shm_dir.c_str());
  if (dir == nullptr) return;
  int looked = 0;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.find(".tmp.") != std::string::npos) continue;
    const std::string path = shm_dir + "/" + name;
    if (path == keep || ++looked > kMaxLooked) continue;
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) continue;
    if (Layout* l = mapLayout(fd.get())) {
      if (!running(l->parent_pid, l->parent_start)) ::unlink(path.c_str());
      ::munmap(l, sizeof(Layout));
    }
  }
  ::closedir(dir);
}

// The board in place, else a new one made whole under a private name and linked into place.
Layout* openClaimBoard(const std::string& path, pid_t parent) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (fd.valid()) return mapLayout(fd.get());
    if (errno != ENOENT) return nullptr;
    // Unique per process and thread (gettid is newer than the glibc 2.28 the library targets).
    static std::atomic<unsigned> boards_made{0};
    const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), boards_made.fetch_add(1));
    ScopedFd made(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!made.valid()) return nullptr;
    void* p = MAP_FAILED;
    if (::ftruncate(made.get(), sizeof(Layout)) == 0)
      p = ::mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, made.get(), 0);
    if (p == MAP_FAILED) {
      ::unlink(tmp.c_str());
      return nullptr;
    }
    initLayout(static_cast<Layout*>(p), parent);
    const int linked = ::link(tmp.c_str(), path.c_str());
    ::unlink(tmp.c_str());
    if (linked == 0) {
      std::filesystem::path where(path);
      sweepEndedBoards(where.parent_path().string(), path);
      return static_cast<Layout*>(p);
    }
    ::munmap(p, sizeof(Layout));
    // Another rank of the node linked its board first: use theirs.
  }
  return nullptr;
}

bool copyInto(char* out, size_t size, const std::string& text) {
  if (text.size() >= size) return false;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return true;
}

// Under the lock: the published claim, if it reads back whole.
std::optional<NodeClaim> published(const Layout* l) {
  if (l->state != kClaimed) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(l->record, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  Expected<AttemptRecord> record = attemptFromJson(j);
  if (!record) return std::nullopt;
  return NodeClaim{ClaimedAttempt{l->dir, std::move(*record)}, l->gave_up};
}

// Under the lock: the claim for the others, or the board open again when it does not fit.
void publish(Layout* l, const NodeClaim& c) {
  const bool fits = copyInto(l->dir, sizeof l->dir, c.attempt.dir) &&
                    copyInto(l->record, sizeof l->record, toJson(c.attempt.record).dump()) &&
                    copyInto(l->gave_up, sizeof l->gave_up, c.gave_up.substr(0, sizeof l->gave_up - 1));
  l->state = fits ? kClaimed : kOpen;
  l->claimer_pid = 0;
  l->claimer_start = 0;
}

struct Board {
  Layout* layout = nullptr;
  ~Board() {
    if (layout != nullptr) ::munmap(layout, sizeof(Layout));
  }
};

}  // namespace claim_board

using namespace claim_board;

std::string LaunchClaim::boardPath(const std::string& shm_dir, const std::string& job_dir,
                                   const std::string& launch_key, const std::string& host, pid_t parent) {
  if (launch_key.empty() || parent <= 1) return "";
  const uint64_t parent_start = processStartTicks(parent);
  if (parent_start == 0) return "";
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(job_dir, ec).lexically_normal().string();
  if (ec) absolute = job_dir;
  const std::string key = fmt::format("{}\n{}\n{}\n{}:{}", absolute, launch_key, host, parent, parent_start);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{}/{}{:016x}", shm_dir, boardPrefix(), h);
}

LaunchClaim::Outcome LaunchClaim::claimOnce(const std::string& path, const std::function<NodeClaim()>& claim_here,
                                            double wait_s) {
  Board board;
  if (!path.empty()) board.layout = openClaimBoard(path, ::getppid());
  Layout* l = board.layout;
  if (l == nullptr) return {claim_here(), false};
  const pid_t self = ::getpid();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                               std::chrono::duration<double>(wait_s));
  for (;;) {
    {
      BoardLock lock(l);
      if (std::optional<NodeClaim> c = published(l)) return {std::move(*c), true};
      if (l->state != kClaiming || !running(l->claimer_pid, l->claimer_start)) {
        // Nobody at it, or its claimer died: this rank claims for the node.
        l->state = kClaiming;
        l->claimer_pid = self;
        l->claimer_start = processStartTicks(self);
        break;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return {claim_here(), false};  // not published
    std::this_thread::sleep_for(kPoll);
  }
  NodeClaim c = claim_here();
  BoardLock lock(l);
  publish(l, c);
  return {std::move(c), false};
}

}  // namespace hangwatch::watchdog
