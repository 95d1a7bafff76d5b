// dumpio's fast node summary reader: the common reader's summary, the stack tree skipped
// when the caller says it has every class, and the same refusals.
#include <catch2/catch.hpp>

#include <string>

#include "hangwatch/common/node_summary.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/dumpio/node_summary_fast_reader.h"

using namespace hangwatch;

namespace {

NodeSummary twoRanks() {
  NodeSummary s;
  s.host = "n1";
  s.covers = {0, 1};
  s.files = {{11, 12}, {13, 14}};
  s.tree = {{-1, FrameKind::kNative, "main"}, {0, FrameKind::kPython, "train (t.py:3)"}, {0, FrameKind::kNative, "idle"}};
  StackDigest a, b;
  a.add(FrameKind::kPython, "train (t.py:3)");
  a.add(FrameKind::kNative, "main");
  b.add(FrameKind::kNative, "idle");
  b.add(FrameKind::kNative, "main");
  s.classes = {{a.hex(), 1, "0-1", 2}, {b.hex(), 2, "1", 1}};
  for (int r : {0, 1}) {
    RankRecord rec;
    rec.rank = r;
    rec.has_snapshot = true;
    rec.host = "n1";
    rec.threads = {{10 + r, "main", 0}};
    if (r == 1) rec.threads.push_back({20, "idle", 1});
    RankState st;
    st.rank = r;
    st.phase = DumpPhase::kDone;
    rec.state = st;
    s.ranks.push_back(rec);
  }
  return s;
}

Expected<dumpio::NodeSummaryRead> fast(const std::string& text, bool tree = true) {
  std::string padded = text;
  padded.resize(text.size() + dumpio::kFastReaderPadding, '\0');
  dumpio::NodeSummaryReadOptions o;
  int asked = 0;
  if (!tree)
    o.need_tree = [&](const NodeSummary& s) {
      ++asked;
      CHECK(s.classes.size() == 2);  // the classes come first in the file
      return false;
    };
  auto r = dumpio::nodeSummaryFromPaddedText(std::string_view(padded.data(), text.size()), o);
  if (!tree) CHECK(asked == 1);
  return r;
}

}  // namespace

TEST_CASE("FastNodeSummaryReaderGivesTheCommonReadersSummary") {
  const std::string text = toJson(twoRanks()).dump();
  auto f = fast(text);
  REQUIRE(f.ok());
  CHECK(f->tree_read);
  auto slow = nodeSummaryFromText(text);
  REQUIRE(slow.ok());
  CHECK(toJson(f->summary) == toJson(*slow));
}

TEST_CASE("FastNodeSummaryReaderSkipsTheTreeWhenTheClassesAreKnown") {
  auto f = fast(toJson(twoRanks()).dump(), false);
  REQUIRE(f.ok());
  CHECK_FALSE(f->tree_read);
  CHECK(f->summary.tree.empty());
  CHECK(f->summary.ranks.at(1).threads.at(1).stack == 1);
}

TEST_CASE("FastNodeSummaryReaderRefusesWhatTheCommonReaderRefuses") {
  NodeSummary s = twoRanks();
  s.ranks[0].threads[0].stack = 2;
  const std::string bad_stack = toJson(s).dump();
  CHECK_FALSE(fast(bad_stack).ok());
  CHECK_FALSE(nodeSummaryFromText(bad_stack).ok());
  s = twoRanks();
  s.tree[2].parent = 5;
  const std::string bad_tree = toJson(s).dump();
  CHECK_FALSE(fast(bad_tree).ok());
  CHECK_FALSE(nodeSummaryFromText(bad_tree).ok());
  const std::string whole = toJson(twoRanks()).dump();
  for (size_t cut : {size_t{1}, whole.size() / 3, whole.size() - 2}) {
    INFO("cut at " << cut);
    CHECK_FALSE(fast(whole.substr(0, cut)).ok());
  }
  CHECK_FALSE(fast(whole + "{}").ok());
}
