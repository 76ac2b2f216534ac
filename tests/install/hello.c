/* An outside program: built against an installed weft through pkg-config. */
#include <weft.h>

#include <stdio.h>

int main(void)
{
    weft_comm_t comm;
    float data[3] = {1.5f, 2.5f, -3.0f};
    int size = 0;

    if (weft_init() != WEFT_OK || weft_comm_world(&comm) != WEFT_OK ||
        weft_comm_size(comm, &size) != WEFT_OK) {
        fprintf(stderr, "hello: %s\n", weft_last_error());
        return 1;
    }
    if (weft_allreduce(WEFT_IN_PLACE, data, 3, WEFT_FLOAT32, WEFT_SUM, comm) != WEFT_OK) {
        fprintf(stderr, "hello: %s\n", weft_last_error());
        return 1;
    }
    /* an invalid call must fail cleanly */
    if (weft_allreduce(data, NULL, 3, WEFT_FLOAT32, WEFT_SUM, comm) != WEFT_ERR_INVALID_ARG) {
        fprintf(stderr, "hello: NULL recvbuf accepted\n");
        return 1;
    }
    printf("size=%d sum=%g,%g,%g\n", size, data[0], data[1], data[2]);
    weft_comm_destroy(comm);
    weft_finalize();
    return data[0] == 1.5f && data[1] == 2.5f && data[2] == -3.0f ? 0 : 1;
}
