# Ring progress (issue 4): the gdb-scripts' debugger-free parsing, and the NCCL
# host-structure layout derived from the installed libnccl.so.2 (skips without one).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME ringprogress.gdb_script_parsers
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_parsers
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  add_test(NAME ringprogress.nccl_host_layout_matches_ptype
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_nccl_host_layout
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  set_tests_properties(ringprogress.gdb_script_parsers ringprogress.nccl_host_layout_matches_ptype PROPERTIES
    TIMEOUT 300 ENVIRONMENT PYTHONDONTWRITEBYTECODE=1 SKIP_REGULAR_EXPRESSION "skipped ")
endif()
