// Every shape of missing or partial data, on every kind of hang the report names: the verdict
// may lose confidence, but it never names a wrong culprit, and when it is not confident the
// truth is among its suspects and it says which ranks lack what.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "hangwatch/common/rank_state.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

enum class Damage { kNoFiles, kNoForensics, kNoSnapshot, kTruncatedForensics, kTruncatedSnapshot, kNoRingProgress,
                    kStillCollecting };
constexpr Damage kDamages[] = {Damage::kNoFiles,           Damage::kNoForensics,     Damage::kNoSnapshot,
                               Damage::kTruncatedForensics, Damage::kTruncatedSnapshot, Damage::kNoRingProgress,
                               Damage::kStillCollecting};

const char* damageName(Damage d) {
  switch (d) {
    case Damage::kNoFiles: return "no files";
    case Damage::kNoForensics: return "no forensics dump";
    case Damage::kNoSnapshot: return "no snapshot";
    case Damage::kTruncatedForensics: return "truncated forensics dump";
    case Damage::kTruncatedSnapshot: return "truncated snapshot";
    case Damage::kNoRingProgress: return "debugger phase cut short";
    case Damage::kStillCollecting: return "still collecting";
  }
  return "?";
}

struct Truth {
  VerdictKind kind;
  std::vector<int> culprits;
  std::optional<Link> link;
};

struct Scenario {
  std::string name;
  int world;
  uint64_t seq;
  Truth truth;
  std::vector<FakeRank> ranks;
};

constexpr int kChannels = 2;
constexpr uint64_t kSeq = 10;

// Progress of connection X -> X+1 grows with the distance downstream of where the ring
// stopped, as measured on simgpu (a dead link 5->6 on 8 ranks: 0 on 5->6, 1 on 6->7, ...).
std::vector<FakeRank> stuckRing(int world, const std::function<uint64_t(int)>& progress_from,
                                std::vector<int> without_records = {}) {
  auto delivered = [&](int from, int) -> std::optional<uint64_t> { return 100 + progress_from(from); };
  auto consumed = [&](int from, int) -> std::optional<uint64_t> { return 100 + progress_from(from); };
  return verdict_test::ringJob(world, kSeq, kChannels, delivered, consumed, std::move(without_records));
}

Scenario deadLink(int world, int from) {
  Scenario s{"dead link " + std::to_string(from) + "->" + std::to_string((from + 1) % world), world, kSeq,
             {VerdictKind::kCommunicationHang, {std::min(from, (from + 1) % world), std::max(from, (from + 1) % world)},
              Link{from, (from + 1) % world}},
             {}};
  s.ranks = stuckRing(world, [=](int x) { return static_cast<uint64_t>((x - from + world) % world); });
  return s;
}

// Both connections of `rank` stopped; the rest of the ring drained as far as it could.
uint64_t aroundRank(int x, int rank, int world) {
  if (x == rank || (x + 1) % world == rank) return 0;
  return static_cast<uint64_t>((x - rank + world) % world);
}

Scenario deadRank(int world, int rank) {
  Scenario s{"dead rank " + std::to_string(rank), world, kSeq, {VerdictKind::kCommunicationHang, {rank}, std::nullopt}, {}};
  s.ranks = stuckRing(world, [=](int x) { return aroundRank(x, rank, world); }, {rank});
  // Its device stopped: the collector finds its channels stalled, waiting on nothing.
  for (int ch = 0; ch < kChannels; ++ch) {
    RingProgress r;
    r.comm = verdict_test::kComm;
    r.op = "ncclAllReduce";
    r.seq = kSeq;
    r.channel = ch;
    r.rank = rank;
    r.prev = (rank + world - 1) % world;
    r.next = (rank + 1) % world;
    r.stalled = true;
    s.ranks[rank].dump.ring_progress.push_back(r);
  }
  return s;
}

Scenario stuckInHostCode(int world, int rank) {
  Scenario s{"rank " + std::to_string(rank) + " stuck in host code", world, kSeq,
             {VerdictKind::kNonCommunicationHang, {rank}, std::nullopt}, {}};
  s.ranks = stuckRing(world, [=](int x) { return aroundRank(x, rank, world); }, {rank});
  s.ranks[rank].notInCollective(kSeq, {"stall_in_host_loop", "train_step", "main"});
  return s;
}

Scenario mismatch(int world, int rank) {
  Scenario s{"rank " + std::to_string(rank) + " in another collective", world, kSeq,
             {VerdictKind::kCollectiveMismatch, {rank}, std::nullopt}, {}};
  s.ranks = stuckRing(world, [=](int x) { return aroundRank(x, rank, world); });
  FakeRank& odd = s.ranks[rank];
  odd.snap.streams[0].pending[0].op = "ncclAllGather";
  for (RingProgress& r : odd.dump.ring_progress) r.op = "ncclAllGather";
  return s;
}

// Every rank inside ncclCommInitRank for the world communicator but `rank`, which never called it.
Scenario neverJoins(int world, int rank) {
  Scenario s{"rank " + std::to_string(rank) + " never joins", world, kSeq,
             {VerdictKind::kNonCommunicationHang, {rank}, std::nullopt}, {}};
  for (int r = 0; r < world; ++r) {
    s.ranks.emplace_back(r, world, kSeq);
    if (r != rank) s.ranks.back().insideInit("00000000600dcafe", r, world);
  }
  s.ranks[rank].notInCollective(kSeq, {"stall_in_host_loop", "Trainer", "main"});
  s.ranks[rank].snap.comms.clear();
  return s;
}

// FakeRank::write without fsync: a thousand job directories per test case.
void writeRank(const FakeRank& r, const std::string& dir) {
  int n = *r.snap.identity.rank;
  std::filesystem::create_directories(dir + "/ranks");
  std::ofstream(watchdogSnapshotPath(dir, n)) << toJson(r.snap).dump();
  std::ofstream(forensicsDumpPath(dir, n)) << toJson(r.dump).dump();
}

void truncate(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::ofstream(path, std::ios::trunc) << text.substr(0, text.size() / 3);
}

void writeDamaged(const FakeRank& rank, Damage d, const std::string& dir) {
  FakeRank r = rank;
  int n = *r.snap.identity.rank;
  if (d == Damage::kNoFiles) return;
  if (d == Damage::kNoRingProgress) {
    r.dump.ring_progress.clear();
    r.dump.errors.push_back("debugger: Couldn't get registers: No such process.");
    r.dump.target_exited_during = "debugger";
  }
  writeRank(r, dir);
  switch (d) {
    case Damage::kNoForensics: std::filesystem::remove(forensicsDumpPath(dir, n)); break;
    case Damage::kNoSnapshot: std::filesystem::remove(watchdogSnapshotPath(dir, n)); break;
    case Damage::kTruncatedForensics: truncate(forensicsDumpPath(dir, n)); break;
    case Damage::kTruncatedSnapshot: truncate(watchdogSnapshotPath(dir, n)); break;
    case Damage::kStillCollecting: {
      std::filesystem::remove(forensicsDumpPath(dir, n));
      RankState s;
      s.rank = n;
      s.host = "another-node";  // not this host: only the deadline says when to stop waiting
      s.deadline_unix_s = 4e9;
      std::ofstream(rankStatePath(dir, n)) << toJson(s).dump();
      break;
    }
    default: break;
  }
}

bool covers(const Suspect& s, const Truth& t) {
  if (t.link) {
    if (s.link && s.link->from == t.link->from && (s.link->to == t.link->to || s.link->to < 0)) return true;
    return !s.link && (std::count(s.ranks.begin(), s.ranks.end(), t.link->from) ||
                       std::count(s.ranks.begin(), s.ranks.end(), t.link->to));
  }
  return std::all_of(t.culprits.begin(), t.culprits.end(),
                     [&](int c) { return std::count(s.ranks.begin(), s.ranks.end(), c) > 0; });
}

std::string describe(const Verdict& v) {
  std::string out = std::string(verdictKindName(v.kind)) + (v.confident ? " (confident)" : " (not confident)") + ": " +
                    v.headline + "\n  suspects:";
  for (const Suspect& s : v.suspects) out += " [" + s.text + "]";
  out += "\n  hinges on: " + v.hinges_on;
  return out;
}

// Writes the scenario with `damaged` ranks damaged and checks what the report says.
void checkShape(const Scenario& sc, const std::vector<std::pair<int, Damage>>& damaged) {
  verdict_test::TempDir dir;
  std::string shape;
  for (const FakeRank& r : sc.ranks) {
    int n = *r.snap.identity.rank;
    auto d = std::find_if(damaged.begin(), damaged.end(), [&](const auto& x) { return x.first == n; });
    if (d == damaged.end()) writeRank(r, dir.path);
    else {
      writeDamaged(r, d->second, dir.path);
      shape += "rank " + std::to_string(n) + ": " + damageName(d->second) + "; ";
    }
  }
  // Detected by a rank with data; the trigger names the collective.
  int detector = 0;
  while (std::any_of(damaged.begin(), damaged.end(), [&](const auto& x) { return x.first == detector; })) ++detector;
  verdict_test::writeTrigger(dir.path, detector, sc.seq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  Verdict v = ReportBuilder::build(std::move(*job)).verdict;
  INFO(sc.name << " with " << shape << "\n" << describe(v));
  const Truth& t = sc.truth;
  CHECK(v.kind != VerdictKind::kNoHang);
  // A culprit, when named, is the right one, confident or not.
  if (v.culprit_link) {
    REQUIRE(t.link);
    CHECK(*v.culprit_link == *t.link);
  }
  if (!v.culprit_ranks.empty()) CHECK(v.culprit_ranks == t.culprits);
  if (v.confident) {
    CHECK(v.kind == t.kind);
    CHECK(v.culprit_ranks == t.culprits);
  } else {
    CHECK_FALSE(v.hinges_on.empty());
    CHECK_FALSE(v.lacking_data.empty());
    bool truth_left = (!v.culprit_ranks.empty() && v.culprit_ranks == t.culprits) ||
                      std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) { return covers(s, t); });
    CHECK(truth_left);
  }
}

// Every single rank and pair of ranks, and every three neighbours, with each kind of damage
// (pairs also with two different kinds).
void checkEveryShape(const Scenario& sc) {
  const int n = sc.world;
  for (Damage d : kDamages) {
    for (int a = 0; a < n; ++a) {
      checkShape(sc, {{a, d}});
      for (int b = a + 1; b < n; ++b) {
        checkShape(sc, {{a, d}, {b, d}});
        Damage other = kDamages[(static_cast<int>(d) + 1) % std::size(kDamages)];
        checkShape(sc, {{a, d}, {b, other}});
      }
      checkShape(sc, {{a, d}, {(a + 1) % n, d}, {(a + 2) % n, d}});
    }
  }
}

}  // namespace

TEST_CASE("DeadLinkOnEightRanksNeverGetsAConfidentWrongCulpritWhateverDataIsMissing") {
  checkEveryShape(deadLink(8, 5));
}

TEST_CASE("DeadRankOnSixRanksNeverGetsAConfidentWrongCulpritWhateverDataIsMissing") {
  checkEveryShape(deadRank(6, 3));
}

TEST_CASE("RankStuckInHostCodeNeverGetsAConfidentWrongCulpritWhateverDataIsMissing") {
  checkEveryShape(stuckInHostCode(6, 2));
}

TEST_CASE("CommunicatorNeverFormedNeverGetsAConfidentWrongCulpritWhateverDataIsMissing") {
  checkEveryShape(neverJoins(6, 4));
}

TEST_CASE("CollectiveMismatchNeverGetsAConfidentWrongCulpritWhateverDataIsMissing") {
  checkEveryShape(mismatch(8, 1));
}

TEST_CASE("LinkNeitherEndReportedIsASuspectBesideTheLeastProgressSeen") {
  Scenario sc = deadLink(8, 5);
  verdict_test::TempDir dir;
  for (const FakeRank& r : sc.ranks) {
    int n = *r.snap.identity.rank;
    if (n != 5 && n != 6) r.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, kSeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  Report report = ReportBuilder::build(std::move(*job));
  const Verdict& v = report.verdict;
  CHECK(v.kind == VerdictKind::kInconclusive);
  CHECK_FALSE(v.confident);
  CHECK(v.headline ==
        "Inconclusive: least progress on 6 -> 7 among ranks with data; ranks 5 and 6 did not dump: suspect 5 -> 6 or "
        "6 -> 7.");
  CHECK(v.hinges_on.find("ring progress of ranks 5 and 6") != std::string::npos);
  REQUIRE(v.lacking_data.size() == 2);
  CHECK(v.lacking_data[0].lacks == "no dump");
}

TEST_CASE("DeadRankWithoutItsSnapshotIsNamedButTheVerdictSaysWhatItCannotTell") {
  Scenario sc = deadRank(6, 3);
  verdict_test::TempDir dir;
  for (const FakeRank& r : sc.ranks) {
    if (*r.snap.identity.rank != 3) r.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, kSeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  const Verdict v = ReportBuilder::build(std::move(*job)).verdict;
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK_FALSE(v.confident);
  CHECK(v.hinges_on.find("whether its GPU stopped inside the collective or it never called it") != std::string::npos);
}

// NCCL's ncclRemoteError on a member's communicator (its proxy lost a network peer) beside ranks
// that wrote nothing: `silent` left no file, `erring` report the error on `comm`.
Verdict lostRankVerdict(const std::vector<int>& silent, const std::vector<int>& erring,
                        const std::string& comm = verdict_test::kComm) {
  Scenario sc = deadRank(6, 3);
  verdict_test::TempDir dir;
  for (FakeRank& r : sc.ranks) {
    const int n = *r.snap.identity.rank;
    if (std::count(silent.begin(), silent.end(), n)) continue;
    if (std::count(erring.begin(), erring.end(), n))
      for (SnapshotComm& c : r.snap.comms)
        if (c.hash == comm) c.async_error = "ncclRemoteError";
    r.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, kSeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  return ReportBuilder::build(std::move(*job)).verdict;
}

TEST_CASE("ARankWithoutAnyFileIsNamedWhenItsPeersNcclLostItOverTheNetwork") {
  const Verdict v = lostRankVerdict({3}, {4});
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.confident);
  CHECK(v.hinges_on.empty());
  CHECK(v.suspects.empty());
  CHECK(v.headline.find("rank 3 is gone") != std::string::npos);
  REQUIRE_FALSE(v.evidence.empty());
  CHECK(v.evidence[0].find("NCCL on rank(s) 4 failed communicator") != std::string::npos);
}

TEST_CASE("NcclsRemoteErrorNamesNoPeerSoTwoSilentRanksStayUnnamed") {
  const Verdict v = lostRankVerdict({3, 5}, {4});
  CHECK_FALSE(v.confident);
  CHECK(v.headline.find("is gone") == std::string::npos);
}

TEST_CASE("ARemoteErrorOnAnotherCommunicatorSaysNothingOfThisOne") {
  const Verdict v = lostRankVerdict({3}, {4}, "0000000000000bad");
  CHECK_FALSE(v.confident);
  CHECK(v.hinges_on.find("whether its GPU stopped inside the collective or it never called it") != std::string::npos);
}

// NCCL's RAS asked by the collectors of `askers` (its answer on the focus communicator):
// `missing` listed missing (unresponsive), every other member answering, with pids as the
// fixture gives them (100 + rank); `silent` left no file. `nccl_id`: what the snapshots know
// of NCCL's commHash ("" none: the RAS communicator is matched by size and pids).
struct RasCase {
  std::vector<int> silent{3};
  std::vector<int> askers{0, 4};
  std::vector<int> missing{3};
  std::string nccl_id = "00000000005b1170";
  std::string ras_hash = "0x5b1170";
  int64_t missing_pid = 103;
  std::string error;
  // HANGWATCH_COLLECT=0: snapshots only, and the askers' answers in ranks/rNNNNN.ras.json, as
  // `forensics ras` writes them; `answer_pid` is the pid the answer was asked for (0: the asker's).
  bool collector_off = false;
  int64_t answer_pid = 0;
};

Verdict rasVerdict(const RasCase& rc, std::vector<std::string>* problems = nullptr) {
  Scenario sc = deadRank(6, 3);
  verdict_test::TempDir dir;
  for (FakeRank& r : sc.ranks) {
    const int n = *r.snap.identity.rank;
    if (std::count(rc.silent.begin(), rc.silent.end(), n)) continue;
    for (SnapshotComm& c : r.snap.comms)
      if (c.hash == verdict_test::kComm) c.nccl_id = rc.nccl_id;
    if (std::count(rc.askers.begin(), rc.askers.end(), n)) {
      RasStatus ras;
      ras.address = "localhost:28028";
      ras.error = rc.error;
      RasComm comm{rc.ras_hash, sc.world, {}, {}};
      for (int m = 0; m < sc.world; ++m) {
        const bool gone = std::count(rc.missing.begin(), rc.missing.end(), m) > 0;
        RasMember member{m, "node" + std::to_string(m / 4), gone ? rc.missing_pid : 100 + m, m % 4, gone, false};
        (gone ? comm.missing : comm.ranks).push_back(member);
      }
      if (rc.error.empty()) ras.communicators = {comm};
      if (rc.collector_off) {
        ras.asked_by = "ras-command";
        RasAnswer answer{1, n, rc.answer_pid ? rc.answer_pid : r.dump.pid, r.dump.host, ras};
        (void)writeFileAtomically(rasAnswerPath(dir.path, n), toJson(answer).dump());
      } else {
        ras.asked_by = "collector";
        r.dump.ras = ras;
      }
    }
    if (rc.collector_off) (void)writeFileAtomically(watchdogSnapshotPath(dir.path, n), toJson(r.snap).dump());
    else r.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, kSeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  if (problems) *problems = job->problems;
  return ReportBuilder::build(std::move(*job)).verdict;
}

TEST_CASE("ARankWithoutAnyFileIsNamedWhenNcclsRasListsItMissing") {
  const Verdict v = rasVerdict({});
  CHECK(v.kind == VerdictKind::kCommunicationHang);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.confident);
  CHECK(v.suspects.empty());
  CHECK(v.headline.find("rank 3 does not answer") != std::string::npos);
  REQUIRE_FALSE(v.evidence.empty());
  CHECK(v.evidence[0].find("NCCL's RAS, asked by the collector of rank(s) 0,4") != std::string::npos);
  CHECK(v.evidence[0].find("pid 103 on node0, GPU 3") != std::string::npos);
  // It wrote no file, so where it ran comes from RAS, or from its last metrics window.
  CHECK(v.evidence[1].find("unknown") == std::string::npos);
}

TEST_CASE("WithTheCollectorOffTheAnswerForensicsRasWroteNamesTheRankRasListsMissing") {
  RasCase rc;
  rc.collector_off = true;
  rc.askers = {0};
  const Verdict v = rasVerdict(rc);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.confident);
  REQUIRE_FALSE(v.evidence.empty());
  CHECK(v.evidence[0].find("NCCL's RAS, asked from the node of rank(s) 0 with nothing stopped (the collector was off)") !=
        std::string::npos);
  // An answer asked for another process than the rank's own is not that rank's node's word.
  RasCase foreign = rc;
  foreign.answer_pid = 999;
  CHECK_FALSE(rasVerdict(foreign).confident);
  // No answer (RAS off in the job): a hedge, and the report says why RAS could not decide.
  RasCase off = rc;
  off.error = "NCCL's RAS is off in the process (NCCL_RAS_ENABLE=0)";
  std::vector<std::string> problems;
  CHECK_FALSE(rasVerdict(off, &problems).confident);
  CHECK(std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
    return p.find("NCCL's RAS, asked from the node of rank 0 (the collector was off), gave no answer: "
                  "NCCL's RAS is off") != std::string::npos;
  }));
}

TEST_CASE("RasIsMatchedBySizeAndPidsWhereNoSnapshotKnowsNcclsCommHash") {
  RasCase rc;
  rc.nccl_id = "";
  rc.ras_hash = "0xfeed";
  CHECK(rasVerdict(rc).confident);
}

TEST_CASE("RasOfAnotherCommunicatorOrWithoutAnAnswerSaysNothing") {
  RasCase other;
  other.ras_hash = "0xbad";
  CHECK_FALSE(rasVerdict(other).confident);
  RasCase failed;
  failed.error = "localhost:28028: no NCCL RAS answered (its RAS thread did not answer within 1 s)";
  CHECK_FALSE(rasVerdict(failed).confident);
}

TEST_CASE("RasNamesNobodyWhenTwoMembersAreSilentOrTheSilentOneAnsweredIt") {
  RasCase two;
  two.silent = {3, 5};
  two.missing = {3, 5};
  CHECK_FALSE(rasVerdict(two).confident);
  RasCase answered;  // RAS heard from rank 3: whatever kept its files away, it is not gone
  answered.missing = {};
  CHECK_FALSE(rasVerdict(answered).confident);
  RasCase only_paused;  // RAS missed a rank that dumped (its collector held it): no culprit in that
  only_paused.missing = {5};
  CHECK_FALSE(rasVerdict(only_paused).confident);
}

TEST_CASE("MismatchWhoseMajorityMissingRanksCouldTurnNamesNoSide") {
  Scenario sc = mismatch(4, 1);
  verdict_test::TempDir dir;
  for (const FakeRank& r : sc.ranks) {
    int n = *r.snap.identity.rank;
    if (n != 2 && n != 3) r.write(dir.path);
  }
  verdict_test::writeTrigger(dir.path, 0, kSeq);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  const Verdict v = ReportBuilder::build(std::move(*job)).verdict;
  CHECK(v.kind == VerdictKind::kCollectiveMismatch);
  CHECK_FALSE(v.confident);
  CHECK(v.culprit_ranks.empty());
  REQUIRE(v.suspects.size() == 2);
  CHECK(v.headline.find("which side is odd is not known") != std::string::npos);
}
