/*
 * core/runtime/pit_testing.h - testing hooks of libpit. Exported by libpit.so (so the
 * tests, which link the shared library like users do, can reach them) but not
 * declared in pit.h and not installed: they are not part of the API and may
 * change without notice. See docs/api.md, "Testing hooks".
 */
#ifndef PIT_CORE_TESTING_H
#define PIT_CORE_TESTING_H

#include "pit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arms device allocation fault injection for the whole process: the n-th
 * device allocation from now fails with PIT_ERR_OUT_OF_MEMORY (once); n <= 0
 * disarms. Overrides PIT_FAULT_ALLOC, which arms the same counter once at
 * start-up. Allocations are those a backend makes through its mem_alloc. */
PIT_API void pit_debug_fail_alloc_after(long n);

/* Device allocations attempted in this process so far (injected failures
 * included): the difference around a call is how many it makes. */
PIT_API long pit_debug_alloc_count(void);

/* Puts a plug-in table in the slot of backend name ("cuda", "hip", "opencl")
 * as if it had been loaded from a file: the same checks, then its init. The
 * table must outlive every context made from it. For the plug-in fuzzer. */
struct pit_backend;
PIT_API pit_status pit_debug_install_backend(const char *name, const struct pit_backend *be);

#ifdef __cplusplus
}
#endif
#endif /* PIT_CORE_TESTING_H */
