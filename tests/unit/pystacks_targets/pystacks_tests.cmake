# Included from tests/unit/CMakeLists.txt. Builds the reader standalone when
# forensics/CMakeLists.txt does not (yet) add it, so either landing order works.
if(NOT TARGET forensics_python)
  add_subdirectory(${PROJECT_SOURCE_DIR}/forensics/python ${CMAKE_BINARY_DIR}/forensics_python_standalone)
endif()

# Like hangwatch_unit_test(pystacks forensics_python), plus: a test whose
# interpreter or headers are not installed prints "SKIPPED:" and CTest reports it skipped.
file(GLOB pystacks_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/pystacks*_test.cc)
if(NOT pystacks_srcs)
  return()
endif()
add_executable(pystacks_tests ${unit_tests_in_all} ${pystacks_srcs})
add_dependencies(unit_tests pystacks_tests)
target_link_libraries(pystacks_tests PRIVATE catch_main forensics_python)
target_compile_definitions(pystacks_tests PRIVATE
  PYSTACKS_TARGETS_DIR="${CMAKE_CURRENT_SOURCE_DIR}/pystacks_targets"
  PYSTACKS_C_COMPILER="${CMAKE_C_COMPILER}")
if(HANGWATCH_UNIT_TESTS)
  catch_discover_tests(pystacks_tests TEST_PREFIX "pystacks." PROPERTIES TIMEOUT 120 SKIP_REGULAR_EXPRESSION "SKIPPED:")
endif()
