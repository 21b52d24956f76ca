// peak.h: the `tinygpt peak` command: this CPU's FMA peak in GFLOP/s, on
// one thread and on all, and what the CPU is; with --product, how fast
// tinygpt's own products run beside it.
//
// Reading order: file 42 (glue code), after fma_peak.h (file 21b), which
// measures the peak, and linear.h (file 4), whose fast products
// (linear_fast.c, file 17) --product times; this file reads the flags,
// times the products and prints. The
// numbers are the denominator of "% of peak": a speed in GFLOP/s (flops.h)
// over the peak of as many threads (docs/speed-and-memory.md, "The peak").
#ifndef TINYGPT_PEAK_H
#define TINYGPT_PEAK_H

// cmd_peak: the `tinygpt peak` command.
int cmd_peak(int argc, char **argv);

#endif
