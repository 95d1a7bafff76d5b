#include "hangwatch/simgpu/nccl/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "hangwatch/common/scoped_fd.h"
#include "hangwatch/simgpu/nccl/algorithm.h"

namespace simnccl {
namespace {

constexpr uint64_t kMagic = 0x53494d4e43434c31ULL;  // "SIMNCCL1"

size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t headerBytes(int nranks) { return alignUp(sizeof(SegmentHeader), 64) + alignUp(sizeof(RankRecord) * nranks, 64); }

template <typename T>
bool agree(std::atomic<T>& field, T mine) {
  T expected = 0;
  return field.compare_exchange_strong(expected, mine) || expected == mine;
}

}  // namespace

size_t SegmentShape::connectionBytes() const {
  return alignUp(sizeof(Connection), 64) + static_cast<size_t>(kSteps) * slot_bytes;
}

size_t SegmentShape::totalBytes() const {
  // Untouched connections cost nothing: the segment's pages are made on first use.
  size_t conns = static_cast<size_t>(nchannels) * nranks * (3 + 2 * patDimensions(nranks)) +
                 static_cast<size_t>(nranks) * nranks;
  return headerBytes(nranks) + conns * connectionBytes();
}

hangwatch::Expected<SharedSegment*> SharedSegment::open(const std::string& name, const SegmentShape& shape) {
  hangwatch::ScopedFd fd(::shm_open(name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return hangwatch::Error{"shm_open " + name + ": " + std::strerror(errno)};
  size_t bytes = shape.totalBytes();
  struct stat st {};
  // Only grow: shrinking under a peer that already mapped it would SIGBUS the peer.
  if (::fstat(fd.get(), &st) != 0 ||
      (static_cast<size_t>(st.st_size) < bytes && ::ftruncate(fd.get(), bytes) != 0))
    return hangwatch::Error{"sizing shared memory " + name + ": " + std::strerror(errno)};
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return hangwatch::Error{"mmap " + name + ": " + std::strerror(errno)};
  fd.close();  // the mapping outlives the descriptor
  auto* seg = new SharedSegment(name, shape, static_cast<char*>(base));
  SegmentHeader& h = seg->header();
  if (!agree(h.nranks, static_cast<uint32_t>(shape.nranks)) ||
      !agree(h.nchannels, static_cast<uint32_t>(shape.nchannels)) ||
      !agree(h.slot_bytes, static_cast<uint64_t>(shape.slot_bytes)) || !agree(h.magic, kMagic)) {
    std::string msg = fmt::format(
        "ranks disagree on the communicator: nranks {} vs {}, channels {} vs {} "
        "(SIMGPU_NCHANNELS and SIMGPU_SLOT_BYTES must match)",
        h.nranks.load(), shape.nranks, h.nchannels.load(), shape.nchannels);
    delete seg;
    return hangwatch::Error{msg};
  }
  return seg;
}

SharedSegment::~SharedSegment() { ::munmap(base_, shape_.totalBytes()); }

void SharedSegment::unlink() { ::shm_unlink(name_.c_str()); }

RankRecord& SharedSegment::rank(int r) {
  return reinterpret_cast<RankRecord*>(base_ + alignUp(sizeof(SegmentHeader), 64))[r];
}

Connection& SharedSegment::ringConnection(int channel, int from_rank) {
  size_t index = static_cast<size_t>(channel) * shape_.nranks + from_rank;
  return *reinterpret_cast<Connection*>(base_ + headerBytes(shape_.nranks) + index * shape_.connectionBytes());
}

Connection& SharedSegment::p2pConnection(int from, int to) {
  size_t index = static_cast<size_t>(shape_.nchannels) * shape_.nranks + static_cast<size_t>(from) * shape_.nranks + to;
  return *reinterpret_cast<Connection*>(base_ + headerBytes(shape_.nranks) + index * shape_.connectionBytes());
}

Connection& SharedSegment::treeConnection(int channel, int child, bool up) {
  size_t index = static_cast<size_t>(shape_.nchannels) * shape_.nranks + static_cast<size_t>(shape_.nranks) * shape_.nranks +
                 (static_cast<size_t>(channel) * shape_.nranks + child) * 2 + (up ? 0 : 1);
  return *reinterpret_cast<Connection*>(base_ + headerBytes(shape_.nranks) + index * shape_.connectionBytes());
}

Connection& SharedSegment::patConnection(int channel, int from, int dim, bool allgather) {
  const size_t n = static_cast<size_t>(shape_.nranks);
  const size_t dims = static_cast<size_t>(patDimensions(shape_.nranks));
  size_t index = static_cast<size_t>(shape_.nchannels) * n * 3 + n * n +
                 ((static_cast<size_t>(channel) * n + from) * dims + dim) * 2 + (allgather ? 1 : 0);
  return *reinterpret_cast<Connection*>(base_ + headerBytes(shape_.nranks) + index * shape_.connectionBytes());
}

char* SharedSegment::slotData(Connection& conn, uint64_t step) {
  return reinterpret_cast<char*>(&conn) + alignUp(sizeof(Connection), 64) + (step % kSteps) * shape_.slot_bytes;
}

}  // namespace simnccl
