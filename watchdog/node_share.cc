#include "hangwatch/watchdog/node_share.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>

#include <fmt/format.h>

#include "hangwatch/common/rank_identity.h"

namespace hangwatch::watchdog {

namespace {

constexpr uint32_t kMagic = 0x68774e53;  // "hwNS"
constexpr uint32_t kVersion = 7;  // 7: member_left 2, left on a SIGTERM
constexpr int kMaxMembers = 256;
constexpr uint8_t kLeftAtExit = 1;
constexpr uint8_t kLeftOnTerm = 2;

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "the board is shared between processes: its atomics must not hide a lock");

}  // namespace

struct NodeShare::Layout {
  std::atomic<uint32_t> magic;  // stored last when a board is made
  uint32_t version;
  pthread_mutex_t members_lock;  // robust and process-shared: a member may die holding it
  int32_t members[kMaxMembers];  // pids, 0 = free slot
  uint64_t member_starts[kMaxMembers];  // their start times (clock ticks since boot): pids are reused
  int32_t member_ranks[kMaxMembers];    // their launcher ranks, -1 unknown
  uint64_t member_pidns[kMaxMembers];   // their pid namespaces (inode), 0 unknown
  uint8_t member_left[kMaxMembers];     // 1: left at exit (nothing pending), 2: on a SIGTERM; kept to be named
  int32_t member_devices[kMaxMembers];  // their CUDA devices, -1 unknown
  std::atomic<int64_t> next_lookup_ns[2];
  std::atomic<uint32_t> triggered;
  std::atomic<uint32_t> complete;
  std::atomic<int32_t> suspected_episode;
  std::atomic<uint64_t> lookups;
  std::atomic<int64_t> beacon_base;
};

namespace {

void initLayout(NodeShare::Layout* l, bool process_shared) {
  new (l) NodeShare::Layout();
  l->version = kVersion;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  if (process_shared) {
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  }
  pthread_mutex_init(&l->members_lock, &attr);
  pthread_mutexattr_destroy(&attr);
  for (int32_t& m : l->members) m = 0;
  for (uint64_t& s : l->member_starts) s = 0;
  for (int32_t& r : l->member_ranks) r = -1;
  for (uint64_t& n : l->member_pidns) n = 0;
  for (uint8_t& m : l->member_left) m = 0;
  for (int32_t& d : l->member_devices) d = -1;
  for (auto& n : l->next_lookup_ns) n.store(0, std::memory_order_relaxed);
  l->triggered.store(0, std::memory_order_relaxed);
  l->complete.store(0, std::memory_order_relaxed);
  l->suspected_episode.store(0, std::memory_order_relaxed);
  l->lookups.store(0, std::memory_order_relaxed);
  l->beacon_base.store(-1, std::memory_order_relaxed);
  l->magic.store(kMagic, std::memory_order_release);
}

class MembersLock {
 public:
  explicit MembersLock(NodeShare::Layout* l) : l_(l) {
    // A member killed inside the lock leaves it "owner dead": the list is still consistent
    // (one int store at a time), so take it over.
    if (pthread_mutex_lock(&l_->members_lock) == EOWNERDEAD) pthread_mutex_consistent(&l_->members_lock);
  }
  ~MembersLock() { pthread_mutex_unlock(&l_->members_lock); }

 private:
  NodeShare::Layout* l_;
};

// Field 22 of /proc/<pid>/stat; 0 when the process is gone or a zombie (or /proc cannot tell).
uint64_t startTicks(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  ScopedFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return 0;
  char buf[1024];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  // A zombie stays in /proc until reaped, and in a container nobody may ever reap it.
  if (p == nullptr || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X') return 0;
  for (int field = 2; p != nullptr && field < 22; ++field) p = std::strchr(p + 1, ' ');
  return p != nullptr ? std::strtoull(p + 1, nullptr, 10) : 0;
}

// Field 3 of /proc/<pid>/stat: 'R', 'S', 'D', 'T' (stopped), 't' (stopped by a tracer), ...;
// '?' when /proc cannot tell.
char processState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  ScopedFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return '?';
  char buf[512];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return '?';
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  return p != nullptr && p[1] == ' ' && p[2] != '\0' ? p[2] : '?';
}

// The inode of this process's pid namespace; 0 when /proc cannot tell.
uint64_t pidNamespace() {
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// A member is alive when its pid runs and started when the member did: a restarted job on a
// busy node (or in a container) easily gets an old member's pid.
bool alive(pid_t pid, uint64_t started) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  return started == 0 || startTicks(pid) == started;  // 0: /proc could not tell when it joined
}

// Under the lock: how many members are alive and have not left. The others stay listed, so the
// live can name them.
int liveMembers(const NodeShare::Layout* l) {
  int live = 0;
  for (int i = 0; i < kMaxMembers; ++i)
    if (l->members[i] != 0 && !l->member_left[i] && alive(l->members[i], l->member_starts[i])) ++live;
  return live;
}

// Under the lock: drops dead members; returns how many live ones are left.
int pruneDeadMembers(NodeShare::Layout* l) {
  int live = 0;
  for (int i = 0; i < kMaxMembers; ++i) {
    if (l->members[i] == 0) continue;
    if (!l->member_left[i] && alive(l->members[i], l->member_starts[i])) {
      ++live;
    } else {
      l->members[i] = 0;
      l->member_starts[i] = 0;
      l->member_ranks[i] = -1;
      l->member_pidns[i] = 0;
      l->member_left[i] = 0;
      l->member_devices[i] = -1;
    }
  }
  return live;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string errnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

Expected<NodeShare::Layout*> mapBoard(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Error{errnoText("fstat")};
  if (static_cast<size_t>(st.st_size) < sizeof(NodeShare::Layout)) return Error{"board is smaller than expected"};
  void* p = ::mmap(nullptr, sizeof(NodeShare::Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Error{errnoText("mmap")};
  auto* l = static_cast<NodeShare::Layout*>(p);
  if (l->magic.load(std::memory_order_acquire) != kMagic || l->version != kVersion) {
    ::munmap(p, sizeof(NodeShare::Layout));
    return Error{"board of another hangwatch version"};
  }
  return l;
}

// `path` still names the file `fd` has open: the board was neither removed nor replaced.
bool stillInPlace(int fd, const std::string& path) {
  struct stat mine, named;
  return ::fstat(fd, &mine) == 0 && ::stat(path.c_str(), &named) == 0 && mine.st_dev == named.st_dev &&
         mine.st_ino == named.st_ino;
}

// Killed jobs (SIGKILL, a node's OOM killer) never leave their boards: remove those of this
// user whose members are all gone, a bounded number per start so a start stays cheap.
void sweepDeadBoards(const std::string& shm_dir, const std::string& keep) {
  constexpr int kMaxLooked = 64;
  std::string prefix = fmt::format("hangwatch-{}-", ::getuid());
  DIR* dir = ::opendir(shm_dir.c_str());
  if (dir == nullptr) return;
  int looked = 0;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.find(".tmp.") != std::string::npos) continue;
    std::string path = shm_dir + "/" + name;
    if (path == keep || ++looked > kMaxLooked) continue;
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid()) continue;
    if (Expected<NodeShare::Layout*> board = mapBoard(fd.get())) {
      {
        MembersLock lock(*board);
        // Counted, not pruned: a live job's board keeps its dead members for its ranks to name.
        if (liveMembers(*board) == 0 && stillInPlace(fd.get(), path)) ::unlink(path.c_str());
      }
      ::munmap(*board, sizeof(NodeShare::Layout));
    }
  }
  ::closedir(dir);
}

// Calls f(slot, pid) for every member of this process's pid namespace with a known rank, under
// the members lock: only those pids can be judged (alive, stopped) from here.
template <typename F>
void forEachJudgeableMember(NodeShare::Layout* l, F&& f) {
  const uint64_t mine = pidNamespace();
  if (mine == 0) return;
  MembersLock lock(l);
  for (int i = 0; i < kMaxMembers; ++i) {
    const pid_t pid = l->members[i];
    if (pid != 0 && l->member_ranks[i] >= 0 && l->member_pidns[i] == mine) f(i, pid);
  }
}

}  // namespace

uint64_t processStartTicks(pid_t pid) { return startTicks(pid); }

std::string nodeSharePath(const std::string& job_dir, const std::string& shm_dir, const std::string& attempt) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(job_dir, ec).lexically_normal().string();
  if (ec) absolute = job_dir;
  if (!attempt.empty()) absolute += "\n" + attempt;
  // The host too: a node's /dev/shm is its own, except where hosts share one (containers on
  // one machine, or test nodes that are UTS namespaces), whose ranks must not see each other.
  absolute += "\n" + hostName();
  return fmt::format("{}/hangwatch-{}-{:016x}", shm_dir, ::getuid(), fnv1a(absolute));
}

namespace {

struct MappedBoard {
  ScopedFd fd;
  NodeShare::Layout* layout = nullptr;
};

// Made complete under a private name, then linked into place: no one ever maps half a board.
// nullopt: another rank of this node linked its board first.
Expected<std::optional<MappedBoard>> createBoard(const std::string& path, pid_t self) {
  std::string tmp = fmt::format("{}.tmp.{}", path, self);
  ScopedFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return Error{errnoText("cannot create " + tmp)};
  if (::ftruncate(fd.get(), sizeof(NodeShare::Layout)) != 0) {
    std::string e = errnoText("cannot size " + tmp);
    ::unlink(tmp.c_str());
    return Error{e};
  }
  void* p = ::mmap(nullptr, sizeof(NodeShare::Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    std::string e = errnoText("cannot map " + tmp);
    ::unlink(tmp.c_str());
    return Error{e};
  }
  initLayout(static_cast<NodeShare::Layout*>(p), true);
  int linked = ::link(tmp.c_str(), path.c_str());
  int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked == 0) return std::optional<MappedBoard>(MappedBoard{std::move(fd), static_cast<NodeShare::Layout*>(p)});
  ::munmap(p, sizeof(NodeShare::Layout));
  if (link_errno != EEXIST) {
    errno = link_errno;
    return Error{errnoText("cannot link " + path)};
  }
  return std::optional<MappedBoard>();
}

// This node's board: the one in place, else a new one.
Expected<MappedBoard> openBoard(const std::string& path, pid_t self) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    ScopedFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid() && errno == ENOENT) {
      Expected<std::optional<MappedBoard>> made = createBoard(path, self);
      if (!made) return Error{made.error()};
      if (*made) return std::move(**made);
      continue;  // another rank of this node made it first: use theirs
    }
    if (!fd.valid()) return Error{errnoText("cannot open " + path)};
    Expected<NodeShare::Layout*> mapped = mapBoard(fd.get());
    if (!mapped) return Error{path + ": " + mapped.error()};
    return MappedBoard{std::move(fd), *mapped};
  }
  return Error{"cannot attach to " + path};
}

// Under the lock: resets the flags of an earlier run, then adds `self` to the members.
void join(NodeShare::Layout* layout, pid_t self, int rank) {
  MembersLock lock(layout);
  if (liveMembers(layout) == 0) {
    pruneDeadMembers(layout);
    // Everyone who wrote these flags has exited: an earlier run of this job directory.
    layout->triggered.store(0, std::memory_order_relaxed);
    layout->complete.store(0, std::memory_order_relaxed);
    layout->suspected_episode.store(0, std::memory_order_relaxed);
    layout->beacon_base.store(-1, std::memory_order_relaxed);
    for (auto& n : layout->next_lookup_ns) n.store(0, std::memory_order_relaxed);
  }
  bool registered = false;
  for (int32_t& m : layout->members) {
    if (m == self) registered = true;
  }
  // Dead members stay listed until the board is full; then they make room.
  for (int pass = 0; pass < 2 && !registered; ++pass) {
    if (pass == 1) pruneDeadMembers(layout);
    for (int i = 0; i < kMaxMembers && !registered; ++i) {
      if (layout->members[i] == 0) {
        layout->members[i] = self;
        layout->member_starts[i] = startTicks(self);
        layout->member_ranks[i] = rank;
        layout->member_pidns[i] = pidNamespace();
        layout->member_left[i] = 0;
        layout->member_devices[i] = -1;
        registered = true;
      }
    }
  }
}

}  // namespace

Expected<std::unique_ptr<NodeShare>> NodeShare::attach(const std::string& job_dir, const std::string& shm_dir,
                                                       const std::string& attempt, int rank) {
  return attachAt(nodeSharePath(job_dir, shm_dir, attempt), shm_dir, rank);
}

Expected<std::unique_ptr<NodeShare>> NodeShare::attachAt(const std::string& path, const std::string& shm_dir, int rank,
                                                         const std::function<void()>& after_open) {
  const pid_t self = ::getpid();
  for (int tries = 0; tries < 4; ++tries) {
    Expected<MappedBoard> board = openBoard(path, self);
    if (!board) return Error{board.error()};
    if (after_open) after_open();
    join(board->layout, self, rank);
    // Until this join the board had no live member (just made, or an earlier run's), and any
    // process of the node starting (another job's rank included) sweeps such boards away: one
    // joined after that would be this rank's alone, and the node's next ranks would make
    // another. Joined, it is never swept; still in place now, it is the node's.
    if (stillInPlace(board->fd.get(), path)) {
      sweepDeadBoards(shm_dir, path);
      return std::unique_ptr<NodeShare>(new NodeShare(board->layout, std::move(board->fd), path));
    }
    ::munmap(board->layout, sizeof(Layout));
  }
  return Error{"cannot attach to " + path + ": it was removed each time it was joined"};
}

std::unique_ptr<NodeShare> NodeShare::unshared() {
  auto* layout = static_cast<Layout*>(::operator new(sizeof(Layout)));
  initLayout(layout, false);
  return std::unique_ptr<NodeShare>(new NodeShare(layout, ScopedFd(), ""));
}

NodeShare::~NodeShare() {
  if (fd_.valid()) {
    ::munmap(layout_, sizeof(Layout));  // the descriptor closes after the mapping is gone
  } else {
    pthread_mutex_destroy(&layout_->members_lock);
    layout_->~Layout();
    ::operator delete(layout_);
  }
}

bool NodeShare::claim(Lookup which, int64_t now_ns, int64_t interval_ns) {
  std::atomic<int64_t>& next = layout_->next_lookup_ns[static_cast<int>(which)];
  int64_t due = next.load(std::memory_order_acquire);
  if (now_ns < due) return false;
  return next.compare_exchange_strong(due, now_ns + interval_ns, std::memory_order_acq_rel);
}

bool NodeShare::triggered() const { return layout_->triggered.load(std::memory_order_acquire) != 0; }
void NodeShare::markTriggered() { layout_->triggered.store(1, std::memory_order_release); }
bool NodeShare::complete() const { return layout_->complete.load(std::memory_order_acquire) != 0; }
void NodeShare::markComplete() { layout_->complete.store(1, std::memory_order_release); }
int NodeShare::suspectedEpisode() const { return layout_->suspected_episode.load(std::memory_order_acquire); }

void NodeShare::noteSuspected(int episode) {
  int seen = layout_->suspected_episode.load(std::memory_order_acquire);
  while (episode > seen && !layout_->suspected_episode.compare_exchange_weak(seen, episode, std::memory_order_acq_rel)) {
  }
}

void NodeShare::countLookup() { layout_->lookups.fetch_add(1, std::memory_order_relaxed); }
uint64_t NodeShare::lookups() const { return layout_->lookups.load(std::memory_order_relaxed); }
int64_t NodeShare::beaconBase() const { return layout_->beacon_base.load(std::memory_order_acquire); }

int64_t NodeShare::setBeaconBase(int64_t bytes) {
  int64_t expected = -1;
  if (layout_->beacon_base.compare_exchange_strong(expected, bytes, std::memory_order_acq_rel)) return bytes;
  return expected;
}

std::vector<NodeShare::GoneMember> NodeShare::goneMembers() const {
  std::vector<GoneMember> gone;
  if (!fd_.valid()) return gone;
  forEachJudgeableMember(layout_, [&](int i, pid_t pid) {
    if (layout_->member_starts[i] != 0 && !alive(pid, layout_->member_starts[i]))
      gone.push_back({layout_->member_ranks[i], pid, layout_->member_left[i] == kLeftAtExit, layout_->member_devices[i],
                      layout_->member_left[i] == kLeftOnTerm});
  });
  return gone;
}

std::vector<NodeShare::StoppedMember> NodeShare::stoppedMembers() const {
  std::vector<StoppedMember> stopped;
  if (!fd_.valid()) return stopped;
  forEachJudgeableMember(layout_, [&](int i, pid_t pid) {
    if (!layout_->member_left[i] && alive(pid, layout_->member_starts[i]) && processState(pid) == 'T')
      stopped.push_back({layout_->member_ranks[i], pid, layout_->member_devices[i]});
  });
  return stopped;
}

void NodeShare::noteIdentity(int rank, int device) {
  if (!fd_.valid()) return;
  const pid_t self = ::getpid();
  MembersLock lock(layout_);
  for (int i = 0; i < kMaxMembers; ++i) {
    if (layout_->members[i] != self) continue;
    if (rank >= 0 && layout_->member_ranks[i] < 0) layout_->member_ranks[i] = rank;
    if (device >= 0) layout_->member_devices[i] = device;
  }
}

std::vector<int> NodeShare::memberRanks() const {
  std::vector<int> ranks;
  if (!fd_.valid()) return ranks;
  MembersLock lock(layout_);
  for (int i = 0; i < kMaxMembers; ++i)
    if (layout_->members[i] != 0 && layout_->member_ranks[i] >= 0) ranks.push_back(layout_->member_ranks[i]);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

void NodeShare::leave() { leaveAs(kLeftAtExit); }

void NodeShare::leaveOnTerm() { leaveAs(kLeftOnTerm); }

void NodeShare::leaveAs(uint8_t how) {
  if (left_ || !fd_.valid()) return;
  left_ = true;
  const pid_t self = ::getpid();
  MembersLock lock(layout_);
  // Marked, not removed: a rank that ends while the others still need it is named by them.
  for (int i = 0; i < kMaxMembers; ++i)
    if (layout_->members[i] == self) layout_->member_left[i] = how;
  if (liveMembers(layout_) > 0) return;
  // Last one out removes the file, unless it was already replaced by a newer board.
  if (stillInPlace(fd_.get(), path_)) ::unlink(path_.c_str());
}

}  // namespace hangwatch::watchdog
