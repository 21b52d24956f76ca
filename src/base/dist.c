// dist.c: the processes of one training run (see dist.h): Open MPI's calls
// when built with TINYGPT_MPI (make MPI=1), else one process and nothing to do.
//
// Reading order: file 33b.
#include "dist.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"  // now_seconds, fopen_checked, read_exact, stream_size

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

// ===========================================================================
// Rank 0's files, sent to every rank: built on dist_broadcast, so the same
// code in both builds (with one process each broadcast returns at once).

int dist_rank0_result(const Dist *d, int status, Error *err) {
    dist_broadcast(d, &status, sizeof status);
    if (status) dist_broadcast(d, err, sizeof *err);
    return status;
}

// Rank 0 sends the file a piece at a time, so no rank ever holds it twice
// (a checkpoint may be as large as the memory allows), each piece after
// rank 0's word that it could read it: a disk can fail midway.
enum { PIECE_BYTES = 1 << 24 };

FILE *dist_fopen(const Dist *d, const char *path, Error *err) {
    if (d->size == 1) return fopen_checked(path, "rb", err);
    // 1. Rank 0 opens the file and tells its length, or why it cannot.
    FILE *f = NULL;
    uint64_t size = 0;
    int status = 0;
    if (d->rank == 0) {
        f = fopen_checked(path, "rb", err);
        status = f && stream_size(f, path, &size, err) ? 0 : EXIT_RUNTIME;
    }
    if (dist_rank0_result(d, status, err)) {
        if (f) fclose(f);
        return NULL;
    }
    dist_broadcast(d, &size, sizeof size);
    // 2. The other ranks: a stream in memory of that length. With no buffer
    // given, fmemopen allocates it (and fclose frees it); mode "r+" makes
    // all "size" bytes the stream's from the start ("w+" would keep the
    // last byte for a NUL).
    FILE *copy = f;
    if (d->rank != 0 && !(copy = fmemopen(NULL, size, "r+")))
        die(EXIT_RUNTIME, "out of memory for rank 0's '%s' (%llu bytes)", path, (unsigned long long)size);
    // 3. The bytes.
    char *piece = xmalloc(size < PIECE_BYTES ? (size_t)size + 1 : PIECE_BYTES);  // + 1: never xmalloc(0)
    for (uint64_t done = 0; done < size;) {
        size_t n = size - done < PIECE_BYTES ? (size_t)(size - done) : PIECE_BYTES;
        status = d->rank == 0 && !read_exact(piece, n, f, path, err) ? EXIT_RUNTIME : 0;
        if (dist_rank0_result(d, status, err)) {
            fclose(copy);
            free(piece);
            return NULL;
        }
        dist_broadcast(d, piece, n);
        if (d->rank != 0 && fwrite(piece, 1, n, copy) != n)
            die(EXIT_RUNTIME, "cannot copy rank 0's '%s' into memory: %s", path, strerror(errno));
        done += n;
    }
    free(piece);
    if (fseeko(copy, 0, SEEK_SET) != 0)  // each rank reads from the start
        die(EXIT_RUNTIME, "cannot go back to the start of '%s': %s", path, strerror(errno));
    return copy;
}
