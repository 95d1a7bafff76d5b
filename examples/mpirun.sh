#!/usr/bin/env bash
# Starts an MPI job the way the tests and the demo do, with the settings OpenMPI
# needs in a container: run as root, more ranks than cores, no core binding (ranks
# must share two cores), shared-memory transport without the ptrace-based
# single-copy path that containers often forbid.
#   examples/mpirun.sh -np 4 build/examples/ring_train/ring_train --steps 20
exec mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl self,vader --mca btl_vader_single_copy_mechanism none "$@"
