// sanitized.h: whether the tests run under AddressSanitizer.
#ifndef TINYGPT_TEST_SANITIZED_H
#define TINYGPT_TEST_SANITIZED_H

// TINYGPT_SANITIZED: 1 in a build with AddressSanitizer (`make sanitize`;
// gcc defines __SANITIZE_ADDRESS__, clang answers __has_feature). Two kinds
// of test do not hold there and say so: peak-memory measurements (ASan's
// realloc always moves the block, so the loader's shrinking realloc, free
// in glibc, briefly holds the buffer twice), and bit-for-bit
// agreement between two code paths (the instrumented optimizer fuses a*b+c
// into FMA in one loop and not in its twin).
#if defined(__SANITIZE_ADDRESS__)
#define TINYGPT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINYGPT_SANITIZED 1
#endif
#endif
#ifndef TINYGPT_SANITIZED
#define TINYGPT_SANITIZED 0
#endif

#include <math.h>
#include <stdbool.h>
#include <string.h>

// same_or_close: "got" has the bits of "expected", or, in the sanitized
// build, agrees with it to 1e-6 relative to max(1, |expected|): the check
// of two code paths that must give the same bits (see above).
static inline bool same_or_close(float got, float expected) {
    if (TINYGPT_SANITIZED) return fabs((double)got - (double)expected) <= 1e-6 * fmax(1.0, fabs((double)expected));
    return memcmp(&got, &expected, sizeof got) == 0;
}

#endif
