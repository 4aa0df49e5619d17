/* cmd_doctor.c — `nabla doctor`: version, CPU, SIMD level, threads, backends, MPI, and whether the data set is there. */
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *CMD = "doctor";

/* The "model name" line of /proc/cpuinfo into buf ("unknown" if none). */
static void cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon += 1 + strspn(colon + 1, " \t");
        colon[strcspn(colon, "\n")] = 0;
        snprintf(buf, len, "%s", colon);
        break;
    }
    if (f) fclose(f);
}

static void dataset(const char *dir) {
    static const char *const files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};
    const char *missing = NULL;
    char path[4096];
    for (int i = 0; i < 4 && !missing; i++)
        if (!cli_data_file(dir, files[i], path, sizeof path)) missing = files[i];
    if (!missing && !strcmp(dir, NB_FASHION_MNIST_DIR)) printf("dataset:   Fashion-MNIST in %s\n", dir);
    else if (!missing) printf("dataset:   IDX files (train-/t10k- images and labels) in %s\n", dir);
    else
        printf("dataset:   missing (%s not in %s): install the Debian package dataset-fashion-mnist "
               "(apt install dataset-fashion-mnist) or pass --data DIR\n",
               missing, dir);
}

static void backends(void) {
    static const struct { nb_device dev; const char *name; } devs[] = {
        {{NB_DEVICE_CPU, 0}, "cpu"}, {{NB_DEVICE_REF, 0}, "ref"}, {{NB_DEVICE_CUDA, 0}, "cuda"}};
    printf("backends: ");
    for (int i = 0; i < 3; i++) {
        const nb_backend *be = nb_backend_for(devs[i].dev);
        printf(" %s (%s)", devs[i].name, be ? "registered" : "not available in this build");
    }
    nb_clear_error();
    putchar('\n');
}

int cmd_doctor(int argc, char **argv) {
    const char *data = NB_FASHION_MNIST_DIR;
    const cli_opt opts[] = {{"--data", OPT_STRING, &data, "data set directory to check (" NB_FASHION_MNIST_DIR ")", 0, 0}};
    bool help;
    int rc = cli_parse(CMD, "usage: nabla doctor [--data DIR]\n", argc, argv, opts, 1, &help);
    if (rc != CLI_OK || help) return rc;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    printf("nabla:     %s\n", nb_version());
    printf("cpu:       %s, %ld online\n", cpu, sysconf(_SC_NPROCESSORS_ONLN));
    printf("simd:      %s\n", nb_cpu_simd_level());
    printf("threads:   %d (set with --threads or NB_NUM_THREADS)\n", nb_get_num_threads());
    printf("blas:      none (built-in packed GEMM)\n");
    printf("fusion:    %s\n", nb_fusion_mode());
    backends();
    if (nb_dist_available())
        printf("mpi:       %s (data-parallel training: mpirun -np N nabla train)\n", nb_dist_library_version());
    else
        printf("mpi:       not in this build (install libopenmpi-dev and rebuild for data-parallel training)\n");
    dataset(data);
    return CLI_OK;
}
