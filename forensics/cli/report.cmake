# forensics report (issue #5): the command and the verdict library behind it.
target_sources(forensics_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/report_command.cc ${CMAKE_CURRENT_LIST_DIR}/split_dumps.cc ${CMAKE_CURRENT_LIST_DIR}/node_summary_command.cc)
target_link_libraries(forensics_cli PUBLIC hangwatch_verdict)
