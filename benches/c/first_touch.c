/* What memory costs the first time it is written, against memory already
 * in use: the cost a sender log pays for every byte of a program that never
 * checkpoints (its log only grows). Not an MPI program.
 * Build: cc -O2 first_touch.c. Run: ./a.out MIB anon|thp|shm
 *   anon  anonymous memory, 4 KiB pages
 *   thp   anonymous memory with MADV_HUGEPAGE (2 MiB pages where the kernel has them)
 *   shm   a file in /dev/shm mapped MAP_SHARED (what a file sender log uses)
 * Prints the copy rate into fresh memory (and µs per KiB), then into the
 * same memory again. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int usage(const char *me) {
    fprintf(stderr, "usage: %s MIB anon|thp|shm\n", me);
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 3 || atol(argv[1]) <= 0) return usage(argv[0]);
    size_t total = (size_t)atol(argv[1]) << 20;
    const char *mode = argv[2];
    char *p = MAP_FAILED;
    char path[64] = "";
    if (!strcmp(mode, "shm")) {
        snprintf(path, sizeof path, "/dev/shm/first-touch-%d", (int)getpid());
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd < 0) { perror(path); return 1; }
        /* Unlinked at once: nothing is left behind, whatever happens. */
        unlink(path);
        if (ftruncate(fd, total)) { perror(path); return 1; }
        p = mmap(0, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    } else if (!strcmp(mode, "anon") || !strcmp(mode, "thp")) {
        p = mmap(0, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED && !strcmp(mode, "thp")) madvise(p, total, MADV_HUGEPAGE);
    } else {
        return usage(argv[0]);
    }
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    char *src = malloc(1 << 20);
    if (!src) { perror("malloc"); return 1; }
    memset(src, 7, 1 << 20);
    double t0 = now();
    for (size_t off = 0; off < total; off += 1 << 20) memcpy(p + off, src, 1 << 20);
    double t1 = now();
    for (size_t off = 0; off < total; off += 1 << 20) memcpy(p + off, src, 1 << 20);
    double t2 = now();
    double kib = total / 1024.0;
    printf("%s: first touch %.2f GB/s (%.3f us/KiB), in use %.2f GB/s (%.3f us/KiB)\n", mode,
           total / (t1 - t0) / 1e9, (t1 - t0) * 1e6 / kib, total / (t2 - t1) / 1e9,
           (t2 - t1) * 1e6 / kib);
    return 0;
}
