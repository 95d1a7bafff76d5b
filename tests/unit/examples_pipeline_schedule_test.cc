// ring_train's 1F1B schedule (examples/ring_train/pipeline_schedule.h) against Megatron-LM's
// forward_backward_pipelining_without_interleaving, worked out by hand for 2 stages x 4
// micro-batches, and its invariants on larger shapes.
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "pipeline_schedule.h"

TEST_CASE("TwoStagesOfFourMicrobatchesRunMegatrons1F1BOrder") {
  // Stage 0: one warm-up forward, then forward/backward pairs, the last backward alone. The
  // first stage receives no activation and sends no gradient, so those halves are gone.
  CHECK(describe(oneFOneB(0, 2, 4)) == "F0 T[sF0] F1 T[sF1 rB0] B0 F2 T[sF2 rB1] B1 F3 T[sF3 rB2] B2 T[rB3] B3");
  // Stage 1 (the last): no warm-up; every forward is followed by its backward at once.
  CHECK(describe(oneFOneB(1, 2, 4)) == "T[rF0] F0 B0 T[sB0 rF1] F1 B1 T[sB1 rF2] F2 B2 T[sB2 rF3] F3 B3 T[sB3]");
}

TEST_CASE("EveryStageSendsWhatItsNeighbourReceivesInTheSameOrder") {
  for (int stages : {2, 3, 4, 8}) {
    for (int microbatches : {1, 2, 3, 4, 8, 16}) {
      INFO(stages << " stages, " << microbatches << " micro-batches");
      std::vector<std::vector<PipeStep>> s;
      for (int st = 0; st < stages; ++st) s.push_back(oneFOneB(st, stages, microbatches));
      for (int st = 0; st < stages; ++st) {
        // Each micro-batch runs forward once and backward once, backward after forward.
        std::map<int, int> forward_at, backward_at;
        for (size_t i = 0; i < s[st].size(); ++i) {
          const PipeStep& p = s[st][i];
          if (p.action == PipeAction::Forward) CHECK(forward_at.emplace(p.microbatch, i).second);
          if (p.action == PipeAction::Backward) CHECK(backward_at.emplace(p.microbatch, i).second);
        }
        REQUIRE(forward_at.size() == static_cast<size_t>(microbatches));
        REQUIRE(backward_at.size() == static_cast<size_t>(microbatches));
        for (const auto& [mb, at] : forward_at) CHECK(backward_at[mb] > at);
        // Warm-up: stage st runs min(stages - st - 1, M) forwards, then one more (the first
        // of the steady state) where any is left, before its first backward.
        const int warmup = std::min(stages - st - 1, microbatches);
        int before = 0;
        for (const auto& [mb, at] : forward_at) before += at < backward_at[0];
        CHECK(before == std::min(warmup + 1, microbatches));
        if (st + 1 == stages) continue;
        // What stage st sends forward, stage st+1 receives, in order; gradients the other way.
        std::vector<int> sent_f, recv_f, sent_b, recv_b;
        for (const PipeStep& p : s[st])
          for (const PipeTransferPart& t : p.parts) {
            if (t.send && t.forward) sent_f.push_back(t.microbatch);
            if (!t.send && !t.forward) recv_b.push_back(t.microbatch);
          }
        for (const PipeStep& p : s[st + 1])
          for (const PipeTransferPart& t : p.parts) {
            if (!t.send && t.forward) recv_f.push_back(t.microbatch);
            if (t.send && !t.forward) sent_b.push_back(t.microbatch);
          }
        CHECK(sent_f == recv_f);
        CHECK(sent_b == recv_b);
        CHECK(sent_f.size() == static_cast<size_t>(microbatches));
      }
    }
  }
}
