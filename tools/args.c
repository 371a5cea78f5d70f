/* tools/args.c - option parsing shared by the pit sub-commands: getopt_long
 * with messages that name the bad option, and strict whole numbers. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

int tool_usage_error(const tool_command *c, const char *fmt, const char *what)
{
    fprintf(stderr, "pit %s: ", c->name);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    c->usage(stderr);
    return 2;
}

/* The option getopt_long refused, as the user typed it: a long option is a
 * whole argument that the call stepped past; a short one is optopt, possibly
 * inside a cluster such as -qx. */
static const char *rejected_option(char **argv, int before, char *shortopt, size_t len)
{
    if (optind > before && !strncmp(argv[optind - 1], "--", 2))
        return argv[optind - 1];
    snprintf(shortopt, len, "-%c", optopt);
    return shortopt;
}

int tool_parse_options(const tool_command *c, int argc, char **argv, void *user)
{
    char shortopt[4];
    optind = 1;
    opterr = 0; /* the messages below name the command and the option */
    for (;;) {
        int before = optind;
        int id = getopt_long(argc, argv, c->short_options, c->options, NULL);
        if (id == -1)
            break;
        if (id == 'h') {
            c->usage(stdout);
            return 0;
        }
        if (id == '?')
            return tool_usage_error(c, "unknown option '%s'",
                                    rejected_option(argv, before, shortopt, sizeof shortopt));
        if (id == ':')
            return tool_usage_error(c, "option '%s' needs a value",
                                    rejected_option(argv, before, shortopt, sizeof shortopt));
        if (c->on_option(c, user, id, optarg) != 0)
            return 2;
    }
    if (optind < argc)
        return tool_usage_error(c, "unexpected argument '%s'", argv[optind]);
    return -1;
}

int tool_parse_number(const char *command, const char *what, const char *text,
                      unsigned long long min, unsigned long long max, unsigned long long *out)
{
    char *end = NULL;
    errno = 0;
    /* strtoull alone takes "-1", " 7" and "" without complaint. */
    unsigned long long v = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
    if (!end || *end || errno == ERANGE || v < min || v > max) {
        fprintf(stderr, "pit %s: %s '%s' is not a whole number from %llu to %llu\n", command, what,
                text, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int tool_no_option(const tool_command *c, void *user, int id, const char *value)
{
    (void)c, (void)user, (void)id, (void)value;
    return 2; /* unreachable: getopt_long knows only --help */
}

int tool_find_name(const char *name, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(name, names[i]))
            return i;
    return -1;
}

int tool_int_option(const tool_command *c, const char *option, const char *value, int min, int max,
                    int *out)
{
    unsigned long long n = 0;
    if (tool_parse_number(c->name, option, value, (unsigned long long)min, (unsigned long long)max,
                          &n) != 0)
        return 2;
    *out = (int)n;
    return 0;
}
