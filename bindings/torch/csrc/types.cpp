#include "types.hpp"

#include <c10/util/Exception.h>

namespace weft_torch {

namespace {

const char *op_name(c10d::ReduceOp::RedOpType op)
{
    switch (op) {
    case c10d::ReduceOp::SUM:
        return "SUM";
    case c10d::ReduceOp::AVG:
        return "AVG";
    case c10d::ReduceOp::PRODUCT:
        return "PRODUCT";
    case c10d::ReduceOp::MIN:
        return "MIN";
    case c10d::ReduceOp::MAX:
        return "MAX";
    case c10d::ReduceOp::BAND:
        return "BAND";
    case c10d::ReduceOp::BOR:
        return "BOR";
    case c10d::ReduceOp::BXOR:
        return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
        return "PREMUL_SUM";
    default:
        return "UNUSED";
    }
}

bool is_bitwise(c10d::ReduceOp::RedOpType op)
{
    return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

/* weft's type for t, or false where weft has none of that width. */
bool direct_dtype(at::ScalarType t, weft_dtype_t *dtype_p)
{
    switch (t) {
    case at::kFloat:
        *dtype_p = WEFT_FLOAT32;
        return true;
    case at::kDouble:
        *dtype_p = WEFT_FLOAT64;
        return true;
    case at::kHalf:
        *dtype_p = WEFT_FLOAT16;
        return true;
    case at::kBFloat16:
        *dtype_p = WEFT_BFLOAT16;
        return true;
    case at::kChar:
        *dtype_p = WEFT_INT8;
        return true;
    case at::kByte:
        *dtype_p = WEFT_UINT8;
        return true;
    case at::kInt:
        *dtype_p = WEFT_INT32;
        return true;
    case at::kLong:
        *dtype_p = WEFT_INT64;
        return true;
    case at::kUInt32:
        *dtype_p = WEFT_UINT32;
        return true;
    case at::kUInt64:
        *dtype_p = WEFT_UINT64;
        return true;
    case at::kFloat8_e4m3fn: /* both saturate as torch's conversion does */
        *dtype_p = WEFT_FLOAT8_E4M3;
        return true;
    case at::kFloat8_e5m2:
        *dtype_p = WEFT_FLOAT8_E5M2;
        return true;
    default:
        return false;
    }
}

weft_op_t direct_op(c10d::ReduceOp::RedOpType op)
{
    switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PREMUL_SUM:
        return WEFT_SUM;
    case c10d::ReduceOp::AVG:
        return WEFT_AVG;
    case c10d::ReduceOp::PRODUCT:
        return WEFT_PROD;
    case c10d::ReduceOp::MIN:
        return WEFT_MIN;
    case c10d::ReduceOp::MAX:
        return WEFT_MAX;
    case c10d::ReduceOp::BAND:
        return WEFT_BAND;
    case c10d::ReduceOp::BOR:
        return WEFT_BOR;
    default:
        return WEFT_BXOR;
    }
}

} // namespace

ReducePlan reduce_plan(at::ScalarType t, const c10d::ReduceOp &reduce_op)
{
    const auto op = reduce_op.op_;
    ReducePlan plan{};

    TORCH_CHECK_VALUE(op <= c10d::ReduceOp::PREMUL_SUM, "weft: unknown ReduceOp ", (int)op);
    if (t == at::kBool) {
        /* bools reduce as bytes of 0 and 1: a sum or max is "any", a product
         * or min is "all" */
        TORCH_CHECK_VALUE(op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM,
                          "weft: Cannot use ReduceOp.", op_name(op), " with boolean inputs");
        plan.dtype = WEFT_UINT8;
        switch (op) {
        case c10d::ReduceOp::PRODUCT:
        case c10d::ReduceOp::MIN:
        case c10d::ReduceOp::BAND:
            plan.op = WEFT_BAND;
            break;
        case c10d::ReduceOp::BXOR:
            plan.op = WEFT_BXOR;
            break;
        default:
            plan.op = WEFT_BOR;
            break;
        }
        return plan;
    }
    if (at::isComplexType(t)) {
        TORCH_CHECK_VALUE(op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG ||
                              op == c10d::ReduceOp::PREMUL_SUM,
                          "weft: ReduceOp.", op_name(op), " is not supported on complex tensors");
        plan = reduce_plan(c10::toRealValueType(t), reduce_op);
        plan.complex = true;
        return plan;
    }
    const bool floating = at::isFloatingType(t);
    TORCH_CHECK_VALUE(!(floating && is_bitwise(op)), "weft: Cannot use ReduceOp.", op_name(op),
                      " with non-integral dtype ", t);
    TORCH_CHECK_VALUE(floating || op != c10d::ReduceOp::PREMUL_SUM,
                      "weft: ReduceOp.PREMUL_SUM needs a floating-point tensor, not ", t);
    TORCH_CHECK_VALUE(!(at::isFloat8Type(t) && op == c10d::ReduceOp::PREMUL_SUM),
                      "weft: ReduceOp.PREMUL_SUM of ", t,
                      " is not supported (torch does not multiply 8-bit float tensors)");
    if (!direct_dtype(t, &plan.dtype)) {
        if (t == at::kShort) {
            plan.wide_type = at::kInt;
        } else if (t == at::kUInt16) {
            plan.wide_type = at::kUInt32;
        } else {
            TORCH_CHECK_VALUE(false, "weft: reductions of dtype ", t, " are not supported");
        }
        plan.widen = true;
        direct_dtype(plan.wide_type, &plan.dtype);
    }
    plan.op = direct_op(op);
    if (op == c10d::ReduceOp::PREMUL_SUM) {
        auto *supp = dynamic_cast<c10d::PreMulSumSupplement *>(reduce_op.supplement_.get());
        TORCH_CHECK_VALUE(supp != nullptr, "weft: ReduceOp.PREMUL_SUM without its factor");
        plan.premul = true;
        if (supp->tensor_factor.defined()) {
            plan.factor_tensor = supp->tensor_factor;
        } else {
            plan.factor = supp->double_factor;
        }
    }
    return plan;
}

at::Tensor reduce_buffer(const at::Tensor &t, const ReducePlan &plan)
{
    at::Tensor view = plan.complex ? at::view_as_real(t) : t;
    at::Tensor buf;

    if (plan.widen) {
        buf = view.to(plan.wide_type).contiguous();
    } else if (plan.premul) {
        buf = view.clone(at::MemoryFormat::Contiguous);
    } else {
        buf = as_contiguous(view);
    }
    if (plan.premul) {
        if (plan.factor_tensor.defined()) {
            buf.mul_(plan.factor_tensor.to(buf.scalar_type()));
        } else {
            buf.mul_(plan.factor);
        }
    }
    return buf;
}

void reduce_result(const at::Tensor &t, const ReducePlan &plan, const at::Tensor &buf)
{
    copy_back(plan.complex ? at::view_as_real(t) : t, buf);
}

at::Tensor as_contiguous(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

void copy_back(const at::Tensor &dst, const at::Tensor &buf)
{
    if (buf.data_ptr() == dst.data_ptr() && buf.scalar_type() == dst.scalar_type() &&
        buf.sizes() == dst.sizes() && buf.strides() == dst.strides()) {
        return;
    }
    dst.copy_(buf.reshape(dst.sizes()));
}

void check_cpu_tensor(const at::Tensor &t, const char *call)
{
    TORCH_CHECK_VALUE(t.defined(), "weft: ", call, ": a tensor is undefined");
    TORCH_CHECK_VALUE(t.device().is_cpu(), "weft: ", call, ": takes CPU tensors, got one on ",
                      t.device(),
                      " (device tensors: every collective, send and recv, one tensor or a "
                      "list of one device)");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "weft: ", call,
                      ": only dense (strided) tensors are supported, got layout ", t.layout());
}

const at::Tensor &single_cpu_tensor(const std::vector<at::Tensor> &tensors, const char *call)
{
    TORCH_CHECK_VALUE(tensors.size() == 1, "weft: ", call, " takes one tensor per process, got ",
                      tensors.size());
    const at::Tensor &t = tensors[0];
    check_cpu_tensor(t, call);
    return t;
}

void check_root(int64_t root, int size, const char *call)
{
    TORCH_CHECK_VALUE(root >= 0 && root < size, "weft: ", call, ": root rank ", root,
                      " is out of range for a group of ", size);
}

void raise_status(weft_status_t status, const char *call, uint64_t seq)
{
    /* a timeout says "Timed out", as gloo's do (what torch's own tests and
     * its users' code look for), then weft's status and diagnosis */
    if (status == WEFT_ERR_TIMEOUT) {
        C10_THROW_ERROR(DistBackendError, c10::str("weft: ", call, " #", seq, " failed: Timed out (",
                                                   weft_status_name(status), "): ",
                                                   weft_last_error()));
    }
    C10_THROW_ERROR(DistBackendError,
                    c10::str("weft: ", call, " #", seq, " failed: ", weft_status_name(status), " (",
                             weft_status_string(status), "): ", weft_last_error()));
}

} // namespace weft_torch
