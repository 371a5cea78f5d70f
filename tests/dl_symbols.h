/*
 * tests/dl_symbols.h - a table of function pointers filled from a library
 * opened with dlopen, for the GPU tests that drive the CUDA driver beside
 * pit (test_cuda_graph.c, test_cuda_views.c) and must load where none is.
 */
#ifndef PIT_TESTS_DL_SYMBOLS_H
#define PIT_TESTS_DL_SYMBOLS_H

#include <dlfcn.h>
#include <stddef.h>

typedef struct dl_symbol {
    void **slot;
    const char *name;
} dl_symbol;

/* 1 when lib opens and every symbol is found (each slot then set). */
static inline int dl_load_symbols(const char *lib, const dl_symbol *syms, size_t n)
{
    void *h = dlopen(lib, RTLD_NOW);
    if (!h)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(*syms[i].slot = dlsym(h, syms[i].name)))
            return 0;
    return 1;
}

#endif /* PIT_TESTS_DL_SYMBOLS_H */
