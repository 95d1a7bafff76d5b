#include "hangwatch/common/dump_fs_remote.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace hangwatch {
namespace dump_fs_wire {

enum Op : uint8_t { kWrite = 1, kCreate = 2, kRead = 3, kStat = 4, kMakeDirs = 5, kAppend = 6 };
constexpr char kProgress = 'p';
constexpr char kResult = 'r';
// A frame larger than this is no request of ours (a snapshot is a few MB).
constexpr uint32_t kMaxFrame = 1u << 30;

class FrameOut {
 public:
  FrameOut& u8(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  FrameOut& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  FrameOut& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  FrameOut& f64(double v) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return u64(bits);
  }
  FrameOut& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
    return *this;
  }
  // The frame with its length in front.
  std::string framed() const {
    std::string out;
    out.reserve(4 + bytes_.size());
    const auto n = static_cast<uint32_t>(bytes_.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
    return out + bytes_;
  }

 private:
  std::string bytes_;
};

class FrameIn {
 public:
  explicit FrameIn(std::string_view bytes) : rest_(bytes) {}
  bool ok() const { return ok_; }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() { return static_cast<uint32_t>(little(4)); }
  uint64_t u64() { return little(8); }
  double f64() {
    const uint64_t bits = u64();
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    return std::string(take(n));
  }

 private:
  std::string_view take(size_t n) {
    static const char zeros[8] = {};
    if (!ok_ || rest_.size() < n) {
      ok_ = false;
      return std::string_view(zeros, n <= sizeof zeros ? n : 0);
    }
    std::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }
  uint64_t little(int n) {
    std::string_view b = take(static_cast<size_t>(n));
    uint64_t v = 0;
    for (size_t i = 0; i < b.size(); ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    return v;
  }
  std::string_view rest_;
  bool ok_ = true;
};

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    // MSG_NOSIGNAL: a helper that died is an error here, never a SIGPIPE to the training job.
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool readAll(int fd, char* out, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, out, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> readFrame(int fd) {
  unsigned char head[4];
  if (!readAll(fd, reinterpret_cast<char*>(head), sizeof head)) return std::nullopt;
  const uint32_t n = head[0] | (head[1] << 8) | (head[2] << 16) | (static_cast<uint32_t>(head[3]) << 24);
  if (n > kMaxFrame) return std::nullopt;
  std::string frame(n, '\0');
  if (!readAll(fd, frame.data(), n)) return std::nullopt;
  return frame;
}

// A result: whether it succeeded, its yes/no, its text (the error, the file's bytes, the path
// written) and, for stat, the file's attributes.
FrameOut result(bool ok, bool value, std::string_view text, const std::optional<FileStat>& st = std::nullopt) {
  FrameOut f;
  f.u8(kResult).u8(ok).u8(value).str(text).u8(st.has_value());
  f.f64(st ? st->mtime_unix_s : 0).u64(st ? st->size : 0).u8(st && st->is_dir);
  return f;
}

template <typename T>
FrameOut resultOf(const Expected<T>& e, bool value, std::string_view text) {
  return e ? result(true, value, text) : result(false, false, e.error());
}

std::string brokenError(const std::string& why) { return "the dump-folder I/O helper is gone (" + why + ")"; }

}  // namespace dump_fs_wire

struct RemoteDumpFs::Answer {
  bool ok = false;
  bool value = false;
  std::string text;
  std::optional<FileStat> stat;
};

std::optional<RemoteDumpFs::Answer> RemoteDumpFs::ask(const std::string& request,
                                                      const std::function<void()>& progress) {
  if (broken_) return std::nullopt;
  auto broke = [this](std::string why) -> std::optional<Answer> {
    broken_ = true;
    broken_why_ = std::move(why);
    return std::nullopt;
  };
  if (!dump_fs_wire::sendAll(socket_.get(), request))
    return broke(fmt::format("cannot send to it: {}", std::strerror(errno)));
  for (;;) {
    std::optional<std::string> frame = dump_fs_wire::readFrame(socket_.get());
    if (!frame) return broke("it closed the connection");
    dump_fs_wire::FrameIn in(*frame);
    const char kind = static_cast<char>(in.u8());
    if (kind == dump_fs_wire::kProgress) {
      if (progress) progress();
      continue;
    }
    Answer a;
    a.ok = in.u8() != 0;
    a.value = in.u8() != 0;
    a.text = in.str();
    const bool has_stat = in.u8() != 0;
    FileStat st{in.f64(), in.u64(), in.u8() != 0};
    if (has_stat) a.stat = st;
    if (kind != dump_fs_wire::kResult || !in.ok()) return broke("it answered what is not a result");
    return a;
  }
}

Expected<Written> RemoteDumpFs::writeAtomically(const std::string& path, std::string_view contents, mode_t mode,
                                                const std::function<void()>& progress) {
  std::optional<Answer> a =
      ask(dump_fs_wire::FrameOut().u8(dump_fs_wire::kWrite).str(path).str(contents).u32(mode).framed(), progress);
  if (!a) return Error{dump_fs_wire::brokenError(broken_why_)};
  if (!a->ok) return Error{a->text};
  return Written{a->text};
}

Expected<bool> RemoteDumpFs::createExclusively(const std::string& path, std::string_view contents, mode_t mode) {
  std::optional<Answer> a =
      ask(dump_fs_wire::FrameOut().u8(dump_fs_wire::kCreate).str(path).str(contents).u32(mode).framed());
  if (!a) return Error{dump_fs_wire::brokenError(broken_why_)};
  if (!a->ok) return Error{a->text};
  return a->value;
}

Expected<std::string> RemoteDumpFs::read(const std::string& path, size_t limit, bool create, mode_t mode) {
  std::optional<Answer> a =
      ask(dump_fs_wire::FrameOut().u8(dump_fs_wire::kRead).str(path).u64(limit).u8(create).u32(mode).framed());
  if (!a) return Error{dump_fs_wire::brokenError(broken_why_)};
  if (!a->ok) return Error{a->text};
  return std::move(a->text);
}

std::optional<FileStat> RemoteDumpFs::stat(const std::string& path) {
  std::optional<Answer> a = ask(dump_fs_wire::FrameOut().u8(dump_fs_wire::kStat).str(path).framed());
  if (!a || !a->ok) return std::nullopt;
  return a->stat;
}

Expected<bool> RemoteDumpFs::makeDirs(const std::string& dir, mode_t mode) {
  std::optional<Answer> a = ask(dump_fs_wire::FrameOut().u8(dump_fs_wire::kMakeDirs).str(dir).u32(mode).framed());
  if (!a) return Error{dump_fs_wire::brokenError(broken_why_)};
  if (!a->ok) return Error{a->text};
  return a->value;
}

Expected<bool> RemoteDumpFs::append(const std::string& path, std::string_view text, mode_t mode, bool keep_open,
                                    bool sync) {
  std::optional<Answer> a = ask(
      dump_fs_wire::FrameOut().u8(dump_fs_wire::kAppend).str(path).str(text).u32(mode).u8(keep_open).u8(sync).framed());
  if (!a) return Error{dump_fs_wire::brokenError(broken_why_)};
  if (!a->ok) return Error{a->text};
  return a->value;
}

namespace {

// The helper is one thread: the handler and the serving loop share these.
volatile sig_atomic_t in_operation = 0;
volatile sig_atomic_t parent_gone = 0;
unsigned parent_gone_bound_s = 3;

void onParentGone(int) {
  parent_gone = 1;
  if (in_operation == 0) ::_exit(0);
  ::alarm(parent_gone_bound_s);  // SIGALRM's default action ends the helper then
}

void finishTheOperationWhenTheParentGoes(int sig, unsigned bound_s) {
  parent_gone_bound_s = bound_s;
  struct sigaction sa {};
  sa.sa_handler = &onParentGone;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a call the operation is in goes on (a FIFO's open, a slow write)
  ::sigaction(sig, &sa, nullptr);
  ::signal(SIGALRM, SIG_DFL);  // an ignored disposition survives exec
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, sig);
  sigaddset(&wanted, SIGALRM);
  ::sigprocmask(SIG_UNBLOCK, &wanted, nullptr);  // the starting thread's mask survives exec too
}

}  // namespace

int serveDumpFs(int socket, int parent_gone_signal, unsigned bound_s) {
  if (parent_gone_signal != 0) finishTheOperationWhenTheParentGoes(parent_gone_signal, bound_s);
  DumpFs& fs = localDumpFs();
  const std::string progress_frame = dump_fs_wire::FrameOut().u8(dump_fs_wire::kProgress).framed();
  bool answering = true;
  auto progress = [&] { answering = answering && dump_fs_wire::sendAll(socket, progress_frame); };
  while (answering) {
    in_operation = 0;
    if (parent_gone != 0) return 0;
    std::optional<std::string> frame = dump_fs_wire::readFrame(socket);
    if (!frame) return 0;
    in_operation = 1;
    dump_fs_wire::FrameIn in(*frame);
    const uint8_t op = in.u8();
    dump_fs_wire::FrameOut out;
    switch (op) {
      case dump_fs_wire::kWrite: {
        std::string path = in.str(), contents = in.str();
        const auto mode = static_cast<mode_t>(in.u32());
        if (!in.ok()) return 1;
        Expected<Written> w = fs.writeAtomically(path, contents, mode, progress);
        out = dump_fs_wire::resultOf(w, true, w ? w->path : "");
        break;
      }
      case dump_fs_wire::kCreate: {
        std::string path = in.str(), contents = in.str();
        const auto mode = static_cast<mode_t>(in.u32());
        if (!in.ok()) return 1;
        Expected<bool> c = fs.createExclusively(path, contents, mode);
        out = dump_fs_wire::resultOf(c, c && *c, "");
        break;
      }
      case dump_fs_wire::kRead: {
        std::string path = in.str();
        const uint64_t limit = in.u64();
        const bool create = in.u8() != 0;
        const auto mode = static_cast<mode_t>(in.u32());
        if (!in.ok()) return 1;
        Expected<std::string> r = fs.read(path, std::min<uint64_t>(limit, dump_fs_wire::kMaxFrame - 64), create, mode);
        out = r ? dump_fs_wire::result(true, true, *r) : dump_fs_wire::result(false, false, r.error());
        break;
      }
      case dump_fs_wire::kStat: {
        std::string path = in.str();
        if (!in.ok()) return 1;
        std::optional<FileStat> st = fs.stat(path);
        out = dump_fs_wire::result(st.has_value(), st.has_value(), "", st);
        break;
      }
      case dump_fs_wire::kMakeDirs: {
        std::string dir = in.str();
        const auto mode = static_cast<mode_t>(in.u32());
        if (!in.ok()) return 1;
        Expected<bool> m = fs.makeDirs(dir, mode);
        out = dump_fs_wire::resultOf(m, m && *m, "");
        break;
      }
      case dump_fs_wire::kAppend: {
        std::string path = in.str(), text = in.str();
        const auto mode = static_cast<mode_t>(in.u32());
        const bool keep_open = in.u8() != 0, sync = in.u8() != 0;
        if (!in.ok()) return 1;
        Expected<bool> a = fs.append(path, text, mode, keep_open, sync);
        out = dump_fs_wire::resultOf(a, true, "");
        break;
      }
      default:
        return 1;
    }
    answering = answering && dump_fs_wire::sendAll(socket, out.framed());
  }
  return 0;
}

}  // namespace hangwatch
