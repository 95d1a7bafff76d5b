#include "pipeline_schedule.h"

#include <algorithm>

namespace {

class ScheduleBuilder {
 public:
  ScheduleBuilder(int stage, int stages) : first_(stage == 0), last_(stage == stages - 1) {}

  void compute(PipeAction action, int microbatch) { steps_.push_back(PipeStep{action, microbatch, {}}); }

  // The parts a stage has peers for; no step when none is left.
  void transfer(std::initializer_list<PipeTransferPart> parts) {
    PipeStep step{PipeAction::Transfer, 0, {}};
    for (const PipeTransferPart& p : parts) {
      const bool to_next = p.send == p.forward;  // sends go forward, receives come back
      if (to_next ? !last_ : !first_) step.parts.push_back(p);
    }
    if (!step.parts.empty()) steps_.push_back(std::move(step));
  }

  std::vector<PipeStep> take() { return std::move(steps_); }

 private:
  bool first_;
  bool last_;
  std::vector<PipeStep> steps_;
};

PipeTransferPart sendForward(int mb) { return {true, true, mb}; }
PipeTransferPart recvForward(int mb) { return {false, true, mb}; }
PipeTransferPart sendBackward(int mb) { return {true, false, mb}; }
PipeTransferPart recvBackward(int mb) { return {false, false, mb}; }

}  // namespace

std::vector<PipeStep> oneFOneB(int stage, int stages, int microbatches) {
  ScheduleBuilder b(stage, stages);
  const int warmup = std::min(stages - stage - 1, microbatches);
  const int steady = microbatches - warmup;
  for (int mb = 0; mb < warmup; ++mb) {
    b.transfer({recvForward(mb)});
    b.compute(PipeAction::Forward, mb);
    b.transfer({sendForward(mb)});
  }
  if (steady > 0) b.transfer({recvForward(warmup)});
  for (int i = 0; i < steady; ++i) {
    b.compute(PipeAction::Forward, warmup + i);
    b.transfer({sendForward(warmup + i), recvBackward(i)});
    b.compute(PipeAction::Backward, i);
    if (i + 1 == steady)
      b.transfer({sendBackward(i)});
    else
      b.transfer({sendBackward(i), recvForward(warmup + i + 1)});
  }
  for (int mb = steady; mb < microbatches; ++mb) {
    b.transfer({recvBackward(mb)});
    b.compute(PipeAction::Backward, mb);
    b.transfer({sendBackward(mb)});
  }
  return b.take();
}

std::string describe(const std::vector<PipeStep>& steps) {
  std::string out;
  for (const PipeStep& s : steps) {
    if (!out.empty()) out += ' ';
    if (s.action != PipeAction::Transfer) {
      out += (s.action == PipeAction::Forward ? "F" : "B") + std::to_string(s.microbatch);
      continue;
    }
    out += "T[";
    for (size_t i = 0; i < s.parts.size(); ++i) {
      const PipeTransferPart& p = s.parts[i];
      out += (i ? " " : "") + std::string(p.send ? "s" : "r") + (p.forward ? "F" : "B") + std::to_string(p.microbatch);
    }
    out += "]";
  }
  return out;
}
