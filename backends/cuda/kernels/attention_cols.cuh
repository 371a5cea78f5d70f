/*
 * attention_cols.cuh - pit_attention.cu's key-column micro-tiles (ATT_COLS):
 * which tile and chunks a CTA takes, the chunk's mask bits from the tile's
 * words, and a heavy tile's partials merged by the segment that finishes
 * last. Included by pit_attention.cu, whose constants and helpers it uses.
 */
/* A CTA's part of the column micro-tiles: item < nqb light tile item of
 * its query set's mask set whole, else segment seg of heavy tile heavy:
 * chunks [c0, c1) of the tile's keys. False when the tile has no row. */
struct att_cols {
    const int *rows, *cols;
    const pit_u64 *bits;
    int c0, c1, heavy, seg;
};

PIT_DEV bool cols_of(const pit_attention_args &a, int b, int item, att_cols &tc)
{
    const pit_cols_ix &x = a.cx;
    const int light = item < x.nqb, t = light ? item : x.nqb + (item - x.nqb) / x.segs;
    const pit_i64 tile = (pit_i64)(a.ms ? b : 0) * x.tiles + t;
    tc.heavy = light ? -1 : t - x.nqb;
    tc.seg = light ? 0 : (item - x.nqb) % x.segs;
    tc.rows = x.rows + tile * BQ;
    tc.cols = x.cols + tile * x.cap;
    tc.bits = x.tbits + tile * (x.cap / KC) * BQ;
    if (__ldg(tc.rows) < 0) return false;
    const int nch = (__ldg(x.ncols + tile) + KC - 1) / KC, per = light ? nch : (nch + x.segs - 1) / x.segs;
    tc.c0 = tc.seg * per < nch ? tc.seg * per : nch;
    tc.c1 = tc.c0 + per < nch ? tc.c0 + per : nch;
    return true;
}

/* chunk_bits of a tile's chunk c from its words (row0: the warp's first tile row) */
PIT_DEV pit_u32 cols_bits(const pit_u64 *bits, int c, int row0)
{
    const int lane = pit_lane(), g = lane >> 2, t = lane & 3;
    pit_u32 on = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const pit_u64 w = bits[(pit_i64)c * BQ + row0 + g + 8 * h];
#pragma unroll
        for (int j = 0; j < 8; ++j) on |= (pit_u32)(w >> (8 * j + 2 * t) & 3u) << (4 * j + 2 * h);
    }
    return on;
}

/* A heavy tile's segment: its rows' O (not normalised), max and sum go to
 * the partials; the segment that finishes last merges every segment's
 * into O and lse, and sets the tile's count of finished segments back to
 * 0 for the next launch. */
PIT_DEV void store_partial(const pit_attention_args &a, int b, const att_cols &tc, int row0,
                           const float (&o)[HDV / 8][4], const float (&m_run)[2], const float (&l_run)[2])
{
    __shared__ int last;
    const pit_cols_ix &x = a.cx;
    const int lane = pit_lane(), g = lane >> 2, t = lane & 3;
    const pit_i64 slot = (pit_i64)b * x.heavy_tiles + tc.heavy, first = slot * x.segs * BQ;
    const pit_i64 mine = first + (pit_i64)tc.seg * BQ;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row0 + g + 8 * h;
        float l = l_run[h];
        l += shfl_xor_f(l, 1);
        l += shfl_xor_f(l, 2);
        if (t == 0) {
            a.part_ml[2 * (mine + r)] = m_run[h];
            a.part_ml[2 * (mine + r) + 1] = l;
        }
#pragma unroll
        for (int j = 0; j < HDV / 8; ++j)
            *(float2 *)(a.part_o + (mine + r) * HDV + j * 8 + 2 * t) = make_float2(o[j][2 * h], o[j][2 * h + 1]);
    }
    pit_fence_device();
    __syncthreads();
    if (threadIdx.x == 0) last = pit_atomic_add(a.done + slot, 1) == x.segs - 1;
    __syncthreads();
    if (!last) return;
    pit_fence_device();
    T *out = (T *)a.o + b * a.so;
    for (int i = threadIdx.x; i < BQ * (HDV / 2); i += THREADS) {
        const int r = i / (HDV / 2), col = (i % (HDV / 2)) * 2, row = __ldg(tc.rows + r);
        if (row < 0) continue;
        float mx = PIT_NEG_INF;
        for (int sg = 0; sg < x.segs; ++sg) mx = fmaxf(mx, pit_ldcg_f32(a.part_ml + 2 * (first + sg * BQ + r)));
        float sum = 0.f, v0 = 0.f, v1 = 0.f;
        for (int sg = 0; sg < x.segs; ++sg) {
            const pit_i64 at = first + sg * BQ + r;
            const float m = pit_ldcg_f32(a.part_ml + 2 * at);
            const float f = m == PIT_NEG_INF ? 0.f : pit_exp2_ftz(m - mx);
            sum += f * pit_ldcg_f32(a.part_ml + 2 * at + 1);
            v0 += f * pit_ldcg_f32(a.part_o + at * HDV + col);
            v1 += f * pit_ldcg_f32(a.part_o + at * HDV + col + 1);
        }
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        *(pit_u32 *)(out + (pit_i64)row * a.ldo + col) = pack2(v0 * inv, v1 * inv);
        if (col == 0 && a.lse) {
            float *lse = a.lse + (pit_i64)(b / a.heads_q) * a.lse_sb + (pit_i64)(b % a.heads_q) * a.lse_sh;
            lse[row] = sum > 0.f ? (mx + pit_log2f(sum)) * 0.6931471805599453f : PIT_NEG_INF;
        }
    }
    if (threadIdx.x == 0) a.done[slot] = 0;
}
