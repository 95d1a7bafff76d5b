# forensics report on real hung jobs, in abort mode (issues #5, #18); the binary comes in
# through FORENSICS. A job runs until mpirun returns, which is bounded by the collectors.
if(TARGET forensics)
  hangwatch_e2e_test(report.dead_link test_report.CommunicationHangs.test_dead_link_names_the_link 240)
  hangwatch_e2e_test(report.dead_rank test_report.CommunicationHangs.test_dead_rank_names_the_rank 240)
  hangwatch_e2e_test(report.python_dead_link
                     test_report.CommunicationHangs.test_dead_link_in_the_python_example_names_the_link 240)
  hangwatch_e2e_test(report.host_loop
                     test_report.HostSideHangs.test_rank_spinning_in_host_code_is_a_non_communication_hang_with_its_frames 240)
  hangwatch_e2e_test(report.python_dataloader
                     test_report.HostSideHangs.test_python_dataloader_deadlock_names_the_rank_and_its_dataloader_thread 240)
  hangwatch_e2e_test(report.mismatch test_report.HostSideHangs.test_different_collective_on_one_rank_is_a_mismatch 240)
  hangwatch_e2e_test(report.healthy test_report.HealthyJob 240)
  hangwatch_e2e_test(report.damaged_dumps
                     test_report.DamagedDumps.test_deleted_and_truncated_dumps_are_listed_and_the_verdict_stays_right 240)
  hangwatch_e2e_test(report.mixed_jobs test_report.DamagedDumps.test_mixed_in_dumps_of_another_job_are_set_aside 240)
  hangwatch_e2e_test(report.html_screenshot test_report.HtmlReport 240)
  # Node summaries (issue #32): the report from nodes/<host>.json equals the flat one.
  hangwatch_e2e_test(report.node_summary.dead_link test_node_summary.NodeSummaries.test_dead_link_between_nodes 240)
  hangwatch_e2e_test(report.node_summary.dead_rank test_node_summary.NodeSummaries.test_dead_rank_on_the_second_node 240)
  hangwatch_e2e_test(report.node_summary.host_loop test_node_summary.NodeSummaries.test_host_loop_on_three_nodes 240)
  hangwatch_e2e_test(report.node_summary.deadline
                     test_node_summary.NodeSummaries.test_a_node_whose_rank_still_collects_is_summarised_at_the_deadline 240)
  hangwatch_e2e_test(report.node_summary.usage test_node_summary.NodeSummaries.test_usage_errors 60)
  set_property(TEST e2e.report.node_summary.dead_link e2e.report.node_summary.dead_rank e2e.report.node_summary.host_loop
               e2e.report.node_summary.deadline e2e.report.node_summary.usage
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
  set_property(TEST e2e.report.dead_link e2e.report.dead_rank e2e.report.python_dead_link e2e.report.host_loop
               e2e.report.python_dataloader e2e.report.mismatch e2e.report.healthy e2e.report.damaged_dumps
               e2e.report.mixed_jobs e2e.report.html_screenshot
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
