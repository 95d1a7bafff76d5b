# Prometheus textfiles and alert rules (issue 14), against a real node exporter and
# Prometheus on loopback.
hangwatch_e2e_test(prometheus.rules test_prometheus.ShippedRules 60)
if(TARGET forensics)
  hangwatch_e2e_test(prometheus.live_job test_prometheus.LiveJob 240)
  set_property(TEST e2e.prometheus.live_job APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
