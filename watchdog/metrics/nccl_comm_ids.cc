#include "hangwatch/watchdog/metrics/nccl_comm_ids.h"

#include <algorithm>

namespace hangwatch::watchdog {
namespace {

thread_local NcclCommIds::Capture* t_capture = nullptr;

}  // namespace

NcclCommIds::Capture::Capture() : outer_(t_capture) { t_capture = this; }

NcclCommIds::Capture::~Capture() {
  t_capture = outer_;
  // A second init during one call (NCCL made more than one communicator here): none
  // of them can be told apart by thread, so the first is kept as a note like the rest.
  if (inits_ > 1 && owner_ != nullptr) owner_->keep({id_, nranks_, rank_});
}

std::optional<uint64_t> NcclCommIds::Capture::id() const {
  if (inits_ != 1) return std::nullopt;
  return id_;
}

void NcclCommIds::initSeen(uint64_t comm_id, int nranks, int rank) {
  inits_seen_.fetch_add(1, std::memory_order_relaxed);
  if (Capture* c = t_capture) {
    if (++c->inits_ == 1) {
      c->owner_ = this;
      c->id_ = comm_id;
      c->nranks_ = nranks;
      c->rank_ = rank;
      return;
    }
  }
  keep({comm_id, nranks, rank});
}

void NcclCommIds::keep(const Note& n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (notes_.size() >= kMaxNotes) notes_.erase(notes_.begin());
  notes_.push_back(n);
}

std::optional<uint64_t> NcclCommIds::takeUnique(int rank, int nranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto fits = [&](const Note& n) { return n.rank == rank && n.nranks == nranks; };
  auto it = std::find_if(notes_.begin(), notes_.end(), fits);
  if (it == notes_.end() || std::find_if(it + 1, notes_.end(), fits) != notes_.end()) return std::nullopt;
  const uint64_t id = it->comm_id;
  notes_.erase(it);
  return id;
}

size_t NcclCommIds::pendingNotes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return notes_.size();
}

NcclCommIds& ncclCommIds() {
  static NcclCommIds* ids = new NcclCommIds;  // never destroyed: NCCL may init during exit
  return *ids;
}

}  // namespace hangwatch::watchdog
