# Real Slurm (issue #44): Debian's slurmctld, slurmd and srun on a one-machine cluster that
# slurm_cluster.py starts once for every case of test_slurm.RealSlurm. scripts/test.sh installs
# them (install-deps.sh --tests) and sets HANGWATCH_REQUIRE_SLURM: there a missing Slurm fails
# instead of skipping.
if(TARGET forensics)
  hangwatch_e2e_test(slurm.real_srun test_slurm.RealSlurm 360)
  set_property(TEST e2e.slurm.real_srun APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
