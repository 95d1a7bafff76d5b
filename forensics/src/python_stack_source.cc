#include "hangwatch/forensics/python_stack_source.h"

#include <vector>

#include "hangwatch/forensics/python/python_stacks.h"
#include "hangwatch/stackmerge/thread_merge.h"

namespace hangwatch::forensics {

struct PythonStackSource::Snapshot {
  PythonProcessStacks stacks;
  mutable std::vector<bool> claimed;
};

bool PythonStackSource::available() { return true; }

Expected<bool> PythonStackSource::read(pid_t pid) {
  auto stacks = readPythonStacks(pid);
  if (!stacks) return Error{stacks.error()};
  if (!stacks->has_value()) return false;
  snapshot_ = std::make_unique<Snapshot>();
  snapshot_->stacks = std::move(**stacks);
  snapshot_->claimed.assign(snapshot_->stacks.threads.size(), false);
  return true;
}

std::string PythonStackSource::version() const { return snapshot_ ? snapshot_->stacks.version : ""; }

bool PythonStackSource::mergeInto(ThreadStack& thread, uint64_t fs_base) const {
  if (!snapshot_) return false;
  const auto& threads = snapshot_->stacks.threads;
  for (size_t i = 0; i < threads.size(); ++i) {
    const stackmerge::PythonThreadStack& py = threads[i];
    bool same = py.native_tid ? *py.native_tid == thread.tid : (fs_base != 0 && py.pthread_id == fs_base);
    if (!same) continue;
    snapshot_->claimed[i] = true;
    if (!py.name.empty()) thread.name = py.name;
    thread.python_frames = py.frames;
    if (py.frames.empty()) return true;
    stackmerge::MergedThreadStack merged = stackmerge::mergeThreadStack(thread.native_frames, py);
    thread.frames = std::move(merged.frames);
    thread.merge_note = std::move(merged.note);
    return true;
  }
  return false;
}

size_t PythonStackSource::unmatchedThreads() const {
  if (!snapshot_) return 0;
  size_t n = 0;
  for (bool c : snapshot_->claimed) n += c ? 0 : 1;
  return n;
}

PythonStackSource::PythonStackSource() = default;
PythonStackSource::~PythonStackSource() = default;

}  // namespace hangwatch::forensics
