/* A program that uses the installed pit: the version and a status name. */
#include <pit.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (pit_version() != PIT_VERSION)
        return 1;
    if (strcmp(pit_status_string(PIT_ERR_SHAPE_MISMATCH), "PIT_ERR_SHAPE_MISMATCH") != 0)
        return 1;
    pit_context *ctx = NULL;
    pit_status s = pit_context_create("no-such-backend", 0, &ctx);
    if (s != PIT_ERR_BACKEND_NOT_FOUND || ctx != NULL)
        return 1;
    printf("consumer: pit %d linked, error path ok: %s\n", pit_version(), pit_last_error());
    return 0;
}
