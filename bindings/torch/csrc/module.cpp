/* The Python module weft_torch._C: the backend's creator, which
 * weft_torch/__init__.py registers with torch.distributed. */
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "device.hpp"
#include "process_group.hpp"

PYBIND11_MODULE(_C, m)
{
    m.doc() = "weft as a torch.distributed backend (see weft_torch)";
    m.def("create_backend", &weft_torch::ProcessGroupWeft::create, pybind11::arg("store"),
          pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
          "A weft process group over store's group (collective over its ranks).");
    m.def(
        "set_reproducible",
        [](const c10::intrusive_ptr<c10d::Backend> &backend, bool on) {
            auto *pg = dynamic_cast<weft_torch::ProcessGroupWeft *>(backend.get());
            TORCH_CHECK_VALUE(pg != nullptr, "weft_torch.set_reproducible: the group's CPU "
                                             "backend is not weft");
            pg->setReproducible(on);
        },
        pybind11::arg("backend"), pybind11::arg("on"),
        /* the worker may need the GIL to complete what is queued before */
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "weft's reproducible mode for the group's reductions from now on.");
    m.def("emu_empty", &weft_torch::emu_empty, pybind11::arg("numel"), pybind11::arg("dtype"),
          "A 1-d CPU tensor in weft's emulated device memory.");
    m.def(
        "weft_version",
        [] {
            return std::to_string(WEFT_VERSION_MAJOR) + "." + std::to_string(WEFT_VERSION_MINOR) +
                   "." + std::to_string(WEFT_VERSION_PATCH);
        },
        "The weft version the extension was built against.");
}
