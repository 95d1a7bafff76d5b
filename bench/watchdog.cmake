# libhangwatch.so launch-path cost: the same benchmark binary runs with and without
# LD_PRELOAD (bench/watchdog_bench.sh), so the only difference is the interposer.
add_executable(watchdog_launch_bench watchdog_launch_bench.cc)
target_link_libraries(watchdog_launch_bench PRIVATE benchmark::benchmark simcuda simgpu_api)

# The per-collective cost of keeping each communicator's last issued collectives.
add_executable(issued_history_bench issued_history_bench.cc)
target_link_libraries(issued_history_bench PRIVATE benchmark::benchmark hangwatch_watchdog)
