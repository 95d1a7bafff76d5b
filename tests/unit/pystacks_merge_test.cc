#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "hangwatch/stackmerge/thread_merge.h"
#include "pystacks_targets/target_process.h"
#include "hangwatch/forensics/python/python_stacks.h"

using hangwatch::FrameKind;
using hangwatch::StackFrame;

namespace {

const std::string kScript = std::string(PYSTACKS_TARGETS_DIR) + "/blocked_threads.py";

// Native stacks by tid from `eu-stack -m` (test-only stand-in for the collector's unwinder).
std::map<int64_t, std::vector<StackFrame>> euStack(pid_t pid) {
  std::map<int64_t, std::vector<StackFrame>> stacks;
  FILE* p = popen(("eu-stack -m -p " + std::to_string(pid) + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return stacks;
  static const std::regex tid_line(R"(^TID (\d+):)");
  static const std::regex frame_line(R"(^#\d+\s+0x[0-9a-f]+\s+([^\s-]\S*)?\s*(?:- (\S+))?)");
  char buf[4096];
  int64_t tid = 0;
  while (fgets(buf, sizeof(buf), p)) {
    std::cmatch m;
    if (std::regex_search(buf, m, tid_line)) {
      tid = std::stoll(m[1].str());
    } else if (tid != 0 && std::regex_search(buf, m, frame_line)) {
      StackFrame f;
      f.function = m[1].matched ? m[1].str() : "??";
      f.module = m[2].matched ? m[2].str() : "";
      stacks[tid].push_back(f);
    }
  }
  pclose(p);
  return stacks;
}

size_t indexOf(const std::vector<StackFrame>& frames, const std::string& function, FrameKind kind) {
  for (size_t i = 0; i < frames.size(); ++i)
    if (frames[i].function == function && frames[i].kind == kind) return i;
  return frames.size();
}

std::string describe(const std::vector<StackFrame>& frames) {
  std::string out;
  for (const auto& f : frames) out += (f.kind == FrameKind::kPython ? "  py " : "  ") + f.function + "\n";
  return out;
}

void checkRealMerge(int minor) {
  if (access("/usr/bin/eu-stack", X_OK) != 0) {
    WARN("SKIPPED: eu-stack is not installed");
    return;
  }
  const auto interpreters = pystacks_test::interpretersFor(minor);
  if (interpreters.empty()) {
    WARN("SKIPPED: no Python 3." << minor << " installed");
    return;
  }
  for (const auto& python : interpreters) {
    INFO("interpreter " << python);
    pystacks_test::TargetProcess target({python, kScript});
    REQUIRE(target.waitFor("ready", std::chrono::seconds(20)));
    usleep(200 * 1000);
    REQUIRE(target.stop());
    auto read = hangwatch::forensics::readPythonStacks(target.pid());
    REQUIRE(read.ok());
    REQUIRE(read->has_value());
    const auto native = euStack(target.pid());
    REQUIRE(native.size() == 2);

    size_t merged_threads = 0;
    for (const auto& py : (*read)->threads) {
      REQUIRE(py.native_tid.has_value());
      REQUIRE(native.count(*py.native_tid) == 1);
      const auto merged = hangwatch::stackmerge::mergeThreadStack(native.at(*py.native_tid), py);
      INFO("thread " << py.name << "\n" << describe(merged.frames) << "note: " << merged.note);
      REQUIRE(merged.note.empty());
      CHECK(indexOf(merged.frames, "_PyEval_EvalFrameDefault", FrameKind::kNative) == merged.frames.size());
      // The native wait stays innermost, the C function called from Python right above the Python frames.
      CHECK(merged.frames.front().module.find("libc") != std::string::npos);
      const size_t first_python = indexOf(merged.frames, py.frames.front().function, FrameKind::kPython);
      REQUIRE(first_python > 0);
      CHECK(merged.frames[first_python - 1].kind == FrameKind::kNative);
      // Stripped interpreters (Debian's) do not name their static functions.
      const size_t acquire = indexOf(merged.frames, "lock_PyThread_acquire_lock", FrameKind::kNative);
      if (acquire != merged.frames.size()) CHECK(acquire < first_python);
      // Python frames appear in one run, in their order.
      for (size_t k = 0; k < py.frames.size(); ++k) {
        REQUIRE(first_python + k < merged.frames.size());
        CHECK(merged.frames[first_python + k].function == py.frames[k].function);
        CHECK(merged.frames[first_python + k].kind == FrameKind::kPython);
      }
      const std::string outermost = py.name == "MainThread" ? "Py_BytesMain" : "start_thread";
      CHECK(indexOf(merged.frames, outermost, FrameKind::kNative) > first_python + py.frames.size() - 1);
      ++merged_threads;
    }
    CHECK(merged_threads == 2);
  }
}

}  // namespace

TEST_CASE("RealStackMergesReadFromMainThroughPythonToNativeWaitOnPython311") { checkRealMerge(11); }
TEST_CASE("RealStackMergesReadFromMainThroughPythonToNativeWaitOnPython312") { checkRealMerge(12); }
TEST_CASE("RealStackMergesReadFromMainThroughPythonToNativeWaitOnPython313") { checkRealMerge(13); }
