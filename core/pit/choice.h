/*
 * core/pit/choice.h - every form pit_report.choice and pit_report.runner_up
 * take: the one list. docs/api.md shows the same forms in its table of
 * choices; tests/test_reports.c checks that the table and PIT_CHOICE_FORMS
 * agree, and that what each operator stores is one of the forms.
 *
 * %c is the gathered axis (k, m, n: pit_axis_letter), %s the dense GEMM's
 * name (the backend's dense_name, "GEMM" when it has none), the %d run
 * micro-tile rows x cols and a tile bm x bn x bk, %lld the tile-steps the
 * cost model counted.
 */
#ifndef PIT_CORE_CHOICE_H
#define PIT_CORE_CHOICE_H

/* pit_matmul (and pit_relu_ffn's second product, pit_matmul_backward's dB) */
#define PIT_CHOICE_SPARSE "%c%dx%d tile %dx%dx%d (%lld tiles)"   /* the selection's kernel */
#define PIT_CHOICE_SPARSE_TILE_SET "%c%dx%d tile %dx%dx%d (tile set)" /* options' tile_bm/bn/bk */
#define PIT_CHOICE_FORCED "forced %c%dx%d tile %dx%dx%d" /* forced micro-tile, dense preferred */
#define PIT_CHOICE_FIXED "fixed %c%dx%d tile %dx%dx%d"   /* options.fixed_plan */
#define PIT_CHOICE_DENSE "dense %s"                      /* the selection's dense GEMM */
#define PIT_CHOICE_DENSE_KEPT "dense %s (kept, no detection)" /* a settled dense plan */
#define PIT_CHOICE_DENSE_FORCED "dense %s (forced)"      /* options.force_dense */
#define PIT_CHOICE_DENSE_REFUSED "dense %s (tile %dx%dx%d refused)" /* the device refused the tile */
#define PIT_CHOICE_NONE "none" /* runner_up only: no other option */
#define PIT_DENSE_GENERIC "GEMM" /* %s of the dense forms when the backend names none */

/* the operators of dynamic-sparse models: micro-tile, then the tile that ran */
#define PIT_CHOICE_SDDMM "sddmm %dx%d"
#define PIT_CHOICE_SOFTMAX "softmax %dx%d"
#define PIT_CHOICE_ATTENTION "attention %dx%d" /* the fused kernel */
#define PIT_CHOICE_TILE " tile %dx%dx%d"        /* appended by ops_report_tile */
#define PIT_CHOICE_ATTENTION_COMPOSED PIT_CHOICE_ATTENTION PIT_CHOICE_TILE
#define PIT_CHOICE_ATTENTION_COLUMNS PIT_CHOICE_ATTENTION " (key columns)" /* the backend's key-column tiles */
#define PIT_CHOICE_MOE "moe %dx%d"
#define PIT_CHOICE_MOE_FFN "moe ffn %dx%d" /* then the first product's tile */
#define PIT_CHOICE_ROWS "rows %dx%d"

/* Every final form, "" (nothing ran: an empty output, or K = 0) included. */
#define PIT_CHOICE_FORMS                                                                    \
    PIT_CHOICE_SPARSE, PIT_CHOICE_SPARSE_TILE_SET, PIT_CHOICE_FORCED, PIT_CHOICE_FIXED,     \
        PIT_CHOICE_DENSE, PIT_CHOICE_DENSE_KEPT, PIT_CHOICE_DENSE_FORCED,                   \
        PIT_CHOICE_DENSE_REFUSED, PIT_CHOICE_NONE, PIT_CHOICE_SDDMM, PIT_CHOICE_SOFTMAX,    \
        PIT_CHOICE_ATTENTION, PIT_CHOICE_ATTENTION_COMPOSED, PIT_CHOICE_ATTENTION_COLUMNS,  \
        PIT_CHOICE_MOE PIT_CHOICE_TILE, PIT_CHOICE_MOE_FFN PIT_CHOICE_TILE,                 \
        PIT_CHOICE_ROWS PIT_CHOICE_TILE, ""

#endif /* PIT_CORE_CHOICE_H */
