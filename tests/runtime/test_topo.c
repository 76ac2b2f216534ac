/*
 * runtime/topo: this machine's topology loads and prints; a saved
 * three-package machine (topo_3pkg.xml, through HWLOC_XMLFILE) gives the
 * expected NUMA nodes and distances, GPUs in bus id order (the Matrox BMC
 * display left out), NICs, paths between them and the NIC nearest each
 * GPU; a topology hwloc cannot load is an error, not a crash. comm/node.c:
 * whether the ranks of one machine outnumber the CPUs they may run on.
 */
#include <criterion/criterion.h>

#include "comm/comm.h"
#include "comm/node.h"
#include "runtime/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static weft_topo_t *load_xml(const char *name)
{
    const char *srcdir = getenv("top_srcdir");
    char path[4096];
    weft_topo_t *t = NULL;
    weft_status_t st;

    snprintf(path, sizeof(path), "%s/tests/runtime/%s", srcdir != NULL ? srcdir : ".", name);
    /* hwloc would fall back to this machine without a word */
    cr_assert_eq(access(path, R_OK), 0, "%s not found (set top_srcdir)", path);
    setenv("HWLOC_XMLFILE", path, 1);
    st = weft__topo_load(&t);
    unsetenv("HWLOC_XMLFILE");
    cr_assert_eq(st, WEFT_OK, "%s: %s", path, weft_last_error());
    return t;
}

Test(topo, this_machine)
{
    weft_topo_t *t = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f;

    cr_assert_eq(weft__topo_load(&t), WEFT_OK, "%s", weft_last_error());
    cr_expect(t->this_machine);
    cr_expect_gt(t->npus, 0);
    cr_expect_gt(t->ncores, 0);
    cr_expect_leq(t->ncores, t->npus);
    cr_expect_gt(t->nnuma, 0);
    cr_expect_gt(t->hostname[0], 0);
    cr_expect_not_null(t->bound_cpus, "hwloc knows this process's binding here");
    f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    weft__topo_print(t, f);
    fclose(f);
    cr_expect_not_null(strstr(text, "topology of "), "%s", text);
    cr_expect_not_null(strstr(text, "this process is bound to cpus "), "%s", text);
    free(text);
    weft__topo_free(t);
}

Test(topo, three_packages)
{
    weft_topo_t *t = load_xml("topo_3pkg.xml");
    static const uint64_t dist[9] = {10, 21, 32, 21, 10, 21, 32, 21, 10};

    cr_expect_str_eq(t->hostname, "testhost");
    cr_expect_not(t->this_machine);
    cr_expect_null(t->bound_cpus, "another machine's topology says nothing of this process");
    cr_expect_eq(t->npackages, 3);
    cr_expect_eq(t->ncores, 5);
    cr_expect_eq(t->npus, 5);
    cr_assert_eq(t->nnuma, 3);
    cr_expect_eq(t->numa[0].memory, 64ull << 30);
    cr_expect_eq(t->numa[1].memory, 32ull << 30);
    cr_expect_str_eq(t->numa[1].cpus, "2-3");
    cr_expect_str_eq(t->numa[2].cpus, "4");
    cr_assert_not_null(t->numa_distance);
    cr_expect_str_eq(t->numa_distance_name, "NUMALatency");
    for (int i = 0; i < 9; i++) {
        cr_expect_eq(t->numa_distance[i], dist[i], "distance %d -> %d", i / 3, i % 3);
    }
    weft__topo_free(t);
}

Test(topo, gpus_and_nics)
{
    weft_topo_t *t = load_xml("topo_3pkg.xml");
    static const char *busids[5] = {"0000:17:00.0", "0000:21:00.0", "0000:23:00.0", "0000:81:00.0",
                                    "0000:c1:00.0"};

    cr_assert_eq(t->ngpus, 5, "the Matrox BMC display is no GPU");
    for (int i = 0; i < 5; i++) {
        cr_expect_str_eq(t->gpus[i].busid, busids[i], "GPU %d in bus id order", i);
    }
    cr_expect_str_eq(t->gpus[0].name, "NVIDIA GPU");
    cr_expect_str_eq(t->gpus[1].name, "Test GPU H", "the model of its OS device");
    cr_expect_str_eq(t->gpus[3].name, "AMD GPU");
    cr_expect_eq(t->gpus[3].vendor_id, 0x1002);
    cr_expect_eq(t->gpus[3].class_id, 0x0380);
    cr_expect_eq(t->gpus[0].nbridges, 2, "two switch ports above GPU 0");
    cr_assert_eq(t->gpus[4].nnuma, 1);
    cr_expect_eq(t->gpus[4].numa[0], 2);
    cr_expect_str_eq(t->gpus[4].cpus, "4");

    cr_assert_eq(t->nnics, 3);
    cr_expect_str_eq(t->nics[0].name, "ib0");
    cr_expect_eq(t->nics[0].kind, WEFT_TOPO_NIC_NETWORK);
    cr_expect_str_eq(t->nics[1].name, "mlx5_0");
    cr_expect_eq(t->nics[1].kind, WEFT_TOPO_NIC_OPENFABRICS);
    cr_expect_str_eq(t->nics[1].busid, "0000:18:00.0");
    cr_expect_str_eq(t->nics[2].name, "eth1");
    cr_expect_str_eq(t->nics[2].cpus, "2-3");

    cr_expect_eq(weft__topo_gpu_by_busid(t, "0000:81:00.0"), 3);
    cr_expect_eq(weft__topo_gpu_by_busid(t, "00000000:C1:00.0"), 4, "nvidia-smi's form");
    cr_expect_eq(weft__topo_gpu_by_busid(t, "17:00.0"), 0, "no domain: domain 0");
    cr_expect_eq(weft__topo_gpu_by_busid(t, "0000:22:00.0"), -1, "the BMC display");
    cr_expect_eq(weft__topo_gpu_by_busid(t, "0000:17:00"), -1, "no function");
    cr_expect_eq(weft__topo_gpu_by_busid(t, "0000:17:00.0x"), -1, "trailing text");
    cr_expect_eq(weft__topo_gpu_by_busid(t, NULL), -1);
    weft__topo_free(t);
}

Test(topo, nearest_nic)
{
    weft_topo_t *t = load_xml("topo_3pkg.xml");

    cr_expect_eq(weft__topo_path(&t->gpus[0], &t->nics[1]), WEFT_TOPO_PATH_PCISWITCH);
    cr_expect_eq(weft__topo_path(&t->gpus[1], &t->nics[1]), WEFT_TOPO_PATH_NUMA);
    cr_expect_eq(weft__topo_path(&t->gpus[1], &t->gpus[2]), WEFT_TOPO_PATH_HOSTBRIDGE);
    cr_expect_eq(weft__topo_path(&t->gpus[3], &t->nics[2]), WEFT_TOPO_PATH_HOSTBRIDGE);
    cr_expect_eq(weft__topo_path(&t->gpus[0], &t->nics[2]), WEFT_TOPO_PATH_SYS);
    cr_expect_eq(weft__topo_path(&t->gpus[4], &t->nics[0]), WEFT_TOPO_PATH_SYS);

    cr_expect_eq(weft__topo_nic_near_gpu(t, 0), 1, "behind the same switch; verbs over ib0");
    cr_expect_eq(weft__topo_nic_near_gpu(t, 1), 1, "same NUMA node: the verbs device");
    cr_expect_eq(weft__topo_nic_near_gpu(t, 2), 1);
    cr_expect_eq(weft__topo_nic_near_gpu(t, 3), 2, "eth1 on the same host bridge");
    cr_expect_eq(weft__topo_nic_near_gpu(t, 4), -1, "no NIC on NUMA node 2");
    cr_expect_eq(weft__topo_nic_near_gpu(t, 5), -1, "out of range");
    cr_expect_eq(weft__topo_nic_near_gpu(t, -1), -1, "out of range");
    weft__topo_free(t);
}

Test(topo, print_saved_machine)
{
    weft_topo_t *t = load_xml("topo_3pkg.xml");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    cr_assert_not_null(f);
    weft__topo_print(t, f);
    fclose(f);
    cr_expect_not_null(
        strstr(text, "topology of testhost: 3 package(s), 3 NUMA node(s), 5 core(s)"), "%s", text);
    cr_expect_not_null(strstr(text, "     0 10 21 32\n"), "%s", text);
    cr_expect_not_null(strstr(text, "GPU 0: 0000:17:00.0 NVIDIA GPU [10de:2335], NUMA 0, cpus 0-1; "
                                    "nearest NIC 1 mlx5_0 (same PCI switch)"),
                       "%s", text);
    cr_expect_not_null(strstr(text, "GPU 4: 0000:c1:00.0 NVIDIA GPU [10de:2335], NUMA 2, cpus 4; "
                                    "no NIC on its NUMA node"),
                       "%s", text);
    cr_expect_not_null(strstr(text, "NIC 1: mlx5_0 (openfabrics) at 0000:18:00.0, NUMA 0"), "%s",
                       text);
    cr_expect_not_null(strstr(text, "cpu binding: unknown"), "%s", text);
    free(text);
    weft__topo_free(t);
}

Test(topo, unloadable)
{
    char path[] = "/tmp/weft_topo_XXXXXX";
    int fd = mkstemp(path);
    weft_topo_t *t = NULL;
    FILE *f;

    cr_assert_geq(fd, 0);
    f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputs("<?xml version=\"1.0\"?>\n<topology version=\"2.0\"></topology>\n", f);
    fclose(f);
    setenv("HWLOC_XMLFILE", path, 1);
    cr_expect_eq(weft__topo_load(&t), WEFT_ERR_INTERNAL);
    unsetenv("HWLOC_XMLFILE");
    unlink(path);
    cr_expect_null(t, "no topology on failure");
    cr_expect_not_null(strstr(weft_last_error(), "hwloc could not load"), "%s", weft_last_error());
}

/* rank records as world.c exchanges them: the machine info inside a larger
 * record, so the stride is not the info's size */
typedef struct {
    uint64_t before;
    weft_machine_info_t m;
    uint64_t after;
} record_t;

static void cpus(record_t *r, uint64_t key, const int *list, int n)
{
    memset(r, 0, sizeof(*r));
    r->m.key = key;
    for (int i = 0; i < n; i++) {
        r->m.cpus[list[i] / 64] |= 1ull << (list[i] % 64);
    }
}

static int over(const record_t *r, int size, int rank)
{
    return weft__machine_oversubscribed(&r[0].m, sizeof(*r), size, rank);
}

Test(topo, machine_oversubscribed)
{
    record_t r[4];
    const int c0[] = {0}, c1[] = {1}, c01[] = {0, 1}, c2[] = {2}, c64[] = {64}, c1023[] = {1023};

    /* bound to a core each (mpirun --bind-to core): not oversubscribed */
    cpus(&r[0], 7, c0, 1);
    cpus(&r[1], 7, c1, 1);
    cr_expect(!over(r, 2, 0) && !over(r, 2, 1));
    /* both on core 0 */
    cpus(&r[1], 7, c0, 1);
    cr_expect(over(r, 2, 0) && over(r, 2, 1));
    /* ranks of another machine do not count */
    cpus(&r[0], 7, c0, 1);
    cpus(&r[1], 7, c1, 1);
    cpus(&r[2], 9, c0, 1);
    cpus(&r[3], 9, c0, 1);
    cr_expect(!over(r, 4, 0) && !over(r, 4, 1) && over(r, 4, 2) && over(r, 4, 3));
    /* four ranks (say two namespaces of two, different node keys) on one
     * machine of two cores */
    for (int i = 0; i < 4; i++) {
        cpus(&r[i], 5, c01, 2);
    }
    cr_expect(over(r, 4, 0) && over(r, 4, 3));
    /* three ranks, three cores between them */
    cpus(&r[0], 5, c01, 2);
    cpus(&r[1], 5, c01, 2);
    cpus(&r[2], 5, c2, 1);
    cr_expect(!over(r, 3, 1));
    cr_expect(over(r, 3, 2) == 0, "the union counts, not the rank's own mask");
    /* CPUs past the first word */
    cpus(&r[0], 5, c64, 1);
    cpus(&r[1], 5, c1023, 1);
    cr_expect(!over(r, 2, 0));
    cpus(&r[1], 5, c64, 1);
    cr_expect(over(r, 2, 1));
}

/* Whether any machine is: the same answer from every rank's records, whatever their order. */
Test(topo, machines_oversubscribed_any)
{
    record_t r[5];
    const int c0[] = {0}, c1[] = {1}, c01[] = {0, 1};

    /* machines 7 and 9 interleaved, a core per rank on each */
    cpus(&r[0], 7, c0, 1);
    cpus(&r[1], 9, c0, 1);
    cpus(&r[2], 7, c1, 1);
    cpus(&r[3], 9, c1, 1);
    cr_expect_eq(weft__machines_oversubscribed_any(&r[0].m, sizeof(*r), 4), 0);
    /* a third rank on machine 9, its two cores taken: only that machine is */
    cpus(&r[4], 9, c01, 2);
    cr_expect_eq(weft__machines_oversubscribed_any(&r[0].m, sizeof(*r), 5), 1);
    cr_expect(!over(r, 5, 0) && over(r, 5, 1), "machine 7 is not, machine 9 is");
    /* the same ranks in another order */
    cpus(&r[0], 9, c01, 2);
    cpus(&r[4], 7, c0, 1);
    cr_expect_eq(weft__machines_oversubscribed_any(&r[0].m, sizeof(*r), 5), 1);
    /* one rank; none */
    cr_expect_eq(weft__machines_oversubscribed_any(&r[4].m, sizeof(*r), 1), 0);
    cr_expect_eq(weft__machines_oversubscribed_any(&r[0].m, sizeof(*r), 0), 0);
}

Test(topo, this_machine_info)
{
    weft_machine_info_t a, b;
    int n = 0;

    weft__machine_info(&a);
    weft__machine_info(&b);
    cr_expect_neq(a.key, 0);
    cr_expect_eq(a.key, b.key, "the machine key is stable");
    for (int w = 0; w < WEFT_CPU_WORDS; w++) {
        n += __builtin_popcountll(a.cpus[w]);
    }
    cr_expect_eq(n, weft__usable_cores(), "the mask has this process's usable cores");
}
