/*
 * common/sm90.cuh - Hopper's features (sm_90a): warpgroup MMA (wgmma), the
 * tensor copy engine (TMA), shared-memory barriers (mbarrier), bulk stores
 * and register reallocation between warpgroups. PIT_HAS_WGMMA is 1 where
 * they compile, 0 elsewhere (AMD, older NVIDIA). Needs common/port.cuh first.
 */
#ifndef PIT_SM90_CUH
#define PIT_SM90_CUH
#ifndef PIT_PORT_CUH
#error "include common/port.cuh before common/sm90.cuh"
#endif

#if defined(PIT_AMD)
#define PIT_HAS_WGMMA 0
#else
/* Named barrier id (1..15; 0 is __syncthreads) over n threads (a multiple
 * of 32): wait until all n have come, or come without waiting. */
PIT_DEV void pit_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
PIT_DEV void pit_bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }

/* ---- Hopper warpgroup MMA (wgmma, sm_90a only): D(64xN, f32) += A(64x16)
 * . B(16xN), both operands in shared memory under 128-byte swizzle: A
 * K-major (rows of 64 elements = 128 bytes), B N-major (transposed: rows of
 * 64 N elements per 64-column chunk). A descriptor holds the start address,
 * the leading and stride byte offsets (>> 4) and the swizzle mode (1:
 * 128 B). Accumulator layout: thread t of the warpgroup holds, for column
 * block i (8 columns), d[4i + j] at row 16 (t / 32) + (t % 32) / 4 + 8 (j / 2),
 * column 8i + 2 (t % 4) + j % 2: mma.sync's m16n8 layout, one warp a 16-row
 * slice. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PIT_HAS_WGMMA 1
PIT_DEV pit_u64 pit_wgmma_desc(pit_u32 addr, pit_u32 lbo, pit_u32 sbo)
{
    return (pit_u64)((addr & 0x3ffff) >> 4) | ((pit_u64)(lbo >> 4) << 16) | ((pit_u64)(sbo >> 4) << 32) |
           (1ull << 62);
}
PIT_DEV void pit_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
PIT_DEV void pit_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> PIT_DEV void pit_wgmma_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
/* Pins registers a wgmma reads or writes between volatile asm statements:
 * the compiler may otherwise sink a register's last write below
 * wgmma.fence (or hoist a read above wgmma.wait_group), which the fence
 * rules make undefined. */
template <int N> PIT_DEV void pit_wgmma_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
template <int N> PIT_DEV void pit_wgmma_pin(pit_u32 (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}
/* cp.async's writes (generic proxy) become visible to wgmma (async proxy) */
PIT_DEV void pit_fence_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- the tensor copy engine (TMA) and its shared-memory barriers: a
 * barrier at shared address `bar` counts one arrival (the thread that
 * announces the bytes) and the bytes the copies deliver; a waiter spins on
 * the phase parity of its use (use k of a barrier: parity k & 1). */
PIT_DEV void pit_mbar_init(pit_u32 bar, int arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
/* barrier inits visible to the async proxy (the copy engine) */
PIT_DEV void pit_fence_mbar_init(void) { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
PIT_DEV void pit_mbar_expect_tx(pit_u32 bar, pit_u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* An arrival on bar once this thread's cp.async copies so far have landed
 * (noinc: it counts as one of the arrivals the barrier expects) */
PIT_DEV void pit_copy_arrive(pit_u32 bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* one plain arrival (a consumer handing a stage back to its producer) */
PIT_DEV void pit_mbar_arrive(pit_u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
PIT_DEV void pit_mbar_wait(pit_u32 bar, pit_u32 parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* One box of a 3-D tensor map (a __grid_constant__ parameter) at element
 * coordinates (x, y, z) into shared address dst; completes on bar. Parts of
 * the box outside the tensor arrive as zeros and count as delivered bytes. */
PIT_DEV void pit_tma_load_3d(pit_u32 dst, const void *map, pit_u32 bar, int x, int y, int z)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"(map), "r"(bar), "r"(x), "r"(y), "r"(z)
                 : "memory");
}

/* Four 8x8 matrices of 16-bit pairs in mma's fragment layout, stored
 * transposed: lanes 8q .. 8q + 7 give the shared addresses of matrix q's 8
 * output rows (16 bytes each) */
PIT_DEV void pit_stmatrix_x4_trans(pit_u32 addr, const pit_u32 (&x)[4])
{
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x[0]),
                 "r"(x[1]), "r"(x[2]), "r"(x[3])
                 : "memory");
}
/* the tensor map at generic address map fetched ahead of its first copy */
PIT_DEV void pit_prefetch_tensormap(const void *map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

PIT_DEV void pit_st_shared_u32(pit_u32 addr, pit_u32 v)
{
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
/* bytes (a multiple of 16) from shared address src to global dst, both
 * 16-byte aligned, in this thread's bulk group */
PIT_DEV void pit_bulk_store(void *dst, pit_u32 src, pit_u32 bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
                 : "memory");
}
PIT_DEV void pit_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* this thread's bulk stores have read their shared memory (READ) or are done */
template <bool READ> PIT_DEV void pit_bulk_wait(void)
{
    if (READ)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    else
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

/* ---- thread-block clusters: a barrier of every thread of the cluster
 * (shared-memory writes before it are seen by the cluster's reads after
 * it), and a float of another CTA's shared memory (distributed shared
 * memory) at this CTA's shared address `addr` in CTA `rank` of the cluster */
PIT_DEV void pit_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
}
PIT_DEV float pit_cluster_ld_f32(pit_u32 addr, pit_u32 rank)
{
    pit_u32 remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

/* A warpgroup's registers a thread, moved between warpgroups of a
 * warp-specialised kernel (all four warps execute it) */
template <int N> PIT_DEV void pit_regs_dec(void) { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N> PIT_DEV void pit_regs_inc(void) { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

#define PIT_WG_D64 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define PIT_WG_D128 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63," \
    "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79," \
    "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95," \
    "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111," \
    "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
#define PIT_WG_O8(d, i) "+f"((d)[i]), "+f"((d)[i + 1]), "+f"((d)[i + 2]), "+f"((d)[i + 3]), \
                        "+f"((d)[i + 4]), "+f"((d)[i + 5]), "+f"((d)[i + 6]), "+f"((d)[i + 7])
#define PIT_WG_O64(d) PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24), \
                      PIT_WG_O8(d, 32), PIT_WG_O8(d, 40), PIT_WG_O8(d, 48), PIT_WG_O8(d, 56)
#define PIT_WG_D8 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define PIT_WG_D16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define PIT_WG_D32 \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"

/* scale-d true (accumulate), scales +1, A not transposed, B transposed
 * (TB 1: B N-major) or not (TB 0: B K-major, laid out as A) */
#define PIT_WG_ASM(SHAPE, D, DA, DB, TB) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE " " D ", " DA ", " DB \
    ", p, 1, 1, 0, " TB ";\n}\n"

/* N = 64 (32 accumulators a thread), N = 128 (64) and N = 256 (128) */
template <int DT, int TB = 1> PIT_DEV void pit_wgmma(float (&d)[32], pit_u64 da, pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_ASM("m64n64k16.f32.bf16.bf16", PIT_WG_D32, "%32", "%33", "%34")
                     : PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24)
                     : "l"(da), "l"(db), "n"(TB));
    else
        asm volatile(PIT_WG_ASM("m64n64k16.f32.f16.f16", PIT_WG_D32, "%32", "%33", "%34")
                     : PIT_WG_O8(d, 0), PIT_WG_O8(d, 8), PIT_WG_O8(d, 16), PIT_WG_O8(d, 24)
                     : "l"(da), "l"(db), "n"(TB));
}
template <int DT, int TB = 1> PIT_DEV void pit_wgmma(float (&d)[64], pit_u64 da, pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_ASM("m64n128k16.f32.bf16.bf16", PIT_WG_D64, "%64", "%65", "%66")
                     : PIT_WG_O64(d) : "l"(da), "l"(db), "n"(TB));
    else
        asm volatile(PIT_WG_ASM("m64n128k16.f32.f16.f16", PIT_WG_D64, "%64", "%65", "%66")
                     : PIT_WG_O64(d) : "l"(da), "l"(db), "n"(TB));
}
template <int DT, int TB = 1> PIT_DEV void pit_wgmma(float (&d)[128], pit_u64 da, pit_u64 db)
{
    if (DT == PIT_DT_BF16)
        asm volatile(PIT_WG_ASM("m64n256k16.f32.bf16.bf16", PIT_WG_D128, "%128", "%129", "%130")
                     : PIT_WG_O64(d), PIT_WG_O64(d + 64) : "l"(da), "l"(db), "n"(TB));
    else
        asm volatile(PIT_WG_ASM("m64n256k16.f32.f16.f16", PIT_WG_D128, "%128", "%129", "%130")
                     : PIT_WG_O64(d), PIT_WG_O64(d + 64) : "l"(da), "l"(db), "n"(TB));
}

/* N = 16, 32, 64, 128 (N / 2 accumulators a thread) with A from registers:
 * this warp's 16 rows as mma.sync's m16n8k16 A fragment (four 32-bit
 * registers); TB 1: B N-major, 0: K-major. A: the operands after the
 * accumulators ("{a0..a3}, descB, TB"). */
#define PIT_WG_RS_ASM(SHAPE, D, A) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." SHAPE " " D ", " A ";\n}\n"
#define PIT_WG_RS(N, D, A, ...)                                                                                       \
    if (DT == PIT_DT_BF16)                                                                                            \
        asm volatile(PIT_WG_RS_ASM("m64n" #N "k16.f32.bf16.bf16", D, A)                                               \
                     : __VA_ARGS__ : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));                   \
    else                                                                                                              \
        asm volatile(PIT_WG_RS_ASM("m64n" #N "k16.f32.f16.f16", D, A)                                                 \
                     : __VA_ARGS__ : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB))
template <int DT, int TB> PIT_DEV void pit_wgmma_rs(float (&d)[8], const pit_u32 (&a)[4], pit_u64 db)
{
    PIT_WG_RS(16, PIT_WG_D8, "{%8,%9,%10,%11}, %12, p, 1, 1, %13", PIT_WG_O8(d, 0));
}
template <int DT, int TB> PIT_DEV void pit_wgmma_rs(float (&d)[16], const pit_u32 (&a)[4], pit_u64 db)
{
    PIT_WG_RS(32, PIT_WG_D16, "{%16,%17,%18,%19}, %20, p, 1, 1, %21", PIT_WG_O8(d, 0), PIT_WG_O8(d, 8));
}
template <int DT, int TB> PIT_DEV void pit_wgmma_rs(float (&d)[32], const pit_u32 (&a)[4], pit_u64 db)
{
    PIT_WG_RS(64, PIT_WG_D32, "{%32,%33,%34,%35}, %36, p, 1, 1, %37", PIT_WG_O8(d, 0), PIT_WG_O8(d, 8),
              PIT_WG_O8(d, 16), PIT_WG_O8(d, 24));
}
template <int DT, int TB> PIT_DEV void pit_wgmma_rs(float (&d)[64], const pit_u32 (&a)[4], pit_u64 db)
{
    PIT_WG_RS(128, PIT_WG_D64, "{%64,%65,%66,%67}, %68, p, 1, 1, %69", PIT_WG_O64(d));
}
#else
#define PIT_HAS_WGMMA 0
#endif

#endif /* AMD / NVIDIA */

#endif /* PIT_SM90_CUH */
