# What `forensics analyze` costs on a 64-rank pipeline job's timelines with the critical-path pass
# and without it (bench/analyze_bench.cc; the ratio of one run, its x_op_by_op counter, is what to
# report). The job's op order comes from the 1F1B schedule ring_train runs.
if(TARGET ring_train_schedule)
  add_executable(analyze_bench analyze_bench.cc)
  target_link_libraries(analyze_bench PRIVATE benchmark::benchmark hangwatch_slowdown hangwatch_common ring_train_schedule)
endif()
