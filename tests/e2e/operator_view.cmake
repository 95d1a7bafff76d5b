# What the operator sees (issue #28): nodes in the report, the dump root, the collector off by
# configuration, file modes on shared storage, the HTML ring in a headless browser.
if(TARGET forensics)
  hangwatch_e2e_test(operator.two_nodes_collector_off test_operator_view.TwoNodeJobWithTheCollectorOff 300)
  set_property(TEST e2e.operator.two_nodes_collector_off APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
