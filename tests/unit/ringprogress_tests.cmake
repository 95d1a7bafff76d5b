# Ring progress (issue 4, issue 12): the gdb-scripts' debugger-free parsing, and the NCCL
# host-structure layout derived from the installed libnccl.so.2 (skips without one).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME ringprogress.gdb_script_parsers
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_parsers
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  add_test(NAME ringprogress.nccl_host_layout_matches_ptype
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_nccl_host_layout
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  # The cuda backend: the host walk on memory laid out with the installed libnccl.so.2's
  # offsets (skips without one), and the kernel reader's rules on a fake cuda-gdb.
  add_test(NAME ringprogress.cuda_backend_on_real_nccl_layout
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_cuda_backend
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  add_test(NAME ringprogress.cuda_kernel_reader
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_cuda_kernel_reader
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  # The spin-loop matcher on the installed libnccl.so.2's real sm_90 SASS (NVIDIA's cuobjdump
  # from scripts/install-deps.sh --tests; skips without it unless HANGWATCH_REQUIRE_CUOBJDUMP).
  add_test(NAME ringprogress.spin_loops_in_real_nccl_sass
           COMMAND ${Python3_EXECUTABLE} -m unittest -v test_real_sass
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/tests)
  set_tests_properties(ringprogress.gdb_script_parsers ringprogress.nccl_host_layout_matches_ptype
                       ringprogress.cuda_backend_on_real_nccl_layout ringprogress.cuda_kernel_reader
                       ringprogress.spin_loops_in_real_nccl_sass PROPERTIES
    TIMEOUT 300 ENVIRONMENT PYTHONDONTWRITEBYTECODE=1 SKIP_REGULAR_EXPRESSION "skipped ")
endif()
