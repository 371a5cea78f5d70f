/*
 * emu_warps.cpp - runs CUDA kernels written against port.cuh on the CPU
 * (pit_detect_strip.cu for the emulated detection test, the key-column
 * tiles of pit_attention_cols.cu for theirs): one CTA at a time, each of
 * its threads a coroutine
 * (ucontext) of one host thread. A thread runs until it reaches a warp
 * step (ballot, shuffle) or __syncthreads; a warp step completes when all
 * 32 lanes of the warp wait on the same one, __syncthreads when every
 * thread of the CTA waits on it. Anything else (a warp step some lanes
 * skip, a barrier some threads never reach) is a kernel bug on a GPU too:
 * the run stops with a message. Test code only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include "emu_device.h"
#include "kernels/args.h"
#undef __CUDACC__

enum { RUNNING, AT_WARP_STEP, AT_BARRIER, EXITED };
enum { BALLOT = 1, SHUFFLE };

struct emu_thread {
    ucontext_t context;
    int state, step;
    int vote, value, source, result;
    char *stack;
};

enum { MAX_THREADS = 1024, STACK = 1 << 18 };
static emu_thread threads[MAX_THREADS];
static ucontext_t scheduler;
static int current, nthreads;
static emu_dim3 block, grid;
static void (*entry)(const void *);
static const void *entry_args;

emu_dim3 emu_thread_idx(void) { return emu_dim3{(unsigned)current, 0, 0}; }
emu_dim3 emu_block_idx(void) { return block; }
emu_dim3 emu_grid_dim(void) { return grid; }

static void wait_in(int state)
{
    threads[current].state = state;
    swapcontext(&threads[current].context, &scheduler);
}

void __syncthreads(void) { wait_in(AT_BARRIER); }

pit_u32 pit_ballot(bool p)
{
    threads[current].step = BALLOT;
    threads[current].vote = p;
    wait_in(AT_WARP_STEP);
    return (pit_u32)threads[current].result;
}

int pit_shfl(int v, int src)
{
    threads[current].step = SHUFFLE;
    threads[current].value = v;
    threads[current].source = src;
    wait_in(AT_WARP_STEP);
    return threads[current].result;
}

static void thread_main(void)
{
    entry(entry_args);
    threads[current].state = EXITED;
}

static void stop(const char *why, unsigned b, int warp)
{
    fprintf(stderr, "emulated kernel: %s (block %u, warp %d)\n", why, b, warp);
    exit(2);
}

/* Completes the warp steps all of whose lanes wait; returns how many. */
static int complete_warp_steps(unsigned b)
{
    int done = 0;
    for (int w = 0; w < nthreads / PIT_WARP; ++w) {
        emu_thread *lane = &threads[w * PIT_WARP];
        int waiting = 0, step = 0;
        pit_u32 ballot = 0;
        for (int l = 0; l < PIT_WARP; ++l) {
            if (lane[l].state != AT_WARP_STEP) continue;
            if (waiting && lane[l].step != step) stop("lanes of a warp at different warp steps", b, w);
            step = lane[l].step;
            ++waiting;
            if (lane[l].vote) ballot |= 1u << l;
        }
        if (waiting == 0) continue;
        if (waiting != PIT_WARP) stop("a warp step not every lane reaches", b, w); /* none runs: no lane will */
        for (int l = 0; l < PIT_WARP; ++l) {
            lane[l].result = step == BALLOT ? (int)ballot : lane[lane[l].source & (PIT_WARP - 1)].value;
            lane[l].state = RUNNING;
        }
        ++done;
    }
    return done;
}

static void run_block(unsigned b)
{
    for (int t = 0; t < nthreads; ++t) {
        emu_thread *th = &threads[t];
        if (!th->stack && !(th->stack = (char *)malloc(STACK))) stop("out of host memory", b, t / PIT_WARP);
        getcontext(&th->context);
        th->context.uc_stack.ss_sp = th->stack;
        th->context.uc_stack.ss_size = STACK;
        th->context.uc_link = &scheduler;
        makecontext(&th->context, thread_main, 0);
        th->state = RUNNING;
    }
    for (;;) {
        for (current = 0; current < nthreads; ++current)
            if (threads[current].state == RUNNING) swapcontext(&scheduler, &threads[current].context);
        int exited = 0, at_barrier = 0;
        for (int t = 0; t < nthreads; ++t) {
            exited += threads[t].state == EXITED;
            at_barrier += threads[t].state == AT_BARRIER;
        }
        if (exited == nthreads) return;
        if (complete_warp_steps(b)) continue;
        if (at_barrier != nthreads) stop("a barrier not every thread reaches", b, -1);
        for (int t = 0; t < nthreads; ++t) threads[t].state = RUNNING;
    }
}

extern "C" {
void emu_strip_f32(const pit_detect_args);
void emu_strip_f16(const pit_detect_args);
void emu_strip_bf16(const pit_detect_args);
void emu_strip_i32(const pit_detect_args);
void emu_strip_u8(const pit_detect_args);

/* fn(args) on a grid of gx x gy CTAs of `threads` threads (a multiple of
 * the warp, at most MAX_THREADS), the CTAs one after another. */
void pit_emu_run(void (*fn)(const void *), const void *args, unsigned gx, unsigned gy, unsigned threads_per_cta)
{
    if (threads_per_cta == 0 || threads_per_cta > MAX_THREADS || threads_per_cta % PIT_WARP)
        stop("a CTA size the emulator does not take", 0, -1);
    entry = fn;
    entry_args = args;
    nthreads = (int)threads_per_cta;
    grid = emu_dim3{gx, gy, 1};
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
            block = emu_dim3{x, y, 0};
            run_block(x);
        }
}

static void (*strip_kernel)(const pit_detect_args);
static void strip_entry(const void *args) { strip_kernel(*(const pit_detect_args *)args); }

/* pit_detect_strip of dtype dt (a pit_dtype code) on a grid of ctas. */
void pit_emu_detect_strip(int dt, const void *args, unsigned ctas)
{
    void (*const kernels[])(const pit_detect_args) = {emu_strip_f32, emu_strip_f16, emu_strip_bf16, emu_strip_i32,
                                                      emu_strip_u8};
    if (dt < 0 || dt > 4) stop("no such dtype", 0, -1);
    strip_kernel = kernels[dt];
    pit_emu_run(strip_entry, args, ctas, 1, PIT_DETECT_STRIP_THREADS);
}
}
