#include "hangwatch/watchdog/dump_storage.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "hangwatch/common/atomic_file.h"
#include "hangwatch/common/dump_fs.h"
#include "hangwatch/common/dump_mode.h"
#include "hangwatch/watchdog/io_helper.h"
#include "hangwatch/watchdog/watchdog_log.h"

namespace hangwatch::watchdog {
namespace {

using Clock = std::chrono::steady_clock;

// The storage thread's file system: `inner`'s, telling `moved` after each operation that
// returned and, inside a whole-file write, after each of its system calls. A call made of
// several operations (TRIGGER.json and then its beacon line) is stalled when one of them makes
// no progress for the deadline, never because together they take longer: a slow mount that
// moves is not a stalled one.
class ProgressDumpFs final : public DumpFs {
 public:
  ProgressDumpFs(DumpFs& inner, std::function<void()> moved) : inner_(inner), moved_(std::move(moved)) {}

  Expected<Written> writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                    const std::function<void()>& progress) override {
    return told(inner_.writeAtomically(path, contents, mode, [&] {
      if (progress) progress();
      moved_();
    }));
  }
  Expected<bool> createExclusively(const std::string& path, std::string_view contents, mode_t mode) override {
    return told(inner_.createExclusively(path, contents, mode));
  }
  Expected<std::string> read(const std::string& path, size_t limit, bool create, mode_t mode) override {
    return told(inner_.read(path, limit, create, mode));
  }
  std::optional<FileStat> stat(const std::string& path) override { return told(inner_.stat(path)); }
  Expected<bool> makeDirs(const std::string& dir, mode_t mode) override { return told(inner_.makeDirs(dir, mode)); }
  Expected<bool> append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                        bool sync) override {
    return told(inner_.append(path, text, mode, keep_open, sync));
  }

 private:
  template <typename R>
  R told(R answer) {
    moved_();
    return answer;
  }

  DumpFs& inner_;
  std::function<void()> moved_;
};

}  // namespace

std::string fallbackRootFromEnv(const EnvLookup& env_in) {
  EnvLookup env = env_in ? env_in : EnvLookup([](const char* n) { return std::getenv(n); });
  if (const char* v = env("HANGWATCH_FALLBACK_DIR"); v && *v) return v;
  if (const char* v = env("TMPDIR"); v && *v) return std::string(v) + "/hangwatch-fallback";
  return "/var/tmp/hangwatch-fallback";
}

// Queued work beyond this is dropped (and counted): a storage thread that cannot keep up
// must not grow without bound inside someone else's training job.
constexpr size_t kMaxQueued = 256;

struct DumpStorage::Task {
  std::string what;
  std::string replaces;  // a whole-file write: a newer one for the same path takes its place while queued
  std::shared_ptr<std::string> text;
  std::function<void()> run;      // against the primary folder, on the storage thread
  std::function<void()> instead;  // queued work only: against the fallback, when the folder was given up first
  bool append = false;
  bool done = false;  // under Shared::mutex
};

struct DumpStorage::Shared {
  explicit Shared(DumpStorageConfig c) : config(std::move(c)) {}
  const DumpStorageConfig config;
  std::mutex mutex;
  std::condition_variable wake;      // the storage thread waits for work
  std::condition_variable finished;  // callers wait for theirs
  std::deque<std::shared_ptr<Task>> queue;
  std::shared_ptr<Task> running;
  Clock::time_point running_since;
  bool stop = false;
  bool closed = false;   // the process is ending (close()): nothing more is written
  int local_writes = 0;  // fallback writes in progress on other threads
  std::atomic<bool> given_up{false};
  std::string why;
  uint64_t lines_lost = 0;
  std::function<void(const std::string&, const std::string&)> on_fallback;
  std::atomic<pid_t> io_helper_pid{0};

  std::chrono::nanoseconds deadline() const {
    return std::chrono::nanoseconds(static_cast<int64_t>(std::max(0.001, config.deadline_s) * 1e9));
  }

  // A path inside the primary folder (not the folder itself).
  bool underPrimary(const std::string& path) const {
    const std::string& root = config.primary;
    return path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/';
  }

  std::string place(const std::string& path) const {
    if (!given_up.load(std::memory_order_acquire)) return path;
    if (path == config.primary) return config.fallback;
    return underPrimary(path) ? config.fallback + path.substr(config.primary.size()) : path;
  }

  // Gives the folder up: what was queued goes to the fallback, on this thread.
  void fallBack(const std::string& reason) {
    std::deque<std::shared_ptr<Task>> moved;
    std::function<void(const std::string&, const std::string&)> tell;
    {
      std::lock_guard lock(mutex);
      if (given_up.load(std::memory_order_relaxed)) return;
      why = reason;
      given_up.store(true, std::memory_order_release);
      if (running && running->append) ++lines_lost;
      for (auto& t : queue)
        if (t->instead) moved.push_back(t);
      queue.clear();
      tell = on_fallback;
      finished.notify_all();
    }
    for (auto& t : moved) t->instead();
    if (tell) tell(reason, config.fallback);
  }

  // The storage thread moved on (one system call done): the deadline counts from here. A
  // slow mount that keeps moving is not a stalled one.
  void touch() {
    std::lock_guard lock(mutex);
    running_since = Clock::now();
  }

  void checkStalled() {
    std::string what;
    {
      std::lock_guard lock(mutex);
      if (!running || given_up.load(std::memory_order_relaxed) || Clock::now() - running_since <= deadline()) return;
      what = running->what;
    }
    fallBack(fmt::format("stalled: {} took more than {:g} s", what, config.deadline_s));
  }

  // A write of this process's own, on whichever thread, that close() waits for; false once
  // closed (the write is not started).
  bool beginLocal() {
    std::lock_guard lock(mutex);
    if (closed) return false;
    ++local_writes;
    return true;
  }

  void endLocal() {
    std::lock_guard lock(mutex);
    --local_writes;
    finished.notify_all();
  }

  static std::string closedError(const std::string& path) {
    return "not written, the rank is exiting: " + path;
  }

  Expected<Written> writeLocal(const std::string& path, const std::string& contents, mode_t mode) {
    if (!beginLocal()) return Error{closedError(path)};
    Expected<Written> w = localDumpFs().writeAtomically(path, contents, mode, {});
    endLocal();
    return w;
  }

  // The fallback is node-local: written by this process itself, on whichever thread.
  Expected<Written> writeFallback(const std::string& path, const std::string& contents, mode_t mode) {
    return writeLocal(place(path), contents, mode);
  }

  void appendFallback(const std::string& path, const std::string& line) {
    const bool began = beginLocal();
    const bool ok = began && localDumpFs().append(place(path), line, dumpFileMode(), /*keep_open=*/false, /*sync=*/false);
    if (began) endLocal();
    if (!ok) {
      std::lock_guard lock(mutex);
      ++lines_lost;
    }
  }

  static void serve(const std::shared_ptr<Shared>& self) {
    // Declared in this order: the thread's file system is put back before the helper goes.
    std::unique_ptr<IoHelper> helper;
    std::optional<ProgressDumpFs> counted;
    std::optional<ThreadDumpFs> this_threads_fs;
    if (!self->config.io_helper.empty()) {
      auto tell = [](const std::string& message) { WatchdogLog::instance().failureOnce("io-helper", message); };
      if (auto started = IoHelper::start(self->config.io_helper, tell)) {
        helper = std::move(*started);
        self->io_helper_pid.store(helper->pid(), std::memory_order_release);
      } else {
        tell("the storage thread does the dump folder's file operations itself (a mount that stalls forever "
             "would then keep this rank from exiting): " + started.error());
      }
    }
    counted.emplace(helper ? static_cast<DumpFs&>(*helper) : localDumpFs(), [raw = self.get()] { raw->touch(); });
    this_threads_fs.emplace(&*counted);
    for (;;) {
      std::shared_ptr<Task> task;
      {
        std::unique_lock lock(self->mutex);
        self->wake.wait(lock, [&] { return self->stop || !self->queue.empty(); });
        if (self->queue.empty()) return;
        task = self->queue.front();
        self->queue.pop_front();
        self->running = task;
        self->running_since = Clock::now();
      }
      task->run();
      std::lock_guard lock(self->mutex);
      self->running.reset();
      task->done = true;
      self->finished.notify_all();
    }
  }
};

DumpStorage::DumpStorage(DumpStorageConfig config) : shared_(std::make_shared<Shared>(std::move(config))) {
  // Detached: a thread blocked in the kernel on a stalled mount cannot be joined, and owns
  // what it uses (the shared state) should this object go first.
  std::thread worker(&Shared::serve, shared_);
  pthread_setname_np(worker.native_handle(), "hangwatch-io");
  worker.detach();
}

DumpStorage::~DumpStorage() {
  std::lock_guard lock(shared_->mutex);
  shared_->stop = true;
  shared_->wake.notify_all();
}

void DumpStorage::onFallback(std::function<void(const std::string&, const std::string&)> fn) {
  std::lock_guard lock(shared_->mutex);
  shared_->on_fallback = std::move(fn);
}

bool DumpStorage::enqueue(std::shared_ptr<Task> task) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->closed) {
      if (task->append) ++shared_->lines_lost;
      return false;
    }
    if (!shared_->given_up.load(std::memory_order_relaxed) && !task->instead) {
      // Waited for (a snapshot, a state file): ahead of the queued metrics, behind other waited ones.
      auto first_queued = std::find_if(shared_->queue.begin(), shared_->queue.end(),
                                       [](const std::shared_ptr<Task>& t) { return bool(t->instead); });
      shared_->queue.insert(first_queued, std::move(task));
      shared_->wake.notify_one();
      return true;
    }
    if (!shared_->given_up.load(std::memory_order_relaxed)) {
      if (!task->replaces.empty())
        for (auto& queued : shared_->queue)
          if (queued->replaces == task->replaces) {
            *queued->text = std::move(*task->text);
            return true;
          }
      if (task->instead && shared_->queue.size() >= kMaxQueued) {
        if (task->append) ++shared_->lines_lost;
        return false;
      }
      shared_->queue.push_back(std::move(task));
      shared_->wake.notify_one();
      return true;
    }
  }
  if (task->instead) task->instead();
  return true;
}

void DumpStorage::checkStalled() { shared_->checkStalled(); }

void DumpStorage::fallBack(const std::string& why) { shared_->fallBack(why); }

std::string DumpStorage::runBounded(const std::string& what, std::function<void()> op) {
  checkStalled();
  if (shared_->given_up.load(std::memory_order_acquire)) return "the dump folder was given up (" + why() + ")";
  auto task = std::make_shared<Task>();
  task->what = what;
  task->run = std::move(op);
  if (!enqueue(task)) return "the rank is exiting: " + what + " not done";
  // Waits while the storage thread makes progress (on this task or those before it); once
  // the operation it is in has made none for the deadline, the folder is given up.
  std::unique_lock lock(shared_->mutex);
  while (!task->done) {
    if (shared_->given_up.load(std::memory_order_relaxed) && shared_->running != task)
      return "the dump folder was given up (" + shared_->why + ")";
    if (shared_->closed && shared_->running != task) return "the rank is exiting: " + what + " not done";
    shared_->finished.wait_for(lock, std::min<std::chrono::nanoseconds>(shared_->deadline(), std::chrono::milliseconds(50)));
    if (task->done || !shared_->running || Clock::now() - shared_->running_since <= shared_->deadline()) continue;
    const std::string stuck = shared_->running->what;
    lock.unlock();
    const std::string why = fmt::format("stalled: {} took more than {:g} s", stuck, shared_->config.deadline_s);
    fallBack(why);
    return "the dump folder " + why;
  }
  return "";
}

Expected<Written> DumpStorage::write(const std::string& path, std::string contents) {
  return write(path, std::move(contents), dumpFileMode());
}

Expected<Written> DumpStorage::write(const std::string& path, std::string contents, mode_t mode) {
  auto text = std::make_shared<const std::string>(std::move(contents));
  // Elsewhere (the fallback itself, when the folder was given up at start): node-local, here.
  if (!shared_->underPrimary(path)) return shared_->writeLocal(path, *text, mode);
  if (!fellBack()) {
    // On the storage thread, whose file system resets the deadline at each step (ProgressDumpFs).
    Expected<Written> w =
        call<Written>("writing " + path, [path, text, mode] { return writeFileAtomically(path, *text, mode); });
    if (w) return w;
    if (closing()) return Error{Shared::closedError(path)};
    fallBack(w.error());
  }
  return shared_->writeFallback(path, *text, mode);
}

void DumpStorage::writeLater(const std::string& path, std::string contents) {
  checkStalled();
  auto sp = shared_;
  auto text = std::make_shared<std::string>(std::move(contents));
  auto task = std::make_shared<Task>();
  task->what = "writing " + path;
  task->replaces = path;
  task->text = text;
  task->run = [sp, path, text] {
    if (Expected<Written> w = writeFileAtomically(path, *text); !w) {
      sp->fallBack(w.error());
      (void)sp->writeFallback(path, *text, dumpFileMode());
    }
  };
  task->instead = [sp, path, text] { (void)sp->writeFallback(path, *text, dumpFileMode()); };
  enqueue(std::move(task));
}

void DumpStorage::appendLater(const std::string& path, std::string line) {
  checkStalled();
  auto sp = shared_;
  auto text = std::make_shared<const std::string>(std::move(line));
  auto task = std::make_shared<Task>();
  task->what = "appending to " + path;
  task->append = true;
  task->run = [sp, path, text] {
    Expected<bool> appended = dumpFs().append(path, *text, dumpFileMode(), /*keep_open=*/true, /*sync=*/false);
    if (appended) return;
    sp->fallBack(appended.error());
    sp->appendFallback(path, *text);
  };
  task->instead = [sp, path, text] { sp->appendFallback(path, *text); };
  enqueue(std::move(task));
}

std::string DumpStorage::place(const std::string& path) const {
  shared_->checkStalled();
  return shared_->place(path);
}

void DumpStorage::giveUp(const std::string& why) { fallBack(why); }

bool DumpStorage::fellBack() const {
  shared_->checkStalled();
  return shared_->given_up.load(std::memory_order_acquire);
}

std::string DumpStorage::fallbackRoot() const { return shared_->config.fallback; }

std::string DumpStorage::why() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->why;
}

uint64_t DumpStorage::linesLost() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->lines_lost;
}

pid_t DumpStorage::ioHelperPid() const { return shared_->io_helper_pid.load(std::memory_order_acquire); }

bool DumpStorage::closing() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->closed;
}

bool DumpStorage::close(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::unique_lock lock(shared_->mutex);
  shared_->closed = true;
  for (const auto& t : shared_->queue)
    if (t->append) ++shared_->lines_lost;
  shared_->queue.clear();
  shared_->finished.notify_all();  // callers waiting for what was queued answer now
  return shared_->finished.wait_until(lock, until, [&] { return !shared_->running && shared_->local_writes == 0; });
}

bool DumpStorage::drain(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::unique_lock lock(shared_->mutex);
  return shared_->finished.wait_until(lock, until, [&] { return shared_->queue.empty() && !shared_->running; });
}

}  // namespace hangwatch::watchdog
