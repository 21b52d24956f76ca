// parallel.h: when a loop over threads starts a parallel region of its own.
//
// Reading order: file 11b, before block.c, its first user; the fast
// kernels (file 17 on) use it too. Their loops are orphaned `omp for`s:
// they share their iterations among the threads of the parallel region
// they run in, or, outside any, the calling thread runs them all.
// RUN_SHARED gives such loops a region of their own only when it pays:
// when no region is running them already and the work is worth waking the
// threads for.
//
// Why not always `#pragma omp parallel ... if (...)`: inside a region (a
// slice's team of one, model.h) that makes a nested team of one thread,
// which libgomp builds and tears down on every call, ~3 us with a futex
// call on a 2-core Zen 5; the baby gpt's slices made ~100 a step each. And
// a region whose `if` is false costs the same, so small work runs without
// one. Inside a region whose team has more than one thread, every thread
// must make the call (a worksharing loop is met by the whole team), and a
// last loop may end without a barrier ("nowait"): the caller's region end
// waits. tinygpt calls them inside a region only from a slice's team of
// one. (The plain layers of files 3-10 keep their `#pragma omp parallel
// for`: one line, read first.)
#ifndef TINYGPT_PARALLEL_H
#define TINYGPT_PARALLEL_H

#include <omp.h>
#include <stdbool.h>
#include <stddef.h>

static inline bool own_region_pays(size_t work, size_t min_work) { return work >= min_work && !omp_in_parallel(); }

// "call" (a function whose loops are orphaned `omp for`s) in a parallel
// region of its own when own_region_pays(work, min_work), else right here.
#define RUN_SHARED(work, min_work, call)           \
    do {                                           \
        if (own_region_pays((work), (min_work))) { \
            _Pragma("omp parallel") call;          \
        } else {                                   \
            call;                                  \
        }                                          \
    } while (0)

#endif
