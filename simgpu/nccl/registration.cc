// User-buffer registration (ncclCommRegister) and symmetric-memory windows
// (ncclCommWindowRegister, NCCL >= 2.27). On simgpu every buffer is host memory that
// any rank's channels copy from, so a registered buffer or window works like any other
// buffer in a collective; these calls keep NCCL's bookkeeping and argument rules
// (src/register/register.cc, src/dev_runtime.cc).
#include <nccl.h>

#include <string>

#include "hangwatch/simgpu/nccl/comm_handle.h"
#include "hangwatch/simgpu/nccl/group.h"

namespace {

ncclResult_t fail(ncclResult_t code, const std::string& message) {
  simnccl::setLastError(message);
  return code;
}

struct Registration {
  void* buff;
  size_t size;
};

}  // namespace

namespace simnccl {

bool insideRegisteredBuffer(ncclComm& comm, const void* buff, size_t bytes) {
  const auto* begin = static_cast<const char*>(buff);
  std::lock_guard<std::mutex> lock(comm.registry_mutex);
  for (void* handle : comm.registrations) {
    const auto* reg = static_cast<const Registration*>(handle);
    const auto* base = static_cast<const char*>(reg->buff);
    if (begin >= base && begin + bytes <= base + reg->size) return true;
  }
  return false;
}

}  // namespace simnccl

extern "C" {

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister : comm argument is NULL");
  if (handle == nullptr) return fail(ncclInvalidArgument, "ncclCommRegister : handle argument is NULL");
  if (!comm->state) return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  auto* reg = new Registration{buff, size};
  std::lock_guard<std::mutex> lock(comm->registry_mutex);
  comm->registrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDeregister : comm argument is NULL");
  std::lock_guard<std::mutex> lock(comm->registry_mutex);
  if (comm->registrations.erase(handle) == 0) return fail(ncclInvalidUsage, "Deregister: Could not find handle");
  delete static_cast<Registration*>(handle);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowRegister : comm argument is NULL");
  if (buff == nullptr || size == 0) return ncclSuccess;  // NCCL registers nothing and leaves *win alone
  if (win == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowRegister : win argument is NULL");
  if (!comm->state) return fail(ncclInvalidArgument, "Attempt to use communicator before the previous operation returned ncclSuccess");
  auto* window = new ncclWindow_vidmem{buff, size, winFlags};
  std::lock_guard<std::mutex> lock(comm->registry_mutex);
  comm->windows.insert(window);
  *win = window;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (win == nullptr) return ncclSuccess;
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommWindowDeregister : comm argument is NULL");
  std::lock_guard<std::mutex> lock(comm->registry_mutex);
  if (comm->windows.erase(win) == 0) return fail(ncclInvalidArgument, "ncclCommWindowDeregister: unknown window");
  delete win;
  return ncclSuccess;
}

}  // extern "C"
