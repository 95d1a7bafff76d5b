#pragma once
// Interposed libraries call their own exported entry points (cublasSgemm_v2 calls
// cublasGemmEx, ncclBcast calls ncclBroadcast); only the outermost call of a thread
// is recorded. initial-exec TLS: no __tls_get_addr on the launch path.
namespace hangwatch::watchdog {

class ReentryGuard {
 public:
  ReentryGuard() { ++depth(); }
  ~ReentryGuard() { --depth(); }
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;

  static bool nested() { return depth() > 0; }

 private:
  static int& depth() {
    static thread_local int d __attribute__((tls_model("initial-exec"))) = 0;
    return d;
  }
};

}  // namespace hangwatch::watchdog
