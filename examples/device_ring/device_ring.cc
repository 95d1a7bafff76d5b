// device_ring: one process driving several GPUs, as NCCL's single-process examples
// do: communicators from ncclCommInitAll, and every step a ring exchange (each device
// sends its block to the next device and receives the previous one's), issued either
// by one thread in one group for all devices or by one thread per device.
//   device_ring [--devices N] [--steps S] [--count C] [--threads] [--stream0] [--register|--window]
//               [--log-every N]
// Prints "device_ring step=S done" and, at the end, "device_ring OK"; exit 1 on a wrong result.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace {

struct Options {
  int devices = 4;
  int steps = 20;
  size_t count = 1 << 16;
  bool threads = false;
  bool stream0 = false;
  bool register_buffers = false;  // ncclCommRegister the blocks
  bool windows = false;           // ncclMemAlloc the blocks and register them as windows
  int log_every = 1;
  int warmup = 0;  // host-to-device copies on device 0 before any communicator exists
};

const char* kUsage =
    "usage: device_ring [options]   (one process, several devices)\n"
    "  --devices N    devices, one communicator rank each (default 4)\n"
    "  --steps S      ring exchanges (default 20)\n"
    "  --count C      floats per block (default 65536)\n"
    "  --threads      one host thread per device instead of one thread and one group\n"
    "  --stream0      issue on stream 0 (each device's default stream) instead of own streams\n"
    "  --register     register the blocks with ncclCommRegister\n"
    "  --window       allocate the blocks with ncclMemAlloc and register them as windows\n"
    "  --log-every N  print \"device_ring step=S done\" every N steps (default 1)\n"
    "  --warmup N     N host-to-device copies on device 0 before the communicators are made, as a\n"
    "                 program loads its model before NCCL's init (default 0)\n"
    "  --help         this text\n";

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](long min) -> long {
      if (i + 1 >= argc) throw std::string(a + " needs a value");
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < min) throw fmt::format("{}: '{}' is not a number >= {}", a, argv[i], min);
      return v;
    };
    if (a == "--devices") o->devices = static_cast<int>(value(2));
    else if (a == "--steps") o->steps = static_cast<int>(value(1));
    else if (a == "--count") o->count = static_cast<size_t>(value(1));
    else if (a == "--log-every") o->log_every = static_cast<int>(value(1));
    else if (a == "--warmup") o->warmup = static_cast<int>(value(0));
    else if (a == "--threads") o->threads = true;
    else if (a == "--stream0") o->stream0 = true;
    else if (a == "--register") o->register_buffers = true;
    else if (a == "--window") o->windows = true;
    else if (a == "--help") return false;
    else throw std::string("unknown option " + a);
  }
  return true;
}

#define CHECK_CUDA(call)                                                                        \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "device_ring: %s failed: %s\n", #call, cudaGetErrorString(e_));     \
      std::exit(3);                                                                             \
    }                                                                                           \
  } while (0)
#define CHECK_NCCL(call)                                                                        \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess) {                                                                    \
      std::fprintf(stderr, "device_ring: %s failed: %s\n", #call, ncclGetErrorString(r_));     \
      std::exit(3);                                                                             \
    }                                                                                           \
  } while (0)

struct Device {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  void* registrations[2] = {nullptr, nullptr};
  ncclWindow_t windows[2] = {nullptr, nullptr};
};

float valueOf(int device, int step) { return static_cast<float>(device * 1000 + step); }

void fill(const Options& o, Device& dev, int d, int step) {
  std::vector<float> host(o.count, valueOf(d, step));
  CHECK_CUDA(cudaSetDevice(d));
  CHECK_CUDA(cudaMemcpy(dev.send, host.data(), o.count * sizeof(float), cudaMemcpyHostToDevice));
}

bool verify(const Options& o, Device& dev, int d, int step) {
  std::vector<float> host(o.count);
  CHECK_CUDA(cudaSetDevice(d));
  CHECK_CUDA(cudaStreamSynchronize(dev.stream));
  CHECK_CUDA(cudaMemcpy(host.data(), dev.recv, o.count * sizeof(float), cudaMemcpyDeviceToHost));
  const float want = valueOf((d + o.devices - 1) % o.devices, step);
  return host.front() == want && host.back() == want;
}

void exchange(const Options& o, Device& dev, int d) {
  CHECK_NCCL(ncclSend(dev.send, o.count, ncclFloat32, (d + 1) % o.devices, dev.comm, dev.stream));
  CHECK_NCCL(ncclRecv(dev.recv, o.count, ncclFloat32, (d + o.devices - 1) % o.devices, dev.comm, dev.stream));
}

// GPU work before any communicator: the process's rank is not known yet (no launcher).
void warmUp(const Options& o) {
  if (o.warmup == 0) return;
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreate(&stream));
  float* block = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&block), o.count * sizeof(float)));
  std::vector<float> host(o.count, 1.0f);
  for (int i = 0; i < o.warmup; ++i)
    CHECK_CUDA(cudaMemcpyAsync(block, host.data(), o.count * sizeof(float), cudaMemcpyHostToDevice, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaFree(block));
  CHECK_CUDA(cudaStreamDestroy(stream));
}

// Communicators from ncclCommInitAll, a stream (unless --stream0) and two blocks per device.
std::vector<Device> setUp(const Options& o) {
  std::vector<ncclComm_t> comms(o.devices);
  CHECK_NCCL(ncclCommInitAll(comms.data(), o.devices, nullptr));
  std::vector<Device> devs(o.devices);
  for (int d = 0; d < o.devices; ++d) {
    Device& dev = devs[d];
    dev.comm = comms[d];
    CHECK_CUDA(cudaSetDevice(d));
    if (!o.stream0) CHECK_CUDA(cudaStreamCreate(&dev.stream));
    if (o.windows) {
      CHECK_NCCL(ncclMemAlloc(reinterpret_cast<void**>(&dev.send), o.count * sizeof(float)));
      CHECK_NCCL(ncclMemAlloc(reinterpret_cast<void**>(&dev.recv), o.count * sizeof(float)));
    } else {
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev.send), o.count * sizeof(float)));
      CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev.recv), o.count * sizeof(float)));
    }
  }
  return devs;
}

// Registration is collective over the communicator's ranks: one group for all devices.
void registerBlocks(const Options& o, std::vector<Device>& devs) {
  CHECK_NCCL(ncclGroupStart());
  for (int d = 0; d < o.devices; ++d) {
    Device& dev = devs[d];
    float* blocks[2] = {dev.send, dev.recv};
    for (int b = 0; b < 2; ++b) {
      if (o.windows)
        CHECK_NCCL(ncclCommWindowRegister(dev.comm, blocks[b], o.count * sizeof(float), &dev.windows[b],
                                          NCCL_WIN_COLL_SYMMETRIC));
      else
        CHECK_NCCL(ncclCommRegister(dev.comm, blocks[b], o.count * sizeof(float), &dev.registrations[b]));
    }
  }
  CHECK_NCCL(ncclGroupEnd());
}

// One ring exchange; false when a device received a wrong block.
bool runStep(const Options& o, std::vector<Device>& devs, int step) {
  for (int d = 0; d < o.devices; ++d) fill(o, devs[d], d, step);
  if (o.threads) {
    std::vector<std::thread> threads;
    for (int d = 0; d < o.devices; ++d)
      threads.emplace_back([&, d] {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_NCCL(ncclGroupStart());
        exchange(o, devs[d], d);
        CHECK_NCCL(ncclGroupEnd());
      });
    for (auto& t : threads) t.join();
  } else {
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < o.devices; ++d) exchange(o, devs[d], d);
    CHECK_NCCL(ncclGroupEnd());
  }
  bool ok = true;
  for (int d = 0; d < o.devices; ++d) {
    if (!verify(o, devs[d], d, step)) {
      std::fprintf(stderr, "device_ring FAIL device=%d step=%d: wrong block received\n", d, step);
      ok = false;
    }
  }
  return ok;
}

void tearDown(const Options& o, std::vector<Device>& devs) {
  for (int d = 0; d < o.devices; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    for (int b = 0; b < 2; ++b) {
      if (devs[d].windows[b]) CHECK_NCCL(ncclCommWindowDeregister(devs[d].comm, devs[d].windows[b]));
      if (devs[d].registrations[b]) CHECK_NCCL(ncclCommDeregister(devs[d].comm, devs[d].registrations[b]));
    }
    if (o.windows) {
      ncclMemFree(devs[d].send);
      ncclMemFree(devs[d].recv);
    } else {
      cudaFree(devs[d].send);
      cudaFree(devs[d].recv);
    }
    if (devs[d].stream) cudaStreamDestroy(devs[d].stream);
    ncclCommDestroy(devs[d].comm);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    if (!parse(argc, argv, &o)) {
      std::printf("%s", kUsage);
      return 0;
    }
  } catch (const std::string& e) {
    std::fprintf(stderr, "device_ring: %s\n%s", e.c_str(), kUsage);
    return 2;
  }
  int available = 0;
  CHECK_CUDA(cudaGetDeviceCount(&available));
  if (available < o.devices) {
    std::fprintf(stderr, "device_ring: %d devices asked for, %d present\n", o.devices, available);
    return 2;
  }
  warmUp(o);
  std::vector<Device> devs = setUp(o);
  if (o.register_buffers || o.windows) registerBlocks(o, devs);
  bool ok = true;
  for (int step = 0; step < o.steps && ok; ++step) {
    ok = runStep(o, devs, step);
    if (ok && (step + 1) % o.log_every == 0) {
      std::printf("device_ring step=%d done\n", step);
      std::fflush(stdout);
    }
  }
  tearDown(o, devs);
  if (!ok) return 1;
  std::printf("device_ring OK\n");
  return 0;
}
