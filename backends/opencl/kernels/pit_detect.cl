/*
 * pit_detect.cl - online sparsity detection and out-of-order index building
 * for up to 8 micro-tile candidates in one pass over X.
 *
 * Defines: MDT (the dtype code of X's elements, read through mask_on() of
 * pit_common.cl; DT is unused); NCAND (1..8); for each
 * candidate i < 8: TM_i, TK_i (micro-tile rows x cols), AX_i (1 K, 2 M, 3 N),
 * FOFF_i (offset of its flags in local memory); RR x CW, the region one
 * work-group scans (multiples of every TM_i and TK_i, so a micro-tile never
 * straddles two work-groups and is recorded exactly once; or, for a lone
 * candidate, one micro-tile, cut to the operand where it is larger); NFLAGS
 * (sum of the candidates' flags); DWG (work-group size).
 *
 * Grid: (ceil(cols / CW) * DWG, ceil(rows / RR), batch).
 */

/* Micro-tiles of candidate i across and down the region (one where the
 * region is a micro-tile cut to the operand). */
#define ACROSS(i) ((CW + TK_##i - 1) / TK_##i)
#define DOWN(i) ((RR + TM_##i - 1) / TM_##i)
#define NF(i) (DOWN(i) * ACROSS(i))

/* A position in the region: a micro-tile may be a whole row of K, or more. */
#if RR * CW > 0x7fffffff
typedef long region_pos;
#else
typedef int region_pos;
#endif

/* Marks the micro-tile of candidate i holding region element (r, c).
 * Concurrent stores all write 1, so no atomic is needed. */
#define MARK(i)                                                           \
    if ((i) < NCAND) {                                                    \
        const int f_ = FOFF_##i + (r / TM_##i) * ACROSS(i) + c / TK_##i;  \
        if (!flags[f_])                                                   \
            flags[f_] = 1u;                                               \
    }

/* Appends flag f when it belongs to candidate i. Axis M groups by column
 * block and lists row indices; K and N group by row block and list columns. */
#define APPEND(i)                                                                \
    if ((i) < NCAND && f >= FOFF_##i && f < FOFF_##i + NF(i)) {                  \
        const int lf_ = f - FOFF_##i;                                            \
        const int tr_ = r0 / TM_##i + lf_ / ACROSS(i);                           \
        const int tc_ = c0 / TK_##i + lf_ % ACROSS(i);                           \
        const int g_ = b * gpb.s##i + (AX_##i == 2 ? tc_ : tr_);                 \
        const int e_ = (AX_##i == 2 ? tr_ : tc_);                                \
        if (g_ < ngroups.s##i) { /* an index smaller than X is never overrun */ \
            const uint pos_ = atomic_inc(&counts##i[g_]);                        \
            if (pos_ < (uint)cap.s##i)                                           \
                entries##i[(long)g_ * cap.s##i + pos_] = e_;                     \
            atomic_inc(&lcount[i]);                                              \
        }                                                                        \
    }

#define ADD_TOTAL(i)                                   \
    if ((i) < NCAND && lid == (i) && lcount[i] != 0u)  \
        atomic_add(total##i, (int)lcount[i]);

#define INDEX_ARGS(i) \
    , __global int *counts##i, __global int *entries##i, __global int *total##i

__kernel __attribute__((reqd_work_group_size(DWG, 1, 1)))
void pit_detect(__global const mword_t *X, long x_off, long ldx, long x_bs,
                int rows, int cols, int8 gpb, int8 cap, int8 ngroups
                INDEX_ARGS(0) INDEX_ARGS(1) INDEX_ARGS(2) INDEX_ARGS(3)
                INDEX_ARGS(4) INDEX_ARGS(5) INDEX_ARGS(6) INDEX_ARGS(7))
{
    __local uint flags[NFLAGS];
    __local uint lcount[8];
    const int lid = (int)get_local_id(0);
    const int c0 = (int)get_group_id(0) * CW;
    const int r0 = (int)get_group_id(1) * RR;
    const int b = (int)get_group_id(2);

    for (int f = lid; f < NFLAGS; f += DWG)
        flags[f] = 0u;
    if (lid < 8)
        lcount[lid] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);

    X += x_off + (long)b * x_bs;
    /* One element per step whatever MDT is, u8 included: each element marks
     * its own micro-tiles (sides as small as 1, and 3 or 5), rows may start
     * at any element, and neighbouring work-items already read neighbouring
     * elements, so wider loads would save no traffic, only add edge cases. */
    for (region_pos e = lid; e < (region_pos)RR * CW; e += DWG) {
        const int r = (int)(e / CW), c = (int)(e % CW);
        if (r0 + r < rows && c0 + c < cols &&
            mask_on(X, (long)(r0 + r) * ldx + (c0 + c))) {
            MARK(0) MARK(1) MARK(2) MARK(3) MARK(4) MARK(5) MARK(6) MARK(7)
        }
#if NFLAGS == 1
        /* One micro-tile: once any work-item saw a non-zero the rest cannot
         * change the answer (a stale read only scans on). */
        if (flags[0])
            break;
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    /* A set flag implies an in-range element, so the micro-tile exists. */
    for (int f = lid; f < NFLAGS; f += DWG) {
        if (flags[f]) {
            APPEND(0) APPEND(1) APPEND(2) APPEND(3)
            APPEND(4) APPEND(5) APPEND(6) APPEND(7)
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    ADD_TOTAL(0) ADD_TOTAL(1) ADD_TOTAL(2) ADD_TOTAL(3)
    ADD_TOTAL(4) ADD_TOTAL(5) ADD_TOTAL(6) ADD_TOTAL(7)
}
