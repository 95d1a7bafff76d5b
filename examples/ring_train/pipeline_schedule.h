#pragma once
// The 1F1B pipeline schedule without interleaving, as Megatron-LM runs it
// (forward_backward_pipelining_without_interleaving): stage s of P first runs
// min(P - s - 1, M) warm-up forwards, then alternates one forward and one backward,
// then drains the remaining backwards. Neighbouring stages exchange activations and
// gradients with grouped ncclSend/ncclRecv pairs; the first stage receives no
// activation and the last sends none, so their transfers lose that half.
#include <string>
#include <vector>

enum class PipeAction {
  Forward,   // the stage's layers on one micro-batch
  Backward,  // their backward pass on one micro-batch
  Transfer,  // one ncclGroupStart/End around the sends and receives below
};

struct PipeTransferPart {
  bool send = false;
  bool forward = false;  // an activation to the next stage (send) or from the previous one (receive);
                         // else a gradient to the previous stage or from the next one
  int microbatch = 0;
};

struct PipeStep {
  PipeAction action = PipeAction::Forward;
  int microbatch = 0;                   // Forward, Backward
  std::vector<PipeTransferPart> parts;  // Transfer: never empty
};

// Every stage's steps of one training step, in issue order.
std::vector<PipeStep> oneFOneB(int stage, int stages, int microbatches);

// "F0 T[sF0 rB0] B0 ...", for tests and --help examples.
std::string describe(const std::vector<PipeStep>& steps);
