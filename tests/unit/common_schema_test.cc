// The field-list codec's rules (common/schema): how empty values are written, what a
// reader starts from, and that a wrong type names the field.
#include <catch2/catch.hpp>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/common/metrics_window.h"
#include "hangwatch/common/rank_state.h"
#include "hangwatch/common/schema/json_codec.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace {

using hangwatch::RingConnection;
using hangwatch::RingProgress;
using nlohmann::json;

}  // namespace

TEST_CASE("schema.EmptyValuesAreWrittenAsNullOrLeftOutAsTheirFieldSays") {
  RingProgress r;  // nothing known: seq unknown, no channel, no connections
  r.seq_known = false;
  r.channel = -1;
  r.rank = -1;
  json j = hangwatch::schema::toJson(r);
  CHECK(j.at("seq").is_null());           // a KnownField not read
  CHECK(j.at("channel").is_null());       // a RankField of -1
  CHECK(j.at("recv").is_null());          // an empty optional record
  CHECK_FALSE(j.contains("nccl_comm"));   // Empty::kOmit
  CHECK_FALSE(j.contains("nccl_op_count"));
  CHECK(j.at("algorithm") == "");         // Empty::kAsValue
  CHECK(j.at("waiting_threads") == json::array());

  hangwatch::RingWaiter w;
  CHECK(hangwatch::schema::toJson(w).at("direction").is_null());  // Empty::kNull
  w.direction = "recv";
  CHECK(hangwatch::schema::toJson(w).at("direction") == "recv");
}

TEST_CASE("schema.AZeroNumberCountsAsEmptyOnlyWhereItsFieldSays") {
  hangwatch::OpWindowStats op;  // "b" is Empty::kOmit, "cnt" is written as itself
  json j = hangwatch::schema::toJson(op);
  CHECK_FALSE(j.contains("b"));
  CHECK(j.at("cnt") == 0);
  op.bytes = 4096;
  CHECK(hangwatch::schema::toJson(op).at("b") == 4096);
}

TEST_CASE("schema.AMapIsAnObjectAndASelfCodedValueWritesItself") {
  hangwatch::MetricsWindow w;
  w.issue_latency["gemm"].add(3000, 2);
  json j = hangwatch::schema::toJson(w);
  CHECK(j.at("il").at("gemm") == w.issue_latency["gemm"].toJson());
  auto back = hangwatch::schema::fromJson<hangwatch::MetricsWindow>(j);
  REQUIRE(back.ok());
  CHECK(back->issue_latency.at("gemm").count() == 2);
  auto notObject = hangwatch::schema::fromJson<hangwatch::MetricsWindow>(json::parse(R"({"il": [1]})"));
  REQUIRE_FALSE(notObject.ok());
  CHECK(notObject.error() == "metrics window: il is not an object");
  auto badHistogram = hangwatch::schema::fromJson<hangwatch::MetricsWindow>(json::parse(R"({"il": {"gemm": "x"}})"));
  REQUIRE_FALSE(badHistogram.ok());
  CHECK(badHistogram.error().rfind("metrics window: il: ", 0) == 0);
}

TEST_CASE("schema.ACodecThatOmitsLeavesItsKeyOut") {
  hangwatch::OpWindowStats op;  // "np" and "cr" belong to an op on a communicator
  op.comm_size = 4;
  op.comm_rank = 1;
  CHECK_FALSE(hangwatch::schema::toJson(op).contains("np"));
  op.comm = "0xabc";
  json j = hangwatch::schema::toJson(op);
  CHECK(j.at("np") == 4);
  CHECK(j.at("cr") == 1);
  op.comm_rank.reset();
  CHECK_FALSE(hangwatch::schema::toJson(op).contains("cr"));
}

TEST_CASE("schema.AReaderStartsFromWhatARecordDoesNotSay") {
  auto r = hangwatch::schema::fromJson<RingProgress>(json::parse(R"({"comm": "ab", "recv": {"peer": 3}})"));
  REQUIRE(r.ok());
  CHECK_FALSE(r->seq_known);
  CHECK(r->channel == -1);
  CHECK(r->rank == -1);
  REQUIRE(r->recv);
  CHECK(r->recv->peer == 3);
  CHECK_FALSE(r->recv->target_known);
  CHECK_FALSE(r->recv->observed_known);
  CHECK_FALSE(r->send);

  auto nulls = hangwatch::schema::fromJson<RingConnection>(
      json::parse(R"({"peer": null, "target_step": null, "observed_step": 12, "transport": null, "x": [1]})"));
  REQUIRE(nulls.ok());
  CHECK(nulls->peer == -1);
  CHECK_FALSE(nulls->target_known);
  CHECK(nulls->observed_known);
  CHECK(nulls->observed_step == 12);
  CHECK(nulls->transport.empty());
}

TEST_CASE("schema.AWrongTypeIsAnErrorThatNamesTheRecordAndTheField") {
  auto bad = hangwatch::schema::fromJson<hangwatch::WatchdogSnapshot>(
      json::parse(R"({"comms": [{"hash": "a", "last_issued_seq": "seven"}]})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error() == "watchdog snapshot: last_issued_seq is not a number");

  auto negative = hangwatch::schema::fromJson<hangwatch::RankState>(json::parse(R"({"state": "done", "pid": 1.5})"));
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error() == "rank state: pid is not an integer in range");

  auto element = hangwatch::schema::fromJson<hangwatch::ForensicsDump>(json::parse(R"({"phases": [null]})"));
  REQUIRE_FALSE(element.ok());
  CHECK(element.error() == "forensics dump: phase is not a JSON object");

  auto top = hangwatch::schema::fromJson<hangwatch::ForensicsDump>(json::array());
  REQUIRE_FALSE(top.ok());
  CHECK(top.error() == "forensics dump: not a JSON object");
}

TEST_CASE("schema.AnEnumIsWrittenByNameAndAnUnknownNameIsAnError") {
  hangwatch::StackFrame f;
  f.kind = hangwatch::FrameKind::kPython;
  CHECK(hangwatch::schema::toJson(f).at("kind") == "python");
  auto jit = hangwatch::schema::fromJson<hangwatch::StackFrame>(json::parse(R"({"kind": "jit"})"));
  REQUIRE_FALSE(jit.ok());
  CHECK(jit.error() == "frame: unknown frame kind 'jit'");
  auto absent = hangwatch::schema::fromJson<hangwatch::StackFrame>(json::object());
  REQUIRE(absent.ok());
  CHECK(absent->kind == hangwatch::FrameKind::kNative);
  CHECK(absent->function == "??");
}

TEST_CASE("schema.KeyOfNamesTheKeyThatHoldsAMember") {
  STATIC_REQUIRE(hangwatch::schema::keyOf(&hangwatch::ForensicsDump::threads) == "threads");
  STATIC_REQUIRE(hangwatch::schema::keyOf(&hangwatch::SnapshotPendingOp::op_class) == "class");
  STATIC_REQUIRE(hangwatch::schema::keyOf(&hangwatch::RankState::phase) == "state");
}
