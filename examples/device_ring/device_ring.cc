// device_ring: one process driving several GPUs, as NCCL's single-process examples
// do: communicators from ncclCommInitAll, and every step a ring exchange (each device
// sends its block to the next device and receives the previous one's), issued either
// by one thread in one group for all devices or by one thread per device. With --id-file,
// several processes under a launcher each drive --devices devices of one communicator, as
// nccl-tests -g/-t do: process p holds communicator ranks p*N .. p*N+N-1 on those devices.
//   device_ring [--devices N] [--steps S] [--count C] [--threads] [--stream0] [--register|--window]
//               [--log-every N] [--id-file PATH]
// Prints "device_ring step=S done" and, at the end, "device_ring OK"; exit 1 on a wrong result.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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
  bool allreduce = false;  // an AllReduce of every rank's block instead of the ring exchange
  std::string id_file;  // several processes: where process 0 leaves NCCL's unique id
  int process = 0;      // this process's launcher rank, and how many there are
  int processes = 1;
  int rankOf(int d) const { return process * devices + d; }  // communicator rank, and its device
  int world() const { return processes * devices; }
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
    "  --allreduce    each step an ncclAllReduce (sum) of every rank's block, as nccl-tests'\n"
    "                 all_reduce_perf, instead of the ring exchange\n"
    "  --id-file PATH several processes under a launcher (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*,\n"
    "                 SLURM_PROCID/SLURM_NTASKS): process 0 writes NCCL's unique id to PATH, the\n"
    "                 others read it; process p drives devices p*N .. p*N+N-1, one communicator\n"
    "                 rank each, of one communicator of all processes' devices\n"
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
    else if (a == "--id-file") {
      if (i + 1 >= argc) throw std::string(a + " needs a value");
      o->id_file = argv[++i];
    }
    else if (a == "--threads") o->threads = true;
    else if (a == "--allreduce") o->allreduce = true;
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
  std::vector<float> host(o.count, valueOf(o.rankOf(d), step));
  CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
  CHECK_CUDA(cudaMemcpy(dev.send, host.data(), o.count * sizeof(float), cudaMemcpyHostToDevice));
}

bool verify(const Options& o, Device& dev, int d, int step) {
  std::vector<float> host(o.count);
  CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
  CHECK_CUDA(cudaStreamSynchronize(dev.stream));
  CHECK_CUDA(cudaMemcpy(host.data(), dev.recv, o.count * sizeof(float), cudaMemcpyDeviceToHost));
  float want = valueOf((o.rankOf(d) + o.world() - 1) % o.world(), step);
  if (o.allreduce) {
    want = 0;
    for (int r = 0; r < o.world(); ++r) want += valueOf(r, step);
  }
  return host.front() == want && host.back() == want;
}

void exchange(const Options& o, Device& dev, int d) {
  if (o.allreduce) {
    CHECK_NCCL(ncclAllReduce(dev.send, dev.recv, o.count, ncclFloat32, ncclSum, dev.comm, dev.stream));
    return;
  }
  const int r = o.rankOf(d), w = o.world();
  CHECK_NCCL(ncclSend(dev.send, o.count, ncclFloat32, (r + 1) % w, dev.comm, dev.stream));
  CHECK_NCCL(ncclRecv(dev.recv, o.count, ncclFloat32, (r + w - 1) % w, dev.comm, dev.stream));
}

// Which process of how many, from the launcher's variables; false when none is set.
bool launcherRank(Options* o) {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"RANK", "WORLD_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}, {"PMI_RANK", "PMI_SIZE"}};
  for (auto& [rank, size] : pairs) {
    const char* r = std::getenv(rank);
    const char* n = std::getenv(size);
    if (r == nullptr || n == nullptr) continue;
    o->process = std::atoi(r);
    o->processes = std::atoi(n);
    return o->processes > 0 && o->process >= 0 && o->process < o->processes;
  }
  return false;
}

// Process 0 makes the id and leaves it in the file (written aside, then renamed); the others
// wait for it, for a minute at most.
ncclUniqueId sharedId(const Options& o) {
  ncclUniqueId id;
  if (o.process == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    const std::string tmp = o.id_file + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
    if (std::rename(tmp.c_str(), o.id_file.c_str()) != 0) {
      std::fprintf(stderr, "device_ring: cannot write %s: %s\n", o.id_file.c_str(), std::strerror(errno));
      std::exit(3);
    }
    return id;
  }
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(o.id_file, std::ios::binary);
    if (in.read(id.internal, sizeof id.internal)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "device_ring: no unique id in %s after 60 s\n", o.id_file.c_str());
  std::exit(3);
}

// GPU work before any communicator: the process's rank is not known yet (no launcher).
void warmUp(const Options& o) {
  if (o.warmup == 0) return;
  CHECK_CUDA(cudaSetDevice(o.rankOf(0)));
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
  if (o.id_file.empty()) {
    CHECK_NCCL(ncclCommInitAll(comms.data(), o.devices, nullptr));
  } else {
    const ncclUniqueId id = sharedId(o);
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < o.devices; ++d) {
      CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
      CHECK_NCCL(ncclCommInitRank(&comms[d], o.world(), id, o.rankOf(d)));
    }
    CHECK_NCCL(ncclGroupEnd());
  }
  std::vector<Device> devs(o.devices);
  for (int d = 0; d < o.devices; ++d) {
    Device& dev = devs[d];
    dev.comm = comms[d];
    CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
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
        CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
        CHECK_NCCL(ncclGroupStart());
        exchange(o, devs[d], d);
        CHECK_NCCL(ncclGroupEnd());
      });
    for (auto& t : threads) t.join();
  } else {
    CHECK_CUDA(cudaSetDevice(o.rankOf(0)));
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < o.devices; ++d) exchange(o, devs[d], d);
    CHECK_NCCL(ncclGroupEnd());
  }
  bool ok = true;
  for (int d = 0; d < o.devices; ++d) {
    if (!verify(o, devs[d], d, step)) {
      std::fprintf(stderr, "device_ring FAIL device=%d step=%d: wrong block received\n", o.rankOf(d), step);
      ok = false;
    }
  }
  return ok;
}

void tearDown(const Options& o, std::vector<Device>& devs) {
  for (int d = 0; d < o.devices; ++d) {
    CHECK_CUDA(cudaSetDevice(o.rankOf(d)));
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
  if (!o.id_file.empty() && !launcherRank(&o)) {
    std::fprintf(stderr, "device_ring: --id-file needs a launcher's rank and size (RANK/WORLD_SIZE, "
                         "OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS)\n");
    return 2;
  }
  int available = 0;
  CHECK_CUDA(cudaGetDeviceCount(&available));
  if (available < o.rankOf(o.devices)) {
    std::fprintf(stderr, "device_ring: devices %d-%d asked for, %d present\n", o.rankOf(0), o.rankOf(o.devices) - 1,
                 available);
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
