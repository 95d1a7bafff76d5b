#include <catch2/catch.hpp>

#include "hangwatch/common/forensics_dump.h"
#include "sample_records.h"

namespace {

hangwatch::RingConnection connection(int peer, uint64_t target, uint64_t observed, bool waiting,
                                     std::optional<uint64_t> base, std::optional<uint64_t> posted) {
  hangwatch::RingConnection c;
  c.peer = peer;
  c.target_step = target;
  c.observed_step = observed;
  c.waiting = waiting;
  c.base_step = base;
  c.posted_step = posted;
  return c;
}

}  // namespace

TEST_CASE("ForensicsDumpRoundTripsEveryField") {
  hangwatch::ForensicsDump d = hangwatch::test::richDump();
  auto back = hangwatch::forensicsDumpFromText(hangwatch::toJson(d).dump());
  REQUIRE(back.ok());
  CHECK(back->rank == 12);
  CHECK(back->pid == 4242);
  CHECK(back->host == "node\"07\"");
  CHECK(back->cmdline == d.cmdline);
  CHECK(back->backend == "sim");
  CHECK(back->python_version == "3.11.2");
  REQUIRE(back->threads.size() == 2);
  CHECK(back->threads[0].name == "MainThread");
  REQUIRE(back->threads[0].frames.size() == 2);
  CHECK(back->threads[0].frames[1].kind == hangwatch::FrameKind::kPython);
  CHECK(back->threads[0].frames[1].line == 215);
  CHECK(back->threads[0].frames[0].pc == 0x7f0011223344ULL);
  REQUIRE(back->ring_progress.size() == 2);
  CHECK(back->ring_progress[0].recv->observed_step == 123);
  CHECK(back->ring_progress[0].seq == 18446744073709551615ULL);
  CHECK_FALSE(back->ring_progress[0].send.has_value());
  CHECK(back->ring_progress[1].recv->proxy->nsteps == 16);
  REQUIRE(back->ring_progress[0].connections.size() == 2);
  CHECK(back->ring_progress[0].connections[0].role == "tree-parent");
  CHECK(back->ring_progress[0].connections[0].direction == "send");
  CHECK(back->ring_progress[0].connections[0].posted_step == 100u);
  CHECK(back->ring_progress[0].connections[1].role == "tree-child");
  CHECK(back->ring_progress[1].connections.empty());
  REQUIRE(back->phases.size() == 2);
  CHECK(back->phases[1].error == "timed out");
  CHECK(back->phases[0].error.empty());
  CHECK(back->errors == d.errors);
  CHECK(back->target_exited_during == "debugger");
  REQUIRE(back->ras);
  CHECK(back->ras->address == "localhost:28028");
  CHECK(back->ras->asked_by == "collector");
  CHECK(back->ras->seconds == 5.125);
  REQUIRE(back->ras->communicators.size() == 2);
  CHECK(back->ras->communicators[0].hash == "0x9a3f00c2e1d47b05");
  REQUIRE(back->ras->communicators[0].missing.size() == 1);
  CHECK(back->ras->communicators[0].missing[0].pid == 203);
  CHECK(back->ras->communicators[0].missing[0].unresponsive);
  CHECK(back->ras->communicators[0].missing[0].considered_dead);
  CHECK_FALSE(back->ras->communicators[0].ranks[1].unresponsive);
  CHECK(hangwatch::toJson(*back) == hangwatch::toJson(d));
}

TEST_CASE("RasAnswerRoundTripsEveryField") {
  hangwatch::RasAnswer a;
  a.rank = 8;
  a.pid = 777;
  a.host = "node-1";
  a.ras = *hangwatch::test::richDump().ras;
  a.ras.asked_by = "ras-command";
  auto back = hangwatch::rasAnswerFromText(hangwatch::toJson(a).dump());
  REQUIRE(back.ok());
  CHECK(back->schema_version == 1);
  CHECK(back->rank == 8);
  CHECK(back->pid == 777);
  CHECK(back->host == "node-1");
  CHECK(back->ras.asked_by == "ras-command");
  REQUIRE(back->ras.communicators.size() == 2);
  CHECK(back->ras.communicators[0].missing[0].considered_dead);
  CHECK(hangwatch::toJson(*back) == hangwatch::toJson(a));
  // An answer that could not be had keeps why; a dump older than `asked_by` reads as the collector's.
  a.ras = {};
  a.ras.error = "nothing listens on localhost:28028";
  CHECK(hangwatch::rasAnswerFromText(hangwatch::toJson(a).dump())->ras.error == a.ras.error);
  auto old = hangwatch::forensicsDumpFromText(R"({"pid": 3, "ras": {"address": "a:1", "communicators": []}})");
  REQUIRE(old.ok());
  CHECK(old->ras->asked_by.empty());
  CHECK_FALSE(hangwatch::rasAnswerFromText("{\"rank\": 1, \"ras\": ").ok());
  CHECK_FALSE(hangwatch::rasAnswerFromText(R"({"rank": "one"})").ok());
}

TEST_CASE("RingProgressRecordHasTheContractKeys") {
  nlohmann::json j = hangwatch::toJson(hangwatch::test::richDump().ring_progress[0]);
  for (const char* key : {"comm", "op", "seq", "channel", "rank", "prev", "next", "recv", "send"}) {
    CHECK(j.contains(key));
  }
  for (const char* key : {"peer", "target_step", "observed_step"}) CHECK(j["recv"].contains(key));
  // recv/send name their direction by their key; only the graph's connections carry it.
  CHECK_FALSE(j["recv"].contains("direction"));
  CHECK(j["connections"][0]["direction"] == "send");
  CHECK_FALSE(hangwatch::toJson(hangwatch::test::richDump().ring_progress[1]).contains("connections"));
}

TEST_CASE("ForensicsDumpWithoutRingProgressStillHasTheArray") {
  hangwatch::ForensicsDump d;
  nlohmann::json j = hangwatch::toJson(d);
  CHECK_FALSE(j.contains("ras"));  // not asked: no key, and old dumps read as not asked
  CHECK(j["ring_progress"].is_array());
  CHECK(j["threads"].is_array());
  CHECK(j["rank"].is_null());
}

TEST_CASE("ForensicsDumpReaderToleratesMissingFields") {
  auto d = hangwatch::forensicsDumpFromText(R"({"pid": 12, "threads": [{"tid": 12, "frames": [{"function": "main"}]}]})");
  REQUIRE(d.ok());
  CHECK(d->pid == 12);
  CHECK_FALSE(d->rank.has_value());
  REQUIRE(d->threads.size() == 1);
  CHECK(d->threads[0].frames[0].kind == hangwatch::FrameKind::kNative);
  CHECK(d->ring_progress.empty());
}

TEST_CASE("ForensicsDumpReaderRejectsTruncatedAndMistypedFiles") {
  std::string text = hangwatch::toJson(hangwatch::test::richDump()).dump();
  auto truncated = hangwatch::forensicsDumpFromText(text.substr(0, text.size() / 2));
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().find("truncated") != std::string::npos);
  CHECK_FALSE(hangwatch::forensicsDumpFromText(R"({"threads": 5})").ok());
  CHECK_FALSE(hangwatch::forensicsDumpFromText(R"({"ring_progress": [{"seq": "ten"}]})").ok());
  CHECK_FALSE(hangwatch::forensicsDumpFromText(R"([1, 2])").ok());
}

TEST_CASE("RingProgressRoundTripsWaitersStallAndMismatch") {
  hangwatch::RingProgress r;
  r.comm = "00000000deadbeef";
  r.nccl_comm = "9a3f00c2e1d47b05";
  r.op = "ncclAllReduce";
  r.seq = 10;
  r.channel = 3;
  r.rank = 1;
  r.prev = 0;
  r.next = 2;
  r.recv = connection(0, 25, 24, true, 20, std::nullopt);
  r.send = connection(2, 21, 21, false, 20, 28);
  r.comm_rank = 1;
  r.comm_size = 4;
  r.algorithm = "RING";
  r.protocol = "SIMPLE";
  r.source = "sim-frame";
  r.stalled = true;
  r.mismatch = hangwatch::RingMismatch{11, "ncclAllGather"};
  r.waiting_threads = {{77, "simnccl-ch3", "simnccl_wait_peer", "recv"}, {78, "simnccl-ch3", "simnccl_device_stalled", ""}};

  auto back = hangwatch::ringProgressFromJson(hangwatch::toJson(r));
  REQUIRE(back.ok());
  CHECK(back->comm_size == 4);
  CHECK(back->nccl_comm == "9a3f00c2e1d47b05");
  CHECK(back->recv->waiting);
  CHECK(back->recv->base_step == 20u);
  CHECK_FALSE(back->recv->posted_step.has_value());
  CHECK(back->send->posted_step == 28u);
  CHECK(back->stalled);
  REQUIRE(back->mismatch.has_value());
  CHECK(back->mismatch->arrived_op == "ncclAllGather");
  REQUIRE(back->waiting_threads.size() == 2);
  CHECK(back->waiting_threads[0].tid == 77);
  CHECK(back->waiting_threads[1].direction.empty());
  CHECK(hangwatch::toJson(*back) == hangwatch::toJson(r));
}

TEST_CASE("RingValuesAReaderCouldNotSeeAreNullOnDiskAndUnknownWhenReadBack") {
  hangwatch::RingProgress r;
  r.comm = "";
  r.nccl_comm = "2f6c1a0e9b7d4c31";
  r.seq_known = false;
  r.channel = 2;
  r.rank = -1;
  r.prev = -1;
  r.next = -1;
  hangwatch::RingConnection c;
  c.target_known = false;
  c.observed_step = 96;
  c.base_step = 88;
  c.transport = "NET";
  c.counter_memory = "host";
  c.proxy = hangwatch::RingProxyProgress{88, 16, 8, 0, 4, 2};
  c.nic = hangwatch::RingNic{2, "", std::nullopt};  // the index read, the name not
  r.recv = c;
  hangwatch::RingConnection ib = c;
  ib.nic = hangwatch::RingNic{5, "mlx5_5", 1};
  r.send = ib;
  r.source = "nccl-host";
  r.nccl_op_count = 41;

  nlohmann::json j = hangwatch::toJson(r);
  for (const char* key : {"seq", "rank", "prev", "next"}) CHECK(j[key].is_null());
  CHECK(j["channel"] == 2);
  CHECK(j["recv"]["target_step"].is_null());
  CHECK(j["recv"]["peer"].is_null());
  CHECK(j["recv"]["observed_step"] == 96);
  CHECK(j["recv"]["proxy"]["transmitted"] == 4);
  CHECK(j["recv"]["nic"]["index"] == 2);
  CHECK(j["recv"]["nic"]["device"].is_null());
  CHECK(j["recv"]["nic"]["port"].is_null());
  CHECK(j["send"]["nic"] == nlohmann::json::parse(R"({"index": 5, "device": "mlx5_5", "port": 1})"));
  CHECK(j["nccl_op_count"] == 41);

  auto back = hangwatch::ringProgressFromJson(j);
  REQUIRE(back.ok());
  CHECK_FALSE(back->seq_known);
  CHECK(back->rank == -1);
  CHECK_FALSE(back->recv->target_known);
  CHECK(back->recv->observed_known);
  CHECK(back->recv->transport == "NET");
  CHECK(back->recv->counter_memory == "host");
  REQUIRE(back->recv->proxy.has_value());
  CHECK(back->recv->proxy->base == 88u);
  CHECK(back->recv->proxy->done == 2u);
  REQUIRE(back->recv->nic.has_value());
  CHECK(back->recv->nic->index == 2);
  CHECK(back->recv->nic->device.empty());
  CHECK_FALSE(back->recv->nic->port.has_value());
  REQUIRE(back->send->nic.has_value());
  CHECK(back->send->nic->device == "mlx5_5");
  CHECK(back->send->nic->port == 1);
  CHECK(back->nccl_op_count == 41u);
  CHECK(hangwatch::toJson(*back) == j);

  // Absent is as unknown as null; a negative rank is never data.
  auto bare = hangwatch::ringProgressFromJson(nlohmann::json::parse(R"({"rank": -3, "recv": {"peer": 1}})"));
  REQUIRE(bare.ok());
  CHECK_FALSE(bare->seq_known);
  CHECK(bare->rank == -1);
  CHECK(bare->channel == -1);
  CHECK_FALSE(bare->recv->target_known);
  CHECK_FALSE(bare->recv->observed_known);
  CHECK_FALSE(hangwatch::toJson(*bare).contains("nccl_op_count"));
}

TEST_CASE("RingProgressWithOnlyContractKeysReadsWithDefaults") {
  auto r = hangwatch::ringProgressFromJson(nlohmann::json::parse(
      R"({"comm": "ab", "op": "ncclAllReduce", "seq": 3, "channel": 0, "rank": 1, "prev": 0, "next": 2,
          "recv": {"peer": 0, "target_step": 9, "observed_step": 8}, "send": null})"));
  REQUIRE(r.ok());
  CHECK(r->seq_known);
  CHECK(r->recv->target_known);
  CHECK(r->recv->observed_known);
  CHECK(r->recv->transport.empty());
  CHECK_FALSE(r->recv->proxy.has_value());
  CHECK_FALSE(r->recv->waiting);
  CHECK_FALSE(r->recv->base_step.has_value());
  CHECK_FALSE(r->comm_size.has_value());
  CHECK(r->nccl_comm.empty());
  CHECK_FALSE(hangwatch::toJson(*r).contains("nccl_comm"));  // absent, not "", when not seen
  CHECK_FALSE(r->stalled);
  CHECK_FALSE(r->mismatch.has_value());
  CHECK(r->waiting_threads.empty());
  CHECK_FALSE(hangwatch::ringProgressFromJson(nlohmann::json::parse(R"({"waiting_threads": 4})")).ok());
}
