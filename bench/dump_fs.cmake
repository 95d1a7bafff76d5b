# The dump folder's file operations as the storage thread does them: in this process, and
# through its helper process (watchdog/io_helper.h). The ratio is what the helper adds.
if(TARGET forensics)
  add_executable(dump_fs_bench dump_fs_bench.cc)
  target_link_libraries(dump_fs_bench PRIVATE benchmark::benchmark hangwatch_watchdog)
  add_dependencies(dump_fs_bench forensics)
  target_compile_definitions(dump_fs_bench PRIVATE FORENSICS_BINARY="$<TARGET_FILE:forensics>")
endif()
