// The cuda backend's job directories (tests/fixtures, see its README) through the whole
// report path: every kind of ring record the debugger phase writes reaches the verdict.
#include <catch2/catch.hpp>

#include <string>

#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"

using namespace hangwatch;
using namespace hangwatch::verdict;

namespace {

Report reportOf(const std::string& fixture) {
  Expected<JobData> job = JobLoader().load(std::string(HANGWATCH_FIXTURES_DIR) + "/" + fixture);
  REQUIRE(job.ok());
  REQUIRE(job->world_size == 4);
  return ReportBuilder::build(std::move(*job));
}

std::vector<std::string> suspectTexts(const Verdict& v) {
  std::vector<std::string> out;
  for (const Suspect& s : v.suspects) out.push_back(s.text);
  return out;
}

}  // namespace

TEST_CASE("CudaGdbRecordsKeyedByTheWatchdogHashNameTheDeadLink") {
  const Verdict v = reportOf("cuda-dead-link").verdict;
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link.has_value());
  CHECK(*v.culprit_link == Link{1, 2});
  CHECK(v.confident);
  CHECK(v.source == "debugger");
  CHECK(v.channels_agree == 2);
  CHECK(v.channels_total == 2);
}

TEST_CASE("CudaGdbRecordsWithOnlyNcclsCommHashJoinThroughTheSnapshotsCommTable") {
  // The records' `comm` is empty; comms[].nccl_id in each snapshot ties nccl_comm to the op.
  const Verdict v = reportOf("cuda-dead-link-nccl-id-only").verdict;
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  REQUIRE(v.culprit_link.has_value());
  CHECK(*v.culprit_link == Link{1, 2});
  CHECK(v.communicator == "7b3e0c5a9d21f468");
}

TEST_CASE("HostOnlyGdbRecordsWithoutCountersAreNotTakenAsProgress") {
  // Plain gdb cannot read the device counters of the P2P links: their records say so (null),
  // and the verdict must not read null as step 0. It names the suspects it cannot tell apart.
  const Verdict v = reportOf("cuda-dead-link-gdb-only").verdict;
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK_FALSE(v.culprit_link.has_value());
  CHECK(suspectTexts(v) == std::vector<std::string>{"link 0 -> 1", "link 1 -> 2", "link 2 -> 3"});
  REQUIRE_FALSE(v.lacking_data.empty());
  CHECK(v.lacking_data[0].lacks.find("cuda-gdb") != std::string::npos);
}
