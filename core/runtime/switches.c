/* core/runtime/switches.c - the one reader of the experimental switches
 * (switches.def): read once when a context is created, so a call never
 * consults the environment and every call of a context sees the same values. */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

typedef struct switch_spec {
    const char *variable;
    long min, max;
} switch_spec;

static const switch_spec switch_specs[PIT_SWITCH_COUNT] = {
#define PIT_SWITCH(id, variable, min, max, what) [PIT_SWITCH_##id] = {variable, min, max},
#include "switches.def"
#undef PIT_SWITCH
};

/* strtol with base 10 reads digits the same way in every locale */
static int32_t switch_value(const switch_spec *s)
{
    const char *text = getenv(s->variable);
    if (!text || !*text)
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || v < s->min || v > s->max) {
        pit_log_debug("%s=%s ignored: not an integer in %ld..%ld", s->variable, text, s->min, s->max);
        return 0;
    }
    pit_log_debug("%s=%ld", s->variable, v);
    return (int32_t)v;
}

void pit_switches_read(pit_switches *sw)
{
    for (int i = 0; i < PIT_SWITCH_COUNT; i++)
        sw->value[i] = switch_value(&switch_specs[i]);
}
