/*
 * attention_ws.cuh - pit_attention.cu's warp-specialised kernel (ATT_WS):
 * Q, K and V copied by TMA into a ring of stages by one thread, two
 * warpgroups multiplying. Included by pit_attention.cu, whose constants
 * and helpers (the chunk walk, the mask bits, the softmax, the output
 * store) it uses.
 */
/* ---- warp-specialised ---------------------------------------------------------- */
/* Registers a thread: the copying warpgroup (one thread issues) gives its
 * share to the multiplying ones, within what the CTA got at launch (the
 * launch bounds' 168 a thread). Asking for more than that waits forever
 * for registers no one frees. */
constexpr int WS_COPY_REGS = 24, WS_MMA_REGS = 240, WS_MMA_WARPS = 8;
static_assert(128 * WS_COPY_REGS + 256 * WS_MMA_REGS <= 384 * 168, "registers the CTA has");
PIT_DEV pit_u32 ws_full(pit_u32 sbase, int s) { return sbase + WS_BARS + 8 * s; }
PIT_DEV pit_u32 ws_empty(pit_u32 sbase, int s) { return sbase + WS_BARS + 8 * (WS_STAGES + s); }
PIT_DEV pit_u32 ws_qbar(pit_u32 sbase) { return sbase + WS_BARS + 16 * WS_STAGES; }
/* stage s's K (64-column slabs of KC rows under 128-byte swizzle, as TMA
 * writes them), then its V */
PIT_DEV pit_u32 ws_k(pit_u32 sbase, int s) { return sbase + Q_BYTES + s * (K_BYTES + V_BYTES); }
PIT_DEV pit_u32 ws_v(pit_u32 sbase, int s) { return ws_k(sbase, s) + K_BYTES; }

/* One thread of warpgroup 0: Q's block (slabs of 64 columns x BQ rows),
 * then each chunk's K and V rows into the next stage once both multiplying
 * warpgroups are done with its last use. Rows past the keys (or queries)
 * arrive as zeros. */
PIT_DEV void ws_copy(const pit_attention_args &a, pit_u32 sbase, int b, int qb)
{
    const att_walk w = walk_of(a, b, qb);
    if (w.chunks == 0) return;
    const int kv = kv_set(a, b);
    pit_mbar_expect_tx(ws_qbar(sbase), Q_BYTES);
#pragma unroll
    for (int j = 0; j < HD / 64; ++j) pit_tma_load_3d(sbase + j * BQ * 128, &a.map_q, ws_qbar(sbase), 64 * j, qb * BQ, b);
    for (int c = 0; c < w.chunks; ++c) {
        const int s = c % WS_STAGES;
        const int key0 = walk_key0(walk_entry(w, c), c);
        if (c >= WS_STAGES) pit_mbar_wait(ws_empty(sbase, s), (pit_u32)(c / WS_STAGES - 1) & 1u);
        pit_mbar_expect_tx(ws_full(sbase, s), K_BYTES + V_BYTES);
#pragma unroll
        for (int j = 0; j < HD / 64; ++j)
            pit_tma_load_3d(ws_k(sbase, s) + j * KC * 128, &a.map_k, ws_full(sbase, s), 64 * j, key0, kv);
#pragma unroll
        for (int j = 0; j < HDV / 64; ++j)
            pit_tma_load_3d(ws_v(sbase, s) + j * KC * 128, &a.map_v, ws_full(sbase, s), 64 * j, key0, kv);
    }
}

/* O += P.V of the chunk in stage st, P from registers (V: B N-major, a
 * k-step 16 key rows = 2048 B on, the next 64 columns one slab on) */
PIT_DEV void ws_pv(float (&od)[HDV / 2], pit_u32 (&pa)[4][4], pit_u32 sbase, int st)
{
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        pit_wgmma_rs<PIT_DTYPE, 1>(od, pa[kk], pit_wgmma_desc(ws_v(sbase, st) + kk * 2048, KC * 128, 1024));
    pit_wgmma_commit();
}

/* S = Q.K^T of the chunk in stage st into fresh accumulators (Q's slabs
 * of this warpgroup's rows at qa as A, K-major; K as B, K-major) */
PIT_DEV void ws_scores(float (&s)[8][4], pit_u32 qa, pit_u32 sbase, int st)
{
#pragma unroll
    for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
    float(&sd)[32] = reinterpret_cast<float(&)[32]>(s);
    pit_wgmma_pin(sd);
    pit_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk)
        pit_wgmma<PIT_DTYPE, 0>(sd, pit_wgmma_desc(qa + (kk / 4) * BQ * 128 + (kk % 4) * 32, 16, 1024),
                                pit_wgmma_desc(ws_k(sbase, st) + (kk / 4) * KC * 128 + (kk % 4) * 32, 16, 1024));
    pit_wgmma_commit();
}

/* Multiplying warpgroup cw: query rows q0 + 64 cw .. + 63. Chunk c: S of
 * chunk c is issued, then P.V of chunk c - 1; once S is in, its softmax
 * runs while P.V is on the tensor cores; then O is rescaled and chunk c -
 * 1's stage goes back. The first chunk and the last P.V are apart: no
 * branch between a wgmma and its wait (ptxas would serialise them). */
PIT_DEV void ws_attend(const pit_attention_args &a, pit_u32 sbase, int b, int qb, int cw)
{
    const att_walk w = walk_of(a, b, qb);
    const int q0 = qb * BQ, row0 = q0 + (threadIdx.x / PIT_WARP - 4) * 16;
    const bool masked = a.flags & PIT_ATT_MASK, first_lane = pit_lane() == 0;
    const pit_u8 *mask = a.mask + (pit_i64)b * a.ms * MASK_BYTES;
    const pit_u32 qa = sbase + cw * 64 * 128; /* this warpgroup's rows of each Q slab */
    float o[HDV / 8][4];
#pragma unroll
    for (int j = 0; j < HDV / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_run[2] = {PIT_NEG_INF, PIT_NEG_INF}, l_run[2] = {0.f, 0.f};
    if (w.chunks > 0) {
        float(&od)[HDV / 2] = reinterpret_cast<float(&)[HDV / 2]>(o);
        pit_u32 pa[4][4];
        pit_u32(&pr)[16] = reinterpret_cast<pit_u32(&)[16]>(pa);
        float s[8][4], alpha[2];
        float(&sd)[32] = reinterpret_cast<float(&)[32]>(s);
        auto bits = [&](int c) {
            const int e = walk_entry(w, c);
            return chunk_bits(a, mask, q0, row0, walk_key0(e, c), !masked || (e & PIT_ENTRY_FULL) != 0);
        };
        /* the two warpgroups take turns to issue their products (named
         * barriers 1 + cw: "cw's turn"), so that one's softmax runs while the
         * other's products are on the tensor cores; warpgroup 0 goes first */
        auto my_turn = [&]() { pit_bar_sync(1 + cw, 256); };
        auto pass_turn = [&]() { pit_bar_arrive(2 - cw, 256); };
        if (cw == 1) pass_turn();
        pit_u32 on = bits(0);
        pit_mbar_wait(ws_qbar(sbase), 0);
        pit_mbar_wait(ws_full(sbase, 0), 0);
        my_turn();
        ws_scores(s, qa, sbase, 0);
        pass_turn();
        pit_wgmma_wait<0>();
        pit_wgmma_pin(sd);
        softmax_chunk(a, s, on, m_run, l_run, alpha);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) pit_acc_fragment(s, kk, pa[kk]);
        for (int c = 1; c < w.chunks; ++c) {
            const int st = c % WS_STAGES, prev = (c - 1) % WS_STAGES;
            on = bits(c);
            pit_mbar_wait(ws_full(sbase, st), (pit_u32)(c / WS_STAGES) & 1u);
            pit_wgmma_pin(od);
            pit_wgmma_pin(pr);
            my_turn();
            ws_scores(s, qa, sbase, st);
            ws_pv(od, pa, sbase, prev);
            pass_turn();
            pit_wgmma_wait<1>(); /* S in; P.V may run on */
            pit_wgmma_pin(sd);
            softmax_chunk(a, s, on, m_run, l_run, alpha);
            pit_wgmma_wait<0>();
            pit_wgmma_pin(od);
            pit_wgmma_pin(pr);
            if (first_lane) pit_mbar_arrive(ws_empty(sbase, prev));
            rescale_rows(o, alpha);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) pit_acc_fragment(s, kk, pa[kk]);
        }
        pit_wgmma_pin(od);
        pit_wgmma_pin(pr);
        my_turn();
        pit_wgmma_fence();
        ws_pv(od, pa, sbase, (w.chunks - 1) % WS_STAGES);
        pass_turn();
        if (cw == 0) my_turn(); /* warpgroup 1's last pass, which nobody else waits for */
        pit_wgmma_wait<0>();
        pit_wgmma_pin(od);
    }
    store_out(a, b, row0, nullptr, o, m_run, l_run);
}

PIT_KERNEL void __launch_bounds__(THREADS, 1) pit_op_attention(const __grid_constant__ pit_attention_args a)
{
    extern __shared__ __align__(16) pit_u8 smem_raw[];
    const pit_u32 sbase = pit_smem_addr(smem_raw) + ((ALIGN - (pit_smem_addr(smem_raw) & (ALIGN - 1))) & (ALIGN - 1));
    int b, qb;
    attn_work(a, b, qb);
    if (threadIdx.x == 0) {
        for (int s = 0; s < WS_STAGES; ++s) {
            pit_mbar_init(ws_full(sbase, s), 1); /* the copier's announcement, and the bytes */
            pit_mbar_init(ws_empty(sbase, s), WS_MMA_WARPS);
        }
        pit_mbar_init(ws_qbar(sbase), 1);
        pit_fence_mbar_init();
    }
    __syncthreads();
    if (threadIdx.x < 128) {
        pit_regs_dec<WS_COPY_REGS>();
        if (threadIdx.x == 0) ws_copy(a, sbase, b, qb);
    } else {
        pit_regs_inc<WS_MMA_REGS>();
        ws_attend(a, sbase, b, qb, threadIdx.x / 128 - 1);
    }
}
