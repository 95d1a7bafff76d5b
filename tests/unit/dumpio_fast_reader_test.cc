#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

using hangwatch::ForensicsDump;
using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::dumpio::forensicsDumpFromTextFast;
using hangwatch::dumpio::FastReadOptions;
using hangwatch::dumpio::forensicsDumpFromPaddedText;

namespace {

// Every field the collector writes, with strings that need escaping.
ForensicsDump richDump() {
  ForensicsDump d;
  d.rank = 12;
  d.pid = 4242;
  d.host = "node\"07\"";
  d.exe = "/usr/bin/python3";
  d.cmdline = {"python3", "train.py", "--tab\there", "caf\xc3\xa9 \xf0\x9f\x98\x80"};
  d.process_state = "S (sleeping)";
  d.time_unix_s = 1795266293.2491817;
  d.backend_requested = "auto";
  d.backend = "sim";
  d.unwinder = "libdwfl";
  d.debugger = "/usr/bin/gdb";
  d.python_version = "3.11.2";
  d.errors = {"debugger: timed out\nafter 30 s"};
  d.target_exited_during = "debugger";
  ThreadStack t;
  t.tid = 77;
  t.name = "MainThread";
  t.os_name = "python3";
  t.state = "S";
  t.wchan = "futex_wait_queue";
  StackFrame native;
  native.function = "std::vector<int, std::allocator<int> >::push_back(int const&)";
  native.module = "/usr/lib/libfoo.so";
  native.pc = 0x7f0011223344ULL;
  native.offset = 0x3344;
  native.file = "foo.cc";
  native.line = 10;
  StackFrame py;
  py.kind = FrameKind::kPython;
  py.function = "<module>";
  py.file = "train.py";
  py.line = 215;
  t.frames = {native, py};
  t.native_frames = {native};
  t.python_frames = {py};
  t.merge_note = "native unwind ended early";
  d.threads = {t, ThreadStack{}};
  hangwatch::RingProgress r;
  r.comm = "57a76bac89a0c4ad";
  r.nccl_comm = "0c1e5a1f7d2b9e44";
  r.op = "ncclAllReduce";
  r.seq = 18446744073709551615ULL;
  r.channel = 1;
  r.rank = 3;
  r.prev = 2;
  r.next = 0;
  hangwatch::RingConnection c;
  c.peer = 2;
  c.target_step = 124;
  c.observed_step = 123;
  c.waiting = true;
  c.base_step = 100;
  r.recv = c;
  r.comm_rank = 3;
  r.comm_size = 4;
  r.algorithm = "RING";
  r.protocol = "SIMPLE";
  r.source = "sim-frame";
  r.stalled = true;
  r.mismatch = hangwatch::RingMismatch{11, "ncclBroadcast"};
  r.waiting_threads.push_back({78, "simnccl-ch1", "simnccl_wait_peer", "recv"});
  // What the cuda backend's host reader writes: values it could not see are null.
  hangwatch::RingProgress host;
  host.nccl_comm = "2f6c1a0e9b7d4c31";
  host.seq_known = false;
  host.channel = 5;
  host.rank = 1;
  host.prev = 0;
  host.next = -1;
  hangwatch::RingConnection net;
  net.peer = 0;
  net.target_known = false;
  net.observed_step = 96;
  net.base_step = 88;
  net.transport = "NET";
  net.counter_memory = "host";
  net.proxy = hangwatch::RingProxyProgress{88, 16, 8, 6, 4, 2};
  host.recv = net;
  hangwatch::RingConnection p2p;
  p2p.peer = 2;
  p2p.target_known = p2p.observed_known = false;
  p2p.transport = "P2P";
  host.send = p2p;
  host.source = "nccl-host";
  host.nccl_op_count = 41;
  d.ring_progress = {r, host};
  d.phases = {{"unwind", 0.25, true, ""}, {"debugger", 30.0, false, "timed out"}};
  return d;
}

}  // namespace

TEST_CASE("FastReaderGivesTheSameDumpAsTheCommonReader") {
  for (int indent : {-1, 1, 2}) {
    const std::string text = hangwatch::toJson(richDump()).dump(indent);
    auto slow = hangwatch::forensicsDumpFromText(text);
    auto fast = forensicsDumpFromTextFast(text);
    REQUIRE(slow.ok());
    REQUIRE(fast.ok());
    CHECK(hangwatch::toJson(*fast) == hangwatch::toJson(*slow));
    REQUIRE(fast->ring_progress.size() == 2);
    CHECK(fast->ring_progress[0].seq_known);
    CHECK_FALSE(fast->ring_progress[1].seq_known);
    CHECK(fast->ring_progress[1].next == -1);
    CHECK_FALSE(fast->ring_progress[1].send->observed_known);
    CHECK(fast->ring_progress[1].recv->proxy->received == 6u);
  }
}

TEST_CASE("FastReaderRejectsEveryTruncationOfADump") {
  const std::string text = hangwatch::toJson(richDump()).dump();
  for (size_t len = 0; len < text.size(); ++len) {
    INFO(len);
    CHECK_FALSE(forensicsDumpFromTextFast(std::string_view(text).substr(0, len)).ok());
  }
}

TEST_CASE("FastReaderKeepsDefaultsForMissingAndNullFieldsAndSkipsUnknownOnes") {
  auto d = forensicsDumpFromTextFast(
      R"({"rank": null, "host": null, "future": {"a": [1, {"b": null}], "c": "x"}, "threads": [{"frames": [{}]}]})");
  REQUIRE(d.ok());
  CHECK_FALSE(d->rank);
  CHECK(d->host.empty());
  REQUIRE(d->threads.size() == 1);
  REQUIRE(d->threads[0].frames.size() == 1);
  CHECK(d->threads[0].frames[0].function == "??");
  CHECK(d->threads[0].frames[0].kind == FrameKind::kNative);
}

TEST_CASE("FastReaderNamesTheFieldOfTheWrongType") {
  auto bad_host = forensicsDumpFromTextFast(R"({"host": 7})");
  REQUIRE_FALSE(bad_host.ok());
  CHECK(bad_host.error().find("host") != std::string::npos);
  auto bad_kind = forensicsDumpFromTextFast(R"({"threads": [{"frames": [{"kind": "jit"}]}]})");
  REQUIRE_FALSE(bad_kind.ok());
  CHECK(bad_kind.error().find("jit") != std::string::npos);
  CHECK_FALSE(forensicsDumpFromTextFast(R"({"threads": {}})").ok());
  CHECK_FALSE(forensicsDumpFromTextFast(R"({"rank": 1.5})").ok());
  CHECK_FALSE(forensicsDumpFromTextFast(R"({"rank": 99999999999})").ok());
  CHECK_FALSE(forensicsDumpFromTextFast(R"([])").ok());
  CHECK_FALSE(forensicsDumpFromTextFast(R"({} {})").ok());
}

TEST_CASE("FastReaderSkipsHostileNestingInAnUnknownFieldWithoutRecursingIntoIt") {
  const std::string deep = R"({"host": "h", "future": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto d = forensicsDumpFromTextFast(deep);
  REQUIRE(d.ok());
  CHECK(d->host == "h");
  // Unbalanced, the same nesting is an error, not a crash.
  CHECK_FALSE(forensicsDumpFromTextFast(R"({"future": )" + std::string(100000, '[') + "}").ok());
}

TEST_CASE("FastReaderAcceptsIntegralFloatsLikeTheCommonReader") {
  const std::string text = R"({"pid": 1e3, "rank": 2.0, "threads": [{"tid": 7.0}]})";
  auto slow = hangwatch::forensicsDumpFromText(text);
  auto fast = forensicsDumpFromTextFast(text);
  REQUIRE(slow.ok());
  REQUIRE(fast.ok());
  CHECK(fast->pid == 1000);
  CHECK(hangwatch::toJson(*fast) == hangwatch::toJson(*slow));
}

TEST_CASE("FastReaderSkipsRawFramesWhenAskedAndKeepsEverythingElse") {
  const std::string text = hangwatch::toJson(richDump()).dump();
  auto full = forensicsDumpFromTextFast(text);
  auto summary = forensicsDumpFromTextFast(text, FastReadOptions{.skip_raw_frames = true});
  REQUIRE(full.ok());
  REQUIRE(summary.ok());
  REQUIRE(full->threads[0].native_frames.size() == 1);
  CHECK(summary->threads[0].native_frames.empty());
  CHECK(summary->threads[0].python_frames.empty());
  for (ThreadStack& t : full->threads) {
    t.native_frames.clear();
    t.python_frames.clear();
  }
  CHECK(hangwatch::toJson(*summary) == hangwatch::toJson(*full));
}

TEST_CASE("FastReaderReadsPaddedTextInPlaceWhateverThePaddingHolds") {
  const std::string text = hangwatch::toJson(richDump()).dump();
  // Padding that looks like more JSON must not be read as part of the dump.
  std::string buffer = text + std::string(hangwatch::dumpio::kFastReaderPadding, '}');
  auto d = forensicsDumpFromPaddedText(std::string_view(buffer.data(), text.size()));
  REQUIRE(d.ok());
  CHECK(hangwatch::toJson(*d) == hangwatch::toJson(richDump()));
}

// tests/fixtures/cuda-dead-link* (make_cuda_dead_link.py): what the cuda backend writes. Both
// readers must read them alike, and they must be in the writers' own form, so that they stand
// for real output and not for an older or hand-made shape.
TEST_CASE("CudaBackendFixturesReadAlikeAndAreInTheWritersForm") {
  int dumps = 0;
  for (const char* job : {"cuda-dead-link", "cuda-dead-link-nccl-id-only", "cuda-dead-link-gdb-only"}) {
    INFO(job);
    const std::string variant = job;
    const std::filesystem::path ranks = std::filesystem::path(HANGWATCH_FIXTURES_DIR) / job / "ranks";
    for (int rank = 0; rank < 4; ++rank) {
      char tag[16];
      std::snprintf(tag, sizeof tag, "r%05d", rank);
      std::ifstream dump_file(ranks / (std::string(tag) + ".forensics.json"));
      REQUIRE(dump_file);
      const std::string text((std::istreambuf_iterator<char>(dump_file)), std::istreambuf_iterator<char>());
      auto slow = hangwatch::forensicsDumpFromText(text);
      auto fast = forensicsDumpFromTextFast(text);
      REQUIRE(slow.ok());
      REQUIRE(fast.ok());
      CHECK(hangwatch::toJson(*fast) == hangwatch::toJson(*slow));
      CHECK(hangwatch::toJson(*slow) == nlohmann::json::parse(text));
      REQUIRE(slow->ring_progress.size() == 2);
      for (const hangwatch::RingProgress& r : slow->ring_progress) {
        CHECK_FALSE(r.seq_known);  // NCCL's memory does not say which collective: null, not 0
        CHECK(r.nccl_comm == "2f6c1a0e9b7d4c31");
        CHECK(r.comm == (variant == "cuda-dead-link-nccl-id-only" ? "" : "7b3e0c5a9d21f468"));
        CHECK(r.source == (variant == "cuda-dead-link-gdb-only" ? "nccl-host" : "cuda-registers"));
      }
      ++dumps;

      std::ifstream snap_file(ranks / (std::string(tag) + ".watchdog.json"));
      REQUIRE(snap_file);
      const std::string snap_text((std::istreambuf_iterator<char>(snap_file)), std::istreambuf_iterator<char>());
      auto snap = hangwatch::watchdogSnapshotFromJson(nlohmann::json::parse(snap_text));
      auto snap_fast = hangwatch::dumpio::watchdogSnapshotFromTextFast(snap_text);
      REQUIRE(snap.ok());
      REQUIRE(snap_fast.ok());
      CHECK(hangwatch::toJson(*snap) == nlohmann::json::parse(snap_text));
      CHECK(hangwatch::toJson(*snap_fast) == hangwatch::toJson(*snap));
      REQUIRE(snap->comms.size() == 1);
      CHECK(snap->comms[0].nccl_id == "2f6c1a0e9b7d4c31");
    }
  }
  CHECK(dumps == 12);
}
