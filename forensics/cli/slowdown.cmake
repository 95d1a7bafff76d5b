# `forensics analyze` and `forensics timeline` (issue #6): the slowdown analyzer's commands.
if(TARGET hangwatch_slowdown)
  target_sources(forensics_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/analyze_command.cc
                                       ${CMAKE_CURRENT_LIST_DIR}/timeline_command.cc)
  target_link_libraries(forensics_cli PUBLIC hangwatch_slowdown)
  # `forensics report` says when a hang followed a slowdown (the critical path of the steps before).
  target_compile_definitions(forensics_cli PRIVATE HANGWATCH_WITH_SLOWDOWN=1)
endif()
