/*
 * hip_cocheck.c - pit-hip-cocheck, the hip_code_objects test: reads the
 * code objects pit-hip-genco built (its manifests) and checks, in the ELF
 * itself, that each one is an AMDGPU HSA code object for the target it is
 * filed under (e_flags' EF_AMDGPU_MACH) and defines its kernel (the
 * "<kernel>.kd" descriptor symbol). No GPU and no LLVM tool needed.
 *
 *   pit-hip-cocheck --expect gfx90a,gfx942,gfx1100 DIR/gfx90a.manifest ...
 * Exit 0 when every expected target has code objects and all are right.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIT_EM_AMDGPU 224
#define PIT_ELFOSABI_AMDGPU_HSA 64
#define PIT_EF_AMDGPU_MACH 0xff

static const struct {
    const char *arch;
    unsigned mach;
} machs[] = {{"gfx90a", 0x3f}, {"gfx942", 0x4c}, {"gfx1100", 0x41}};

static int expected_mach(const char *arch)
{
    for (size_t i = 0; i < sizeof machs / sizeof machs[0]; ++i)
        if (!strcmp(machs[i].arch, arch)) return (int)machs[i].mach;
    return -1;
}

static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > (long)sizeof(Elf64_Ehdr) && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n)) != NULL &&
            fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
        *size = (size_t)n;
    }
    fclose(f);
    return data;
}

/* 1 when a symbol table of the ELF defines name */
static int has_symbol(const unsigned char *d, size_t size, const char *name)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    if (eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) return 0;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(d + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; ++i) {
        if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || str->sh_offset + str->sh_size > size) continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(d + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; ++k)
            if (sym[k].st_name < str->sh_size && sym[k].st_shndx != SHN_UNDEF &&
                !strncmp((const char *)d + str->sh_offset + sym[k].st_name, name, str->sh_size - sym[k].st_name))
                return 1;
    }
    return 0;
}

/* Checks one code object; returns its ABI version (2 = code object v4,
 * 3 = v5) or -1 with the reason printed. */
static int check_object(const char *path, const char *arch, const char *kernel)
{
    size_t size = 0;
    unsigned char *d = slurp(path, &size);
    const char *why = NULL;
    int abi = -1;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)d;
    char kd[256];
    snprintf(kd, sizeof kd, "%s.kd", kernel);
    if (!d) why = "cannot read it";
    else if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64) why = "not a 64-bit ELF";
    else if (eh->e_machine != PIT_EM_AMDGPU) why = "e_machine is not EM_AMDGPU";
    else if (eh->e_ident[EI_OSABI] != PIT_ELFOSABI_AMDGPU_HSA) why = "OS/ABI is not AMDGPU_HSA";
    else if ((int)(eh->e_flags & PIT_EF_AMDGPU_MACH) != expected_mach(arch)) why = "EF_AMDGPU_MACH names another target";
    else if (!has_symbol(d, size, kd)) why = "no kernel descriptor symbol";
    else abi = eh->e_ident[EI_ABIVERSION];
    if (why)
        printf("FAIL %s (%s, %s): %s (e_flags 0x%x)\n", path, arch, kd, why,
               d && size >= sizeof *eh ? (unsigned)eh->e_flags : 0u);
    free(d);
    return abi;
}

/* All code objects of one manifest ("file<TAB>kernel defines" lines). */
static int check_manifest(const char *manifest, const char *arch)
{
    FILE *f = fopen(manifest, "r");
    if (!f) {
        printf("FAIL %s: no manifest (%s)\n", arch, manifest);
        return -1;
    }
    char line[2048];
    int n = 0, bad = 0, abi = -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        char kernel[128];
        snprintf(kernel, sizeof kernel, "%.*s", (int)strcspn(tab + 1, " "), tab + 1);
        int a = check_object(line, arch, kernel);
        if (a < 0) ++bad;
        else abi = a;
        ++n;
    }
    fclose(f);
    if (abi >= 0)
        printf("%s: %d code objects, EF_AMDGPU_MACH 0x%02x, ELF ABI version %d (code object v%d), %d bad\n", arch,
               n, (unsigned)expected_mach(arch), abi, abi + 2, bad);
    else
        printf("%s: %d code objects, none valid\n", arch, n);
    return n > 0 && bad == 0 ? 0 : -1;
}

static const char *manifest_for(const char *arch, int n, char **manifests)
{
    size_t len = strlen(arch);
    for (int i = 0; i < n; ++i) {
        const char *base = strrchr(manifests[i], '/');
        base = base ? base + 1 : manifests[i];
        if (!strncmp(base, arch, len) && !strcmp(base + len, ".manifest")) return manifests[i];
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[1], "--expect")) {
        fprintf(stderr, "usage: pit-hip-cocheck --expect gfxA,gfxB,... MANIFEST...\n");
        return 2;
    }
    char expect[256];
    snprintf(expect, sizeof expect, "%s", argv[2]);
    int failed = 0;
    for (char *arch = strtok(expect, ","); arch; arch = strtok(NULL, ",")) {
        const char *m = manifest_for(arch, argc - 3, argv + 3);
        if (expected_mach(arch) < 0) {
            printf("FAIL %s: unknown target\n", arch);
            failed = 1;
        } else if (!m) {
            printf("FAIL %s: not built (configure found no compiler for it; see the CMake message)\n", arch);
            failed = 1;
        } else if (check_manifest(m, arch) != 0) {
            failed = 1;
        }
    }
    printf(failed ? "hip_code_objects: FAILED\n" : "hip_code_objects: OK\n");
    return failed;
}
