#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "hangwatch/stackmerge/thread_merge.h"

using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::stackmerge::mergeThreadStack;
using hangwatch::stackmerge::PythonThreadStack;

namespace {

const std::string kLibpython = "/usr/lib/libpython3.12.so.1.0";
const std::string kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

StackFrame mergeFrame(const std::string& function, const std::string& module) {
  StackFrame f;
  f.function = function;
  f.module = module;
  return f;
}

StackFrame python(const std::string& function, int line) {
  StackFrame f;
  f.kind = FrameKind::kPython;
  f.function = function;
  f.file = "train.py";
  f.line = line;
  return f;
}

std::vector<std::string> names(const std::vector<StackFrame>& frames) {
  std::vector<std::string> out;
  for (const auto& f : frames) out.push_back((f.kind == FrameKind::kPython ? "py:" : "") + f.function);
  return out;
}

// A thread blocked in lock.acquire under step() <- train() <- <module>, with
// call machinery between the eval activations.
std::vector<StackFrame> nativeWithEvals(size_t evals) {
  std::vector<StackFrame> frames{mergeFrame("__futex_abstimed_wait_common", kLibc), mergeFrame("sem_clockwait", kLibc),
                                 mergeFrame("PyThread_acquire_lock_timed", kLibpython),
                                 mergeFrame("lock_PyThread_acquire_lock", kLibpython),
                                 mergeFrame("cfunction_vectorcall_FASTCALL_KEYWORDS", kLibpython)};
  for (size_t i = 0; i < evals; ++i) {
    frames.push_back(mergeFrame("_PyEval_EvalFrameDefault", kLibpython));
    if (i + 1 < evals) {
      frames.push_back(mergeFrame("_PyFunction_Vectorcall", kLibpython));
      frames.push_back(mergeFrame("ext_call_back", "/opt/ext/_ext.so"));
      frames.push_back(mergeFrame("PyObject_Call", kLibpython));
    }
  }
  for (const char* outer : {"PyEval_EvalCode", "pymain_run_python", "Py_BytesMain"}) frames.push_back(mergeFrame(outer, kLibpython));
  frames.push_back(mergeFrame("main", "/usr/bin/python3.12"));
  return frames;
}

}  // namespace

TEST_CASE("OneEvalFramePerPythonFrameSplicesEachFrameInPlace") {
  PythonThreadStack py;
  py.frames = {python("step", 40), python("train", 60), python("<module>", 80)};
  py.eval_group_sizes = {1, 1, 1};
  const auto merged = mergeThreadStack(nativeWithEvals(3), py);
  CHECK(merged.note.empty());
  CHECK(names(merged.frames) == std::vector<std::string>{
                                   "__futex_abstimed_wait_common", "sem_clockwait", "PyThread_acquire_lock_timed",
                                   "lock_PyThread_acquire_lock", "cfunction_vectorcall_FASTCALL_KEYWORDS", "py:step",
                                   "ext_call_back", "py:train", "ext_call_back", "py:<module>", "PyEval_EvalCode",
                                   "pymain_run_python", "Py_BytesMain", "main"});
  CHECK(merged.frames[5].line == 40);
}

TEST_CASE("EntryGroupsSpliceSeveralPythonFramesPerEvalFrame") {
  PythonThreadStack py;
  py.frames = {python("wait", 10), python("get", 20), python("step", 40), python("train", 60), python("<module>", 80)};
  py.eval_group_sizes = {3, 2};
  const auto merged = mergeThreadStack(nativeWithEvals(2), py);
  CHECK(merged.note.empty());
  CHECK(names(merged.frames) == std::vector<std::string>{
                                   "__futex_abstimed_wait_common", "sem_clockwait", "PyThread_acquire_lock_timed",
                                   "lock_PyThread_acquire_lock", "cfunction_vectorcall_FASTCALL_KEYWORDS", "py:wait",
                                   "py:get", "py:step", "ext_call_back", "py:train", "py:<module>", "PyEval_EvalCode",
                                   "pymain_run_python", "Py_BytesMain", "main"});
}

TEST_CASE("EmptyEvalGroupConsumesItsEvalFrame") {
  PythonThreadStack py;
  py.frames = {python("train", 60)};
  py.eval_group_sizes = {0, 1};
  const auto merged = mergeThreadStack(nativeWithEvals(2), py);
  CHECK(merged.note.empty());
  CHECK(std::count_if(merged.frames.begin(), merged.frames.end(),
                      [](const StackFrame& f) { return f.function == "_PyEval_EvalFrameDefault"; }) == 0);
  CHECK(names(merged.frames).at(5) == "ext_call_back");
  CHECK(names(merged.frames).at(6) == "py:train");
}

TEST_CASE("MoreEvalFramesThanGroupsKeepsNativeStackWithReason") {
  PythonThreadStack py;
  py.frames = {python("step", 40), python("train", 60)};
  py.eval_group_sizes = {2};
  const auto native_frames = nativeWithEvals(2);
  const auto merged = mergeThreadStack(native_frames, py);
  CHECK(names(merged.frames) == names(native_frames));
  CHECK(merged.note.find("2 _PyEval_EvalFrameDefault") != std::string::npos);
  CHECK(merged.note.find("1 eval groups") != std::string::npos);
}

TEST_CASE("NativeUnwindThatStoppedEarlyIsReported") {
  PythonThreadStack py;
  py.frames = {python("step", 40), python("train", 60)};
  py.eval_group_sizes = {1, 1};
  auto native_frames = nativeWithEvals(2);
  native_frames.resize(6);
  native_frames.push_back(mergeFrame("??", ""));
  const auto merged = mergeThreadStack(native_frames, py);
  CHECK(names(merged.frames) == names(native_frames));
  CHECK(merged.note.find("ended early") != std::string::npos);
}

TEST_CASE("GroupSizesNotCoveringFramesAreRejected") {
  PythonThreadStack py;
  py.frames = {python("step", 40), python("train", 60)};
  py.eval_group_sizes = {1, 0};
  const auto merged = mergeThreadStack(nativeWithEvals(2), py);
  CHECK_FALSE(merged.note.empty());
  CHECK(names(merged.frames) == names(nativeWithEvals(2)));
}

TEST_CASE("ThreadWithoutPythonKeepsNativeStack") {
  const std::vector<StackFrame> native_frames{mergeFrame("epoll_wait", kLibc), mergeFrame("start_thread", kLibc)};
  const auto merged = mergeThreadStack(native_frames, PythonThreadStack{});
  CHECK(merged.note.empty());
  CHECK(names(merged.frames) == names(native_frames));
}

TEST_CASE("ColdSplitEvalFrameIsRecognised") {
  PythonThreadStack py;
  py.frames = {python("step", 40)};
  py.eval_group_sizes = {1};
  const std::vector<StackFrame> native_frames{mergeFrame("sem_clockwait", kLibc),
                                              mergeFrame("_PyEval_EvalFrameDefault.cold", kLibpython),
                                              mergeFrame("main", "/usr/bin/python3.12")};
  const auto merged = mergeThreadStack(native_frames, py);
  CHECK(merged.note.empty());
  CHECK(names(merged.frames) == std::vector<std::string>{"sem_clockwait", "py:step", "main"});
}
