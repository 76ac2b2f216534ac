#include "process_group.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include "types.hpp"

namespace weft_torch {

namespace {

/* The c10d Store key of a group's unique id (the store is the group's own,
 * prefixed by torch). */
const char *const kUniqueIdKey = "weft_unique_id";

/* While the group is busy the worker looks at its queue this often instead
 * of being woken for every operation. In a group whose operations are
 * waited for as soon as they are queued (dist.all_reduce(t), the common
 * case), each then runs on the waiting thread, and waking the worker for it
 * would cost the caller a system call and the machine a thread switch for
 * nothing: there the worker leaves a newly queued operation to its caller
 * for one look, and runs it itself only when nobody came. Once that
 * happened (operations started with async_op=True and waited for later),
 * the group counts as asynchronous: enqueue wakes the worker, which runs
 * each operation at once, until a caller runs one again. */
constexpr std::chrono::microseconds kLook(100);

/* After this many looks without anything queued, running or pending the
 * worker sleeps until an operation is queued (which then wakes it). */
constexpr unsigned kLooksBeforeSleep(200);

/* How often the worker tests pending requests when nothing else wakes it. */
constexpr std::chrono::microseconds kPollInterval(50);

} // namespace

/* ------------------------------------------------------------------ Work */

WorkWeft::WorkWeft(int rank, c10d::OpType type, const char *title, std::vector<at::Tensor> outputs,
                   const std::optional<std::vector<at::Tensor>> &inputs,
                   std::vector<c10::Device> devices)
    : c10d::Work(rank, type, title, inputs), outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::move(devices)))
{
}

std::vector<at::Tensor> WorkWeft::result()
{
    return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkWeft::getFuture()
{
    return future_;
}

uint64_t WorkWeft::getSequencenumber() const
{
    return seq_;
}

int WorkWeft::sourceRank() const
{
    int src = source_.load();

    TORCH_CHECK(src >= 0, "weft: sourceRank() is known only for a receive that completed");
    return src;
}

void WorkWeft::complete(std::exception_ptr error)
{
    /* the future first: whoever wait() releases finds it done too (as
     * ProcessGroupGloo orders them) */
    if (error) {
        future_->setError(error);
    } else {
        /* a device operation's future: ready once the group's stream is
         * past it (the future records its events on the current stream) */
        c10::OptionalStreamGuard guard(device_ ? device_->stream() : std::nullopt);
        future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
    done_.store(true, std::memory_order_release);
}

bool WorkWeft::isCompleted()
{
    if (!c10d::Work::isCompleted() || (device_ && !device_->query())) {
        return false;
    }
    return std::all_of(members_.begin(), members_.end(),
                       [](const c10::intrusive_ptr<WorkWeft> &m) { return m->isCompleted(); });
}

void WorkWeft::synchronize()
{
    if (device_) {
        device_->block_current();
    }
    for (const c10::intrusive_ptr<WorkWeft> &m : members_) {
        m->synchronize();
    }
}

bool WorkWeft::wait(std::chrono::milliseconds timeout)
{
    TORCH_CHECK(!held_.load(std::memory_order_acquire),
                "weft: wait() on a send or receive held in an open coalescing region: it is "
                "queued at the region's end (endCoalescing)");
    /* with a timeout, only c10d::Work's wait can give up in time */
    if (timeout == kNoTimeout && !done_.load(std::memory_order_acquire) && group_) {
        if (c10::intrusive_ptr<c10d::Backend> group = group_->lock()) {
            static_cast<ProcessGroupWeft *>(group.get())->run_until(*this);
        }
    }
    const bool done = c10d::Work::wait(timeout); /* raises the operation's error */
    if (done) {
        synchronize(); /* device operations: the current stream waits for them */
    }
    return done;
}

/* --------------------------------------------------------- ProcessGroup */

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout)
{
    weft_unique_id_t id;
    weft_status_t status = weft_init();

    if (status != WEFT_OK) {
        raise_status(status, "weft_init", 0);
    }
    if (rank == 0) {
        status = weft_get_unique_id(&id);
        if (status != WEFT_OK) {
            weft_finalize();
            raise_status(status, "weft_get_unique_id", 0);
        }
        store->set(kUniqueIdKey, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    } else {
        std::vector<uint8_t> bytes;
        try {
            bytes = store->get(kUniqueIdKey);
        } catch (...) {
            weft_finalize();
            throw;
        }
        if (bytes.size() != sizeof id.internal) {
            weft_finalize();
            C10_THROW_ERROR(DistBackendError,
                            c10::str("weft: the group's unique id in the store has ", bytes.size(),
                                     " bytes, not ", sizeof id.internal));
        }
        std::memcpy(id.internal, bytes.data(), sizeof id.internal);
    }
    status = weft_comm_init_rank(size, &id, rank, &comm_);
    if (status != WEFT_OK) {
        std::string detail = weft_last_error();
        weft_finalize();
        C10_THROW_ERROR(DistBackendError,
                        c10::str("weft: joining the group (rank ", rank, " of ", size,
                                 ") failed: ", weft_status_name(status), ": ", detail));
    }
    timeout_ = effective_timeout(timeout);
    status = weft_comm_set_timeout(comm_, timeout_.count() / 1000.0);
    if (status != WEFT_OK) {
        std::string detail = weft_last_error();
        weft_comm_destroy(comm_);
        weft_finalize();
        C10_THROW_ERROR(ValueError, c10::str("weft: the group's timeout of ", timeout.count(),
                                             " ms: ", detail));
    }
    worker_ = std::thread(&ProcessGroupWeft::worker_loop, this);
}

std::chrono::milliseconds
ProcessGroupWeft::effective_timeout(std::chrono::milliseconds torch_timeout) const
{
    char text[64];

    if (std::getenv("WEFT_TIMEOUT") != nullptr &&
        weft_config_get("TIMEOUT", text, sizeof text) == WEFT_OK) {
        const double s = std::strtod(text, nullptr);
        if (s > 0 && s < 1e9) {
            return std::chrono::milliseconds((int64_t)(s * 1000.0));
        }
        return std::chrono::hours(24 * 365 * 100); /* inf: a century, which weft takes as none */
    }
    return torch_timeout;
}

void ProcessGroupWeft::set_on_worker(const char *profile, std::function<void()> set)
{
    auto work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::UNKNOWN, profile,
                                              std::vector<at::Tensor>{}, std::nullopt);

    enqueue(work, [set] {
        set();
        return Pending{};
    });
    work->wait();
}

void ProcessGroupWeft::setTimeout(std::chrono::milliseconds timeout)
{
    const std::chrono::milliseconds effective = effective_timeout(timeout);
    weft_comm_t comm = comm_;

    /* in the queue: the communicator is the turn holder's to drive, and
     * operations queued before keep the deadline they were queued with */
    set_on_worker("weft:set_timeout", [this, comm, effective] {
        timeout_ = effective;
        check(weft_comm_set_timeout(comm, effective.count() / 1000.0), "set_timeout", 0);
    });
}

void ProcessGroupWeft::setReproducible(bool on)
{
    weft_comm_t comm = comm_;

    set_on_worker("weft:set_reproducible", [comm, on] {
        check(weft_comm_set_reproducible(comm, on ? 1 : 0), "set_reproducible", 0);
    });
}

ProcessGroupWeft::~ProcessGroupWeft()
{
    stop_worker();
    for (auto &lane : lanes_) {
        lane.second->drain();
    }
    weft_comm_destroy(comm_);
    lanes_.clear();
    weft_finalize();
}

c10::intrusive_ptr<c10d::Backend>
ProcessGroupWeft::create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         const std::chrono::duration<float> &timeout)
{
    return c10::make_intrusive<ProcessGroupWeft>(
        store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

void ProcessGroupWeft::shutdown()
{
    stop_worker();
}

void ProcessGroupWeft::stop_worker()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) {
        worker_.join();
    }
}

void ProcessGroupWeft::worker_loop()
{
    uint64_t seen = 0; /* the front operation at the last look */
    unsigned idle = 0; /* looks with nothing to do */
    std::unique_lock<std::mutex> lock(mutex_);

    for (;;) {
        if (driving_) {
            idle = 0; /* a caller runs the queue */
        } else if (!queue_.empty()) {
            idle = 0;
            const uint64_t front = queue_.front().first->seq_;
            if (stop_ || front == seen || !waited_ || queue_.size() > 1) {
                if (front == seen) {
                    waited_ = false; /* left for a look, and nobody came */
                }
                driving_ = true;
                run_next(lock);
                driving_ = false;
                /* what is queued behind waited for this one, not for a
                 * caller: run it next without a look in between */
                seen = queue_.empty() ? 0 : queue_.front().first->seq_;
                continue;
            }
            seen = front; /* left to a caller for one look */
        } else if (in_flight_count_ != 0) {
            idle = 0;
            driving_ = true;
            lock.unlock();
            const bool finished = poll_in_flight();
            lock.lock();
            in_flight_count_ = in_flight_.size();
            driving_ = false;
            if (finished) {
                continue;
            }
            cv_.wait_for(lock, kPollInterval);
            continue;
        } else if (stop_) {
            return; /* stopped, and everything queued has run */
        } else {
            idle++;
        }
        if (idle >= kLooksBeforeSleep) {
            sleeping_ = true;
            cv_.wait(lock); /* until enqueue, a turn given back with work left,
                               or stop_worker wakes it */
            sleeping_ = false;
            idle = 0;
        } else {
            cv_.wait_for(lock, kLook);
        }
    }
}

void ProcessGroupWeft::run_next(std::unique_lock<std::mutex> &lock)
{
    auto item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();

    std::exception_ptr error;
    Pending pending;
    try {
        pending = join_members(item.second(), item.first->members_);
    } catch (...) {
        error = std::current_exception();
    }
    if (error || (pending.req == nullptr && !pending.done)) {
        item.first->complete(error);
    } else {
        in_flight_.push_back(
            {item.first, std::move(pending), std::chrono::steady_clock::now() + timeout_});
    }
    poll_in_flight();
    lock.lock();
    in_flight_count_ = in_flight_.size();
}

void ProcessGroupWeft::run_until(const WorkWeft &work)
{
    std::unique_lock<std::mutex> lock(mutex_);

    /* while work is still queued (sequence numbers rise in queue order) and
     * no other thread holds the turn */
    while (!driving_ && !queue_.empty() && queue_.front().first->seq_ <= work.seq_) {
        waited_ = true;
        driving_ = true;
        run_next(lock);
        driving_ = false;
    }
    if (stop_ || !queue_.empty() || in_flight_count_ != 0) {
        cv_.notify_all(); /* the worker carries on with what is left */
    }
}

bool ProcessGroupWeft::poll_in_flight()
{
    bool finished = false;
    const auto now = std::chrono::steady_clock::now();

    for (size_t i = 0; i < in_flight_.size();) {
        InFlight &f = in_flight_[i];
        std::exception_ptr error;
        int done = 0;
        weft_status_t status = WEFT_OK;

        if (f.pending.req != nullptr) {
            status = weft_test(f.pending.req, &done);
        } else {
            done = f.pending.done() ? 1 : 0;
        }
        if (!done && status == WEFT_OK && now > f.deadline) {
            /* weft cannot withdraw the request while it may still write the
             * tensor: abort the communicator, which ends it (and every other
             * operation of the group) with WEFT_ERR_ABORTED; an enqueued
             * operation ends too, and its lane keeps the tensors until then */
            weft_comm_abort(comm_);
            if (f.pending.req != nullptr) {
                status = weft_wait(f.pending.req);
            }
            done = 1;
            try {
                C10_THROW_ERROR(DistBackendError,
                                c10::str("weft: ", f.pending.what, " #", f.work->seq_,
                                         " timed out after ", timeout_.count(),
                                         " ms (the group's timeout); the group is aborted"));
            } catch (...) {
                error = std::current_exception();
            }
        }
        if (!done && status == WEFT_OK) {
            i++;
            continue;
        }
        if (!error) {
            try {
                if (status != WEFT_OK) {
                    raise_status(status, f.pending.what.c_str(), f.work->seq_);
                }
                if (f.pending.req != nullptr &&
                    (f.work->retrieveOpType() == c10d::OpType::RECV ||
                     f.work->retrieveOpType() == c10d::OpType::RECVANYSOURCE)) {
                    int src = -1;

                    check(weft_request_source(f.pending.req, &src), f.pending.what.c_str(),
                          f.work->seq_);
                    f.work->source_.store(src);
                }
                if (f.pending.after) {
                    f.pending.after();
                }
            } catch (...) {
                error = std::current_exception();
            }
        }
        if (f.pending.req != nullptr) {
            weft_request_free(f.pending.req);
        }
        f.work->complete(error);
        in_flight_.erase(in_flight_.begin() + (long)i);
        finished = true;
    }
    return finished;
}

c10::intrusive_ptr<WorkWeft> ProcessGroupWeft::enqueue(c10::intrusive_ptr<WorkWeft> work, Run run)
{
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(!stop_, "weft: the process group was shut down");
        work->seq_ = ++next_seq_;
        work->group_.emplace(c10::intrusive_ptr<c10d::Backend>::unsafe_reclaim_from_nonowning(this));
        queue_.emplace_back(work, std::move(run));
        if (coalescing_) {
            coalesced_.push_back(work);
        }
        wake = sleeping_ || !waited_ || queue_.size() > 1;
    }
    if (wake) {
        cv_.notify_one();
    }
    return work;
}

c10::intrusive_ptr<WorkWeft>
ProcessGroupWeft::enqueue_collective(c10d::OpType type, const char *title,
                                     std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> inputs,
                                     std::function<void(uint64_t seq)> run)
{
    auto work = c10::make_intrusive<WorkWeft>(rank_, type, title, std::move(outputs),
                                              std::optional<std::vector<at::Tensor>>(inputs));
    const uint64_t *seq = &work->seq_;

    return enqueue(work, [run = std::move(run), seq] {
        run(*seq);
        return Pending{};
    });
}

/* ------------------------------------------------------ Device tensors */

Lane *ProcessGroupWeft::lane_for(const at::Tensor &t)
{
    const bool emu = lane_kind(t) == LaneKind::emu;
    const std::pair<int, int> key =
        emu ? std::make_pair(-1, -1)
            : std::make_pair((int)t.device().type(), (int)t.device().index());
    std::lock_guard<std::mutex> lock(lanes_mutex_);
    std::unique_ptr<Lane> &lane = lanes_[key];

    if (!lane) {
        lane = make_lane(t);
    }
    return lane.get();
}

c10::intrusive_ptr<WorkWeft>
ProcessGroupWeft::enqueue_device(c10d::OpType type, const char *title,
                                 std::vector<at::Tensor> outputs, std::vector<at::Tensor> inputs,
                                 std::function<void(Lane &lane, uint64_t seq)> run,
                                 std::vector<at::Tensor> scratch, c10::intrusive_ptr<WorkWeft> work)
{
    std::vector<at::Tensor> used = outputs;
    used.insert(used.end(), inputs.begin(), inputs.end());
    used.insert(used.end(), scratch.begin(), scratch.end());
    /* the lane of the first tensor with memory (an empty one has none to tell) */
    auto it = std::find_if(used.begin(), used.end(), [](const at::Tensor &t) {
        return t.defined() && lane_kind(t) != LaneKind::none;
    });
    TORCH_CHECK(it != used.end(), "weft: ", title, ": no device tensor with memory");
    const at::Tensor like = *it;
    Lane *lane = lane_for(like);
    lane->prepare(used);

    std::vector<c10::Device> devices;
    std::optional<c10::Device> device; /* the turn holder enqueues on it */
    if (!lane->host_completed()) {
        devices.push_back(like.device());
        device = like.device();
    }
    if (!work) {
        work = c10::make_intrusive<WorkWeft>(rank_, type, title, std::move(outputs),
                                             std::optional<std::vector<at::Tensor>>(inputs),
                                             std::move(devices));
    }
    WorkWeft *w = work.get(); /* queued with its Run: alive while that runs */
    const char *call = std::strncmp(title, "weft:", 5) == 0 ? title + 5 : title;

    return enqueue(work, [this, lane, w, call, device, run = std::move(run),
                          used = std::move(used)] {
        for (const InFlight &f : in_flight_) {
            /* weft refuses to enqueue on a communicator with requests in
             * flight: waiting for them here could wait for a peer's send
             * queued behind its own device operation */
            TORCH_CHECK(f.pending.req == nullptr, "weft: ", call,
                        " of a device tensor: the group has a point-to-point operation in "
                        "flight (",
                        f.pending.what, "); wait for it first");
        }
        c10::OptionalDeviceGuard guard(device);
        run(*lane, w->seq_);
        std::shared_ptr<DeviceDone> end = lane->mark(used);
        if (!lane->host_completed()) {
            w->device_ = std::move(end);
            return Pending{};
        }
        Pending p;
        p.done = [end] { return end->query(); };
        p.after = [this, lane, w, call] { check_device(lane, call, w->seq_); };
        p.what = call;
        return p;
    });
}

void ProcessGroupWeft::check_device(Lane *lane, const char *what, uint64_t seq)
{
    const weft_status_t status = weft_stream_synchronize(lane->stream());

    if (status != WEFT_OK) {
        if (device_error_.empty()) {
            device_error_ = c10::str(what, " #", seq, ": ", weft_status_name(status), ": ",
                                     weft_last_error());
        }
        raise_status(status, what, seq);
    }
    if (!device_error_.empty()) {
        C10_THROW_ERROR(DistBackendError,
                        c10::str("weft: ", what, " #", seq,
                                 " failed: an earlier device operation of the group failed (",
                                 device_error_, ")"));
    }
}

/* ---------------------------------------------------------- Coalescing */

ProcessGroupWeft::Pending
ProcessGroupWeft::join_members(Pending p, const std::vector<c10::intrusive_ptr<WorkWeft>> &members)
{
    if (members.empty()) {
        return p;
    }
    p.done = [inner = std::move(p.done), members] {
        return (!inner || inner()) &&
               std::all_of(members.begin(), members.end(), [](const auto &m) {
                   return m->done_.load(std::memory_order_acquire);
               });
    };
    p.after = [after = std::move(p.after), members] {
        if (after) {
            after();
        }
        for (const auto &m : members) {
            if (std::exception_ptr e = m->exception()) {
                std::rethrow_exception(e);
            }
        }
    };
    if (p.what.empty()) {
        p.what = c10::str("coalesced operations (", members.size(), ")");
    }
    return p;
}

c10::intrusive_ptr<WorkWeft> ProcessGroupWeft::take_region(std::vector<Held> *held,
                                                           std::string *refused)
{
    coalescing_ = false;
    coalesced_.clear();
    held->swap(held_);
    held_.clear();
    region_first_ = at::Tensor();
    refused->swap(refused_);
    refused_.clear();
    return std::move(held_work_);
}

void ProcessGroupWeft::fail_held(const c10::intrusive_ptr<WorkWeft> &work, const std::string &why,
                                 size_t held, bool value_error)
{
    const std::string msg =
        c10::str("weft: ", why, "; the region's ", held,
                 " sends and receives were dropped (none was sent)");
    try {
        if (value_error) {
            C10_THROW_ERROR(ValueError, msg);
        }
        C10_THROW_ERROR(DistBackendError, msg);
    } catch (...) {
        work->complete(std::current_exception());
    }
    work->held_.store(false, std::memory_order_release);
}

void ProcessGroupWeft::startCoalescing()
{
    c10::intrusive_ptr<WorkWeft> dropped;
    std::vector<Held> held;
    std::string refused;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(!stop_, "weft: the process group was shut down");
        if (coalescing_) {
            dropped = take_region(&held, &refused);
        }
        coalescing_ = true;
    }
    if (dropped) {
        fail_held(dropped, "a coalescing region was left without endCoalescing", held.size(),
                  false);
    }
}

namespace {

/* What a coalescing region's parts must share: the lane (none for CPU tensors) and device. */
bool same_kind(const at::Tensor &a, const at::Tensor &b)
{
    auto kind = [](const at::Tensor &t) {
        return t.defined() ? lane_kind(t) : LaneKind::none;
    };
    return kind(a) == kind(b) && (kind(a) == LaneKind::none || a.device() == b.device());
}

} // namespace

c10::intrusive_ptr<WorkWeft> ProcessGroupWeft::hold_p2p(const at::Tensor &t, int peer, int tag,
                                                        bool send, const char *call)
{
    /* an empty CPU tensor has no memory to tell emu from host: it joins any region */
    const bool empty_cpu = t.defined() && t.device().is_cpu() && t.numel() == 0;
    const bool device = !empty_cpu && t.defined() && lane_kind(t) != LaneKind::none;
    std::lock_guard<std::mutex> lock(mutex_);

    if (!coalescing_) {
        return {};
    }
    if (!held_work_) {
        std::vector<c10::Device> devices; /* a torch device's: a stream-aware future */
        if (device && lane_kind(t) == LaneKind::torch_device) {
            devices.push_back(t.device());
        }
        held_work_ = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::COALESCED,
                                                   "weft:coalesced", std::vector<at::Tensor>{},
                                                   std::nullopt, std::move(devices));
        held_work_->held_.store(true, std::memory_order_release);
    }
    if (!refused_.empty()) {
        return held_work_; /* dropped at the end with the rest */
    }
    if (!empty_cpu && region_first_.defined() && !same_kind(region_first_, t)) {
        refused_ = c10::str(call, " of a tensor ",
                            device ? c10::str("on ", t.device(), " in device memory")
                                   : std::string("in CPU memory"),
                            " in a coalescing region whose first send or receive is of one ",
                            device ? "elsewhere" : "in device memory",
                            ": a region takes one device's tensors");
    } else if (device && peer == WEFT_ANY_SOURCE) {
        refused_ = c10::str(call, " of a device tensor from any rank in a coalescing region "
                                  "(name the source)");
    } else if (device && !t.is_contiguous()) {
        refused_ = c10::str(call, " of a non-contiguous device tensor in a coalescing region "
                                  "(pass a contiguous one)");
    } else {
        held_.push_back({t, peer, tag, send});
        if (!send) {
            held_work_->add_output(t);
        }
        if (!empty_cpu && !region_first_.defined()) {
            region_first_ = t;
        }
    }
    return held_work_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::endCoalescing()
{
    std::vector<c10::intrusive_ptr<WorkWeft>> members;
    std::vector<Held> held;
    std::string refused;
    c10::intrusive_ptr<WorkWeft> work;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(coalescing_, "weft: endCoalescing without an open coalescing region "
                                 "(startCoalescing)");
        members.swap(coalesced_);
        work = take_region(&held, &refused);
    }
    if (!refused.empty()) {
        /* a bad part: nothing of the region's sends and receives is sent */
        fail_held(work, refused, held.size(), true);
        return work;
    }
    if (!work) {
        /* no send or receive: one Work for what ran inside the region */
        work = c10::make_intrusive<WorkWeft>(rank_, c10d::OpType::COALESCED, "weft:coalesced",
                                             std::vector<at::Tensor>{}, std::nullopt);
        if (members.empty()) {
            work->complete(nullptr);
            return work;
        }
    }
    const auto with_memory = std::find_if(held.begin(), held.end(), [](const Held &h) {
        return h.t.defined() && lane_kind(h.t) != LaneKind::none;
    });
    if (with_memory == held.end()) {
        /* CPU tensors: posted now, as outside a region, in call order */
        for (Held &h : held) {
            std::vector<at::Tensor> tensors{h.t};
            c10::intrusive_ptr<c10d::Work> w =
                h.send ? send(tensors, h.peer, h.tag)
                       : receive(tensors, h.peer, h.tag,
                                 h.peer == WEFT_ANY_SOURCE ? "recv_anysource" : "recv");
            members.push_back(c10::static_intrusive_pointer_cast<WorkWeft>(w));
        }
        work->members_ = std::move(members);
        auto queued = enqueue(work, [] { return Pending{}; });
        work->held_.store(false, std::memory_order_release);
        return queued;
    }
    /* device tensors: one weft group on the lane's stream */
    std::vector<at::Tensor> tensors; /* what the lane keeps (an empty CPU part has nothing) */
    for (const Held &h : held) {
        if (!(h.t.device().is_cpu() && h.t.numel() == 0)) {
            tensors.push_back(h.t);
        }
    }
    work->members_ = std::move(members);
    weft_comm_t comm = comm_;
    auto queued = enqueue_device(
        c10d::OpType::COALESCED, "weft:coalesced", {}, std::move(tensors),
        [comm, held = std::move(held)](Lane &lane, uint64_t seq) {
            weft_status_t status = weft_group_start();
            std::string detail;

            check(status, "coalesced", seq);
            for (const Held &h : held) {
                status = h.send ? weft_send_enqueue(h.t.data_ptr(), (size_t)h.t.nbytes(),
                                                    WEFT_UINT8, h.peer, h.tag, comm, lane.stream())
                                : weft_recv_enqueue(h.t.data_ptr(), (size_t)h.t.nbytes(),
                                                    WEFT_UINT8, h.peer, h.tag, comm, lane.stream());
                if (status != WEFT_OK) {
                    detail = weft_last_error();
                    break;
                }
            }
            const weft_status_t end = weft_group_end();
            if (status == WEFT_OK && end != WEFT_OK) {
                status = end;
                detail = weft_last_error();
            }
            if (status != WEFT_OK) {
                /* the parts before the failed one are queued: a torn batch,
                 * which the peers would wait for: abort the group */
                weft_comm_abort(comm);
                C10_THROW_ERROR(DistBackendError,
                                c10::str("weft: coalesced #", seq, " failed: ",
                                         weft_status_name(status), ": ", detail,
                                         "; the group is aborted"));
            }
        },
        {}, work);
    work->held_.store(false, std::memory_order_release);
    return queued;
}

} // namespace weft_torch
