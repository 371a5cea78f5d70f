/*
 * kernel_tools.c - the build-time kernel tools' shared parts
 * (kernel_tools.h).
 */
#include "kernel_tools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_kernels.h"

static int write_text(const char *tool, const char *dir, const char *name, const char *text)
{
    char path[1024];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        fprintf(stderr, "%s: path too long: %s/%s\n", tool, dir, name);
        return -1;
    }
    /* headers live in folders (common/port.cuh): make the one they name */
    char *slash = strrchr(path, '/');
    if (slash > path + strlen(dir)) {
        *slash = 0;
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "%s: cannot create %s: %s\n", tool, path, strerror(errno));
            return -1;
        }
        *slash = '/';
    }
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "%s: cannot write %s: %s\n", tool, path, strerror(errno));
    return ok ? 0 : -1;
}

int pit_tool_write_sources(const char *tool, const char *dir)
{
    const char *const *hsrc, *const *hname;
    int nh = pit_cuda_kernel_headers(&hsrc, &hname);
    for (int i = 0; i < nh; ++i)
        if (write_text(tool, dir, hname[i], hsrc[i])) return -1;
    for (int k = 0; k < PIT_CUDA_KERNEL_COUNT; ++k) {
        char name[128];
        snprintf(name, sizeof name, "%s.cu", pit_cuda_kernel_name((pit_cuda_kernel_kind)k));
        if (write_text(tool, dir, name, pit_cuda_kernel_source((pit_cuda_kernel_kind)k))) return -1;
    }
    return 0;
}

pid_t pit_tool_spawn(const char *const *argv, const char *log)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

int pit_tool_run_jobs(int count, int jobs, pit_tool_start_fn start, pit_tool_done_fn done, void *user)
{
    pid_t *pids = calloc(count > 0 ? (size_t)count : 1, sizeof *pids);
    if (!pids) return count;
    int next = 0, running = 0, failed = 0;
    while (next < count || running > 0) {
        while (running < jobs && next < count) {
            pids[next] = start(next, user);
            if (pids[next] < 0) {
                done(next, 0, user);
                ++failed;
            } else {
                ++running;
            }
            ++next;
        }
        if (running == 0) continue;
        int status = 0;
        pid_t pid = wait(&status);
        if (pid < 0) break;
        for (int i = 0; i < next; ++i) {
            if (pids[i] != pid) continue;
            int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
            pids[i] = 0;
            done(i, ok, user);
            failed += !ok;
            --running;
        }
    }
    free(pids);
    return failed + (next < count ? count - next : 0);
}

char *pit_tool_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t len = 0;
    FILE *m = f ? open_memstream(&text, &len) : NULL;
    char buf[4096];
    size_t n;
    while (m && (n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, m);
    int ok = m && !ferror(f);
    if (m) fclose(m);
    if (f) fclose(f);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

void pit_tool_print_log(const char *path, int max_lines)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    for (int n = 0; f && n < max_lines && fgets(line, sizeof line, f); ++n) fputs(line, stderr);
    if (f) fclose(f);
}

int pit_tool_embed_file(FILE *f, const char *prefix, int index, const char *path)
{
    if (strpbrk(path, "\"\\\n")) return -1;
    fprintf(f, "__asm__(\".section .rodata\\n.balign 64\\n%s%d:\\n.incbin \\\"%s\\\"\\n%s%d_end:\\n.previous\");\n",
            prefix, index, path, prefix, index);
    fprintf(f, "extern const unsigned char %s%d[], %s%d_end[];\n", prefix, index, prefix, index);
    return 0;
}

void pit_tool_c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
