#pragma once
// Host-side misbehaviour a rank can be told to show (DESIGN.md §3). The names are
// what an operator finds on the rank's stack, so they are extern "C" and never inlined.

// Spins forever without calling the next collective: a rank stuck in host code.
extern "C" [[noreturn]] void stall_in_host_loop(int step);

// Sleeps forever: a rank waiting on something outside the job.
extern "C" [[noreturn]] void stall_in_sleep(int step);

// A stop-the-world pause of `ms` milliseconds, like a garbage collector's.
extern "C" void gc_pause(int ms);

// Ends this process while its GPU runs a collective: how = 0 SIGKILL, 1 abort(), 2 exit(1).
extern "C" [[noreturn]] void exit_mid_collective(int step, int how);
// Stops every thread of this process (SIGSTOP) while its GPU runs a collective: frozen but
// alive, as a host stuck in the kernel or a stopped job step; it goes on once continued.
extern "C" void freeze_mid_collective(int step);
