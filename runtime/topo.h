/*
 * This machine's topology, read once through hwloc: packages, NUMA nodes
 * (memory, distances), cores, hardware threads, GPUs and NICs with where
 * they attach (PCI bus id, PCI bridges, NUMA node, cpus), and the cpus
 * this process is bound to.
 *
 * The result is a plain snapshot: no hwloc type appears here, nothing in
 * it changes after weft__topo_load, and any thread may read it. The caller
 * owns it and releases it with weft__topo_free. Loading reads sysfs (tens
 * of milliseconds on a large machine): do it once, not per operation.
 *
 * GPUs are the PCI display devices of NVIDIA (vendor 0x10de) and AMD
 * (0x1002): classes 0x0300 (VGA), 0x0302 (3D) and 0x0380 (other display,
 * which is how AMD Instinct parts present). Their indexes follow PCI bus
 * id order, as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them, over every GPU
 * of the machine whatever CUDA_VISIBLE_DEVICES says: map a CUDA or HIP
 * device to its index through its bus id (weft__topo_gpu_by_busid).
 *
 * NICs are hwloc's network (eth0, ib0) and OpenFabrics (mlx5_0) OS
 * devices, in hwloc's order. One adapter often shows as both (ib0 and
 * mlx5_0 on the same PCI function); both are listed.
 */
#ifndef WEFT_RUNTIME_TOPO_H
#define WEFT_RUNTIME_TOPO_H

#include "base/base.h"

#include <stdio.h>

/* PCI bridges recorded between a device and its host bridge. */
#define WEFT_TOPO_MAX_BRIDGES 8

typedef enum {
    WEFT_TOPO_NIC_NETWORK,    /* a network interface (eth0, ib0) */
    WEFT_TOPO_NIC_OPENFABRICS /* a verbs device (mlx5_0): RDMA */
} weft_topo_nic_kind_t;

/* How close two devices are, nearest last (NCCL's PIX/PXB, PHB, NODE, SYS). */
typedef enum {
    WEFT_TOPO_PATH_SYS,        /* across the CPUs' interconnect, or unknown */
    WEFT_TOPO_PATH_NUMA,       /* the same NUMA node (or the same non-I/O parent) */
    WEFT_TOPO_PATH_HOSTBRIDGE, /* the same PCI host bridge (root complex) */
    WEFT_TOPO_PATH_PCISWITCH   /* below the same PCI switch (a common PCI-PCI bridge) */
} weft_topo_path_t;

/* A GPU or a NIC and where it attaches. */
typedef struct weft_topo_dev {
    char name[64];      /* GPU: model if hwloc knows it, else "NVIDIA GPU";
                         * NIC: the OS device name */
    char busid[24];     /* "0000:17:00.0"; "" when not on PCI */
    unsigned vendor_id; /* PCI ids; 0 when not on PCI */
    unsigned device_id;
    unsigned class_id;
    weft_topo_nic_kind_t kind; /* NICs only */
    char *cpus;                /* cpus of its locality, as a list ("0-23,48-71") */
    int *numa;                 /* [nnuma] OS indexes of the NUMA nodes it is local to */
    int nnuma;
    /* for comparing two devices (weft__topo_path) */
    uint64_t anchor;                         /* hwloc id of the nearest non-I/O ancestor */
    uint64_t hostbridge;                     /* hwloc id of its host bridge; 0 when none */
    uint64_t bridges[WEFT_TOPO_MAX_BRIDGES]; /* PCI-PCI bridges above it, nearest first */
    int nbridges;
} weft_topo_dev_t;

typedef struct weft_topo_numa {
    int os_index;
    uint64_t memory; /* bytes local to the node */
    char *cpus;      /* its cpus, as a list; "" for memory-only nodes */
} weft_topo_numa_t;

typedef struct weft_topo {
    char hostname[256]; /* of the machine described */
    int this_machine;   /* 0: another machine's, loaded from HWLOC_XMLFILE */
    int npackages;
    int ncores;
    int npus;
    int nnuma;
    weft_topo_numa_t *numa;   /* [nnuma], in hwloc's logical order */
    uint64_t *numa_distance;  /* [nnuma * nnuma], row i column j from numa[i] to numa[j]
                               * (0: not reported); NULL when hwloc has no matrix */
    char *numa_distance_name; /* hwloc's name for it ("NUMALatency"), or NULL */
    int ngpus;
    weft_topo_dev_t *gpus; /* [ngpus], in PCI bus id order */
    int nnics;
    weft_topo_dev_t *nics; /* [nnics] */
    char *bound_cpus;      /* cpus this process was bound to at load time, as a list;
                            * NULL when hwloc cannot tell or the topology is not this
                            * machine's (HWLOC_XMLFILE) */
    int bound_everywhere;  /* the binding covers every cpu of the machine */
} weft_topo_t;

/* Read this machine's topology. On failure (hwloc cannot start or read the
 * machine, no memory) returns the status with a message and leaves *topo_p
 * unchanged. hwloc's usual environment applies (HWLOC_XMLFILE loads a saved
 * topology instead of this machine's). */
weft_status_t weft__topo_load(weft_topo_t **topo_p);
void weft__topo_free(weft_topo_t *topo);

/* A human-readable report of everything above, several lines. */
void weft__topo_print(const weft_topo_t *topo, FILE *f);

/* The index of the GPU at PCI bus id busid ("0000:17:00.0"; the 8-digit
 * domain of nvidia-smi and hex digits in either case are accepted), or -1. */
int weft__topo_gpu_by_busid(const weft_topo_t *topo, const char *busid);

/* How close two devices are: a common PCI-PCI bridge, else a common host
 * bridge, else a common non-I/O parent or a shared NUMA node, else SYS. */
weft_topo_path_t weft__topo_path(const weft_topo_dev_t *a, const weft_topo_dev_t *b);
const char *weft__topo_path_name(weft_topo_path_t path);

/* The NIC closest to GPU gpu_index by weft__topo_path, or -1 when the index
 * is out of range, there is no NIC, or every NIC is only SYS-close (on
 * another NUMA node: any NIC will do as well as another). Ties go to an
 * OpenFabrics device (it can do RDMA), then to the lowest index. */
int weft__topo_nic_near_gpu(const weft_topo_t *topo, int gpu_index);

#endif /* WEFT_RUNTIME_TOPO_H */
