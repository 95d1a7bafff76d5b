#pragma once
// How the ranks of an example find each other before NCCL takes over. Under mpirun (or
// srun with PMI) that is MPI. Under torchrun, or a Slurm script that sets up env:// as
// PyTorch users do, there is no MPI: the rank and size come from RANK/WORLD_SIZE/LOCAL_RANK
// (else SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID) and rank 0 serves a small key-value store at
// MASTER_ADDR:MASTER_PORT, as torch's TCPStore does. Either way only NCCL unique ids and a
// final barrier go through it.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int localRank() const { return local_rank_; }
  const char* kind() const { return kind_; }

  // Called by every rank of the job, in the same order: `members` (global ranks, ascending)
  // receive the `bytes` that members[0] passes; the others' `data` is overwritten.
  virtual void share(const std::vector<int>& members, void* data, size_t bytes) = 0;
  virtual void barrier() = 0;
  // Ends the whole job (a lone rank exiting would leave the others hung).
  [[noreturn]] virtual void abort(int code) = 0;
  virtual void finalize() = 0;

 protected:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  const char* kind_ = "";
};

// MPI when the launcher is an MPI one or no env:// variables are set; env:// otherwise.
std::unique_ptr<Bootstrap> startBootstrap(int* argc, char*** argv);
// Over an MPI_COMM_WORLD the caller initialised.
std::unique_ptr<Bootstrap> mpiBootstrap();
