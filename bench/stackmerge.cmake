# Cross-rank stack merge at job scale: StackTree / StackClassifier over 16,384 synthetic ranks,
# and the dump parse it depends on, against a plain memory scan of the same bytes.
add_executable(stackmerge_bench stackmerge_bench.cc)
target_link_libraries(stackmerge_bench PRIVATE benchmark::benchmark hangwatch_dumpio hangwatch_stackmerge hangwatch_common)

# The report's load stage alone over a real or generated job dir (bench/gen_dump_set.py).
add_executable(dump_load_bench dump_load_bench.cc)
target_link_libraries(dump_load_bench PRIVATE hangwatch_dumpio hangwatch_stackmerge hangwatch_common)
