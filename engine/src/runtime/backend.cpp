// backend.cpp — the checks every backend's ops share: one place says what shapes and dtypes an op
// takes, so that the CPU and CUDA backends cannot disagree about it.
#include "tp/runtime/backend.h"

#include <fmt/format.h>

#include <cmath>

namespace tp {

namespace {

std::string shape(const Tensor& t) { return fmt::format("[{}, {}] {}", t.rows, t.cols, dtypeName(t.dtype)); }

Status bad(const char* op, const std::string& what) { return invalidArgument(fmt::format("{}: {}", op, what)); }

} // namespace

const char* deviceKindName(DeviceKind d) { return d == DeviceKind::Cuda ? "cuda" : "cpu"; }

// The checks of one op call: each line names what must hold.
class OpCheck
{
public:
    OpCheck(const char* op, const Backend& be)
        : m_op(op)
        , m_be(be)
    {
    }
    // On this device, in `dtype` (default: the storage dtype).
    OpCheck& on(const char* name, const Tensor& t, std::optional<DType> dtype = {})
    {
        const DType want = dtype.value_or(m_be.storage());
        if (m_status.ok() && (t.device != m_be.device() || t.dtype != want))
            m_status = bad(m_op, fmt::format("{} is {} on {}, expected {} on {}", name, shape(t), deviceKindName(t.device),
                                             dtypeName(want), deviceKindName(m_be.device())));
        if (m_status.ok() && (t.rows < 0 || t.cols < 0 || t.stride < t.cols || (!t.data && !t.empty())))
            m_status = bad(m_op, fmt::format("{} {} is not a valid view (stride {})", name, shape(t), t.stride));
        return *this;
    }
    OpCheck& dense(const char* name, const Tensor& t)
    {
        if (m_status.ok() && !t.isContiguous())
            m_status = bad(m_op, fmt::format("{} must be contiguous, it is a view of stride {}", name, t.stride));
        return *this;
    }
    // `what` is called only when the check fails: any callable, taken as it is (a std::function
    // would allocate for every op call whose lambda captures more than two pointers).
    template<typename What>
    OpCheck& require(bool ok, const What& what)
    {
        if (m_status.ok() && !ok)
            m_status = bad(m_op, what());
        return *this;
    }
    Status status() const { return m_status; }

private:
    const char* m_op;
    const Backend& m_be;
    Status m_status;
};

Status Backend::upload(const void* host, const Tensor& dst)
{
    TP_RETURN_IF_ERROR(OpCheck("upload", *this).on("dst", dst, dst.dtype).dense("dst", dst).status());
    return dst.empty() ? Status() : doUpload(host, dst);
}

Status Backend::download(const Tensor& src, void* host)
{
    TP_RETURN_IF_ERROR(OpCheck("download", *this).on("src", src, src.dtype).dense("src", src).status());
    return src.empty() ? Status() : doDownload(src, host);
}

Status Backend::gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y, const Tensor& scratch)
{
    OpCheck c("gemm", *this);
    c.on("x", x).on("w", w).dense("w", w).on("y", y, y.dtype);
    c.require(y.dtype == storage() || y.dtype == DType::F32, [&] { return fmt::format("y is {}", shape(y)); });
    c.require(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows,
              [&] { return fmt::format("x {} · w {}ᵀ does not give y {}", shape(x), shape(w), shape(y)); });
    if (bias)
        c.on("bias", *bias).require(bias->rows == 1 && bias->cols == w.rows,
                                    [&] { return fmt::format("bias {} for {} outputs", shape(*bias), w.rows); });
    c.require(scratch.bytes() >= gemmScratchBytes(x.rows, x.cols, w.rows),
              [&] { return fmt::format("scratch of {} bytes, {} needed", scratch.bytes(), gemmScratchBytes(x.rows, x.cols, w.rows)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doGemm(x, w, bias, y, scratch);
}

Status Backend::rmsNorm(const Tensor& x, const Tensor* w, const Tensor& y, std::int64_t group, double eps, double offset)
{
    OpCheck c("rms_norm", *this);
    c.on("x", x).dense("x", x).on("y", y).dense("y", y);
    if (w)
        c.on("w", *w).require(w->rows == 1 && (w->cols == group || w->cols == x.cols),
                              [&] { return fmt::format("w {} for groups of {} in rows of {}", shape(*w), group, x.cols); });
    c.require(group > 0 && x.cols % group == 0 && y.rows == x.rows && y.cols == x.cols,
              [&] { return fmt::format("x {} in groups of {} into y {}", shape(x), group, shape(y)); });
    c.require(std::isfinite(eps) && eps >= 0 && std::isfinite(offset), [&] { return fmt::format("eps {}, offset {}", eps, offset); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doRmsNorm(x, w, y, group, static_cast<float>(eps), static_cast<float>(offset));
}

Status Backend::layerNorm(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y, double eps, double offset)
{
    OpCheck c("layer_norm", *this);
    c.on("x", x).dense("x", x).on("y", y).dense("y", y);
    for (const auto& [name, p] : {std::pair{"w", w}, {"b", b}})
        if (p)
            c.on(name, *p).require(p->rows == 1 && p->cols == x.cols, [&] { return fmt::format("{} {} for rows of {}", name, shape(*p), x.cols); });
    c.require(x.cols > 0 && y.rows == x.rows && y.cols == x.cols, [&] { return fmt::format("x {} into y {}", shape(x), shape(y)); });
    c.require(std::isfinite(eps) && eps >= 0 && std::isfinite(offset), [&] { return fmt::format("eps {}, offset {}", eps, offset); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doLayerNorm(x, w, b, y, static_cast<float>(eps), static_cast<float>(offset));
}

Status Backend::rope(const Tensor& x, const Tensor& y, std::int64_t headDim, const Tensor& positions, const Tensor& table,
                     bool interleaved, bool leading)
{
    OpCheck c("rope", *this);
    c.on("x", x).dense("x", x).on("y", y).dense("y", y).on("positions", positions, DType::I32).on("table", table, DType::F32);
    c.require(headDim > 0 && headDim % 2 == 0 && x.cols % headDim == 0 && y.rows == x.rows && y.cols == x.cols,
              [&] { return fmt::format("x {} into y {} with head_dim {}", shape(x), shape(y), headDim); });
    c.require(positions.rows == 1 && positions.cols == x.rows && table.cols > 0 && table.cols % 2 == 0 && table.cols <= headDim,
              [&] { return fmt::format("positions {} and table {} for {} tokens of head_dim {}", shape(positions),
                                       shape(table), x.rows, headDim); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doRope(x, y, headDim, positions, table, interleaved, leading);
}

Status Backend::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const AttentionShape& s,
                          const Tensor& scratch, const Tensor* sinks)
{
    OpCheck c("attention", *this);
    c.on("q", q).dense("q", q).on("k", k).dense("k", k).on("v", v).dense("v", v).on("y", y).dense("y", y);
    const std::int64_t n = s.batch * s.seq, kn = s.batch * s.rows();
    c.require(s.batch >= 0 && s.seq >= 0 && s.headDim > 0 && s.vHeadDim >= 0 && s.kvHeads >= 0 && s.heads >= 0
                  && (s.kvHeads == 0 ? s.heads == 0 : s.heads % s.kvHeads == 0),
              [&] { return fmt::format("{} query heads over {} kv heads", s.heads, s.kvHeads); });
    c.require(s.past >= 0 && s.keyRows >= 0 && s.keys() <= s.rows(),
              [&] { return fmt::format("{} cached keys and {} queries in {} rows per sequence", s.past, s.seq, s.rows()); });
    c.require(q.rows == n && k.rows == kn && v.rows == kn && y.rows == n && q.cols == s.heads * s.headDim
                  && y.cols == s.heads * s.vDim() && k.cols == s.kvHeads * s.headDim && v.cols == s.kvHeads * s.vDim(),
              [&] { return fmt::format("q {}, k {}, v {}, y {} for {} × {} queries over {} key rows, {}/{} heads of {} "
                                       "(values {})",
                                       shape(q), shape(k), shape(v), shape(y), s.batch, s.seq, s.rows(), s.heads,
                                       s.kvHeads, s.headDim, s.vDim()); });
    c.require(std::isfinite(s.scale) && s.scale > 0, [&] { return fmt::format("scale {}", s.scale); });
    c.require(s.window >= 0 && s.chunk >= 0 && std::isfinite(s.softcap) && s.softcap >= 0,
              [&] { return fmt::format("window {}, chunk {}, softcap {}", s.window, s.chunk, s.softcap); });
    if (sinks)
        c.on("sinks", *sinks).dense("sinks", *sinks).require(sinks->rows == 1 && sinks->cols == s.heads, [&] {
            return fmt::format("sinks {} for {} heads", shape(*sinks), s.heads);
        });
    c.require(scratch.bytes() >= attentionScratchBytes(s), [&] { return fmt::format("scratch of {} bytes", scratch.bytes()); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doAttention(q, k, v, y, s, scratch, sinks);
}

Status Backend::mlaKv(const Tensor& kv, const Tensor& rope, const Tensor& k, const Tensor& v, std::int64_t heads,
                      std::int64_t nope)
{
    OpCheck c("mla_kv", *this);
    c.on("kv", kv).dense("kv", kv).on("rope", rope).on("k", k).dense("k", k).on("v", v).dense("v", v);
    const std::int64_t d = rope.cols;
    const std::int64_t vd = heads > 0 ? kv.cols / heads - nope : 0;
    c.require(heads > 0 && nope >= 0 && kv.cols % heads == 0 && vd > 0 && rope.rows == kv.rows && k.rows == kv.rows
                  && v.rows == kv.rows && k.cols == heads * (nope + d) && v.cols == heads * vd,
              [&] { return fmt::format("kv {} and rope {} of {} heads ({} nope) into k {}, v {}", shape(kv), shape(rope),
                                       heads, nope, shape(k), shape(v)); });
    TP_RETURN_IF_ERROR(c.status());
    return k.empty() ? Status() : doMlaKv(kv, rope, k, v, heads, nope);
}

Status Backend::temperature(const Tensor& x, const Tensor& y, const Tensor& positions, double floorScale, double attnScale)
{
    OpCheck c("temperature", *this);
    c.on("x", x).dense("x", x).on("y", y).dense("y", y).on("positions", positions, DType::I32);
    c.require(y.rows == x.rows && y.cols == x.cols && positions.rows == 1 && positions.cols == x.rows,
              [&] { return fmt::format("x {} into y {} at positions {}", shape(x), shape(y), shape(positions)); });
    c.require(std::isfinite(floorScale) && floorScale > 0 && std::isfinite(attnScale),
              [&] { return fmt::format("floor scale {}, attention scale {}", floorScale, attnScale); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doTemperature(x, y, positions, static_cast<float>(floorScale), static_cast<float>(attnScale));
}

Status Backend::gatedAct(const Tensor& gate, const Tensor& up, const Tensor& y, Activation act, std::int64_t span)
{
    OpCheck c("gated_act", *this);
    c.on("gate", gate).on("up", up).on("y", y).dense("y", y);
    c.require(span >= 1 && gate.rows == up.rows && gate.cols * span == up.cols && y.rows == up.rows && y.cols == up.cols,
              [&] { return fmt::format("gate {} spanning {}, up {}, y {}", shape(gate), span, shape(up), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doGatedAct(gate, up, y, act, span);
}

Status Backend::activation(const Tensor& x, const Tensor& y, Activation act)
{
    OpCheck c("activation", *this);
    c.on("x", x).on("y", y).dense("y", y);
    c.require(y.rows == x.rows && y.cols == x.cols, [&] { return fmt::format("x {}, y {}", shape(x), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doActivation(x, y, act);
}

Status Backend::causalConv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& state, const Tensor& y,
                           std::optional<Activation> act, bool fresh)
{
    OpCheck c("causal_conv", *this);
    c.on("x", x).on("w", w).dense("w", w).on("state", state).on("y", y);
    const std::int64_t K = w.cols, C = x.cols;
    c.require(K > 0 && w.rows == C && state.cols == C && state.rows % K == 0 && y.rows == x.rows && y.cols == C,
              [&] { return fmt::format("x {}, w {}, state {}, y {}", shape(x), shape(w), shape(state), shape(y)); });
    const std::int64_t batch = K > 0 ? state.rows / K : 0;
    c.require(batch > 0 ? x.rows % batch == 0 : x.rows == 0,
              [&] { return fmt::format("x {} is not {} sequences of equal length", shape(x), batch); });
    if (bias)
        c.on("bias", *bias).require(bias->rows == 1 && bias->cols == C, [&] { return fmt::format("bias {} for {} channels", shape(*bias), C); });
    c.require(!act || *act == Activation::Silu, [&] { return fmt::format("activation {}", activationName(*act)); });
    TP_RETURN_IF_ERROR(c.status());
    return state.empty() ? Status() : doCausalConv(x, w, bias, state, y, act, fresh);
}

Status Backend::ssmScan(const Tensor& x, const Tensor& dt, const Tensor& B, const Tensor& C, const Tensor& aLog, const Tensor& D,
                        const Tensor& dtBias, const Tensor& state, const Tensor& y, const ScanShape& s)
{
    OpCheck c("ssm_scan", *this);
    c.on("x", x).on("dt", dt).on("B", B).on("C", C).on("a_log", aLog).on("D", D).on("dt_bias", dtBias);
    c.on("state", state, DType::F32).dense("state", state).on("y", y).dense("y", y);
    c.require(s.batch > 0 && s.heads > 0 && s.headDim > 0 && s.state > 0 && s.groups > 0 && s.heads % s.groups == 0,
              [&] { return fmt::format("{} heads of {} in {} groups, state {}, batch {}", s.heads, s.headDim, s.groups, s.state, s.batch); });
    TP_RETURN_IF_ERROR(c.status());
    const std::int64_t n = y.rows, width = s.heads * s.headDim, gs = s.groups * s.state;
    c.require(n % s.batch == 0 && x.rows == n && dt.rows == n && B.rows == n && C.rows == n && x.cols == width && y.cols == width
                  && dt.cols == s.heads && B.cols == gs && C.cols == gs,
              [&] { return fmt::format("x {}, dt {}, B {}, C {}, y {} for {} sequences of {} heads of {}, {} groups of state {}", shape(x),
                                       shape(dt), shape(B), shape(C), shape(y), s.batch, s.heads, s.headDim, s.groups, s.state); });
    for (const auto& [name, t] : {std::pair{"a_log", &aLog}, {"D", &D}, {"dt_bias", &dtBias}})
        c.require(t->rows == 1 && t->cols == s.heads, [&] { return fmt::format("{} {} for {} heads", name, shape(*t), s.heads); });
    c.require(state.rows == s.batch && state.cols == width * s.state,
              [&] { return fmt::format("state {} for {} sequences of {} × {}", shape(state), s.batch, width, s.state); });
    c.require(std::isfinite(s.dtMin) && s.dtMin >= 0 && !std::isnan(s.dtMax) && s.dtMax >= s.dtMin,
              [&] { return fmt::format("time step limits [{}, {}]", s.dtMin, s.dtMax); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doSsmScan(x, dt, B, C, aLog, D, dtBias, state, y, s);
}

Status Backend::deltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a, const Tensor& aLog,
                          const Tensor& dtBias, const Tensor& state, const Tensor& y, const DeltaShape& s)
{
    OpCheck c("delta_rule", *this);
    c.on("q", q).on("k", k).on("v", v).on("b", b).on("a", a).on("a_log", aLog).on("dt_bias", dtBias);
    c.on("state", state, DType::F32).dense("state", state).on("y", y).dense("y", y);
    c.require(s.batch > 0 && s.keyHeads > 0 && s.valueHeads > 0 && s.keyDim > 0 && s.valueDim > 0 && s.valueHeads % s.keyHeads == 0,
              [&] { return fmt::format("{} value heads of {} over {} key heads of {}, batch {}", s.valueHeads, s.valueDim, s.keyHeads,
                                       s.keyDim, s.batch); });
    TP_RETURN_IF_ERROR(c.status());
    const std::int64_t n = y.rows, keys = s.keyHeads * s.keyDim, values = s.valueHeads * s.valueDim;
    c.require(n % s.batch == 0 && q.rows == n && k.rows == n && v.rows == n && b.rows == n && a.rows == n && q.cols == keys
                  && k.cols == keys && v.cols == values && y.cols == values && b.cols == s.valueHeads && a.cols == s.valueHeads,
              [&] { return fmt::format("q {}, k {}, v {}, b {}, a {}, y {} for {} sequences of {} value heads of {} over {} key "
                                       "heads of {}", shape(q), shape(k), shape(v), shape(b), shape(a), shape(y), s.batch,
                                       s.valueHeads, s.valueDim, s.keyHeads, s.keyDim); });
    for (const auto& [name, t] : {std::pair{"a_log", &aLog}, {"dt_bias", &dtBias}})
        c.require(t->rows == 1 && t->cols == s.valueHeads, [&] { return fmt::format("{} {} for {} heads", name, shape(*t), s.valueHeads); });
    c.require(state.rows == s.batch && state.cols == values * s.keyDim,
              [&] { return fmt::format("state {} for {} sequences of {} × {}", shape(state), s.batch, values, s.keyDim); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doDeltaRule(q, k, v, b, a, aLog, dtBias, state, y, s);
}

Status Backend::embedding(const Tensor& ids, const Tensor& w, const Tensor& y, std::int64_t firstRow)
{
    OpCheck c("embedding", *this);
    c.on("ids", ids, DType::I32).on("w", w).dense("w", w).on("y", y);
    c.require(ids.rows == 1 && y.rows == ids.cols && y.cols == w.cols && firstRow >= 0,
              [&] { return fmt::format("ids {} of w {} (first row {}) into y {}", shape(ids), shape(w), firstRow, shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doEmbedding(ids, w, y, firstRow);
}

Status Backend::add(const Tensor& a, const Tensor& b, const Tensor& y)
{
    OpCheck c("add", *this);
    c.on("a", a).dense("a", a).on("b", b).dense("b", b).on("y", y).dense("y", y);
    c.require((b.rows == a.rows || b.rows == 1) && b.cols == a.cols && y.rows == a.rows && y.cols == a.cols,
              [&] { return fmt::format("a {} + b {} into y {}", shape(a), shape(b), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doAdd(a, b, y);
}

Status Backend::copy(const Tensor& src, const Tensor& dst)
{
    OpCheck c("copy", *this);
    c.on("src", src, src.dtype).on("dst", dst, src.dtype);
    c.require(src.rows == dst.rows && src.cols == dst.cols, [&] { return fmt::format("src {} into dst {}", shape(src), shape(dst)); });
    TP_RETURN_IF_ERROR(c.status());
    return dst.empty() ? Status() : doCopy(src, dst);
}

Status Backend::scale(const Tensor& x, const Tensor& y, double factor, double cap)
{
    OpCheck c("scale", *this);
    c.on("x", x).on("y", y);
    c.require(y.rows == x.rows && y.cols == x.cols, [&] { return fmt::format("x {} into y {}", shape(x), shape(y)); });
    c.require(std::isfinite(factor) && std::isfinite(cap) && cap >= 0, [&] { return fmt::format("factor {}, cap {}", factor, cap); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doScale(x, y, static_cast<float>(factor), static_cast<float>(cap));
}

Status Backend::softmax(const Tensor& x, const Tensor& y)
{
    OpCheck c("softmax", *this);
    c.on("x", x, DType::F32).dense("x", x).on("y", y, DType::F32).dense("y", y);
    c.require(y.rows == x.rows && y.cols == x.cols, [&] { return fmt::format("x {} into y {}", shape(x), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doSoftmax(x, y);
}

Status Backend::sigmoid(const Tensor& x, const Tensor& y)
{
    OpCheck c("sigmoid", *this);
    c.on("x", x, DType::F32).dense("x", x).on("y", y, DType::F32).dense("y", y);
    c.require(y.rows == x.rows && y.cols == x.cols, [&] { return fmt::format("x {} into y {}", shape(x), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doSigmoid(x, y);
}

namespace {

// What experts() and route() both take: the top-k over E experts in groups, a score bias [1, E].
void checkRouting(OpCheck& c, const ExpertsShape& s, const Tensor* scoreBias)
{
    c.require(s.experts > 0 && s.topK > 0 && s.topK <= s.experts && s.firstExpert >= 0 && s.localExperts >= 0
                  && s.firstExpert + s.localExperts <= s.experts && s.intermediate >= 0,
              [&] { return fmt::format("top-{} of {} experts, local [{}, +{}), {} intermediate rows", s.topK, s.experts,
                                       s.firstExpert, s.localExperts, s.intermediate); });
    // Each group needs two experts to score it (one when its best scores it); the top-k must fit in the chosen groups.
    c.require(s.groups >= 1 && s.groups <= kMaxExpertGroups && s.experts % s.groups == 0
                  && (s.groups == 1 || s.groupByMax || s.experts / s.groups >= 2) && s.topkGroup >= 1 && s.topkGroup <= s.groups
                  && s.topK <= s.topkGroup * (s.experts / s.groups) && std::isfinite(s.routedScale) && s.routedScale > 0,
              [&] { return fmt::format("top-{} in the best {} of {} groups of {} experts, routed scale {}", s.topK,
                                       s.topkGroup, s.groups, s.experts, s.routedScale); });
    // The sparsemixer picks two experts, alone: no groups, bias or renormalisation.
    c.require(!s.sparseMixer
                  || (s.topK == 2 && s.groups == 1 && !scoreBias && !s.normalize && std::isfinite(s.jitterEps) && s.jitterEps >= 0),
              [&] { return fmt::format("a sparsemixer choice needs top-2 without groups, score bias or renormalisation, and a "
                                       "jitter eps of at least 0 (top-{}, {} groups, jitter {})",
                                       s.topK, s.groups, s.jitterEps); });
    if (scoreBias)
        c.on("score_bias", *scoreBias).dense("score_bias", *scoreBias).require(
            scoreBias->rows == 1 && scoreBias->cols == s.experts,
            [&] { return fmt::format("score bias {} for {} experts", shape(*scoreBias), s.experts); });
}

} // namespace

Status Backend::experts(const Tensor& x, const Tensor& scores, const Tensor& gateUp, const Tensor& down, const Tensor& y,
                        const ExpertsShape& s, const Tensor& scratch, const Tensor* gateUpBias, const Tensor* downBias,
                        const Tensor* scoreBias)
{
    OpCheck c("experts", *this);
    c.on("x", x).dense("x", x).on("scores", scores, s.givenExperts ? DType::I32 : DType::F32).dense("scores", scores);
    c.on("gate_up", gateUp).dense("gate_up", gateUp).on("down", down).dense("down", down).on("y", y).dense("y", y);
    const std::int64_t H = x.cols;
    checkRouting(c, s, scoreBias);
    const std::int64_t I2 = (s.gated ? 2 : 1) * s.intermediate; // gate_up's rows (or columns) an expert
    const bool weightsFit = s.transposed
        ? gateUp.rows == s.localExperts * H && gateUp.cols == I2 && down.rows == s.localExperts * s.intermediate && down.cols == H
        : gateUp.rows == s.localExperts * I2 && gateUp.cols == H && down.rows == s.localExperts * H && down.cols == s.intermediate;
    const std::int64_t yRows = s.perExpertRows ? s.localExperts * x.rows : x.rows;
    c.require(scores.rows == x.rows && scores.cols == (s.givenExperts ? 1 : s.experts) && y.rows == yRows && y.cols == H && weightsFit,
              [&] { return fmt::format("x {}, scores {}, gate_up {}, down {}, y {} for {} local experts of {} rows",
                                       shape(x), shape(scores), shape(gateUp), shape(down), shape(y), s.localExperts,
                                       s.intermediate); });
    // Given experts: one per row, weight 1, nothing to choose by.
    c.require(!s.perExpertRows || (s.weightInputs && !s.givenExperts && !gateUpBias && !downBias),
              [] { return std::string("per-expert rows are Llama 4's experts: pre-scaled inputs, no biases"); });
    c.require(!s.givenExperts || (s.topK == 1 && !scoreBias && !s.weightInputs),
              [&] { return fmt::format("given experts with top-{}{}", s.topK, scoreBias ? " and a score bias" : ""); });
    if (gateUpBias)
        c.on("gate_up_bias", *gateUpBias).dense("gate_up_bias", *gateUpBias).require(
            gateUpBias->rows == s.localExperts && gateUpBias->cols == I2,
            [&] { return fmt::format("gate_up bias {} for {} local experts of {}", shape(*gateUpBias), s.localExperts, I2); });
    if (downBias)
        c.on("down_bias", *downBias).dense("down_bias", *downBias).require(
            downBias->rows == s.localExperts && downBias->cols == H,
            [&] { return fmt::format("down bias {} for {} local experts of {}", shape(*downBias), s.localExperts, H); });
    c.require(s.gated || (!s.interleaved && s.swigluLimit == 0 && !gateUpBias),
              [] { return std::string("ungated experts with interleaved or clamped gates or a gate_up bias"); });
    c.require(std::isfinite(s.swigluAlpha) && std::isfinite(s.swigluLimit) && s.swigluLimit >= 0,
              [&] { return fmt::format("swiglu alpha {}, limit {}", s.swigluAlpha, s.swigluLimit); });
    c.require(scratch.bytes() >= expertsScratchBytes(x.rows, H, s), [&] { return fmt::format("scratch of {} bytes", scratch.bytes()); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doExperts(x, scores, gateUp, down, y, s, scratch, gateUpBias, downBias, scoreBias);
}

Status Backend::route(const Tensor& scores, const ExpertsShape& s, const Tensor& ids, const Tensor& weights,
                      const Tensor& scratch, const Tensor* scoreBias)
{
    OpCheck c("route", *this);
    c.on("scores", scores, DType::F32).dense("scores", scores).on("ids", ids, DType::I32).dense("ids", ids);
    c.on("weights", weights, DType::F32).dense("weights", weights);
    checkRouting(c, s, scoreBias);
    c.require(!s.givenExperts && scores.cols == s.experts && ids.rows == scores.rows && ids.cols == s.topK
                  && weights.rows == scores.rows && weights.cols == s.topK,
              [&] { return fmt::format("top-{} of scores {} into ids {} and weights {}", s.topK, shape(scores), shape(ids),
                                       shape(weights)); });
    c.require(scratch.bytes() >= routeScratchBytes(s), [&] { return fmt::format("scratch of {} bytes", scratch.bytes()); });
    TP_RETURN_IF_ERROR(c.status());
    return ids.empty() ? Status() : doRoute(scores, s, ids, weights, scratch, scoreBias);
}

Status Backend::combine(const Tensor& z, const Tensor& slots, const Tensor& weights, const Tensor& y)
{
    OpCheck c("combine", *this);
    c.on("z", z).dense("z", z).on("slots", slots, DType::I32).dense("slots", slots);
    c.on("weights", weights, DType::F32).dense("weights", weights).on("y", y).dense("y", y);
    c.require(y.rows == weights.rows && slots.rows == 1 && slots.cols == weights.rows * weights.cols && z.cols == y.cols,
              [&] { return fmt::format("z {} at slots {} weighted by {} into y {}", shape(z), shape(slots), shape(weights),
                                       shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doCombine(z, slots, weights, y);
}

Status Backend::sumBlocks(const Tensor& z, const Tensor& y)
{
    OpCheck c("sum_blocks", *this);
    c.on("z", z).dense("z", z).on("y", y).dense("y", y);
    c.require(z.cols == y.cols && (y.rows == 0 ? z.rows == 0 : z.rows % y.rows == 0 && z.rows >= y.rows),
              [&] { return fmt::format("z {} is not blocks of y {}", shape(z), shape(y)); });
    TP_RETURN_IF_ERROR(c.status());
    return y.empty() ? Status() : doSumBlocks(z, y);
}

Status Backend::argmax(const Tensor& x, const Tensor& ids)
{
    OpCheck c("argmax", *this);
    c.on("x", x, x.dtype == DType::F32 ? DType::F32 : storage()).on("ids", ids, DType::I32).dense("ids", ids);
    c.require(ids.rows == 1 && ids.cols == x.rows && (x.cols > 0 || x.rows == 0),
              [&] { return fmt::format("ids {} for x {}", shape(ids), shape(x)); });
    TP_RETURN_IF_ERROR(c.status());
    return ids.empty() ? Status() : doArgmax(x, ids);
}

Status Backend::fillUniform(const Tensor& dst, const UniformFill& f)
{
    OpCheck c("fill_uniform", *this);
    c.on("dst", dst).dense("dst", dst);
    for (const FillRun& r : f.runs)
        c.require(r.local >= 0 && r.count >= 0 && r.global >= 0 && r.local + r.count <= dst.numel(),
                  [&] { return fmt::format("run [{}, +{}) outside {} elements", r.local, r.count, dst.numel()); });
    TP_RETURN_IF_ERROR(c.status());
    return dst.empty() ? Status() : doFillUniform(dst, f);
}

} // namespace tp
