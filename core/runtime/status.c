/* core/runtime/status.c - status names, the per-thread error message, version. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

#define PIT_ERROR_MAX 2048

static _Thread_local char pit_error_message[PIT_ERROR_MAX];

PIT_API const char *pit_status_string(pit_status status)
{
    switch (status) {
    case PIT_SUCCESS: return "PIT_SUCCESS";
    case PIT_ERR_INVALID_ARGUMENT: return "PIT_ERR_INVALID_ARGUMENT";
    case PIT_ERR_SHAPE_MISMATCH: return "PIT_ERR_SHAPE_MISMATCH";
    case PIT_ERR_UNSUPPORTED_DTYPE: return "PIT_ERR_UNSUPPORTED_DTYPE";
    case PIT_ERR_BAD_STRIDES: return "PIT_ERR_BAD_STRIDES";
    case PIT_ERR_UNSUPPORTED: return "PIT_ERR_UNSUPPORTED";
    case PIT_ERR_BACKEND_NOT_FOUND: return "PIT_ERR_BACKEND_NOT_FOUND";
    case PIT_ERR_BACKEND_INVALID: return "PIT_ERR_BACKEND_INVALID";
    case PIT_ERR_NO_DEVICE: return "PIT_ERR_NO_DEVICE";
    case PIT_ERR_DEVICE_INDEX: return "PIT_ERR_DEVICE_INDEX";
    case PIT_ERR_OUT_OF_MEMORY: return "PIT_ERR_OUT_OF_MEMORY";
    case PIT_ERR_COMPILE: return "PIT_ERR_COMPILE";
    case PIT_ERR_BACKEND: return "PIT_ERR_BACKEND";
    case PIT_ERR_PARSE: return "PIT_ERR_PARSE";
    case PIT_ERR_IO: return "PIT_ERR_IO";
    case PIT_ERR_CONTEXT_MISMATCH: return "PIT_ERR_CONTEXT_MISMATCH";
    case PIT_ERR_ALIASING: return "PIT_ERR_ALIASING";
    case PIT_ERR_INTERNAL: return "PIT_ERR_INTERNAL";
    }
    return "PIT_ERR_UNKNOWN_STATUS";
}

PIT_API const char *pit_last_error(void)
{
    return pit_error_message;
}

PIT_API int pit_version(void)
{
    return PIT_VERSION;
}

pit_status pit_verror(pit_status status, const char *fmt, va_list ap)
{
    vsnprintf(pit_error_message, sizeof pit_error_message, fmt, ap);
    pit_log_debug("error %s: %s", pit_status_string(status), pit_error_message);
    return status;
}

pit_status pit_error(pit_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pit_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

void pit_clear_error(void)
{
    pit_error_message[0] = '\0';
}
