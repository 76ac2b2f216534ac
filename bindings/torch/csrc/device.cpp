/* Device lanes (device.hpp): a torch accelerator's stream, weft's emu stream. */
#include "device.hpp"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "types.hpp"

namespace weft_torch
{

LaneKind lane_kind(const at::Tensor &t)
{
    if (!t.device().is_cpu()) {
        return LaneKind::torch_device;
    }
    weft_memtype_t type = WEFT_MEM_HOST;
    const void *p = t.numel() > 0 ? t.data_ptr() : nullptr;
    if (p != nullptr && weft_mem_type(p, &type) == WEFT_OK && type == WEFT_MEM_EMU) {
        return LaneKind::emu;
    }
    return LaneKind::none;
}

namespace
{

/* ----------------------------------------------------- torch accelerator */

class TorchDone : public DeviceDone
{
  public:
    explicit TorchDone(c10::Stream stream) : stream_(stream), event_(stream.device_type())
    {
        event_.record(stream_);
    }
    bool query() override
    {
        return event_.query();
    }
    void block_current() override
    {
        const c10::impl::DeviceGuardImplInterface *impl =
            c10::impl::getDeviceGuardImpl(stream_.device_type());
        event_.block(impl->getStream(stream_.device()));
    }
    std::optional<c10::Stream> stream() const override
    {
        return stream_;
    }

  private:
    c10::Stream stream_;
    c10::Event event_;
};

class TorchLane : public Lane
{
  public:
    explicit TorchLane(c10::Device device)
        : device_(device), impl_(c10::impl::getDeviceGuardImpl(device.type())),
          stream_(impl_->getStreamFromGlobalPool(device, /*isHighPriority=*/false))
    {
    }
    weft_stream_t stream() override
    {
        return stream_.native_handle();
    }
    void prepare(const std::vector<at::Tensor> &tensors) override
    {
        c10::Event before(device_.type());
        before.record(impl_->getStream(device_)); /* the caller's current stream */
        before.block(stream_);
        for (const at::Tensor &t : tensors) {
            if (t.defined() && t.has_storage()) {
                impl_->recordDataPtrOnStream(t.storage().data_ptr(), stream_);
            }
        }
    }
    std::shared_ptr<DeviceDone> mark(const std::vector<at::Tensor> & /*keep*/) override
    {
        return std::make_shared<TorchDone>(stream_);
    }
    at::Tensor empty(int64_t numel, const at::Tensor &like) override
    {
        /* from the caching allocator on the caller's stream; prepare() records it on ours */
        return at::empty({numel}, like.options());
    }
    void copy(const at::Tensor &dst, const at::Tensor &src) override
    {
        c10::StreamGuard on(stream_);
        dst.copy_(src, /*non_blocking=*/true);
    }
    void drain() override
    {
        stream_.synchronize();
    }
    bool host_completed() const override
    {
        return false;
    }

  private:
    c10::Device device_;
    const c10::impl::DeviceGuardImplInterface *impl_;
    c10::Stream stream_;
};

/* ------------------------------------------------------------------- emu */

/* A flag the emu stream sets by copying `one` over it. */
struct EmuMark {
    uint32_t flag = 0;
    uint32_t one = 1;
};

class EmuDone : public DeviceDone
{
  public:
    explicit EmuDone(std::shared_ptr<EmuMark> mark) : mark_(std::move(mark))
    {
    }
    bool query() override
    {
        return __atomic_load_n(&mark_->flag, __ATOMIC_ACQUIRE) != 0;
    }
    void block_current() override
    {
    }
    std::optional<c10::Stream> stream() const override
    {
        return std::nullopt;
    }

  private:
    std::shared_ptr<EmuMark> mark_;
};

class EmuLane : public Lane
{
  public:
    EmuLane()
    {
        check(weft_stream_create(WEFT_MEM_EMU, &stream_), "weft_stream_create", 0);
    }
    ~EmuLane() override
    {
        drain();
        weft_stream_destroy(stream_);
    }
    weft_stream_t stream() override
    {
        return stream_;
    }
    void prepare(const std::vector<at::Tensor> & /*tensors*/) override
    {
        /* the caller's writes are done: the host runs in program order */
    }
    std::shared_ptr<DeviceDone> mark(const std::vector<at::Tensor> &keep) override
    {
        auto m = std::make_shared<EmuMark>();
        check(weft_memcpy_async(&m->flag, &m->one, sizeof m->one, stream_), "weft_memcpy_async", 0);
        std::lock_guard<std::mutex> lock(mutex_);
        /* the stream may write the tensors and the flag until it is past them */
        while (!kept_.empty() && __atomic_load_n(&kept_.front().first->flag, __ATOMIC_ACQUIRE)) {
            kept_.pop_front();
        }
        kept_.emplace_back(m, keep);
        return std::make_shared<EmuDone>(m);
    }
    at::Tensor empty(int64_t numel, const at::Tensor &like) override
    {
        return emu_empty(numel, like.scalar_type());
    }
    void copy(const at::Tensor &dst, const at::Tensor &src) override
    {
        if (src.nbytes() > 0) {
            check(weft_memcpy_async(dst.data_ptr(), src.data_ptr(), src.nbytes(), stream_),
                  "weft_memcpy_async", 0);
        }
    }
    void drain() override
    {
        weft_stream_synchronize(stream_); /* a failure was reported to its Work */
        std::lock_guard<std::mutex> lock(mutex_);
        kept_.clear();
    }
    bool host_completed() const override
    {
        return true;
    }

  private:
    weft_stream_t stream_ = nullptr;
    std::mutex mutex_;
    std::deque<std::pair<std::shared_ptr<EmuMark>, std::vector<at::Tensor>>> kept_;
};

} // namespace

std::unique_ptr<Lane> make_lane(const at::Tensor &t)
{
    if (lane_kind(t) == LaneKind::emu) {
        return std::make_unique<EmuLane>();
    }
    return std::make_unique<TorchLane>(t.device());
}

at::Tensor emu_empty(int64_t numel, at::ScalarType dtype)
{
    TORCH_CHECK_VALUE(numel >= 0, "weft_torch.emu_empty: numel ", numel, " is negative");
    const size_t bytes = (size_t)numel * c10::elementSize(dtype);
    void *p = nullptr;

    check(weft_init(), "weft_init", 0);
    weft_status_t status = weft_mem_alloc(WEFT_MEM_EMU, bytes > 0 ? bytes : 1, &p);
    if (status != WEFT_OK) {
        std::string detail = weft_last_error();
        weft_finalize();
        C10_THROW_ERROR(ValueError, c10::str("weft_torch.emu_empty: ", numel, " elements of ",
                                             dtype, ": ", weft_status_name(status), ": ", detail));
    }
    return at::from_blob(
        p, {numel},
        [](void *q) {
            weft_mem_free(q);
            weft_finalize();
        },
        at::TensorOptions().dtype(dtype).device(at::kCPU));
}

} // namespace weft_torch
