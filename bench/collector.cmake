# forensics collect against eu-stack and gdb on the same hung ranks, and 8 ranks in
# parallel against one: `ninja collector_bench` prints medians and ratios.
add_custom_target(collector_bench
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/collector_bench.py --build ${PROJECT_BINARY_DIR}
          --json ${CMAKE_CURRENT_BINARY_DIR}/collector_bench.json
  DEPENDS forensics ring_train trainshim
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  USES_TERMINAL)
