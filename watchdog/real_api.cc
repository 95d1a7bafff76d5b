#include "hangwatch/watchdog/real_api.h"

namespace hangwatch::watchdog {

RealApi& RealApi::instance() {
  static RealApi* api = new RealApi();  // leaked: used until the last interposed call
  return *api;
}

}  // namespace hangwatch::watchdog
