/*
 * The machine's topology through hwloc (runtime/topo.h): one load that
 * copies what weft needs into a plain snapshot, then frees hwloc's tree.
 */
#include "runtime/topo.h"

#include <errno.h>
#include <hwloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VENDOR_NVIDIA 0x10de
#define VENDOR_AMD 0x1002

/* A set as a list ("0-3,8"), malloc'ed; NULL when out of memory. */
static char *bitmap_list(hwloc_const_bitmap_t set)
{
    char *s = NULL;

    if (set == NULL) {
        return strdup("");
    }
    return hwloc_bitmap_list_asprintf(&s, set) < 0 ? NULL : s;
}

static int is_gpu(hwloc_obj_t pci)
{
    unsigned vendor = pci->attr->pcidev.vendor_id, cls = pci->attr->pcidev.class_id;

    return (vendor == VENDOR_NVIDIA || vendor == VENDOR_AMD) &&
           (cls == 0x0300 || cls == 0x0302 || cls == 0x0380);
}

static const char *vendor_name(unsigned vendor)
{
    return vendor == VENDOR_NVIDIA ? "NVIDIA" : vendor == VENDOR_AMD ? "AMD" : "PCI";
}

/* "dddd:bb:dd.f" (1 to 8 domain digits) or "bb:dd.f" (domain 0), hex in
 * either case, nothing after, into v = {domain, bus, device, function}. */
static int parse_busid(const char *s, unsigned v[4])
{
    char f[4][9] = {"0", "", "", ""};
    int end = -1;

    if (sscanf(s, "%8[0-9a-fA-F]:%2[0-9a-fA-F]:%2[0-9a-fA-F].%1[0-7]%n", f[0], f[1], f[2], f[3],
               &end) != 4 ||
        end < 0 || s[end] != '\0') {
        end = -1;
        if (sscanf(s, "%2[0-9a-fA-F]:%2[0-9a-fA-F].%1[0-7]%n", f[1], f[2], f[3], &end) != 3 ||
            end < 0 || s[end] != '\0') {
            return -1;
        }
        snprintf(f[0], sizeof(f[0]), "0");
    }
    for (int i = 0; i < 4; i++) {
        v[i] = (unsigned)strtoul(f[i], NULL, 16);
    }
    return 0;
}

static int cmp_busid(const void *a, const void *b)
{
    unsigned x[4], y[4];

    parse_busid(((const weft_topo_dev_t *)a)->busid, x);
    parse_busid(((const weft_topo_dev_t *)b)->busid, y);
    for (int i = 0; i < 4; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

/*
 * Fill dev's locality from obj (an OS device or a PCI device): its PCI
 * device if any, the bridges above that, and the nearest non-I/O ancestor
 * (a package, a group, or the machine) whose cpus and NUMA nodes it is
 * local to.
 */
static weft_status_t fill_locality(hwloc_topology_t hw, hwloc_obj_t obj, weft_topo_dev_t *dev)
{
    hwloc_obj_t pci = obj, anchor = hwloc_get_non_io_ancestor_obj(hw, obj);

    while (pci != NULL && pci->type == HWLOC_OBJ_OS_DEVICE) {
        pci = pci->parent;
    }
    if (pci != NULL && pci->type == HWLOC_OBJ_PCI_DEVICE) {
        struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

        snprintf(dev->busid, sizeof(dev->busid), "%04x:%02x:%02x.%01x", a->domain, a->bus, a->dev,
                 a->func);
        dev->vendor_id = a->vendor_id;
        dev->device_id = a->device_id;
        dev->class_id = a->class_id;
        for (hwloc_obj_t p = pci->parent; p != NULL && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
            if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
                dev->hostbridge = p->gp_index; /* hwloc numbers objects from 1 */
                break;
            }
            if (dev->nbridges < WEFT_TOPO_MAX_BRIDGES) {
                dev->bridges[dev->nbridges++] = p->gp_index;
            }
        }
    }
    dev->anchor = anchor->gp_index;
    dev->cpus = bitmap_list(anchor->cpuset);
    if (dev->cpus == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "topology: locality of %s", dev->name);
    }
    if (anchor->nodeset != NULL) {
        hwloc_const_nodeset_t set = anchor->nodeset;
        int n = hwloc_bitmap_weight(set);

        dev->numa = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
        if (dev->numa == NULL) {
            return weft__error(WEFT_ERR_NO_MEMORY, "topology: locality of %s", dev->name);
        }
        for (int id = hwloc_bitmap_first(set); id >= 0 && dev->nnuma < n;
             id = hwloc_bitmap_next(set, id)) {
            dev->numa[dev->nnuma++] = id;
        }
    }
    return WEFT_OK;
}

/* The model name of a GPU: from a GPU OS device below it (CUDA, NVML, RSMI
 * plugins), else from the PCI name database, else its vendor's name. */
static void gpu_name(hwloc_obj_t pci, char *name, size_t len)
{
    for (hwloc_obj_t c = pci->io_first_child; c != NULL; c = c->next_sibling) {
        const char *model = hwloc_obj_get_info_by_name(c, "GPUModel");

        if (model != NULL) {
            snprintf(name, len, "%s", model);
            return;
        }
    }
    if (pci->name != NULL) {
        snprintf(name, len, "%s", pci->name);
        return;
    }
    snprintf(name, len, "%s GPU", vendor_name(pci->attr->pcidev.vendor_id));
}

static weft_status_t load_numa(hwloc_topology_t hw, weft_topo_t *t)
{
    struct hwloc_distances_s *d = NULL;
    unsigned nr = 1;

    t->numa = calloc(t->nnuma > 0 ? (size_t)t->nnuma : 1, sizeof(*t->numa));
    if (t->numa == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "topology: %d NUMA nodes", t->nnuma);
    }
    for (int i = 0; i < t->nnuma; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);

        t->numa[i].os_index = (int)o->os_index;
        t->numa[i].memory = o->attr->numanode.local_memory;
        t->numa[i].cpus = bitmap_list(o->cpuset);
        if (t->numa[i].cpus == NULL) {
            return weft__error(WEFT_ERR_NO_MEMORY, "topology: NUMA node %d", i);
        }
    }
    /* a latency matrix (the firmware's SLIT) when there is one, else any */
    if (hwloc_distances_get_by_type(hw, HWLOC_OBJ_NUMANODE, &nr, &d,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        nr == 0) {
        nr = 1;
        if (hwloc_distances_get_by_type(hw, HWLOC_OBJ_NUMANODE, &nr, &d, 0, 0) != 0 || nr == 0) {
            return WEFT_OK; /* hwloc has none: not an error */
        }
    }
    t->numa_distance = calloc((size_t)t->nnuma * (size_t)t->nnuma, sizeof(uint64_t));
    if (t->numa_distance == NULL) {
        hwloc_distances_release(hw, d);
        return weft__error(WEFT_ERR_NO_MEMORY, "topology: NUMA distances");
    }
    for (unsigned i = 0; i < d->nbobjs; i++) {
        for (unsigned j = 0; j < d->nbobjs; j++) {
            unsigned li = d->objs[i]->logical_index, lj = d->objs[j]->logical_index;

            if (li < (unsigned)t->nnuma && lj < (unsigned)t->nnuma) {
                t->numa_distance[li * (unsigned)t->nnuma + lj] = d->values[i * d->nbobjs + j];
            }
        }
    }
    if (hwloc_distances_get_name(hw, d) != NULL) {
        t->numa_distance_name = strdup(hwloc_distances_get_name(hw, d));
    }
    hwloc_distances_release(hw, d);
    return WEFT_OK;
}

static weft_status_t load_devices(hwloc_topology_t hw, weft_topo_t *t)
{
    int ngpus = 0, nnics = 0;
    weft_status_t status;

    for (hwloc_obj_t o = hwloc_get_next_pcidev(hw, NULL); o != NULL;
         o = hwloc_get_next_pcidev(hw, o)) {
        ngpus += is_gpu(o);
    }
    for (hwloc_obj_t o = hwloc_get_next_osdev(hw, NULL); o != NULL;
         o = hwloc_get_next_osdev(hw, o)) {
        nnics += o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                 o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    }
    t->gpus = calloc(ngpus > 0 ? (size_t)ngpus : 1, sizeof(*t->gpus));
    t->nics = calloc(nnics > 0 ? (size_t)nnics : 1, sizeof(*t->nics));
    if (t->gpus == NULL || t->nics == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "topology: %d GPUs, %d NICs", ngpus, nnics);
    }
    for (hwloc_obj_t o = hwloc_get_next_pcidev(hw, NULL); o != NULL;
         o = hwloc_get_next_pcidev(hw, o)) {
        if (is_gpu(o)) {
            weft_topo_dev_t *dev = &t->gpus[t->ngpus++];

            gpu_name(o, dev->name, sizeof(dev->name));
            status = fill_locality(hw, o, dev);
            if (status != WEFT_OK) {
                return status;
            }
        }
    }
    qsort(t->gpus, (size_t)t->ngpus, sizeof(*t->gpus), cmp_busid);
    for (hwloc_obj_t o = hwloc_get_next_osdev(hw, NULL); o != NULL;
         o = hwloc_get_next_osdev(hw, o)) {
        hwloc_obj_osdev_type_t type = o->attr->osdev.type;
        weft_topo_dev_t *dev;

        if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) {
            continue;
        }
        dev = &t->nics[t->nnics++];
        snprintf(dev->name, sizeof(dev->name), "%s", o->name != NULL ? o->name : "?");
        dev->kind =
            type == HWLOC_OBJ_OSDEV_NETWORK ? WEFT_TOPO_NIC_NETWORK : WEFT_TOPO_NIC_OPENFABRICS;
        status = fill_locality(hw, o, dev);
        if (status != WEFT_OK) {
            return status;
        }
    }
    return WEFT_OK;
}

static weft_status_t load_binding(hwloc_topology_t hw, weft_topo_t *t)
{
    hwloc_bitmap_t set = hwloc_bitmap_alloc();

    if (set == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "topology: cpu binding");
    }
    /* another machine's topology (HWLOC_XMLFILE) says nothing about this process */
    if (t->this_machine && hwloc_get_cpubind(hw, set, HWLOC_CPUBIND_PROCESS) == 0) {
        t->bound_cpus = bitmap_list(set);
        t->bound_everywhere = hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(hw), set);
        if (t->bound_cpus == NULL) {
            hwloc_bitmap_free(set);
            return weft__error(WEFT_ERR_NO_MEMORY, "topology: cpu binding");
        }
    }
    hwloc_bitmap_free(set);
    return WEFT_OK;
}

weft_status_t weft__topo_load(weft_topo_t **topo_p)
{
    weft_topo_t *t = calloc(1, sizeof(*t));
    hwloc_topology_t hw;
    const char *host;
    weft_status_t status;

    if (t == NULL) {
        return weft__error(WEFT_ERR_NO_MEMORY, "topology");
    }
    if (hwloc_topology_init(&hw) != 0) {
        status = weft__error(errno == ENOMEM ? WEFT_ERR_NO_MEMORY : WEFT_ERR_INTERNAL,
                             "topology: hwloc could not start: %s", strerror(errno));
        goto err_free;
    }
    /* GPUs, NICs and the PCI bridges above them; no storage, no virtual devices */
    hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(hw) != 0) {
        status = weft__error(WEFT_ERR_INTERNAL, "topology: hwloc could not load it: %s",
                             strerror(errno));
        goto err_destroy;
    }
    /* the name of the machine described, which is another one under HWLOC_XMLFILE */
    host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(hw), "HostName");
    if (host != NULL) {
        snprintf(t->hostname, sizeof(t->hostname), "%s", host);
    } else if (gethostname(t->hostname, sizeof(t->hostname) - 1) != 0) {
        snprintf(t->hostname, sizeof(t->hostname), "?");
    }
    t->this_machine = hwloc_topology_is_thissystem(hw);
    t->npackages = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    t->ncores = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    t->npus = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    t->nnuma = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    WEFT_CHECK_GOTO(load_numa(hw, t), err_destroy);
    WEFT_CHECK_GOTO(load_devices(hw, t), err_destroy);
    WEFT_CHECK_GOTO(load_binding(hw, t), err_destroy);
    hwloc_topology_destroy(hw);
    *topo_p = t;
    return WEFT_OK;

err_destroy:
    hwloc_topology_destroy(hw);
err_free:
    weft__topo_free(t);
    return status;
}

static void free_devs(weft_topo_dev_t *devs, int n)
{
    for (int i = 0; i < n; i++) {
        free(devs[i].cpus);
        free(devs[i].numa);
    }
    free(devs);
}

void weft__topo_free(weft_topo_t *t)
{
    if (t == NULL) {
        return;
    }
    for (int i = 0; t->numa != NULL && i < t->nnuma; i++) {
        free(t->numa[i].cpus);
    }
    free(t->numa);
    free(t->numa_distance);
    free(t->numa_distance_name);
    free_devs(t->gpus, t->ngpus);
    free_devs(t->nics, t->nnics);
    free(t->bound_cpus);
    free(t);
}

int weft__topo_gpu_by_busid(const weft_topo_t *t, const char *busid)
{
    unsigned want[4], have[4];

    if (busid == NULL || parse_busid(busid, want) != 0) {
        return -1;
    }
    for (int i = 0; i < t->ngpus; i++) {
        if (parse_busid(t->gpus[i].busid, have) == 0 && memcmp(want, have, sizeof(want)) == 0) {
            return i;
        }
    }
    return -1;
}

weft_topo_path_t weft__topo_path(const weft_topo_dev_t *a, const weft_topo_dev_t *b)
{
    for (int i = 0; i < a->nbridges; i++) {
        for (int j = 0; j < b->nbridges; j++) {
            if (a->bridges[i] == b->bridges[j]) {
                return WEFT_TOPO_PATH_PCISWITCH;
            }
        }
    }
    if (a->hostbridge != 0 && a->hostbridge == b->hostbridge) {
        return WEFT_TOPO_PATH_HOSTBRIDGE;
    }
    if (a->anchor == b->anchor) {
        return WEFT_TOPO_PATH_NUMA;
    }
    for (int i = 0; i < a->nnuma; i++) {
        for (int j = 0; j < b->nnuma; j++) {
            if (a->numa[i] == b->numa[j]) {
                return WEFT_TOPO_PATH_NUMA;
            }
        }
    }
    return WEFT_TOPO_PATH_SYS;
}

const char *weft__topo_path_name(weft_topo_path_t path)
{
    switch (path) {
    case WEFT_TOPO_PATH_PCISWITCH:
        return "same PCI switch";
    case WEFT_TOPO_PATH_HOSTBRIDGE:
        return "same PCI host bridge";
    case WEFT_TOPO_PATH_NUMA:
        return "same NUMA node";
    case WEFT_TOPO_PATH_SYS:
        break;
    }
    return "across NUMA nodes";
}

int weft__topo_nic_near_gpu(const weft_topo_t *t, int gpu_index)
{
    weft_topo_path_t best_path = WEFT_TOPO_PATH_SYS;
    int best = -1;

    if (gpu_index < 0 || gpu_index >= t->ngpus) {
        return -1;
    }
    for (int i = 0; i < t->nnics; i++) {
        weft_topo_path_t p = weft__topo_path(&t->gpus[gpu_index], &t->nics[i]);

        if (p == WEFT_TOPO_PATH_SYS) {
            continue;
        }
        if (best < 0 || p > best_path ||
            (p == best_path && t->nics[i].kind == WEFT_TOPO_NIC_OPENFABRICS &&
             t->nics[best].kind != WEFT_TOPO_NIC_OPENFABRICS)) {
            best = i;
            best_path = p;
        }
    }
    return best;
}

static void print_numa_list(const weft_topo_dev_t *d, FILE *f)
{
    if (d->nnuma == 0) {
        fprintf(f, "NUMA ?");
        return;
    }
    fprintf(f, "NUMA %s", d->nnuma > 1 ? "nodes " : "");
    for (int i = 0; i < d->nnuma; i++) {
        fprintf(f, "%s%d", i > 0 ? "," : "", d->numa[i]);
    }
}

static void print_distances(const weft_topo_t *t, FILE *f)
{
    int width = 2;

    if (t->numa_distance == NULL) {
        if (t->nnuma > 1) {
            fprintf(f, "  NUMA distances: not reported\n");
        }
        return;
    }
    for (int i = 0; i < t->nnuma * t->nnuma; i++) {
        int w = snprintf(NULL, 0, "%llu", (unsigned long long)t->numa_distance[i]);

        width = w > width ? w : width;
    }
    fprintf(f, "  NUMA distances (%s):\n      ",
            t->numa_distance_name != NULL ? t->numa_distance_name : "unnamed");
    for (int j = 0; j < t->nnuma; j++) {
        fprintf(f, " %*d", width, t->numa[j].os_index);
    }
    fprintf(f, "\n");
    for (int i = 0; i < t->nnuma; i++) {
        fprintf(f, "    %2d", t->numa[i].os_index);
        for (int j = 0; j < t->nnuma; j++) {
            fprintf(f, " %*llu", width, (unsigned long long)t->numa_distance[i * t->nnuma + j]);
        }
        fprintf(f, "\n");
    }
}

void weft__topo_print(const weft_topo_t *t, FILE *f)
{
    fprintf(f,
            "topology of %s: %d package(s), %d NUMA node(s), %d core(s), %d hardware "
            "thread(s), %d GPU(s), %d NIC(s)\n",
            t->hostname, t->npackages, t->nnuma, t->ncores, t->npus, t->ngpus, t->nnics);
    for (int i = 0; i < t->nnuma; i++) {
        fprintf(f, "  NUMA node %d: %.1f GiB, cpus %s\n", t->numa[i].os_index,
                (double)t->numa[i].memory / (1024.0 * 1024 * 1024),
                t->numa[i].cpus[0] != '\0' ? t->numa[i].cpus : "none");
    }
    print_distances(t, f);
    for (int i = 0; i < t->ngpus; i++) {
        const weft_topo_dev_t *g = &t->gpus[i];
        int nic = weft__topo_nic_near_gpu(t, i);

        fprintf(f, "  GPU %d: %s %s [%04x:%04x], ", i, g->busid, g->name, g->vendor_id,
                g->device_id);
        print_numa_list(g, f);
        fprintf(f, ", cpus %s; ", g->cpus);
        if (nic >= 0) {
            fprintf(f, "nearest NIC %d %s (%s)\n", nic, t->nics[nic].name,
                    weft__topo_path_name(weft__topo_path(g, &t->nics[nic])));
        } else {
            fprintf(f, "no NIC on its NUMA node\n");
        }
    }
    for (int i = 0; i < t->nnics; i++) {
        const weft_topo_dev_t *n = &t->nics[i];

        fprintf(f, "  NIC %d: %s (%s)", i, n->name,
                n->kind == WEFT_TOPO_NIC_NETWORK ? "network" : "openfabrics");
        if (n->busid[0] != '\0') {
            fprintf(f, " at %s", n->busid);
        }
        fprintf(f, ", ");
        print_numa_list(n, f);
        fprintf(f, ", cpus %s\n", n->cpus);
    }
    if (t->bound_cpus == NULL) {
        fprintf(f, "  this process's cpu binding: unknown (%s)\n",
                t->this_machine ? "hwloc cannot tell" : "the topology is another machine's");
    } else {
        fprintf(f, "  this process is bound to cpus %s%s\n", t->bound_cpus,
                t->bound_everywhere ? " (every cpu: not bound)" : "");
    }
}
