/*
 * Public memory and stream entry points (weft_mem_*, weft_stream_*,
 * weft_memcpy_async): argument checks, then the device table of the memory
 * type or stream. weft_stream_synchronize also reports the failures of
 * collectives enqueued on the stream (runtime/enqueue.h).
 */
#include "device/device.h"
#include "runtime/enqueue.h"
#include "runtime/graph.h"
#include "runtime/init.h"

static weft_status_t type_ops(const char *call, weft_memtype_t type,
                              const weft_device_ops_t **dev_p)
{
    const weft_device_ops_t *dev;

    if ((unsigned)type >= WEFT_MEM_TYPE_COUNT) {
        return weft__error(WEFT_ERR_INVALID_ARG, "%s: type %d is not a weft_memtype_t", call,
                           (int)type);
    }
    dev = weft__device_ops(type);
    if (dev == NULL) {
        return weft__error(WEFT_ERR_UNSUPPORTED, "%s: %s memory is not available: %s", call,
                           weft_memtype_name(type), weft__device_unavailable(type));
    }
    *dev_p = dev;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_mem_alloc(weft_memtype_t type, size_t bytes, void **ptr_p)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    if (ptr_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_mem_alloc: ptr_p is NULL");
    }
    status = type_ops("weft_mem_alloc", type, &dev);
    if (status != WEFT_OK) {
        return status;
    }
    return dev->alloc(bytes, ptr_p);
}

WEFT_EXPORT weft_status_t weft_mem_free(void *ptr)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    if (ptr == NULL) {
        return WEFT_OK;
    }
    status = weft__device_check(ptr, "weft_mem_free", "ptr", &dev);
    if (status != WEFT_OK) {
        return status;
    }
    return dev->free(ptr);
}

WEFT_EXPORT weft_status_t weft_mem_type(const void *ptr, weft_memtype_t *type_p)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    if (type_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_mem_type: type_p is NULL");
    }
    weft__device_init();
    status = weft__device_check(ptr, "weft_mem_type", "ptr", &dev);
    if (status == WEFT_OK) {
        *type_p = dev->memtype;
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_stream_create(weft_memtype_t type, weft_stream_t *stream_p)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    if (stream_p == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG, "weft_stream_create: stream_p is NULL");
    }
    status = type_ops("weft_stream_create", type, &dev);
    if (status != WEFT_OK) {
        return status;
    }
    if (dev->stream_create == NULL) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_stream_create: host memory has no streams (use emu or cuda)");
    }
    return dev->stream_create(stream_p);
}

WEFT_EXPORT weft_status_t weft_stream_destroy(weft_stream_t stream)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    status = weft__device_stream_check(stream, "weft_stream_destroy", &dev);
    if (status != WEFT_OK) {
        return status;
    }
    /* its enqueued collectives finish first: the stream waits on their flags */
    status = weft__enqueue_stream_drain(stream, "weft_stream_destroy");
    if (status == WEFT_OK) {
        weft__graph_stream_gone(stream); /* a capture in progress is dropped */
        status = dev->stream_destroy(stream);
    }
    return status;
}

WEFT_EXPORT weft_status_t weft_stream_synchronize(weft_stream_t stream)
{
    const weft_device_ops_t *dev;
    weft_status_t status, failed;

    weft__error_clear();
    status = weft__device_stream_check(stream, "weft_stream_synchronize", &dev);
    if (status != WEFT_OK) {
        return status;
    }
    if (weft__graph_capturing(stream)) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "weft_stream_synchronize: stream %p is capturing (nothing queued on "
                           "it runs before weft_stream_end_capture and a launch)",
                           stream);
    }
    status = dev->stream_sync(stream);
    /* an enqueued collective that failed released the stream with the error kept here */
    failed = weft__enqueue_stream_error(stream);
    return failed != WEFT_OK ? failed : status;
}

weft_status_t weft__memcpy_check(void *dst, const void *src, size_t bytes, void *stream,
                                 const char *call, const weft_device_ops_t **dev_p)
{
    const weft_device_ops_t *dev, *ddev, *sdev;
    weft_status_t status = weft__device_stream_check(stream, call, &dev);

    if (status == WEFT_OK && bytes > 0 && (dst == NULL || src == NULL)) {
        status = weft__error(WEFT_ERR_INVALID_ARG, "%s: %s is NULL", call,
                             dst == NULL ? "dst" : "src");
    }
    if (status == WEFT_OK) {
        status = weft__device_check(dst, call, "dst", &ddev);
    }
    if (status == WEFT_OK) {
        status = weft__device_check(src, call, "src", &sdev);
    }
    if (status != WEFT_OK) {
        return status;
    }
    if ((ddev != dev && ddev->memtype != WEFT_MEM_HOST) ||
        (sdev != dev && sdev->memtype != WEFT_MEM_HOST)) {
        return weft__error(WEFT_ERR_INVALID_ARG,
                           "%s: a %s stream copies between %s and host memory, not %s to %s",
                           call, dev->name, dev->name, sdev->name, ddev->name);
    }
    *dev_p = dev;
    return WEFT_OK;
}

WEFT_EXPORT weft_status_t weft_memcpy_async(void *dst, const void *src, size_t bytes, weft_stream_t stream)
{
    const weft_device_ops_t *dev;
    weft_status_t status;

    weft__error_clear();
    status = weft__memcpy_check(dst, src, bytes, stream, "weft_memcpy_async", &dev);
    if (status != WEFT_OK) {
        return status;
    }
    if (weft__graph_capturing(stream)) {
        return weft__graph_record_copy(stream, dst, src, bytes, "weft_memcpy_async");
    }
    return dev->memcpy_async(dst, src, bytes, stream);
}
