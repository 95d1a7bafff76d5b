#include "hangwatch/verdict/verdict.h"

namespace hangwatch::verdict {

const char* verdictKindName(VerdictKind k) {
  switch (k) {
    case VerdictKind::kCommunicationHang: return "communication-hang";
    case VerdictKind::kNonCommunicationHang: return "non-communication-hang";
    case VerdictKind::kCollectiveMismatch: return "collective-mismatch";
    case VerdictKind::kNoHang: return "no-hang";
    case VerdictKind::kInconclusive: return "inconclusive";
  }
  return "inconclusive";
}

}  // namespace hangwatch::verdict
