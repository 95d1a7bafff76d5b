# The profiler chain's cost per NCCL callback, with and without a job plugin behind it
# (bench/profiler_chain_bench.cc; the ratio of one run is what to report).
add_executable(profiler_chain_bench profiler_chain_bench.cc)
target_link_libraries(profiler_chain_bench PRIVATE benchmark::benchmark hangwatch_metrics)
