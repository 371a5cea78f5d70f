/*
 * pit_attention.cl - fused attention: O = softmax(scale Q K^T over the
 * allowed keys) V for every batch and query head, and optionally the
 * log-sum-exp of each row (core/backend.h, pit_attention_desc).
 *
 * No score matrix is stored. A work-group takes BM query rows of one query
 * block of one (batch, head) and walks its keys BK at a time: the key blocks
 * the index lists for the block (when there is an index), else every key;
 * either way only the keys inside the causal bound and window of its rows.
 * It scores them into local memory, updates each row's running maximum and
 * sum (online softmax, the same stored score feeding both), and accumulates
 * the weighted rows of V into BN output columns held in local memory; wider
 * outputs take further passes. A key is allowed when the window bounds,
 * measured from the diagonal aligned to the end of the keys (key i + Lk - Lq
 * is "at" query i), and the element mask (when there is one) allow it; a
 * row with no allowed key is written as zeros (lse -inf).
 *
 * Query head h reads the keys and values of head h / group (grouped-query
 * attention). Every tensor comes as element offset and strides of batch,
 * head and row (columns contiguous); a stride of 0 shares the mask.
 *
 * Defines: DT and MDT (pit_common.cl); BM query rows, BK keys at once and
 * BN output columns per pass; WG work-items. The block br x bc (query rows x
 * keys) is an argument: any block size runs.
 *
 * Grid: (ceil(Lq / br) * ceil(br / BM) * WG, batch * heads).
 */
#ifndef WG
#error "WG (work-items per group) must be defined"
#endif

#define ENTRY_FULL 0x40000000 /* PIT_ENTRY_FULL: a mark this kernel ignores */

/* flags */
#define ATT_MASK 1  /* an element mask */
#define ATT_LSE 2   /* write the log-sum-exp */
#define ATT_INDEX 4 /* walk the listed key blocks only */

/* What decides whether key `key` counts for query `row`. */
typedef struct att_rule {
    long diag, wl, wr; /* Lk - Lq; window bounds, -1 none */
    int use_mask;
} att_rule;

inline int key_allowed(const att_rule *u, __global const mword_t *Mk, long ldm, long row,
                       long key)
{
    if (u->wl >= 0 && key < row + u->diag - u->wl)
        return 0;
    if (u->wr >= 0 && key > row + u->diag + u->wr)
        return 0;
    return !u->use_mask || mask_on(Mk, row * ldm + key);
}

/* The scaled score of query `row` and key `key`, -INFINITY where the key
 * weighs nothing. */
inline float pair_score(__global const st_t *Q, long ldq, __global const st_t *K, long ldk,
                        __global const mword_t *Mk, long ldm, const att_rule *u, long row,
                        long key, int D, float scale)
{
    if (!key_allowed(u, Mk, ldm, row, key))
        return -INFINITY;
    float dot = 0.0f;
    for (int k = 0; k < D; ++k)
        dot += LOAD(Q, row * ldq + k) * LOAD(K, key * ldk + k);
    return scale * dot;
}

/* Scores of the chunk's keys (row-major BM x BK) into S; -INFINITY where
 * the key weighs nothing. */
inline void score_chunk(__local float *S, __global const st_t *Q, long ldq,
                        __global const st_t *K, long ldk, __global const mword_t *Mk, long ldm,
                        const att_rule *u, long row0, int rows, long key0, int keys, int D,
                        float scale, int lid)
{
    for (int i = lid; i < BM * BK; i += WG) {
        const int r = i / BK, j = i % BK;
        S[i] = r < rows && j < keys
                   ? pair_score(Q, ldq, K, ldk, Mk, ldm, u, row0 + r, key0 + j, D, scale)
                   : -INFINITY;
    }
}

/* Online softmax step of each row: the new maximum, the factor that
 * rescales what was accumulated under the old one, and the chunk's scores
 * turned into weights exp(s - max) (0 for a key that weighs nothing). */
inline void weigh_chunk(__local float *S, __local float *row_max, __local float *row_sum,
                        __local float *rescale, int lid)
{
    for (int r = lid; r < BM; r += WG) {
        float m = row_max[r];
        for (int j = 0; j < BK; ++j)
            m = fmax(m, S[r * BK + j]);
        const float f = m == -INFINITY ? 1.0f : exp(row_max[r] - m);
        float sum = 0.0f;
        for (int j = 0; j < BK; ++j) {
            const float s = S[r * BK + j];
            const float p = s == -INFINITY ? 0.0f : exp(s - m);
            S[r * BK + j] = p;
            sum += p;
        }
        row_sum[r] = row_sum[r] * f + sum;
        row_max[r] = m;
        rescale[r] = f;
    }
}

/* The weighted rows of V of one chunk into the output columns c0.. */
inline void accumulate_chunk(__local float *acc, __local const float *S,
                             __local const float *rescale, __global const st_t *V, long ldv,
                             long key0, int keys, int c0, int DV, int lid)
{
    for (int i = lid; i < BM * BN; i += WG) {
        const int r = i / BN, c = c0 + i % BN;
        float a = acc[i] * rescale[r];
        if (c < DV)
            for (int j = 0; j < keys; ++j)
                a += S[r * BK + j] * LOAD(V, (key0 + j) * ldv + c);
        acc[i] = a;
    }
}

/* The query rows a work-group of the forward or of dQ takes, the keys their
 * bounds leave, and the index group that lists their key blocks. */
typedef struct att_rows {
    int b, h, hk;    /* batch, query head, its kv head */
    long row0;       /* rows row0 .. row0 + rows - 1, inside the block and Lq */
    int rows;        /* may be 0: no early return, see pit_sddmm.cl */
    long lo, hi;     /* keys [lo, hi) the bounds leave to any of the rows */
    long g;          /* index group (0 without an index) */
    int n;           /* its entries (1 without an index: every key in the bounds) */
    att_rule u;
} att_rows;

inline att_rows query_rows(int Lq, int Lk, int Hq, int group, int br, long wl, long wr,
                           int flags, __global const int *counts, long i_sb, long i_sh,
                           int cap)
{
    att_rows w;
    const int parts = (br + BM - 1) / BM; /* work-groups of one query block */
    const int qb = (int)get_group_id(0) / parts, part = (int)get_group_id(0) % parts;
    const int z = (int)get_group_id(1);
    w.b = z / Hq;
    w.h = z % Hq;
    w.hk = w.h / group;
    w.row0 = (long)qb * br + (long)part * BM;
    w.rows = (int)max(0L, min((long)BM, min((long)br - (long)part * BM, Lq - w.row0)));
    w.u.diag = (long)Lk - Lq;
    w.u.wl = wl;
    w.u.wr = wr;
    w.u.use_mask = (flags & ATT_MASK) != 0;
    w.lo = max(wl >= 0 ? w.row0 + w.u.diag - wl : 0L, 0L);
    w.hi = wr >= 0 ? w.row0 + w.rows - 1 + w.u.diag + wr + 1 : (long)Lk;
    w.hi = w.rows > 0 ? min(w.hi, (long)Lk) : w.lo;
    const int use_index = (flags & ATT_INDEX) != 0;
    w.g = use_index ? w.b * i_sb + w.h * i_sh + qb : 0;
    w.n = use_index ? min(counts[w.g], cap) : 1;
    return w;
}

/* The keys [*k_lo, *k_hi) of entry e of w's group: its key block inside the
 * bounds, or without an index every key in them. */
inline void entry_keys(const att_rows *w, __global const int *entries, int cap, int e,
                       int flags, int bc, int Lk, long *k_lo, long *k_hi)
{
    *k_lo = w->lo;
    *k_hi = w->hi;
    if (!(flags & ATT_INDEX))
        return;
    const long kb = entries[w->g * cap + e] & ~ENTRY_FULL;
    *k_lo = max(w->lo, kb * bc);
    *k_hi = min(w->hi, min(kb * bc + bc, (long)Lk));
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_attention(__global const st_t *Q, long q_off, long q_sb, long q_sh, long ldq,
                   __global const st_t *K, long k_off, long k_sb, long k_sh, long ldk,
                   __global const st_t *V, long v_off, long v_sb, long v_sh, long ldv,
                   __global const mword_t *Mk, long m_off, long m_sb, long m_sh, long ldm,
                   __global st_t *O, long o_off, long o_sb, long o_sh, long ldo,
                   __global float *lse, long l_off, long l_sb, long l_sh,
                   int Lq, int Lk, int D, int DV, int Hq, int group, int br, int bc,
                   float scale, long wl, long wr, int flags,
                   __global const int *counts, __global const int *entries, long i_sb,
                   long i_sh, int cap)
{
    __local float S[BM * BK];
    __local float acc[BM * BN];
    __local float row_max[BM], row_sum[BM], rescale[BM];
    const int lid = (int)get_local_id(0);
    const att_rows w = query_rows(Lq, Lk, Hq, group, br, wl, wr, flags, counts, i_sb, i_sh, cap);
    const int b = w.b, h = w.h, rows = w.rows;
    const long row0 = w.row0;
    Q += q_off + b * q_sb + h * q_sh;
    K += k_off + b * k_sb + w.hk * k_sh;
    V += v_off + b * v_sb + w.hk * v_sh;
    Mk += m_off + b * m_sb + h * m_sh;
    O += o_off + b * o_sb + h * o_sh;
    const int passes = max(1, (DV + BN - 1) / BN); /* one at least: the lse */

    for (int pass = 0; pass < passes; ++pass) {
        const int c0 = pass * BN;
        for (int r = lid; r < BM; r += WG) {
            row_max[r] = -INFINITY;
            row_sum[r] = 0.0f;
        }
        for (int i = lid; i < BM * BN; i += WG)
            acc[i] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = 0; e < w.n; ++e) {
            long k_lo, k_hi;
            entry_keys(&w, entries, cap, e, flags, bc, Lk, &k_lo, &k_hi);
            for (long key0 = k_lo; key0 < k_hi; key0 += BK) {
                const int keys = (int)min((long)BK, k_hi - key0);
                score_chunk(S, Q, ldq, K, ldk, Mk, ldm, &w.u, row0, rows, key0, keys, D, scale,
                            lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                weigh_chunk(S, row_max, row_sum, rescale, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                accumulate_chunk(acc, S, rescale, V, ldv, key0, keys, c0, DV, lid);
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        for (int i = lid; i < BM * BN; i += WG) {
            const int r = i / BN, c = c0 + i % BN;
            if (r < rows && c < DV) {
                const float l = row_sum[r];
                STORE(O, (row0 + r) * ldo + c, l > 0.0f ? acc[i] / l : 0.0f);
            }
        }
        if (pass == 0 && (flags & ATT_LSE))
            for (int r = lid; r < rows; r += WG) {
                const float l = row_sum[r];
                lse[l_off + b * l_sb + h * l_sh + row0 + r] =
                    l > 0.0f ? row_max[r] + log(l) : -INFINITY;
            }
        barrier(CLK_LOCAL_MEM_FENCE); /* acc and the row state are reset next */
    }
}

/* ---- the backward (core/backend.h, attention_backward) ----------------------------
 * P = exp(score - lse) recomputed from the forward's lse; dS = scale P (dP - Di)
 * with dP = dO_i . V_j and Di = dO_i . O_i. pit_attention_dq takes query rows
 * as the forward does and accumulates dQ = dS K over the same keys;
 * pit_attention_dkv takes BM keys of one key block of one (batch, kv head),
 * walks the query blocks of every query head of its group whose index
 * lists the key block (every one without an index) inside the bounds, and
 * accumulates dV = P dO and dK = dS Q. Each writes its rows whole.
 */
#define ATT_DK 8  /* pit_attention_dkv writes dK */
#define ATT_DV 16 /* and dV */

inline float row_dot(__global const st_t *a, __global const st_t *b, int n)
{
    float s = 0.0f;
    for (int c = 0; c < n; ++c)
        s += LOAD(a, c) * LOAD(b, c);
    return s;
}

/* dS of a pair from its score, the row's lse and Di (0 off the pattern). */
inline float pair_ds(float s, float lse, float di, __global const st_t *dOrow,
                     __global const st_t *Vrow, int DV, float scale, float *p)
{
    *p = s == -INFINITY || lse == -INFINITY ? 0.0f : exp(s - lse);
    return *p == 0.0f ? 0.0f : scale * *p * (row_dot(dOrow, Vrow, DV) - di);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_attention_dq(__global const st_t *Q, long q_off, long q_sb, long q_sh, long ldq,
                      __global const st_t *K, long k_off, long k_sb, long k_sh, long ldk,
                      __global const st_t *V, long v_off, long v_sb, long v_sh, long ldv,
                      __global const mword_t *Mk, long m_off, long m_sb, long m_sh, long ldm,
                      __global const st_t *O, long o_off, long o_sb, long o_sh, long ldo,
                      __global const st_t *dO, long g_off, long g_sb, long g_sh, long ldg,
                      __global st_t *dQ, long d_off, long d_sb, long d_sh, long ldd,
                      __global const float *lse, long l_off, long l_sb, long l_sh,
                      int Lq, int Lk, int D, int DV, int Hq, int group, int br, int bc,
                      float scale, long wl, long wr, int flags,
                      __global const int *counts, __global const int *entries, long i_sb,
                      long i_sh, int cap)
{
    __local float S[BM * BK];
    __local float acc[BM * BN];
    __local float row_lse[BM], row_di[BM];
    const int lid = (int)get_local_id(0);
    const att_rows w = query_rows(Lq, Lk, Hq, group, br, wl, wr, flags, counts, i_sb, i_sh, cap);
    const int b = w.b, h = w.h, rows = w.rows;
    const long row0 = w.row0;
    Q += q_off + b * q_sb + h * q_sh;
    K += k_off + b * k_sb + w.hk * k_sh;
    V += v_off + b * v_sb + w.hk * v_sh;
    Mk += m_off + b * m_sb + h * m_sh;
    O += o_off + b * o_sb + h * o_sh;
    dO += g_off + b * g_sb + h * g_sh;
    dQ += d_off + b * d_sb + h * d_sh;
    lse += l_off + b * l_sb + h * l_sh;
    for (int r = lid; r < BM; r += WG) {
        row_lse[r] = r < rows ? lse[row0 + r] : -INFINITY;
        row_di[r] = r < rows ? row_dot(dO + (row0 + r) * ldg, O + (row0 + r) * ldo, DV) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int c0 = 0; c0 < D; c0 += BN) {
        for (int i = lid; i < BM * BN; i += WG)
            acc[i] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = 0; e < w.n; ++e) {
            long k_lo, k_hi;
            entry_keys(&w, entries, cap, e, flags, bc, Lk, &k_lo, &k_hi);
            for (long key0 = k_lo; key0 < k_hi; key0 += BK) {
                const int keys = (int)min((long)BK, k_hi - key0);
                score_chunk(S, Q, ldq, K, ldk, Mk, ldm, &w.u, row0, rows, key0, keys, D, scale,
                            lid);
                barrier(CLK_LOCAL_MEM_FENCE);
                for (int i = lid; i < BM * BK; i += WG) {
                    const int r = i / BK, j = i % BK;
                    float p;
                    S[i] = r < rows && j < keys
                               ? pair_ds(S[i], row_lse[r], row_di[r], dO + (row0 + r) * ldg,
                                         V + (key0 + j) * ldv, DV, scale, &p)
                               : 0.0f;
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                for (int i = lid; i < BM * BN; i += WG) {
                    const int r = i / BN, c = c0 + i % BN;
                    float a = acc[i];
                    if (c < D)
                        for (int j = 0; j < keys; ++j)
                            a += S[r * BK + j] * LOAD(K, (key0 + j) * ldk + c);
                    acc[i] = a;
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
        }
        for (int i = lid; i < BM * BN; i += WG) {
            const int r = i / BN, c = c0 + i % BN;
            if (r < rows && c < D)
                STORE(dQ, (row0 + r) * ldd + c, acc[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Whether group g of the index lists key block kb (uniform in a work-group). */
inline int block_listed(__global const int *counts, __global const int *entries, long g,
                        int cap, long kb)
{
    const int n = min(counts[g], cap);
    for (int e = 0; e < n; ++e)
        if ((entries[g * cap + e] & ~ENTRY_FULL) == kb)
            return 1;
    return 0;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void pit_attention_dkv(__global const st_t *Q, long q_off, long q_sb, long q_sh, long ldq,
                       __global const st_t *K, long k_off, long k_sb, long k_sh, long ldk,
                       __global const st_t *V, long v_off, long v_sb, long v_sh, long ldv,
                       __global const mword_t *Mk, long m_off, long m_sb, long m_sh, long ldm,
                       __global const st_t *O, long o_off, long o_sb, long o_sh, long ldo,
                       __global const st_t *dO, long g_off, long g_sb, long g_sh, long ldg,
                       __global st_t *dK, long dk_off, long dk_sb, long dk_sh, long lddk,
                       __global st_t *dV, long dv_off, long dv_sb, long dv_sh, long lddv,
                       __global const float *lse, long l_off, long l_sb, long l_sh,
                       int Lq, int Lk, int D, int DV, int Hkv, int group, int br, int bc,
                       float scale, long wl, long wr, int flags,
                       __global const int *counts, __global const int *entries, long i_sb,
                       long i_sh, int cap)
{
    __local float S[BM * BK], P[BM * BK];
    __local float acc_k[BM * BN], acc_v[BM * BN];
    __local float q_lse[BK], q_di[BK];
    const int lid = (int)get_local_id(0);
    const int parts = (bc + BM - 1) / BM; /* work-groups of one key block */
    const int kb = (int)get_group_id(0) / parts, part = (int)get_group_id(0) % parts;
    const int z = (int)get_group_id(1), b = z / Hkv, hk = z % Hkv;
    const long key0 = (long)kb * bc + (long)part * BM;
    const int keys = (int)max(0L, min((long)BM, min((long)bc - (long)part * BM, Lk - key0)));
    const att_rule u = {(long)Lk - Lq, wl, wr, (flags & ATT_MASK) != 0};
    /* the queries the bounds leave to any of the keys: [qlo, qhi), empty
     * (qlo = Lq, never a query block past the last) for keys past Lk or
     * beyond every query's reach */
    long qlo = wr >= 0 ? key0 - u.diag - wr : 0;
    long qhi = wl >= 0 ? key0 + keys - 1 - u.diag + wl + 1 : (long)Lq;
    qlo = min(max(qlo, 0L), (long)Lq);
    qhi = keys > 0 ? min(qhi, (long)Lq) : qlo;
    const int use_index = (flags & ATT_INDEX) != 0;
    K += k_off + b * k_sb + hk * k_sh;
    V += v_off + b * v_sb + hk * v_sh;
    const int cols = max(D, DV);
    for (int c0 = 0; c0 < cols; c0 += BN) {
        for (int i = lid; i < BM * BN; i += WG)
            acc_k[i] = acc_v[i] = 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int h = hk * group; h < (hk + 1) * group; ++h) {
            __global const st_t *Qh = Q + q_off + b * q_sb + h * q_sh;
            __global const st_t *Oh = O + o_off + b * o_sb + h * o_sh;
            __global const st_t *dOh = dO + g_off + b * g_sb + h * g_sh;
            __global const mword_t *Mh = Mk + m_off + b * m_sb + h * m_sh;
            __global const float *lh = lse + l_off + b * l_sb + h * l_sh;
            for (long qb = qlo / br; qb * br < qhi; ++qb) {
                if (use_index && !block_listed(counts, entries, b * i_sb + h * i_sh + qb, cap,
                                               kb))
                    continue;
                const long q_end = min(qhi, qb * br + br);
                for (long q0 = max(qlo, qb * br); q0 < q_end; q0 += BK) {
                    const int nq = (int)min((long)BK, q_end - q0);
                    for (int j = lid; j < BK; j += WG) {
                        q_lse[j] = j < nq ? lh[q0 + j] : -INFINITY;
                        q_di[j] = j < nq ? row_dot(dOh + (q0 + j) * ldg, Oh + (q0 + j) * ldo, DV)
                                         : 0.0f;
                    }
                    barrier(CLK_LOCAL_MEM_FENCE);
                    for (int i = lid; i < BM * BK; i += WG) {
                        const int r = i / BK, j = i % BK;
                        float p = 0.0f, ds = 0.0f;
                        if (r < keys && j < nq) {
                            const float s = pair_score(Qh, ldq, K, ldk, Mh, ldm, &u, q0 + j,
                                                       key0 + r, D, scale);
                            ds = pair_ds(s, q_lse[j], q_di[j], dOh + (q0 + j) * ldg,
                                         V + (key0 + r) * ldv, DV, scale, &p);
                        }
                        S[i] = ds;
                        P[i] = p;
                    }
                    barrier(CLK_LOCAL_MEM_FENCE);
                    for (int i = lid; i < BM * BN; i += WG) {
                        const int r = i / BN, c = c0 + i % BN;
                        float ak = acc_k[i], av = acc_v[i];
                        for (int j = 0; j < nq; ++j) {
                            if (c < D)
                                ak += S[r * BK + j] * LOAD(Qh, (q0 + j) * ldq + c);
                            if (c < DV)
                                av += P[r * BK + j] * LOAD(dOh, (q0 + j) * ldg + c);
                        }
                        acc_k[i] = ak;
                        acc_v[i] = av;
                    }
                    barrier(CLK_LOCAL_MEM_FENCE);
                }
            }
        }
        for (int i = lid; i < BM * BN; i += WG) {
            const int r = i / BN, c = c0 + i % BN;
            if (r >= keys)
                continue;
            if ((flags & ATT_DK) && c < D)
                STORE(dK, dk_off + b * dk_sb + hk * dk_sh + (key0 + r) * lddk + c, acc_k[i]);
            if ((flags & ATT_DV) && c < DV)
                STORE(dV, dv_off + b * dv_sb + hk * dv_sh + (key0 + r) * lddv + c, acc_v[i]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
