// dist.h: the processes of one training run, and what they share.
//
// Reading order: file 33b, before train_setup.c and train.c, its only
// users. Under `mpirun -np N tinygpt train ...` (a build made with `make
// MPI=1`), N copies of tinygpt train one model together, data parallel:
// each runs forward and backward on its own rows of the batch, then
// dist_sum_floats adds the N gradients (Open MPI's MPI_Allreduce, in place
// on the one gradient buffer), so every copy holds the same sum and takes
// the same optimizer step. Rank 0 alone reads the files, prints and writes.
//
// Built without MPI, or run without mpirun, there is one process, rank 0
// of 1, and every call here returns at once (dist_fopen just opens the
// file): the training loop reads the same either way, and does the same
// arithmetic as before MPI existed.
// Everything MPI is in dist.c, behind TINYGPT_MPI (set by `make MPI=1`).
//
// Only rank 0 need have the files: the training text (train_setup.c sends
// its tokens), and with --resume or --init the run directory or
// checkpoint. Each file a run starts from is opened with dist_fopen, which
// has rank 0 read it and send its bytes, and every rank parses the same
// bytes with the same code; a failure rank 0 alone can see (no such file,
// the run directory locked) reaches every rank through dist_rank0_result.
#ifndef TINYGPT_DIST_H
#define TINYGPT_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common.h"

typedef struct {
    int rank;               // this process, in [0, size); rank 0 prints and writes
    int size;               // the processes of the run (mpirun -np N); 1 without mpirun
    bool joined;            // MPI_Init was called (dist_finish must finalise)
    double reduce_seconds;  // time spent in dist_sum_floats so far (the bench's allreduce share)
} Dist;

// dist_init: join mpirun's job when there is one (its environment says
// so), else be rank 0 of 1 without starting MPI at all.
void dist_init(Dist *d);
// dist_finish: leave the job (MPI_Finalize); every rank must call it.
void dist_finish(Dist *d);
// dist_abort: end every rank of the job with "status" (after rank 0 has
// said why); a plain exit without mpirun.
void dist_abort(const Dist *d, int status);

// The collectives: every rank calls each, in the same order, with the same
// sizes. With one process each is a no-op (or returns its argument).
//
// dist_sum_floats: x[n] <- the sum over ranks of x[n], in place.
void dist_sum_floats(Dist *d, float *x, size_t n);
// dist_sum_doubles: x[n] <- the sum over ranks of x[n], in place.
void dist_sum_doubles(const Dist *d, double *x, int n);
// dist_max_int: the largest of the ranks' "value"s.
int dist_max_int(const Dist *d, int value);
// dist_rank0_says: rank 0's "value", on every rank (a decision only rank 0
// can make, such as the clock's: each rank's clock differs a little).
bool dist_rank0_says(const Dist *d, bool value);
// dist_broadcast: rank 0's "bytes" bytes at "buf" copied into every rank's "buf".
void dist_broadcast(const Dist *d, void *buf, size_t bytes);

// Built on dist_broadcast, so the same code in both builds:
//
// dist_rank0_result: rank 0's "status" (0, or the exit status it must stop
// with) on every rank, and when it is not 0, rank 0's "err" too: the
// outcome of something only rank 0 does, such as opening a file or locking
// the run directory. Every rank then stops with rank 0's status and
// message, rather than wait for it at the next collective.
int dist_rank0_result(const Dist *d, int status, Error *err);
// dist_fopen: rank 0's file "path", open for reading on every rank: on
// rank 0 the file itself; on the others a stream in memory (fmemopen) of
// the bytes rank 0 read and sent. With one process, fopen_checked. NULL on
// every rank, with rank 0's message in "err", if rank 0 could not read it.
// The caller fcloses it (the copy in memory goes with it).
FILE *dist_fopen(const Dist *d, const char *path, Error *err);

#endif
