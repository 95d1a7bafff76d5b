#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/stackmerge/frame_label.h"
#include "hangwatch/stackmerge/stack_classifier.h"
#include "hangwatch/stackmerge/stack_table.h"

using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::stackmerge::RankThread;
using hangwatch::stackmerge::StackClassifier;
using hangwatch::stackmerge::StackTable;

namespace {

StackFrame native(const std::string& function, const std::string& module = "") {
  StackFrame f;
  f.function = function;
  f.module = module;
  return f;
}

StackFrame python(const std::string& function, const std::string& file, std::optional<int> line) {
  StackFrame f;
  f.kind = FrameKind::kPython;
  f.function = function;
  f.file = file;
  f.line = line;
  return f;
}

ThreadStack thread(const std::string& name, std::vector<StackFrame> innermost_first) {
  ThreadStack t;
  t.name = name;
  t.frames = std::move(innermost_first);
  return t;
}

}  // namespace

TEST_CASE("StackTableLabelsFramesAsTheCrossRankMergeDoes") {
  StackTable table;
  const std::vector<StackFrame> frames = {native("??", "/usr/lib/libfoo.so.1"), native(""), python("step", "train.py", 42),
                                          python("<module>", "", std::nullopt), native("main")};
  const auto& stack = table.frames(table.intern(frames));
  REQUIRE(stack.size() == frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    CHECK(stack[i].label == hangwatch::stackmerge::frameLabel(frames[i]));
    CHECK(stack[i].kind == frames[i].kind);
  }
}

TEST_CASE("StackTableStoresEachDistinctStackOnce") {
  StackTable table;
  const uint32_t a = table.intern({native("wait"), native("main")});
  const uint32_t b = table.intern({native("wait"), native("main")});
  const uint32_t c = table.intern({native("main")});
  // Same label, other kind: a different stack for the table (the tree still merges by label).
  const uint32_t d = table.intern({python("wait", "", std::nullopt), native("main")});
  const uint32_t empty = table.intern(std::vector<StackFrame>{});
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  CHECK(table.frames(empty).empty());
  CHECK(table.size() == 4);
  CHECK(table.labels(a) == std::vector<std::string>{"wait", "main"});
}

TEST_CASE("StackTableGivesOneIdPerStackWhenThreadsInternAtOnce") {
  StackTable table;
  std::vector<std::vector<uint32_t>> ids(4);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < ids.size(); ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ids[t].push_back(table.intern({native("f" + std::to_string(i % 20)), native("main")}));
    });
  for (auto& t : pool) t.join();
  CHECK(table.size() == 20);
  for (size_t t = 1; t < ids.size(); ++t) CHECK(ids[t] == ids[0]);
}

TEST_CASE("ClassifyingByTableIdGivesTheSameClassesAndTreeAsByFrames") {
  auto rank = [](int r) {
    std::vector<ThreadStack> threads = {
        thread("MainThread", {native(r == 5 ? "host_loop" : "ncclAllReduce"), python("step", "train.py", 10), native("main")}),
        thread("simnccl-ch0", {native("simnccl_wait_peer"), native("channel_loop"), native("start_thread")})};
    if (r % 3 == 0) threads.push_back(thread("pin_memory", {native("pthread_cond_wait"), native("start_thread")}));
    return threads;
  };
  StackClassifier by_frames;
  StackClassifier by_id;
  StackTable table;
  for (int r = 0; r < 12; ++r) {
    by_frames.addRank(r, rank(r));
    std::vector<RankThread> threads;
    for (const ThreadStack& t : rank(r)) threads.push_back({t.tid, t.name, table.intern(t.frames)});
    by_id.addRank(r, threads, table);
  }
  const auto expected = by_frames.classes();
  const auto got = by_id.classes();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].ranks == expected[i].ranks);
    CHECK(got[i].thread_names == expected[i].thread_names);
    CHECK(got[i].thread_stacks == expected[i].thread_stacks);
  }
  CHECK(by_id.tree().folded() == by_frames.tree().folded());
  REQUIRE(by_id.tree().nodes().size() == by_frames.tree().nodes().size());
  for (size_t n = 0; n < by_id.tree().nodes().size(); ++n) {
    CHECK(by_id.tree().nodes()[n].ranks == by_frames.tree().nodes()[n].ranks);
    CHECK(by_id.tree().nodes()[n].threads == by_frames.tree().nodes()[n].threads);
  }
}
