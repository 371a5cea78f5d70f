/*
 * tests/test_device_dtypes.c - which float dtypes core lets a device's
 * operators take (core/runtime/registry.c, core/ops/op_util.c): f16 storage
 * wherever f16 arithmetic is (core sets has_f16_storage from has_f16), f16
 * stored without f16 arithmetic (every OpenCL device) accepted, and a device
 * that stores neither f16 nor bf16 refused with PIT_ERR_UNSUPPORTED naming
 * what it lacks. A table of one entry stands in for a plug-in.
 */
#include "ops.h"
#include "rtest.h"

#define CHECK(cond) RT_CHECK(cond, "%s", #cond)

/* What the stand-in plug-in's device_info reports. */
static int g_f16, g_f16_storage, g_bf16;

static pit_status fake_device_info(int index, pit_device_info *info)
{
    (void)index;
    snprintf(info->name, sizeof info->name, "test device");
    snprintf(info->arch, sizeof info->arch, "test-arch");
    info->has_f16 = g_f16;
    info->has_f16_storage = g_f16_storage;
    info->has_bf16 = g_bf16;
    return PIT_SUCCESS;
}

static const pit_backend fake = {.name = "fake", .device_info = fake_device_info};

/* The device core describes for the plug-in's answer. */
static pit_device_info describe(int f16, int f16_storage, int bf16)
{
    g_f16 = f16;
    g_f16_storage = f16_storage;
    g_bf16 = bf16;
    pit_device_info info;
    CHECK(pit_backend_device_info(&fake, 0, &info) == PIT_SUCCESS);
    return info;
}

/* ops_check_on_device on a context of that device. */
static pit_status check_on(const pit_device_info *info, pit_dtype dt)
{
    static pit_context ctx; /* large: not on the stack */
    memset(&ctx, 0, sizeof ctx);
    ctx.be = &fake;
    ctx.info = *info;
    return ops_check_on_device(&ctx, dt, "test_op");
}

static void test_arithmetic_implies_storage(void)
{
    pit_device_info d = describe(1, 0, 1);
    CHECK(d.has_f16 == 1 && d.has_f16_storage == 1);
    CHECK(pit_device_stores(&d, PIT_F16));
    CHECK(check_on(&d, PIT_F16) == PIT_SUCCESS);
}

static void test_storage_without_arithmetic(void)
{
    pit_device_info d = describe(0, 1, 1);
    CHECK(d.has_f16 == 0 && d.has_f16_storage == 1);
    for (pit_dtype dt = PIT_F32; dt <= PIT_BF16; dt++) {
        CHECK(pit_device_stores(&d, dt));
        CHECK(check_on(&d, dt) == PIT_SUCCESS);
    }
}

static void test_refused(void)
{
    pit_device_info d = describe(0, 0, 0);
    CHECK(d.has_f16_storage == 0);
    CHECK(pit_device_stores(&d, PIT_F32));
    CHECK(!pit_device_stores(&d, PIT_F16) && !pit_device_stores(&d, PIT_BF16));
    CHECK(check_on(&d, PIT_F32) == PIT_SUCCESS);
    CHECK(check_on(&d, PIT_I32) == PIT_SUCCESS);
    CHECK(check_on(&d, PIT_F16) == PIT_ERR_UNSUPPORTED);
    CHECK(strstr(pit_last_error(), "test_op") && strstr(pit_last_error(), "no f16 storage") &&
          strstr(pit_last_error(), "test device"));
    CHECK(check_on(&d, PIT_BF16) == PIT_ERR_UNSUPPORTED);
    CHECK(strstr(pit_last_error(), "no bf16 storage") != NULL);
}

int main(void)
{
    test_arithmetic_implies_storage();
    test_storage_without_arithmetic();
    test_refused();
    return rt_finish("test_device_dtypes");
}
