#pragma once
// nccl-tests bandwidth conventions (doc/PERFORMANCE.md of nccl-tests), shared by the
// watchdog's metrics windows and the analyzer so both report the same numbers:
//   algbw = size / time, busbw = algbw * factor(collective, n).
#include <cstdint>
#include <optional>
#include <string_view>

namespace hangwatch {

// 2(n-1)/n for AllReduce; (n-1)/n for AllGather, ReduceScatter and AllToAll; 1 for
// Broadcast, Reduce, Send/Recv. Unknown names: nullopt (no busbw is reported).
std::optional<double> busBandwidthFactor(std::string_view api_name, int nranks);

// nccl-tests' "size" from the API's count*sizeof(dtype) (`api_bytes`): AllGather counts
// the gathered output and ReduceScatter the scattered input, i.e. n times the API count.
double ncclTestsSizeBytes(std::string_view api_name, uint64_t api_bytes, int nranks);

// GB/s (1e9 bytes per second, as nccl-tests prints) for `size_bytes` moved in `ns`.
double gigabytesPerSecond(double size_bytes, double ns);

}  // namespace hangwatch
