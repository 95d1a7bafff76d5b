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
#include "sample_records.h"

using hangwatch::ForensicsDump;
using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::dumpio::forensicsDumpFromTextFast;
using hangwatch::dumpio::FastReadOptions;
using hangwatch::dumpio::forensicsDumpFromPaddedText;
using hangwatch::test::richDump;

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

TEST_CASE("BothDumpReadersRefuseTheSameWrongTypesInTheSameWords") {
  // One field list drives both readers: the error names the field the same way in each.
  for (const char* text :
       {R"({"host": 7})", R"({"threads": [{"frames": [{"kind": "jit"}]}]})", R"({"threads": {}})",
        R"({"rank": 1.5})", R"({"rank": 99999999999})", R"({"ring_progress": [{"seq": "ten"}]})",
        R"({"ring_progress": [{"recv": 3}]})", R"({"ring_progress": [{"channel": true}]})", R"({"phases": [null]})",
        R"({"cmdline": ["a", 2]})", R"({"threads": [{"frames": [{"line": -1.5}]}]})",
        R"({"ring_progress": [{"recv": {"proxy": {"done": -1}}}]})", R"([])"}) {
    INFO(text);
    auto fast = forensicsDumpFromTextFast(text);
    auto common = hangwatch::forensicsDumpFromText(text);
    REQUIRE_FALSE(fast.ok());
    REQUIRE_FALSE(common.ok());
    CHECK(fast.error() == common.error());
  }
  auto bad_kind = forensicsDumpFromTextFast(R"({"threads": [{"frames": [{"kind": "jit"}]}]})");
  CHECK(bad_kind.error() == "forensics dump: unknown frame kind 'jit'");
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
