#ifndef CFUZZERDRIVER_H
#define CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, linked by -sanitize=fuzzer). Called from the executable's own entry point,
/// because SwiftPM renames an executable's `main` and -parse-as-library leaves none.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
