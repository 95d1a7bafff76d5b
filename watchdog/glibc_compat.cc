// Only in libhangwatch.so (HANGWATCH_PORTABLE): makes every glibc reference inside the
// library, ours and the static libstdc++'s and libgcc's, one that glibc 2.28 (RHEL 8,
// manylinux_2_28) resolves, so the preload loads on any node from there on.
//
// glibc 2.34+ gives many functions a new default version (pthread_* and dl* moved into
// libc, stat became a function, libm's exp/log/pow lost SVID error handling) and keeps the
// old one for old programs. The definitions below carry glibc's names, so the static link
// binds every reference in the library to them instead of to the new defaults; the version
// script makes them local, so the job never sees them. Two kinds:
//  - pinned: a jump to the same function at the version 2.28 had as default;
//  - rebuilt: what 2.28 lacks entirely (stat's family, _dl_find_object, arc4random, the
//    clock-selecting waits, __libc_single_threaded), on what it has.
// tests/e2e/test_install.py fails on any import above GLIBC_2.28 and names the symbol.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "hangwatch/watchdog/object_by_address.h"

// `name` (hidden) jumps to `name@version`: any signature, variadic ones included.
#define HANGWATCH_PIN(name, version)                                         \
  __asm__(".symver hangwatch_pinned_" #name ", " #name "@" version "\n"      \
          ".pushsection .text.hangwatch_pin_" #name ",\"ax\",@progbits\n"    \
          ".globl " #name "\n"                                               \
          ".hidden " #name "\n"                                              \
          ".type " #name ", @function\n" #name ":\n"                         \
          ".cfi_startproc\n"                                                 \
          "jmp hangwatch_pinned_" #name "@PLT\n"                             \
          ".cfi_endproc\n"                                                   \
          ".size " #name ", . - " #name "\n"                                 \
          ".popsection\n")

// Moved into libc in 2.34 (2.32 for pthread_sigmask): on 2.28 they live in libpthread.so.0
// and libdl.so.2, which the library therefore names as NEEDED. The reader-writer locks
// are for libstdc++'s shared_mutex, which tests/unit/fixtures/libc_only.cc uses.
HANGWATCH_PIN(pthread_create, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_join, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_detach, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_once, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_key_create, "GLIBC_2.2.5");
HANGWATCH_PIN(__pthread_key_create, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_key_delete, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_getspecific, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_setspecific, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_setname_np, "GLIBC_2.12");
HANGWATCH_PIN(pthread_sigmask, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_mutexattr_init, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_mutexattr_destroy, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_mutexattr_setpshared, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_mutexattr_setrobust, "GLIBC_2.12");
HANGWATCH_PIN(pthread_mutex_consistent, "GLIBC_2.12");
HANGWATCH_PIN(pthread_mutex_trylock, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_mutex_timedlock, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_rwlock_rdlock, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_rwlock_wrlock, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_rwlock_trywrlock, "GLIBC_2.2.5");
HANGWATCH_PIN(pthread_rwlock_unlock, "GLIBC_2.2.5");
HANGWATCH_PIN(dlopen, "GLIBC_2.2.5");
HANGWATCH_PIN(dlclose, "GLIBC_2.2.5");
HANGWATCH_PIN(dlsym, "GLIBC_2.2.5");
HANGWATCH_PIN(dladdr, "GLIBC_2.2.5");
HANGWATCH_PIN(dladdr1, "GLIBC_2.3.3");
HANGWATCH_PIN(dlerror, "GLIBC_2.2.5");
// glibc 2.29's libm versions only dropped the SVID error-handling wrapper.
HANGWATCH_PIN(exp2, "GLIBC_2.2.5");
HANGWATCH_PIN(log2, "GLIBC_2.2.5");
HANGWATCH_PIN(pow, "GLIBC_2.2.5");

extern "C" {

// Before 2.33 the stat family were inline wrappers around these, version 1 on x86-64.
int hangwatch_xstat(int ver, const char* path, struct stat* buf);
int hangwatch_lxstat(int ver, const char* path, struct stat* buf);
int hangwatch_fxstat(int ver, int fd, struct stat* buf);
int hangwatch_fxstatat(int ver, int dirfd, const char* path, struct stat* buf, int flags);
__asm__(".symver hangwatch_xstat, __xstat@GLIBC_2.2.5");
__asm__(".symver hangwatch_lxstat, __lxstat@GLIBC_2.2.5");
__asm__(".symver hangwatch_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver hangwatch_fxstatat, __fxstatat@GLIBC_2.4");
constexpr int kStatVersion = 1;  // _STAT_VER_LINUX on x86-64

int stat(const char* path, struct stat* buf) noexcept { return hangwatch_xstat(kStatVersion, path, buf); }
int lstat(const char* path, struct stat* buf) noexcept { return hangwatch_lxstat(kStatVersion, path, buf); }
int fstat(int fd, struct stat* buf) noexcept { return hangwatch_fxstat(kStatVersion, fd, buf); }
int fstatat(int dirfd, const char* path, struct stat* buf, int flags) noexcept {
  return hangwatch_fxstatat(kStatVersion, dirfd, path, buf, flags);
}
// On x86-64 struct stat64 is struct stat.
int stat64(const char* path, struct stat64* buf) noexcept { return stat(path, reinterpret_cast<struct stat*>(buf)); }
int lstat64(const char* path, struct stat64* buf) noexcept { return lstat(path, reinterpret_cast<struct stat*>(buf)); }
int fstat64(int fd, struct stat64* buf) noexcept { return fstat(fd, reinterpret_cast<struct stat*>(buf)); }
int fstatat64(int dirfd, const char* path, struct stat64* buf, int flags) noexcept {
  return fstatat(dirfd, path, reinterpret_cast<struct stat*>(buf), flags);
}

// libgcc's unwinder finds FDEs only through this (2.35), so exceptions depend on it.
int _dl_find_object(void* address, dl_find_object* result) noexcept {
  return hangwatch::watchdog::findObjectByAddress(address, result);
}

// libstdc++ skips atomics when this says the process has one thread; our own copy never does.
char __libc_single_threaded = 0;

// std::random_device's default source (2.36), which the library uses for unique temporary
// file names (atomic_file.cc): the kernel's randomness as glibc's, but where a container
// refuses getrandom and /dev/urandom, a clock and pid mix rather than glibc's abort.
uint32_t arc4random() noexcept {
  uint32_t value = 0;
  ssize_t n;
  while ((n = ::getrandom(&value, sizeof value, 0)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof value)) return value;
  if (FILE* urandom = std::fopen("/dev/urandom", "rbe")) {
    const bool read = std::fread(&value, sizeof value, 1, urandom) == 1;
    std::fclose(urandom);
    if (read) return value;
  }
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint32_t>(now.tv_nsec * 2654435761u) ^ static_cast<uint32_t>(::getpid() << 16) ^
         static_cast<uint32_t>(now.tv_sec);
}

// Waits on a chosen clock (2.30). A CLOCK_MONOTONIC deadline becomes the CLOCK_REALTIME one
// as far away, as libstdc++ itself did before these existed.
namespace {
timespec onRealtimeClock(clockid_t clock, const timespec* deadline) {
  if (clock == CLOCK_REALTIME) return *deadline;
  timespec now_clock{}, now_real{};
  ::clock_gettime(clock, &now_clock);
  ::clock_gettime(CLOCK_REALTIME, &now_real);
  int64_t ns = (deadline->tv_sec - now_clock.tv_sec) * 1'000'000'000LL + (deadline->tv_nsec - now_clock.tv_nsec) +
               now_real.tv_sec * 1'000'000'000LL + now_real.tv_nsec;
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}
}  // namespace

int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline) {
  const timespec real = onRealtimeClock(clock, deadline);
  return ::pthread_cond_timedwait(cond, mutex, &real);
}

int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline) noexcept {
  const timespec real = onRealtimeClock(clock, deadline);
  return ::pthread_mutex_timedlock(mutex, &real);
}

}  // extern "C"
