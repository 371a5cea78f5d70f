/*
 * tests/test_api.c - every public entry point rejects bad input with a
 * specific status and a message, and never crashes. Needs a device only for
 * the tensor and operator checks (PoCL in CI); reports those as skipped, by
 * name, when no backend has a device.
 */
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pit.h"

static int passed, failed, skipped;

static void expect_status(const char *what, pit_status got, pit_status want)
{
    const char *msg = pit_last_error();
    int ok = got == want && (want == PIT_SUCCESS || (msg && msg[0]));
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: got %s, want %s (message: \"%s\")\n", what, pit_status_string(got),
               pit_status_string(want), msg ? msg : "(null)");
    }
}

static void expect_true(const char *what, int cond)
{
    if (cond)
        passed++;
    else {
        failed++;
        printf("FAIL %s\n", what);
    }
}

static void test_status_strings(void)
{
    for (int s = 0; s <= PIT_ERR_INTERNAL; s++)
        expect_true("status string names the code",
                    strncmp(pit_status_string((pit_status)s), "PIT_", 4) == 0);
    expect_true("unknown status", strstr(pit_status_string((pit_status)999), "UNKNOWN") != NULL);
    expect_true("version", pit_version() == PIT_VERSION);
    expect_true("dtype names", !strcmp(pit_dtype_name(PIT_BF16), "bf16") && pit_dtype_size(PIT_F16) == 2);
    expect_true("u8 dtype", !strcmp(pit_dtype_name(PIT_U8), "u8") && pit_dtype_size(PIT_U8) == 1 &&
                                pit_dtype_size((pit_dtype)5) == 0);
}

static void test_backend_errors(void)
{
    pit_context *ctx = (pit_context *)0x1;
    expect_status("null ctx out", pit_context_create("opencl", 0, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("unknown backend", pit_context_create("nope", 0, &ctx), PIT_ERR_BACKEND_NOT_FOUND);
    expect_true("ctx cleared on failure", ctx == NULL);
    expect_true("message names the backend", strstr(pit_last_error(), "nope") != NULL);
    int n = -1;
    expect_status("device count null", pit_device_count("opencl", NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("device count unknown", pit_device_count("vulkan", &n), PIT_ERR_BACKEND_NOT_FOUND);
    pit_device_info info;
    expect_status("device info null", pit_device_get_info("opencl", 0, NULL), PIT_ERR_INVALID_ARGUMENT);
    setenv("PIT_BACKEND", "opencl:abc", 1);
    expect_status("PIT_BACKEND bad index", pit_context_create(NULL, -1, &ctx), PIT_ERR_DEVICE_INDEX);
    setenv("PIT_BACKEND", ":1", 1);
    expect_status("PIT_BACKEND empty name", pit_context_create(NULL, -1, &ctx), PIT_ERR_BACKEND_NOT_FOUND);
    unsetenv("PIT_BACKEND");
    if (pit_device_count("opencl", &n) == PIT_SUCCESS && n > 0) {
        expect_status("device index out of range", pit_context_create("opencl", n + 5, &ctx),
                      PIT_ERR_DEVICE_INDEX);
        expect_status("device info out of range", pit_device_get_info("opencl", n, &info),
                      PIT_ERR_DEVICE_INDEX);
    } else {
        skipped += 2;
    }
    expect_status("destroy NULL ctx", pit_context_destroy(NULL), PIT_SUCCESS);
}

/* A shared library without pit_backend_register (libpit itself, copied under a
 * plug-in's name) must be refused as not a plug-in; a junk file as not loadable. */
static void test_fake_plugins(const char *libpit)
{
    char dir[] = "/tmp/pit-fake-XXXXXX";
    if (!libpit || !mkdtemp(dir)) {
        skipped += 2;
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/libpit-hip.so' && printf junk > '%s/libpit-cuda.so'", libpit,
             dir, dir);
    if (system(cmd) != 0) {
        skipped += 2;
        return;
    }
    const char *old = getenv("PIT_PLUGIN_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("PIT_PLUGIN_DIR", dir, 1);
    pit_context *ctx = NULL;
    expect_status("not a pit plug-in", pit_context_create("hip", 0, &ctx), PIT_ERR_BACKEND_INVALID);
    expect_true("message says not a plug-in", strstr(pit_last_error(), "not a pit plug-in") != NULL);
    expect_status("junk plug-in file", pit_context_create("cuda", 0, &ctx), PIT_ERR_BACKEND_NOT_FOUND);
    expect_true("message names the file", strstr(pit_last_error(), "libpit-cuda.so") != NULL);
    if (saved) {
        setenv("PIT_PLUGIN_DIR", saved, 1);
        free(saved);
    } else {
        unsetenv("PIT_PLUGIN_DIR");
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
}

static void test_tensor_errors(pit_context *ctx)
{
    pit_tensor *t = NULL;
    int64_t shape[5] = {4, 6, 1, 1, 1};
    expect_status("tensor null shape", pit_tensor_create(ctx, PIT_F32, 2, NULL, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("tensor rank 0", pit_tensor_create(ctx, PIT_F32, 0, shape, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("tensor rank 5", pit_tensor_create(ctx, PIT_F32, 5, shape, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("tensor bad dtype", pit_tensor_create(ctx, (pit_dtype)42, 2, shape, &t),
                  PIT_ERR_UNSUPPORTED_DTYPE);
    int64_t neg[2] = {4, -1};
    expect_status("tensor negative dim", pit_tensor_create(ctx, PIT_F32, 2, neg, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("tensor null ctx", pit_tensor_create(NULL, PIT_F32, 2, shape, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("tensor null out", pit_tensor_create(ctx, PIT_F32, 2, shape, NULL), PIT_ERR_INVALID_ARGUMENT);

    pit_tensor *base = NULL;
    int64_t big[1] = {256};
    expect_status("base tensor", pit_tensor_create(ctx, PIT_F32, 1, big, &base), PIT_SUCCESS);
    if (!base)
        return;
    pit_tensor_desc d;
    pit_tensor_get_desc(base, &d);
    int64_t col_stride[2] = {6, 2};
    expect_status("wrap innermost stride 2", pit_tensor_wrap(ctx, PIT_F32, 2, shape, col_stride, d.data, 0, &t),
                  PIT_ERR_BAD_STRIDES);
    int64_t overlap[2] = {3, 1};
    expect_status("wrap overlapping rows", pit_tensor_wrap(ctx, PIT_F32, 2, shape, overlap, d.data, 0, &t),
                  PIT_ERR_BAD_STRIDES);
    expect_status("wrap misaligned offset", pit_tensor_wrap(ctx, PIT_F32, 2, shape, NULL, d.data, 2, &t),
                  PIT_ERR_BAD_STRIDES);
    expect_status("wrap null data", pit_tensor_wrap(ctx, PIT_F32, 2, shape, NULL, NULL, 0, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    float host[24];
    for (int i = 0; i < 24; i++)
        host[i] = (float)i + 0.5f;
    pit_tensor *w = NULL;
    int64_t padded[2] = {8, 1};
    expect_status("wrap padded rows", pit_tensor_wrap(ctx, PIT_F32, 2, shape, padded, d.data, 16, &w),
                  PIT_SUCCESS);
    expect_status("upload wrong size", pit_tensor_upload(w, NULL, host, 7), PIT_ERR_SHAPE_MISMATCH);
    expect_status("upload null host", pit_tensor_upload(w, NULL, NULL, 96), PIT_ERR_INVALID_ARGUMENT);
    expect_status("upload strided", pit_tensor_upload(w, NULL, host, sizeof host), PIT_SUCCESS);
    float back[24] = {0};
    expect_status("download strided", pit_tensor_download(w, NULL, back, sizeof back), PIT_SUCCESS);
    expect_true("strided round trip", memcmp(host, back, sizeof host) == 0);
    expect_status("zero strided", pit_tensor_zero(w, NULL), PIT_SUCCESS);
    pit_tensor_download(w, NULL, back, sizeof back);
    expect_true("zeroed", back[0] == 0.0f && back[23] == 0.0f);
    pit_tensor_destroy(w);
    pit_tensor_destroy(base);
    expect_status("destroy NULL tensor", pit_tensor_destroy(NULL), PIT_SUCCESS);
}

static int deleter_calls;
static void count_delete(DLManagedTensor *m)
{
    (void)m;
    deleter_calls++;
}

static void test_dlpack(pit_context *ctx)
{
    int64_t shape[2] = {3, 5};
    pit_tensor *t = NULL, *u = NULL;
    if (pit_tensor_create(ctx, PIT_BF16, 2, shape, &t) != PIT_SUCCESS)
        return;
    DLManagedTensor *m = NULL;
    expect_status("to_dlpack", pit_tensor_to_dlpack(t, &m), PIT_SUCCESS);
    expect_true("dlpack dtype bf16", m && m->dl_tensor.dtype.code == kDLBfloat && m->dl_tensor.dtype.bits == 16);
    expect_true("dlpack shape", m && m->dl_tensor.ndim == 2 && m->dl_tensor.shape[1] == 5);
    /* Re-import with our own deleter to see ownership pass to pit. */
    DLManagedTensor in = *m;
    in.deleter = count_delete;
    expect_status("from_dlpack", pit_tensor_from_dlpack(ctx, &in, &u), PIT_SUCCESS);
    pit_tensor_desc d;
    pit_tensor_get_desc(u, &d);
    expect_true("imported borrowed", d.owned == 0 && d.shape[0] == 3 && d.dtype == PIT_BF16);
    pit_tensor_destroy(u);
    expect_true("deleter called once", deleter_calls == 1);
    DLManagedTensor bad = *m;
    bad.dl_tensor.device.device_type = kDLVulkan; /* no backend's; host memory: test_views */
    expect_status("dlpack wrong device", pit_tensor_from_dlpack(ctx, &bad, &u), PIT_ERR_INVALID_ARGUMENT);
    bad = *m;
    bad.dl_tensor.dtype.lanes = 4;
    expect_status("dlpack lanes", pit_tensor_from_dlpack(ctx, &bad, &u), PIT_ERR_UNSUPPORTED_DTYPE);
    bad = *m;
    bad.dl_tensor.dtype.code = kDLComplex;
    expect_status("dlpack complex", pit_tensor_from_dlpack(ctx, &bad, &u), PIT_ERR_UNSUPPORTED_DTYPE);
    bad = *m;
    bad.dl_tensor.ndim = 7;
    expect_status("dlpack rank 7", pit_tensor_from_dlpack(ctx, &bad, &u), PIT_ERR_INVALID_ARGUMENT);
    expect_true("deleter not called on failure", deleter_calls == 1);
    /* torch.bool arrives as kDLBool (code 6), 8 bits: a u8 mask */
    DLManagedTensor mask = *m;
    mask.deleter = count_delete;
    mask.dl_tensor.dtype = (DLDataType){6, 8, 1};
    expect_status("from_dlpack bool", pit_tensor_from_dlpack(ctx, &mask, &u), PIT_SUCCESS);
    pit_tensor_get_desc(u, &d);
    expect_true("bool imported as u8", d.dtype == PIT_U8 && d.shape[1] == 5);
    pit_tensor_destroy(u);
    expect_true("bool deleter called", deleter_calls == 2);
    m->deleter(m);
    pit_tensor_destroy(t);
}

static void test_matmul_errors(pit_context *ctx, pit_context *other)
{
    int64_t a[2] = {8, 16}, b[2] = {16, 4}, c[2] = {8, 4}, wrong[2] = {15, 4};
    pit_tensor *A = NULL, *B = NULL, *C = NULL, *Bw = NULL, *Ci = NULL, *Ch = NULL, *Co = NULL;
    pit_tensor_create(ctx, PIT_F32, 2, a, &A);
    pit_tensor_create(ctx, PIT_F32, 2, b, &B);
    pit_tensor_create(ctx, PIT_F32, 2, c, &C);
    pit_tensor_create(ctx, PIT_F32, 2, wrong, &Bw);
    pit_tensor_create(ctx, PIT_I32, 2, c, &Ci);
    pit_tensor *Cu = NULL;
    pit_tensor_create(ctx, PIT_U8, 2, c, &Cu);
    pit_tensor_create(ctx, PIT_BF16, 2, c, &Ch);
    if (other)
        pit_tensor_create(other, PIT_F32, 2, c, &Co);
    expect_status("matmul null ctx", pit_matmul(NULL, NULL, A, B, C, NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul null A", pit_matmul(ctx, NULL, NULL, B, C, NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul shape", pit_matmul(ctx, NULL, A, Bw, C, NULL, NULL), PIT_ERR_SHAPE_MISMATCH);
    expect_status("matmul dtype mix", pit_matmul(ctx, NULL, A, B, Ch, NULL, NULL), PIT_ERR_UNSUPPORTED_DTYPE);
    expect_status("matmul i32", pit_matmul(ctx, NULL, A, B, Ci, NULL, NULL), PIT_ERR_UNSUPPORTED_DTYPE);
    expect_status("matmul u8", pit_matmul(ctx, NULL, A, B, Cu, NULL, NULL), PIT_ERR_UNSUPPORTED_DTYPE);
    expect_status("matmul C aliases A", pit_matmul(ctx, NULL, A, B, A, NULL, NULL), PIT_ERR_SHAPE_MISMATCH);
    if (Co)
        expect_status("matmul other context", pit_matmul(ctx, NULL, A, B, Co, NULL, NULL),
                      PIT_ERR_CONTEXT_MISMATCH);
    pit_matmul_options o = pit_matmul_options_default();
    o.microtile = (pit_microtile){32, 1, PIT_AXIS_N};
    expect_status("matmul axis not PI", pit_matmul(ctx, NULL, A, B, C, &o, NULL), PIT_ERR_INVALID_ARGUMENT);
    o.microtile = (pit_microtile){-1, 1, PIT_AXIS_K};
    expect_status("matmul negative micro-tile", pit_matmul(ctx, NULL, A, B, C, &o, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    o = pit_matmul_options_default();
    o.sparse = (pit_sparse_operand)7;
    expect_status("matmul bad sparse operand", pit_matmul(ctx, NULL, A, B, C, &o, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    /* An output view that overlaps A's memory. */
    pit_tensor_desc d;
    pit_tensor_get_desc(A, &d);
    pit_tensor *alias = NULL;
    pit_tensor_wrap(ctx, PIT_F32, 2, c, NULL, d.data, 16, &alias);
    expect_status("matmul C overlaps A", pit_matmul(ctx, NULL, A, B, alias, NULL, NULL), PIT_ERR_ALIASING);
    expect_status("dense C overlaps A", pit_matmul_dense(ctx, NULL, A, B, alias), PIT_ERR_ALIASING);
    pit_stream *s = NULL;
    if (other && pit_stream_create(other, &s) == PIT_SUCCESS) {
        expect_status("stream of other context", pit_matmul(ctx, s, A, B, C, NULL, NULL),
                      PIT_ERR_CONTEXT_MISMATCH);
        expect_status("sync other stream", pit_synchronize(ctx, s), PIT_ERR_CONTEXT_MISMATCH);
        pit_stream_destroy(s);
    }
    pit_tensor *list[] = {A, B, C, Bw, Ci, Cu, Ch, Co, alias};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        pit_tensor_destroy(list[i]);
}

static void expect_report_zero(const char *what, const pit_report *r)
{
    static const pit_report zero;
    expect_true(what, memcmp(r, &zero, sizeof zero) == 0);
}

/* A failed pit_matmul leaves a cleared report, whichever check refused it:
 * a caller that prints report.choice after a failure reads "" and not stack
 * garbage. Without a context only the first check can be reached. */
static void test_matmul_clears_report(pit_context *ctx, pit_context *other)
{
    pit_report rep;
    memset(&rep, 0x5a, sizeof rep);
    expect_status("matmul null ctx, report", pit_matmul(NULL, NULL, NULL, NULL, NULL, NULL, &rep),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_report_zero("report cleared: null ctx", &rep);
    /* every operator with a report clears it before its first check */
    struct { const char *what; pit_status got; } refused[7];
    int n = 0;
#define REFUSED(call)                                 \
    do {                                              \
        memset(&rep, 0x5a, sizeof rep);               \
        refused[n].what = #call;                      \
        refused[n].got = (call);                      \
        expect_report_zero(#call, &rep);              \
        n++;                                          \
    } while (0)
    REFUSED(pit_sddmm(NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, &rep));
    REFUSED(pit_sparse_softmax(NULL, NULL, NULL, NULL, NULL, 1.0f, &rep));
    REFUSED(pit_sparse_attention(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1.0f, 32, &rep));
    REFUSED(pit_moe_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, &rep));
    REFUSED(pit_matmul_rows(NULL, NULL, NULL, NULL, NULL, 0, &rep));
    REFUSED(pit_relu_ffn(NULL, NULL, NULL, NULL, NULL, NULL, NULL, &rep));
    REFUSED(pit_moe_ffn(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &rep));
#undef REFUSED
    for (int i = 0; i < n; i++)
        expect_status(refused[i].what, refused[i].got, PIT_ERR_INVALID_ARGUMENT);
    if (!ctx)
        return;
    int64_t a[2] = {8, 16}, b[2] = {16, 4}, c[2] = {8, 4};
    pit_tensor *A = NULL, *B = NULL, *C = NULL;
    pit_tensor_create(ctx, PIT_F32, 2, a, &A);
    pit_tensor_create(ctx, PIT_F32, 2, b, &B);
    pit_tensor_create(ctx, PIT_F32, 2, c, &C);
    pit_matmul_options o = pit_matmul_options_default();
    o.sparse = (pit_sparse_operand)7;
    memset(&rep, 0x5a, sizeof rep);
    expect_status("matmul bad sparse operand, report", pit_matmul(ctx, NULL, A, B, C, &o, &rep),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_report_zero("report cleared: bad sparse operand", &rep);
    memset(&rep, 0x5a, sizeof rep);
    expect_status("matmul shape, report", pit_matmul(ctx, NULL, A, A, C, NULL, &rep), PIT_ERR_SHAPE_MISMATCH);
    expect_report_zero("report cleared: shape", &rep);
    pit_stream *s = NULL;
    if (other && pit_stream_create(other, &s) == PIT_SUCCESS) {
        memset(&rep, 0x5a, sizeof rep);
        expect_status("matmul stream of other context, report", pit_matmul(ctx, s, A, B, C, NULL, &rep),
                      PIT_ERR_CONTEXT_MISMATCH);
        expect_report_zero("report cleared: stream of other context", &rep);
        pit_stream_destroy(s);
    }
    pit_tensor_destroy(A);
    pit_tensor_destroy(B);
    pit_tensor_destroy(C);
}

/* A zero extent makes a tensor empty whatever its other extents: their
 * product would overflow, but an empty tensor spans no byte. */
static void test_empty_with_large_extents(pit_context *ctx)
{
    int64_t zero_last[4] = {INT32_MAX, INT32_MAX, INT32_MAX, 0};
    int64_t zero_first[4] = {0, INT32_MAX, INT32_MAX, INT32_MAX};
    const int64_t *shapes[2] = {zero_last, zero_first};
    for (int i = 0; i < 2; i++) {
        pit_tensor *t = NULL;
        expect_status(i ? "create: zero extent before large ones" : "create: zero extent after large ones",
                      pit_tensor_create(ctx, PIT_F32, 4, shapes[i], &t), PIT_SUCCESS);
        expect_status("upload of an empty tensor", t ? pit_tensor_upload(t, NULL, "", 0) : PIT_ERR_INTERNAL,
                      PIT_SUCCESS);
        expect_status("zero of an empty tensor", t ? pit_tensor_zero(t, NULL) : PIT_ERR_INTERNAL, PIT_SUCCESS);
        pit_tensor_desc d;
        pit_tensor_get_desc(t, &d);
        pit_tensor *w = NULL;
        expect_status("wrap: zero extent with large ones",
                      t ? pit_tensor_wrap(ctx, PIT_F32, 4, shapes[i], NULL, d.data, 0, &w) : PIT_ERR_INTERNAL,
                      PIT_SUCCESS);
        pit_tensor_destroy(w);
        pit_tensor_destroy(t);
    }
}

/* Reliability cases: overflowing descriptors,
 * nulls on every entry point, DLPack edge cases, operand checks of matmul. */
static void test_more_input_checks(pit_context *ctx, pit_context *other)
{
    pit_tensor *t = (pit_tensor *)(uintptr_t)1;
    int64_t huge[4] = {INT32_MAX, INT32_MAX, INT32_MAX, 4};
    expect_status("create: element count overflows", pit_tensor_create(ctx, PIT_F32, 4, huge, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_true("create: *tensor NULL on failure", t == NULL);
    expect_status("create: null ctx", pit_tensor_create(NULL, PIT_F32, 4, huge, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    int64_t big_dim[1] = {(int64_t)1 << 31};
    expect_status("create: dimension 2^31", pit_tensor_create(ctx, PIT_F32, 1, big_dim, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    test_empty_with_large_extents(ctx);
    pit_tensor *base = NULL;
    int64_t n256[1] = {256};
    if (pit_tensor_create(ctx, PIT_F32, 1, n256, &base) != PIT_SUCCESS)
        return;
    pit_tensor_desc d;
    pit_tensor_get_desc(base, &d);
    int64_t shape2[2] = {3, 4}, far[2] = {(int64_t)1 << 62, 1};
    expect_status("wrap: stride spans 2^63", pit_tensor_wrap(ctx, PIT_F32, 2, shape2, far, d.data, 0, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    int64_t neg[2] = {-4, 1};
    expect_status("wrap: negative stride", pit_tensor_wrap(ctx, PIT_F32, 2, shape2, neg, d.data, 0, &t),
                  PIT_ERR_BAD_STRIDES);
    expect_status("wrap: offset + extent past 2^63",
                  pit_tensor_wrap(ctx, PIT_F32, 2, shape2, NULL, d.data, (size_t)INT64_MAX - 3, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    t = (pit_tensor *)(uintptr_t)1;
    expect_status("wrap: null data", pit_tensor_wrap(ctx, PIT_F32, 2, shape2, NULL, NULL, 0, &t),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_true("wrap: *tensor NULL on failure", t == NULL);
    expect_status("wrap: bad dtype", pit_tensor_wrap(ctx, (pit_dtype)-1, 2, shape2, NULL, d.data, 0, &t),
                  PIT_ERR_UNSUPPORTED_DTYPE);
    expect_status("get_desc: null", pit_tensor_get_desc(NULL, &d), PIT_ERR_INVALID_ARGUMENT);
    expect_status("get_desc: null out", pit_tensor_get_desc(base, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("zero: null", pit_tensor_zero(NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    float host[256];
    expect_status("download: wrong size", pit_tensor_download(base, NULL, host, 4), PIT_ERR_SHAPE_MISMATCH);
    expect_status("download: null host", pit_tensor_download(base, NULL, NULL, sizeof host),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("download: null tensor", pit_tensor_download(NULL, NULL, host, 4), PIT_ERR_INVALID_ARGUMENT);
    pit_stream *s = NULL;
    if (other && pit_stream_create(other, &s) == PIT_SUCCESS) {
        expect_status("upload: stream of other context", pit_tensor_upload(base, s, host, sizeof host),
                      PIT_ERR_CONTEXT_MISMATCH);
        expect_status("zero: stream of other context", pit_tensor_zero(base, s), PIT_ERR_CONTEXT_MISMATCH);
        pit_stream_destroy(s);
    }
    /* Streams, contexts, events. */
    expect_status("stream_create: null ctx", pit_stream_create(NULL, &s), PIT_ERR_INVALID_ARGUMENT);
    expect_status("stream_create: null out", pit_stream_create(ctx, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("stream_wrap: null native", pit_stream_wrap(ctx, NULL, &s), PIT_ERR_INVALID_ARGUMENT);
    expect_status("stream_destroy: NULL", pit_stream_destroy(NULL), PIT_SUCCESS);
    expect_status("synchronize: null ctx", pit_synchronize(NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    pit_device_info info;
    expect_status("get_info: null ctx", pit_context_get_info(NULL, &info), PIT_ERR_INVALID_ARGUMENT);
    expect_status("get_info: null info", pit_context_get_info(ctx, NULL), PIT_ERR_INVALID_ARGUMENT);
    pit_event *e = NULL;
    double ms = 0;
    expect_status("event_record: null ctx", pit_event_record(NULL, NULL, &e), PIT_ERR_INVALID_ARGUMENT);
    expect_status("event_record: null out", pit_event_record(ctx, NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("event_elapsed: null", pit_event_elapsed_ms(NULL, NULL, &ms), PIT_ERR_INVALID_ARGUMENT);
    expect_status("event_destroy: NULL", pit_event_destroy(NULL), PIT_SUCCESS);
    double gbps = 0;
    expect_status("copy bandwidth: 0 bytes", pit_measure_copy_bandwidth(ctx, 0, 3, &gbps),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("copy bandwidth: null out", pit_measure_copy_bandwidth(ctx, 1024, 3, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("queued copy bandwidth: null ctx", pit_measure_queued_copy_bandwidth(NULL, 1024, 3, &gbps),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("queued copy bandwidth: 0 bytes", pit_measure_queued_copy_bandwidth(ctx, 0, 3, &gbps),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("queued copy bandwidth: 0 repeats", pit_measure_queued_copy_bandwidth(ctx, 1024, 0, &gbps),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("queued copy bandwidth: null out", pit_measure_queued_copy_bandwidth(ctx, 1024, 3, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    /* a buffer that stays in a cache, an odd size (rounded down to words) */
    gbps = 0;
    expect_status("queued copy bandwidth: 64 KB + 3", pit_measure_queued_copy_bandwidth(ctx, (1 << 16) + 3, 2, &gbps),
                  PIT_SUCCESS);
    expect_true("queued copy bandwidth: positive", gbps > 0 && gbps < 1e7);
    /* DLPack edge cases. */
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    int64_t dl_shape[2] = {16, 16};
    m.dl_tensor.device.device_type = kDLOpenCL;
    m.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
    m.dl_tensor.ndim = 2;
    m.dl_tensor.shape = NULL;
    m.dl_tensor.data = d.data;
    t = (pit_tensor *)(uintptr_t)1;
    expect_status("dlpack: null shape", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_true("dlpack: *tensor NULL on failure", t == NULL);
    m.dl_tensor.shape = dl_shape;
    m.dl_tensor.data = NULL;
    expect_status("dlpack: null data", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_INVALID_ARGUMENT);
    m.dl_tensor.data = d.data;
    m.dl_tensor.device.device_id = 3;
    expect_status("dlpack: other device id", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_INVALID_ARGUMENT);
    m.dl_tensor.device.device_id = 0;
    m.dl_tensor.dtype = (DLDataType){kDLFloat, 64, 1};
    expect_status("dlpack: f64", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_UNSUPPORTED_DTYPE);
    m.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
    m.dl_tensor.ndim = 0;
    expect_status("dlpack: rank 0", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_INVALID_ARGUMENT);
    m.dl_tensor.ndim = 2;
    m.dl_tensor.byte_offset = 2;
    expect_status("dlpack: misaligned offset", pit_tensor_from_dlpack(ctx, &m, &t), PIT_ERR_BAD_STRIDES);
    expect_status("dlpack: null managed", pit_tensor_from_dlpack(ctx, NULL, &t), PIT_ERR_INVALID_ARGUMENT);
    expect_status("to_dlpack: null tensor", pit_tensor_to_dlpack(NULL, &(DLManagedTensor *){NULL}),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("to_dlpack: null out", pit_tensor_to_dlpack(base, NULL), PIT_ERR_INVALID_ARGUMENT);
    /* matmul operands. */
    int64_t a[2] = {8, 16}, b[2] = {16, 4}, c[2] = {8, 4}, a1[1] = {8}, a3[3] = {2, 8, 16},
            b3[3] = {3, 16, 4}, c3[3] = {2, 8, 4};
    pit_tensor *A = NULL, *B = NULL, *C = NULL, *A1 = NULL, *A3 = NULL, *B3 = NULL, *C3 = NULL,
               *Ao = NULL, *Cv = NULL;
    pit_tensor_create(ctx, PIT_F32, 2, a, &A);
    pit_tensor_create(ctx, PIT_F32, 2, b, &B);
    pit_tensor_create(ctx, PIT_F32, 2, c, &C);
    pit_tensor_create(ctx, PIT_F32, 1, a1, &A1);
    pit_tensor_create(ctx, PIT_F32, 3, a3, &A3);
    pit_tensor_create(ctx, PIT_F32, 3, b3, &B3);
    pit_tensor_create(ctx, PIT_F32, 3, c3, &C3);
    if (other)
        pit_tensor_create(other, PIT_F32, 2, a, &Ao);
    expect_status("matmul: null B", pit_matmul(ctx, NULL, A, NULL, C, NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul: null C", pit_matmul(ctx, NULL, A, B, NULL, NULL, NULL), PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul: rank 1", pit_matmul(ctx, NULL, A1, B, C, NULL, NULL), PIT_ERR_SHAPE_MISMATCH);
    expect_status("matmul: ranks differ", pit_matmul(ctx, NULL, A3, B, C, NULL, NULL), PIT_ERR_SHAPE_MISMATCH);
    expect_status("matmul: batch differs", pit_matmul(ctx, NULL, A3, B3, C3, NULL, NULL),
                  PIT_ERR_SHAPE_MISMATCH);
    if (Ao)
        expect_status("matmul: A of other context", pit_matmul(ctx, NULL, Ao, B, C, NULL, NULL),
                      PIT_ERR_CONTEXT_MISMATCH);
    pit_tensor_desc bd;
    pit_tensor_get_desc(B, &bd);
    pit_tensor_wrap(ctx, PIT_F32, 2, c, NULL, bd.data, 0, &Cv);
    expect_status("matmul: C overlaps B", pit_matmul(ctx, NULL, A, B, Cv, NULL, NULL), PIT_ERR_ALIASING);
    pit_matmul_options o = pit_matmul_options_default();
    o.microtile = (pit_microtile){32, 0, PIT_AXIS_K};
    expect_status("matmul: micro-tile 32x0", pit_matmul(ctx, NULL, A, B, C, &o, NULL), PIT_ERR_INVALID_ARGUMENT);
    o.microtile = (pit_microtile){32, 1, (pit_axis)99};
    expect_status("matmul: micro-tile axis 99", pit_matmul(ctx, NULL, A, B, C, &o, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    o = pit_matmul_options_default();
    o.sparse = PIT_SPARSE_B;
    o.microtile = (pit_microtile){32, 1, PIT_AXIS_K};
    expect_status("matmul: sparse B along K", pit_matmul(ctx, NULL, A, B, C, &o, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul_dense: null ctx", pit_matmul_dense(NULL, NULL, A, B, C), PIT_ERR_INVALID_ARGUMENT);
    expect_status("matmul_dense: shape", pit_matmul_dense(ctx, NULL, A, A, C), PIT_ERR_SHAPE_MISMATCH);
    double cms = 0, kms = 0;
    const char *name = NULL;
    expect_status("vendor sparse on OpenCL", pit_vendor_sparse_matmul(ctx, NULL, A, B, C, &cms, &kms, &name),
                  PIT_ERR_UNSUPPORTED);
    pit_tensor *list[] = {A, B, C, A1, A3, B3, C3, Ao, Cv, base};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        pit_tensor_destroy(list[i]);
}

/* pit_moe_ffn and its backward: every argument check, and the calls that
 * have nothing to do. T 4 tokens, H 6, F 3, E 2 experts, top-2. */
enum { FT = 4, FH = 6, FF = 3, FE = 2, FK = 2 };
enum { FX, FIDS, FG, FW1, FW2, FY, FDY, FDX, FDW1, FDW2, FDG, FW1_NARROW, FW2_E3, FIDS_F32,
       FG_WIDE, FSCRATCH, FSCRATCH_SMALL, FSCRATCH_BF16, FSAVED, FSAVED_WIDE, FSAVED_BF16, FN };

static void moe_ffn_tensors(pit_context *ctx, pit_tensor **t)
{
    const struct { pit_dtype dt; int rank; int64_t shape[3]; } spec[FN] = {
        {PIT_F32, 2, {FT, FH}},          {PIT_I32, 2, {FT, FK}},      {PIT_F32, 2, {FT, FK}},
        {PIT_F32, 3, {FE, FH, 2 * FF}},  {PIT_F32, 3, {FE, FF, FH}},  {PIT_F32, 2, {FT, FH}},
        {PIT_F32, 2, {FT, FH}},          {PIT_F32, 2, {FT, FH}},      {PIT_F32, 3, {FE, FH, 2 * FF}},
        {PIT_F32, 3, {FE, FF, FH}},      {PIT_F32, 2, {FT, FK}},      {PIT_F32, 3, {FE, FH, FF}},
        {PIT_F32, 3, {FE + 1, FF, FH}},  {PIT_F32, 2, {FT, FK}},      {PIT_F32, 2, {FT, FK + 1}},
        {PIT_F32, 1, {FT * FK * 3 * FF}}, {PIT_F32, 1, {FT * FK * 2 * FF - 1}},
        {PIT_BF16, 1, {FT * FK * 3 * FF}}, {PIT_F32, 2, {FT * FK, 2 * FF}},
        {PIT_F32, 2, {FT * FK, 2 * FF + 1}}, {PIT_BF16, 2, {FT * FK, 2 * FF}}};
    for (int i = 0; i < FN; i++) {
        t[i] = NULL;
        pit_tensor_create(ctx, spec[i].dt, spec[i].rank, spec[i].shape, &t[i]);
    }
    pit_tensor_zero(t[FIDS], NULL);
}

static pit_status ffn_call(pit_context *ctx, pit_tensor **t, const pit_tensor *W1,
                           const pit_tensor *W2, const pit_tensor *ids, const pit_tensor *gates,
                           pit_tensor *Y, const pit_moe_ffn_options *o)
{
    return pit_moe_ffn(ctx, NULL, t[FX], ids, gates, W1, W2, Y, o, NULL);
}

/* pit_moe_ffn on the valid inputs with options o: status want */
static void expect_ffn(pit_context *ctx, pit_tensor **t, const pit_moe_ffn_options *o, const char *what,
                       pit_status want)
{
    expect_status(what, ffn_call(ctx, t, t[FW1], t[FW2], t[FIDS], t[FG], t[FY], o), want);
}

static pit_status ffn_backward_call(pit_context *ctx, pit_tensor **t, pit_tensor *dX,
                                    pit_tensor *dW1, pit_tensor *dgates,
                                    const pit_moe_ffn_options *o)
{
    return pit_moe_ffn_backward(ctx, NULL, t[FX], t[FIDS], t[FG], t[FW1], t[FW2], t[FDY], dX, dW1,
                                t[FDW2], dgates, o);
}

static void test_moe_ffn_errors(pit_context *ctx)
{
    pit_tensor *t[FN];
    moe_ffn_tensors(ctx, t);
    pit_moe_ffn_options o = pit_moe_ffn_options_default();
    expect_true("moe_ffn defaults: SwiGLU, no scratch, nothing kept",
                o.activation == PIT_ACT_SWIGLU && !o.scratch && !o.saved_h);
    expect_status("moe_ffn valid", ffn_call(ctx, t, t[FW1], t[FW2], t[FIDS], t[FG], t[FY], NULL),
                  PIT_SUCCESS);
    expect_status("moe_ffn null W_down", ffn_call(ctx, t, t[FW1], NULL, t[FIDS], t[FG], t[FY], NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    o.activation = (pit_activation)5;
    expect_ffn(ctx, t, &o, "moe_ffn activation 5", PIT_ERR_INVALID_ARGUMENT);
    o.activation = PIT_ACT_SWIGLU;
    expect_status("moe_ffn SwiGLU with F columns", ffn_call(ctx, t, t[FW1_NARROW], t[FW2], t[FIDS], t[FG], t[FY], &o),
                  PIT_ERR_SHAPE_MISMATCH);
    o.activation = PIT_ACT_RELU;
    expect_ffn(ctx, t, &o, "moe_ffn ReLU with 2F columns", PIT_ERR_SHAPE_MISMATCH);
    expect_status("moe_ffn ReLU with F columns", ffn_call(ctx, t, t[FW1_NARROW], t[FW2], t[FIDS], t[FG], t[FY], &o),
                  PIT_SUCCESS);
    o.activation = PIT_ACT_SWIGLU;
    expect_status("moe_ffn W_down of 3 experts", ffn_call(ctx, t, t[FW1], t[FW2_E3], t[FIDS], t[FG], t[FY], NULL),
                  PIT_ERR_SHAPE_MISMATCH);
    expect_status("moe_ffn f32 ids", ffn_call(ctx, t, t[FW1], t[FW2], t[FIDS_F32], t[FG], t[FY], NULL),
                  PIT_ERR_UNSUPPORTED_DTYPE);
    expect_status("moe_ffn gates [T,k+1]", ffn_call(ctx, t, t[FW1], t[FW2], t[FIDS], t[FG_WIDE], t[FY], NULL),
                  PIT_ERR_SHAPE_MISMATCH);
    expect_status("moe_ffn Y is X", ffn_call(ctx, t, t[FW1], t[FW2], t[FIDS], t[FG], t[FX], NULL),
                  PIT_ERR_ALIASING);
    o.scratch = t[FSCRATCH_SMALL];
    expect_ffn(ctx, t, &o, "moe_ffn scratch one element short", PIT_ERR_INVALID_ARGUMENT);
    o.scratch = t[FSCRATCH_BF16];
    expect_ffn(ctx, t, &o, "moe_ffn bf16 scratch", PIT_ERR_UNSUPPORTED_DTYPE);
    o.scratch = t[FW1];
    expect_ffn(ctx, t, &o, "moe_ffn scratch is W_gate_up", PIT_ERR_ALIASING);
    pit_tensor *strided = NULL;
    pit_tensor_desc d;
    pit_tensor_get_desc(t[FSCRATCH], &d);
    const int64_t half[2] = {FT * FK * 3 * FF / 2, 1}, every_other[2] = {2, 1};
    pit_tensor_wrap(ctx, PIT_F32, 2, half, every_other, d.data, 0, &strided);
    o.scratch = strided;
    expect_ffn(ctx, t, &o, "moe_ffn strided scratch", PIT_ERR_INVALID_ARGUMENT);
    o.scratch = t[FSCRATCH];
    expect_ffn(ctx, t, &o, "moe_ffn caller's scratch", PIT_SUCCESS);
    /* the backward: its outputs, its scratch (T*k*(W+F) elements), nothing asked */
    expect_status("moe_ffn_backward valid", ffn_backward_call(ctx, t, t[FDX], t[FDW1], t[FDG], &o),
                  PIT_SUCCESS);
    expect_status("moe_ffn_backward nothing asked",
                  pit_moe_ffn_backward(ctx, NULL, t[FX], t[FIDS], t[FG], t[FW1], t[FW2], t[FDY], NULL, NULL,
                                       NULL, NULL, NULL),
                  PIT_SUCCESS);
    expect_status("moe_ffn_backward dgates [T,H]", ffn_backward_call(ctx, t, t[FDX], t[FDW1], t[FY], NULL),
                  PIT_ERR_SHAPE_MISMATCH);
    expect_status("moe_ffn_backward dX is dY", ffn_backward_call(ctx, t, t[FDY], t[FDW1], t[FDG], NULL),
                  PIT_ERR_ALIASING);
    o.scratch = t[FDW1]; /* T*k*(W+F) = 72 elements, as many as dW_gate_up */
    expect_status("moe_ffn_backward scratch is dW_gate_up", ffn_backward_call(ctx, t, t[FDX], t[FDW1], t[FDG], &o),
                  PIT_ERR_ALIASING);
    o.scratch = t[FSCRATCH_SMALL];
    expect_status("moe_ffn_backward scratch too small", ffn_backward_call(ctx, t, t[FDX], NULL, NULL, &o),
                  PIT_ERR_INVALID_ARGUMENT);
    /* the first product kept for the backward: [T*k, W], X's dtype, apart */
    o = pit_moe_ffn_options_default();
    o.saved_h = t[FSAVED_WIDE];
    expect_ffn(ctx, t, &o, "moe_ffn saved_h [T*k, W+1]", PIT_ERR_SHAPE_MISMATCH);
    o.saved_h = t[FSAVED_BF16];
    expect_ffn(ctx, t, &o, "moe_ffn bf16 saved_h", PIT_ERR_UNSUPPORTED_DTYPE);
    o.saved_h = t[FSAVED];
    o.scratch = t[FSAVED];
    expect_ffn(ctx, t, &o, "moe_ffn saved_h is the scratch", PIT_ERR_ALIASING);
    o.scratch = NULL;
    expect_ffn(ctx, t, &o, "moe_ffn keeping the first product", PIT_SUCCESS);
    expect_status("moe_ffn_backward from the kept first product",
                  ffn_backward_call(ctx, t, t[FDX], t[FDW1], t[FDG], &o), PIT_SUCCESS);
    expect_status("moe_ffn_backward null ctx",
                  pit_moe_ffn_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
                  PIT_ERR_INVALID_ARGUMENT);
    pit_tensor_destroy(strided);
    for (int i = 0; i < FN; i++)
        pit_tensor_destroy(t[i]);
}

int main(int argc, char **argv)
{
    test_status_strings();
    test_backend_errors();
    test_fake_plugins(argc > 1 ? argv[1] : NULL);
    pit_context *ctx = NULL, *other = NULL;
    if (pit_context_create("opencl", 0, &ctx) == PIT_SUCCESS) {
        pit_context_create("opencl", 0, &other);
        test_tensor_errors(ctx);
        test_dlpack(ctx);
        test_matmul_errors(ctx, other);
        test_matmul_clears_report(ctx, other);
        test_more_input_checks(ctx, other);
        test_moe_ffn_errors(ctx);
        pit_context_destroy(other);
        pit_context_destroy(ctx);
    } else {
        printf("skipped: tensor/operator checks need an OpenCL device: %s\n", pit_last_error());
        test_matmul_clears_report(NULL, NULL);
        skipped++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
