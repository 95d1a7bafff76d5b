#include "hangwatch/simgpu/faults.h"

#include <catch2/catch.hpp>

using simgpu::parseFaults;

TEST_CASE("FaultGrammarAcceptsEveryKindFromTheDesign") {
  auto plan = parseFaults("dead-rank=3@op=10; dead-link=1->2@op=4 ;dead-link=0->7@op=0,channel=2;"
                          "slow-rank=2:0.6;slow-link=1->2:0.3;");
  REQUIRE(plan.ok());
  REQUIRE(plan->dead_ranks.size() == 1);
  CHECK(plan->dead_ranks[0].rank == 3);
  CHECK(plan->dead_ranks[0].op == 10);
  REQUIRE(plan->dead_links.size() == 2);
  CHECK(plan->dead_links[0].from == 1);
  CHECK(plan->dead_links[0].to == 2);
  CHECK_FALSE(plan->dead_links[0].channel.has_value());
  CHECK(plan->dead_links[1].channel == 2);
  CHECK(plan->rankSpeed(2) == Approx(0.6));
  CHECK(plan->rankSpeed(1) == 1.0);
  CHECK(plan->linkSpeed(1, 2) == Approx(0.3));
  CHECK(plan->linkSpeed(2, 1) == 1.0);
}

TEST_CASE("FaultsApplyFromTheirOpIndexOn") {
  auto plan = parseFaults("dead-rank=1@op=5;dead-link=2->3@op=2,channel=1");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->rankDeadAt(1, 4));
  CHECK(plan->rankDeadAt(1, 5));
  CHECK(plan->rankDeadAt(1, 9));
  CHECK_FALSE(plan->rankDeadAt(0, 9));
  CHECK_FALSE(plan->linkDeadAt(2, 3, 1, 1));
  CHECK(plan->linkDeadAt(2, 3, 2, 1));
  CHECK_FALSE(plan->linkDeadAt(2, 3, 2, 0));
  CHECK_FALSE(plan->linkDeadAt(3, 2, 7, 1));
}

TEST_CASE("LostCreditAppliesToItsDirectionFromItsOpOn") {
  auto plan = parseFaults("lost-credit=3->4@op=6");
  REQUIRE(plan.ok());
  REQUIRE(plan->lost_credits.size() == 1);
  CHECK_FALSE(plan->empty());
  CHECK_FALSE(plan->creditLostAt(3, 4, 5));
  CHECK(plan->creditLostAt(3, 4, 6));
  CHECK(plan->creditLostAt(3, 4, 40));
  CHECK_FALSE(plan->creditLostAt(4, 3, 40));
  CHECK_FALSE(plan->linkDeadAt(3, 4, 40, 0));  // data still flows
  CHECK_FALSE(plan->checkRanksBelow(4).ok());
  CHECK(plan->checkRanksBelow(5).ok());
}

TEST_CASE("EmptyFaultSpecIsHealthy") {
  auto plan = parseFaults("");
  REQUIRE(plan.ok());
  CHECK(plan->empty());
  CHECK(parseFaults(" ; ;").ok());
}

TEST_CASE("MalformedFaultsAreRejectedNamingTheToken") {
  const char* bad[] = {
      "dead-rank=3",          "dead-rank=x@op=1",   "dead-rank=3@op=-1",  "dead-link=1-2@op=3",
      "dead-link=1->1@op=3",  "dead-link=1->2@op=3,chan=1", "dead-rank=1@op=2,channel=0",
      "slow-rank=2",          "slow-rank=2:0",      "slow-rank=2:1.5",    "slow-rank=2:abc",
      "slow-link=1->2",       "slow-link=3:0.5",    "fast-rank=1:0.5",    "dead-rank",
      "dead-rank=1@op=3x",    "lost-credit=1->2",   "lost-credit=2->2@op=1", "lost-credit=1->2@op=1,channel=0",
      "dead-nic=node-1:mlx5_0", "dead-nic=node-1@op=2", "dead-nic=:mlx5_0@op=2", "dead-nic=node-1:mlx5_8@op=2",
      "dead-nic=node-1:ib0@op=2",
  };
  for (const char* token : bad) {
    std::string spec = std::string("slow-rank=0:0.5;") + token;
    auto plan = parseFaults(spec);
    INFO(spec);
    REQUIRE_FALSE(plan.ok());
    CHECK_THAT(plan.error(), Catch::Contains("'" + std::string(token) + "'"));
  }
}

TEST_CASE("FaultRanksAreCheckedAgainstTheJobSize") {
  auto plan = parseFaults("slow-link=1->6:0.5");
  REQUIRE(plan.ok());
  CHECK(plan->checkRanksBelow(7).ok());
  auto r = plan->checkRanksBelow(4);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error(), Catch::Contains("slow-link=1->6:0.5"));
}

TEST_CASE("AFaultWhoseConnectionWasNeverUsedIsSaidWithTheAlgorithmThatRan") {
  auto plan = parseFaults("dead-link=3->4@op=8");
  REQUIRE(plan.ok());
  simgpu::FaultLedger ledger;
  for (uint64_t op = 0; op < 12; ++op) ledger.ran(*plan, 3, op, op < 8 ? "RING" : "TREE", {op < 8 ? 4 : 2});
  auto lines = ledger.unfired(*plan, 3);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "fault 'dead-link=3->4@op=8' never took effect: from op 8 on, rank 3 sent nothing to rank 4: op 8 ran TREE, "
        "whose connections from rank 3 go to rank(s) 2");
  ledger.fired("dead-link=3->4@op=8");
  CHECK(ledger.unfired(*plan, 3).empty());
}

TEST_CASE("AFaultWhoseOpWasNeverReachedSaysHowFarTheRankGot") {
  auto plan = parseFaults("dead-rank=2@op=50;lost-credit=2->1@op=60");
  REQUIRE(plan.ok());
  simgpu::FaultLedger ledger;
  for (uint64_t op = 0; op < 20; ++op) ledger.ran(*plan, 2, op, "RING", {3});
  auto lines = ledger.unfired(*plan, 2);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("'lost-credit=2->1@op=60' never took effect: rank 2 never ran its op 60 (it ran 20") !=
        std::string::npos);
  CHECK(lines[1].find("'dead-rank=2@op=50' never took effect: rank 2 never ran its op 50") != std::string::npos);
}

TEST_CASE("OnlyTheProcessAFaultBelongsToSpeaksOfIt") {
  // The sender of a link fault and the rank of a rank fault: rank 4 says nothing of 3 -> 4.
  auto plan = parseFaults("dead-link=3->4@op=0;dead-rank=3@op=0;slow-link=3->4:0.5");
  REQUIRE(plan.ok());
  simgpu::FaultLedger ledger;
  ledger.ran(*plan, 4, 0, "RING", {5});
  CHECK(ledger.unfired(*plan, 4).empty());
  simgpu::FaultLedger sender;
  sender.ran(*plan, 3, 0, "RING", {2});
  // Nothing went to 4 (the dead and the slow link); a dead rank whose op was reached has fired.
  CHECK(sender.unfired(*plan, 3).size() == 2);
}

TEST_CASE("DeadNicNamesAHostAndOneOfItsNicsFromItsOpOn") {
  auto plan = parseFaults("dead-nic=node-1:mlx5_3@op=4;dead-nic=gpu-a:b:eth0@op=0");
  REQUIRE(plan.ok());
  REQUIRE(plan->dead_nics.size() == 2);
  CHECK_FALSE(plan->empty());
  CHECK(plan->dead_nics[0].host == "node-1");
  CHECK(plan->dead_nics[0].device == "mlx5_3");
  CHECK(plan->dead_nics[1].host == "gpu-a:b");  // the last ':' separates the device
  CHECK(plan->deadNicAt("node-1", "mlx5_3", 3) == nullptr);
  CHECK(plan->deadNicAt("node-1", "mlx5_3", 4) == &plan->dead_nics[0]);
  CHECK(plan->deadNicAt("node-1", "mlx5_2", 9) == nullptr);
  CHECK(plan->deadNicAt("node-0", "mlx5_3", 9) == nullptr);
  CHECK(plan->checkRanksBelow(1).ok());  // names no rank
}

TEST_CASE("ADeadNicThatNeverTookEffectIsSaidByTheProcessWhoseGpuUsesIt") {
  auto plan = parseFaults("dead-nic=node-0:mlx5_2@op=3");
  REQUIRE(plan.ok());
  simgpu::FaultLedger owner;
  owner.usesNic(*plan, 2, "node-0", "mlx5_2");
  for (uint64_t op = 0; op < 6; ++op) owner.ran(*plan, 2, op, "RING", {3});
  auto lines = owner.unfired(*plan, 2);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "fault 'dead-nic=node-0:mlx5_2@op=3' never took effect: from op 3 on, no connection of rank 2 (whose GPU uses "
        "node-0's mlx5_2) crossed nodes: op 3 ran RING");
  owner.fired("dead-nic=node-0:mlx5_2@op=3");
  CHECK(owner.unfired(*plan, 2).empty());

  simgpu::FaultLedger early;  // its op never reached
  early.usesNic(*plan, 2, "node-0", "mlx5_2");
  early.ran(*plan, 2, 0, "RING", {3});
  REQUIRE(early.unfired(*plan, 2).size() == 1);
  CHECK_THAT(early.unfired(*plan, 2)[0], Catch::Contains("rank 2 never ran its op 3"));

  // No member uses that NIC: rank 0 says so, naming the NICs it met; others say nothing.
  simgpu::FaultLedger other;
  other.sawNic("node-0", "mlx5_0");
  other.sawNic("node-1", "mlx5_0");
  other.ran(*plan, 1, 0, "RING", {2});
  CHECK(other.unfired(*plan, 1).empty());
  auto said = other.unfired(*plan, 0);
  REQUIRE(said.size() == 1);
  CHECK(said[0] == "fault 'dead-nic=node-0:mlx5_2@op=3' never took effect: no rank of this job uses node-0's mlx5_2 "
                   "(the NICs its ranks use: node-0:mlx5_0, node-1:mlx5_0)");
}
