# forensics report's verdict (issue #5): loading, the verdict rules, the three formats.
if(TARGET hangwatch_verdict AND TARGET forensics_cli)
  hangwatch_unit_test(verdict hangwatch_verdict forensics_cli)
  target_compile_definitions(verdict_tests PRIVATE HANGWATCH_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures")
endif()
