// dist.c: the processes of one training run (see dist.h): Open MPI's calls
// when built with TINYGPT_MPI (make MPI=1), else one process and nothing to do.
//
// Reading order: file 33b.
#include "dist.h"

#include <stdlib.h>

#include "common.h"  // now_seconds

#ifdef TINYGPT_MPI
#include <limits.h>
#include <mpi.h>

// dist_init: mpirun (or another launcher) puts the job's size in the
// environment; without it, a run is the plain program's, and MPI is never
// started (its singleton start-up is slow and prints on some systems).
void dist_init(Dist *d) {
    *d = (Dist){.rank = 0, .size = 1};
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) return;
    MPI_Init(NULL, NULL);
    d->joined = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
}

void dist_finish(Dist *d) {
    if (d->joined) MPI_Finalize();
    d->joined = false;
}

void dist_abort(const Dist *d, int status) {
    if (d->joined && d->size > 1) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

// MPI counts elements in an int: a buffer longer than INT_MAX elements goes
// in pieces.
void dist_sum_floats(Dist *d, float *x, size_t n) {
    if (d->size == 1) return;
    double start = now_seconds();
    for (size_t done = 0; done < n;) {
        int count = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        MPI_Allreduce(MPI_IN_PLACE, x + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        done += (size_t)count;
    }
    d->reduce_seconds += now_seconds() - start;
}

void dist_sum_doubles(const Dist *d, double *x, int n) {
    if (d->size > 1) MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int dist_max_int(const Dist *d, int value) {
    if (d->size > 1) MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return value;
}

bool dist_rank0_says(const Dist *d, bool value) {
    int v = value;
    if (d->size > 1) MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v != 0;
}

void dist_broadcast(const Dist *d, void *buf, size_t bytes) {
    if (d->size == 1) return;
    for (size_t done = 0; done < bytes;) {
        int count = bytes - done > INT_MAX ? INT_MAX : (int)(bytes - done);
        MPI_Bcast((char *)buf + done, count, MPI_BYTE, 0, MPI_COMM_WORLD);
        done += (size_t)count;
    }
}

#else  // the plain build: one process, rank 0 of 1

void dist_init(Dist *d) { *d = (Dist){.rank = 0, .size = 1}; }
void dist_finish(Dist *d) { (void)d; }
void dist_abort(const Dist *d, int status) {
    (void)d;
    exit(status);
}
void dist_sum_floats(Dist *d, float *x, size_t n) { (void)d, (void)x, (void)n; }
void dist_sum_doubles(const Dist *d, double *x, int n) { (void)d, (void)x, (void)n; }
int dist_max_int(const Dist *d, int value) { (void)d; return value; }
bool dist_rank0_says(const Dist *d, bool value) { (void)d; return value; }
void dist_broadcast(const Dist *d, void *buf, size_t bytes) { (void)d, (void)buf, (void)bytes; }

#endif
