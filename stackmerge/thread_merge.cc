#include "hangwatch/stackmerge/thread_merge.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace hangwatch::stackmerge {
namespace {

// The unwinder may name a split-off part of the function ("….cold").
bool isEvalFrame(const StackFrame& f) {
  static const std::string kEval = "_PyEval_EvalFrameDefault";
  return f.kind == FrameKind::kNative && f.function.compare(0, kEval.size(), kEval) == 0 &&
         (f.function.size() == kEval.size() || f.function[kEval.size()] == '.');
}

MergedThreadStack unmerged(const std::vector<StackFrame>& native, std::string why) {
  return MergedThreadStack{native, std::move(why)};
}

}  // namespace

MergedThreadStack mergeThreadStack(const std::vector<StackFrame>& native, const PythonThreadStack& py) {
  std::vector<size_t> evals;
  for (size_t i = 0; i < native.size(); ++i)
    if (isEvalFrame(native[i])) evals.push_back(i);

  const size_t grouped = std::accumulate(py.eval_group_sizes.begin(), py.eval_group_sizes.end(), size_t{0});
  if (grouped != py.frames.size())
    return unmerged(native, fmt::format("python frame groups cover {} of {} python frames", grouped, py.frames.size()));
  if (evals.empty() && py.frames.empty()) return MergedThreadStack{native, ""};
  if (evals.size() != py.eval_group_sizes.size()) {
    std::string why = fmt::format("native stack has {} _PyEval_EvalFrameDefault frames, python stack has {} eval groups",
                                  evals.size(), py.eval_group_sizes.size());
    if (!native.empty() && native.back().function == "??") why += " (native unwind ended early)";
    return unmerged(native, why);
  }

  // Interpreter internals (vectorcall, call trampolines) live in the eval frame's own module.
  const std::string& interpreter_module = native[evals.front()].module;
  MergedThreadStack merged;
  merged.frames.reserve(native.size() + py.frames.size());
  size_t next_python = 0;
  for (size_t i = 0; i < native.size(); ++i) {
    if (isEvalFrame(native[i])) {
      const size_t group = static_cast<size_t>(std::find(evals.begin(), evals.end(), i) - evals.begin());
      for (size_t k = 0; k < py.eval_group_sizes[group]; ++k) merged.frames.push_back(py.frames[next_python++]);
      continue;
    }
    const bool between_evals = i > evals.front() && i < evals.back();
    if (between_evals && !interpreter_module.empty() && native[i].module == interpreter_module) continue;
    merged.frames.push_back(native[i]);
  }
  return merged;
}

}  // namespace hangwatch::stackmerge
