/*
 * Which MPI datatypes and ops weft can take.
 *
 * Reductions need a weft dtype of the same representation, and an op MPI
 * defines for the datatype's class (Open MPI's classes: C integer,
 * floating point, byte) that weft defines too; anything else is forwarded
 * so that Open MPI gives its own answer or error. Data movement (no op)
 * takes any named datatype whose extent is its size, moved as bytes.
 */
#include "bindings/mpi/weft_mpi_internal.h"

#include <stdint.h>

enum { CLASS_INT, CLASS_FLOAT, CLASS_BYTE };

typedef struct {
    MPI_Datatype mpi;
    weft_dtype_t weft;
    int cls;
} dtype_entry_t;

#define MAX_DTYPES 24
static dtype_entry_t table[MAX_DTYPES];
static int ntable;

/* An integer type of this signedness and the size Open MPI reports. */
static void add_int(MPI_Datatype dt, int is_signed)
{
    static const weft_dtype_t by_size[2][9] = {
        {[1] = WEFT_UINT8, [4] = WEFT_UINT32, [8] = WEFT_UINT64},
        {[1] = WEFT_INT8, [4] = WEFT_INT32, [8] = WEFT_INT64},
    };
    int size = 0;

    if (dt == MPI_DATATYPE_NULL || PMPI_Type_size(dt, &size) != MPI_SUCCESS || size < 1 ||
        size > 8 || (size != 1 && size != 4 && size != 8) || ntable == MAX_DTYPES) {
        return;
    }
    table[ntable++] = (dtype_entry_t){dt, by_size[is_signed][size], CLASS_INT};
}

static void add(MPI_Datatype dt, weft_dtype_t weft, int cls)
{
    int size = 0;

    if (dt != MPI_DATATYPE_NULL && PMPI_Type_size(dt, &size) == MPI_SUCCESS &&
        (size_t)size == weft_dtype_size(weft) && ntable < MAX_DTYPES) {
        table[ntable++] = (dtype_entry_t){dt, weft, cls};
    }
}

void weft__mpi_dtype_setup(void)
{
    ntable = 0;
    /* the most used first: the table is searched in order */
    add(MPI_DOUBLE, WEFT_FLOAT64, CLASS_FLOAT);
    add(MPI_FLOAT, WEFT_FLOAT32, CLASS_FLOAT);
    add_int(MPI_INT, 1);
    add_int(MPI_LONG, 1);
    add_int(MPI_UNSIGNED, 0);
    add_int(MPI_UNSIGNED_LONG, 0);
    add_int(MPI_LONG_LONG, 1);
    add_int(MPI_UNSIGNED_LONG_LONG, 0);
    add_int(MPI_INT8_T, 1);
    add_int(MPI_UINT8_T, 0);
    add_int(MPI_INT32_T, 1);
    add_int(MPI_UINT32_T, 0);
    add_int(MPI_INT64_T, 1);
    add_int(MPI_UINT64_T, 0);
    add_int(MPI_SIGNED_CHAR, 1);
    add_int(MPI_UNSIGNED_CHAR, 0);
    add_int(MPI_CHAR, 1); /* Open MPI reduces MPI_CHAR as a C integer */
    add(MPI_BYTE, WEFT_UINT8, CLASS_BYTE);
}

static int find(MPI_Datatype dt)
{
    for (int i = 0; i < ntable; i++) {
        if (table[i].mpi == dt) {
            return i;
        }
    }
    return -1;
}

static int map_op(MPI_Op op, weft_op_t *op_p)
{
    if (op == MPI_SUM) {
        *op_p = WEFT_SUM;
    } else if (op == MPI_PROD) {
        *op_p = WEFT_PROD;
    } else if (op == MPI_MIN) {
        *op_p = WEFT_MIN;
    } else if (op == MPI_MAX) {
        *op_p = WEFT_MAX;
    } else if (op == MPI_BAND) {
        *op_p = WEFT_BAND;
    } else if (op == MPI_BOR) {
        *op_p = WEFT_BOR;
    } else if (op == MPI_BXOR) {
        *op_p = WEFT_BXOR;
    } else if (op == MPI_LAND) {
        *op_p = WEFT_LAND;
    } else if (op == MPI_LOR) {
        *op_p = WEFT_LOR;
    } else if (op == MPI_LXOR) {
        *op_p = WEFT_LXOR;
    } else {
        return 0;
    }
    return 1;
}

weft__mpi_why_t weft__mpi_reduction(MPI_Datatype dt, MPI_Op op, weft_dtype_t *dtype_p,
                                    weft_op_t *op_p)
{
    int i = find(dt);
    weft_op_t wop;

    if (i < 0) {
        return WEFT__MPI_WHY_DTYPE;
    }
    if (!map_op(op, &wop)) {
        return WEFT__MPI_WHY_OP;
    }
    switch (table[i].cls) {
    case CLASS_FLOAT: /* MPI: sum, prod, min, max */
        if (wop != WEFT_SUM && wop != WEFT_PROD && wop != WEFT_MIN && wop != WEFT_MAX) {
            return WEFT__MPI_WHY_OP;
        }
        break;
    case CLASS_BYTE: /* MPI: the bitwise ops only */
        if (wop != WEFT_BAND && wop != WEFT_BOR && wop != WEFT_BXOR) {
            return WEFT__MPI_WHY_OP;
        }
        break;
    default:
        break;
    }
    *dtype_p = table[i].weft;
    *op_p = wop;
    return WEFT__MPI_SERVE;
}

weft__mpi_why_t weft__mpi_movable(MPI_Datatype dt, size_t *size_p)
{
    int i = find(dt), ni, na, nd, combiner, size;
    MPI_Aint lb, extent;

    if (i >= 0) {
        *size_p = weft_dtype_size(table[i].weft);
        return WEFT__MPI_SERVE;
    }
    if (dt == MPI_DATATYPE_NULL) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &combiner) != MPI_SUCCESS) {
        return WEFT__MPI_WHY_ARGS;
    }
    if (combiner != MPI_COMBINER_NAMED || PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS || lb != 0 || extent != size ||
        size <= 0) {
        return WEFT__MPI_WHY_DTYPE;
    }
    *size_p = (size_t)size;
    return WEFT__MPI_SERVE;
}

/* The memory type of a buffer the call passes (NULL, MPI_IN_PLACE and
 * WEFT_IN_PLACE: none, -1); -2 when weft refuses the pointer (freed device
 * memory). */
static int memtype_of(const void *p)
{
    weft_memtype_t t;

    if (p == NULL || p == MPI_IN_PLACE || p == WEFT_IN_PLACE) {
        return -1;
    }
    return weft_mem_type(p, &t) == WEFT_OK ? (int)t : -2;
}

/*
 * The CUDA-aware MPI contract: host and device buffers (CUDA memory with
 * weft's CUDA backend, emu memory) are served by weft, whose collectives
 * take either. A call whose buffers are of two memory types (weft wants
 * one), or a pointer weft refuses, goes to MPI: weft's argument check
 * refuses it (looking each buffer up once), and this names the reason
 * afterwards (weft__mpi_serve), so that a served call pays no second lookup.
 */
weft__mpi_why_t weft__mpi_memory(const void *a, const void *b)
{
    int ta = memtype_of(a), tb = memtype_of(b);

    if (ta == -2 || tb == -2 || (ta >= 0 && tb >= 0 && ta != tb)) {
        return WEFT__MPI_WHY_MEMORY;
    }
    return WEFT__MPI_SERVE;
}

int weft__mpi_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}
