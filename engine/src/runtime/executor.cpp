// executor.cpp — the CPU engine: one thread per rank walking the sharded graph in order.
//
// Math follows the Transformers modeling code of each family in fp32 (modeling_llama.py and
// siblings): RMSNorm, rotary embedding with rotate_half (default and llama3 scaling), causal GQA
// attention, SiLU·mul, softmax top-k routers, fused experts. GEMMs go through OpenBLAS with one
// BLAS thread per rank.
#include "tp/runtime/executor.h"

#include "tp/model/loader.h"
#include "tp/runtime/communicator.h"
#include "tp/runtime/cpu_ops.h"
#include "../profile/nvtx.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>
#include <numeric>
#include <optional>
#include <thread>

namespace tp {

namespace {

using Clock = std::chrono::steady_clock;

bool executableFamily(Family f)
{
    switch (f) {
    case Family::Llama:
    case Family::Mistral:
    case Family::Qwen2:
    case Family::Qwen3:
    case Family::Phi3:
    case Family::Mixtral:
    case Family::Qwen3Moe: return true;
    default: return false;
    }
}

using cpu::gemm;

float silu(float v) { return v / (1.0f + std::exp(-v)); }

class Runner
{
public:
    Runner(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights, const RunOptions& o)
        : m_spec(spec)
        , m_g(g)
        , m_weights(weights)
        , m_o(o)
        , m_c(spec.config)
        , m_T(g.tpSize)
        , m_N(o.batch * o.seq)
    {
        m_nodeCollectives.resize(g.graph.nodes.size());
        for (std::size_t i = 0; i < g.collectives.size(); ++i)
            m_nodeCollectives[static_cast<std::size_t>(g.collectives[i].node)].push_back(static_cast<int>(i));
        for (const auto& n : g.graph.nodes)
            m_nvtxNames.push_back(nvtxName(n.name, n.layer));
        m_tokens = o.tokens;
        if (m_tokens.empty())
            for (std::int64_t i = 0; i < m_N; ++i)
                m_tokens.push_back(static_cast<std::int32_t>((i * 7919 + 13) % m_c.vocabSize));
        ropeFrequencies();
    }

    Result<RunResult> run()
    {
        openblas_set_num_threads(1);
        auto group = LocalGroup::create(m_T, m_o.collectiveTimeout);
        std::vector<RankOut> outs(static_cast<std::size_t>(m_T));
        std::vector<std::thread> threads;
        for (int r = 0; r < m_T; ++r)
            threads.emplace_back([&, r] {
                Communicator& comm = group->rank(r);
                Status st = guardedRankMain(r, comm, outs[static_cast<std::size_t>(r)]);
                if (!st.ok()) {
                    {
                        // The cause wins over its consequences: ranks abandoned because of another
                        // rank's failure report Cancelled, which never replaces a real error.
                        std::lock_guard lock(m_errorMutex);
                        if (m_firstError.ok()
                            || (m_firstError.code() == StatusCode::Cancelled && st.code() != StatusCode::Cancelled))
                            m_firstError = st;
                    }
                    comm.abort(st.message());
                }
            });
        for (auto& t : threads)
            t.join();
        if (!m_firstError.ok())
            return m_firstError;
        RunResult res;
        res.tpSize = m_T;
        res.vocab = m_c.vocabSize;
        res.iterationSeconds = outs[0].iterations;
        for (const auto& o : outs) {
            res.loadSeconds = std::max(res.loadSeconds, o.loadSeconds);
            res.spans.insert(res.spans.end(), o.spans.begin(), o.spans.end());
        }
        return res;
    }

    // This process is one rank; spans of every rank are gathered to rank 0.
    Result<RunResult> runOne(Communicator& comm)
    {
        openblas_set_num_threads(1);
        RankOut out;
        if (Status st = guardedRankMain(comm.rank(), comm, out); !st.ok()) {
            comm.abort(st.message());
            return st;
        }
        // 4 floats per span: node, collective, start, end (layer and bytes follow from the graph).
        std::vector<float> mine;
        for (const auto& sp : out.spans)
            mine.insert(mine.end(), {float(sp.node), float(sp.collective), float(sp.startUs), float(sp.endUs)});
        std::vector<float> counts(static_cast<std::size_t>(m_T));
        const float n = static_cast<float>(mine.size());
        TP_RETURN_IF_ERROR(comm.allGather(std::span<const float>(&n, 1), counts));
        std::vector<float> all(static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), 0.0f)));
        TP_RETURN_IF_ERROR(comm.allGather(mine, all));
        RunResult res;
        res.tpSize = m_T;
        res.vocab = m_c.vocabSize;
        res.loadSeconds = out.loadSeconds;
        res.iterationSeconds = out.iterations;
        std::size_t at = 0;
        for (int r = 0; r < m_T; ++r)
            for (std::size_t i = 0; i < static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]); i += 4, at += 4) {
                Span sp;
                sp.rank = r;
                sp.node = static_cast<int>(all[at]);
                sp.collective = static_cast<int>(all[at + 1]);
                sp.startUs = all[at + 2];
                sp.endUs = all[at + 3];
                sp.layer = m_g.graph.nodes[static_cast<std::size_t>(sp.node)].layer;
                if (sp.collective >= 0)
                    sp.bytes = m_g.collectives[static_cast<std::size_t>(sp.collective)].bytes(m_o.batch, m_o.seq, 4);
                res.spans.push_back(sp);
            }
        res.logits = std::move(m_rank0Logits);
        return res;
    }

private:
    struct RankOut
    {
        int node = -1; // the node this rank is in (for errors raised as exceptions)
        std::vector<double> iterations;
        std::vector<Span> spans;
        double loadSeconds = 0;
    };

    struct Rank
    {
        int r = 0;
        Communicator* comm = nullptr;
        std::vector<std::vector<float>> weights;
        std::vector<std::vector<float>> acts;
        std::vector<float> routerProbs;
        std::vector<Span> spans;
        Clock::time_point t0;
        std::vector<float> scratch, scratch2, gathered;
    };

    // --- plumbing -----------------------------------------------------------------------------
    const ParamShard* shard(int module, const char* name) const { return m_g.param(module, name); }
    const std::vector<float>& weight(const Rank& k, const ParamShard* s) const
    {
        return k.weights[static_cast<std::size_t>(s - m_g.params.data())];
    }
    std::int64_t width(const Rank& k, int tensor) const
    {
        const auto& a = k.acts[static_cast<std::size_t>(tensor)];
        return m_N == 0 ? 0 : static_cast<std::int64_t>(a.size()) / m_N;
    }
    double nowUs(const Rank& k) const { return std::chrono::duration<double, std::micro>(Clock::now() - k.t0).count(); }

    Status fail(const Rank& k, const GraphNode& n, const std::string& what) const
    {
        return Status(StatusCode::Internal, fmt::format("rank {}, node {}: {}", k.r, n.name, what));
    }

    void ropeFrequencies()
    {
        const std::int64_t hd = m_c.headDim;
        for (std::int64_t i = 0; i < hd / 2; ++i) {
            double f = 1.0 / std::pow(m_c.ropeTheta, static_cast<double>(2 * i) / static_cast<double>(hd));
            const RopeScaling& s = m_c.ropeScaling;
            if (s.type == "llama3") {
                const double low = static_cast<double>(s.originalMaxPositions) / s.lowFreqFactor;
                const double high = static_cast<double>(s.originalMaxPositions) / s.highFreqFactor;
                const double wavelen = 2 * std::numbers::pi / f;
                if (wavelen > low) {
                    f /= s.factor;
                } else if (wavelen >= high) {
                    const double smooth = (static_cast<double>(s.originalMaxPositions) / wavelen - s.lowFreqFactor)
                        / (s.highFreqFactor - s.lowFreqFactor);
                    f = (1 - smooth) * f / s.factor + smooth * f;
                }
            } else if (s.type == "linear") {
                f /= s.factor;
            }
            m_invFreq.push_back(f);
        }
    }

    // --- one rank -----------------------------------------------------------------------------
    // Nothing may escape a rank's thread: exceptions (allocation failures above all) become errors
    // that name the rank and the node.
    Status guardedRankMain(int r, Communicator& comm, RankOut& out)
    {
        auto where = [&] {
            return out.node >= 0 ? fmt::format("rank {}, node {}", r, m_g.graph.nodes[static_cast<std::size_t>(out.node)].name)
                                 : fmt::format("rank {}, loading weights", r);
        };
        try {
            return rankMain(r, comm, out);
        } catch (const std::bad_alloc&) {
            return Status(StatusCode::ResourceExhausted, fmt::format("{}: out of memory", where()));
        } catch (const std::exception& e) {
            return Status(StatusCode::Internal, fmt::format("{}: {}", where(), e.what()));
        } catch (...) {
            return Status(StatusCode::Internal, fmt::format("{}: unknown exception", where()));
        }
    }

    Status rankMain(int r, Communicator& comm, RankOut& out)
    {
        Rank k;
        k.r = r;
        k.comm = &comm;
        const auto l0 = Clock::now();
        k.weights.resize(m_g.params.size());
        for (std::size_t i = 0; i < m_g.params.size(); ++i) { // a tied parameter reads its owner's tensor
            TP_ASSIGN_OR_RETURN(k.weights[i], loadParamShard(m_spec, m_g, i, r, m_weights));
        }
        out.loadSeconds = std::chrono::duration<double>(Clock::now() - l0).count();
        k.acts.resize(m_g.graph.tensors.size());

        const int total = m_o.warmup + std::max(m_o.iterations, 1);
        for (int it = 0; it < total; ++it) {
            TP_RETURN_IF_ERROR(comm.barrier());
            k.spans.clear();
            k.t0 = Clock::now();
            for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
                out.node = static_cast<int>(ni);
                if (m_o.stop.stop_requested())
                    return Status(StatusCode::Cancelled, fmt::format("rank {}: run cancelled", r));
                TP_RETURN_IF_ERROR(node(k, static_cast<int>(ni)));
            }
            TP_RETURN_IF_ERROR(comm.barrier());
            const double secs = std::chrono::duration<double>(Clock::now() - k.t0).count();
            const bool warm = it < m_o.warmup;
            if (!warm)
                out.iterations.push_back(secs);
            if (r == 0 && m_o.progress)
                m_o.progress(warm ? it : it - m_o.warmup, warm, secs);
        }
        out.spans = std::move(k.spans);
        return {};
    }

    Status node(Rank& k, int ni)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        if (k.r == m_o.failRank && n.name == m_o.failNode) {
            if (m_o.failKind == "oom")
                throw std::bad_alloc();
            if (m_o.failKind == "exception")
                throw std::runtime_error("injected exception");
            if (m_o.failKind == "hang") { // stops answering until the group gives up on it
                while (!k.comm->aborted())
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                return Status(StatusCode::Cancelled, fmt::format("rank {}, node {}: hung until the watchdog ended the run", k.r, n.name));
            }
            return Status(StatusCode::Internal, fmt::format("rank {}, node {}: injected failure", k.r, n.name));
        }
        Span sp{k.r, ni, -1, n.layer, nowUs(k), 0, 0};
        Status st;
        std::optional<NvtxRange> range(std::in_place, m_nvtxNames[static_cast<std::size_t>(ni)]);
        switch (n.kind) {
        case OpKind::Embedding: st = embedding(k, n); break;
        case OpKind::Norm: st = norm(k, n, false); break;
        case OpKind::HeadNorm: st = norm(k, n, true); break;
        case OpKind::Linear: st = linear(k, n); break;
        case OpKind::Split: st = split(k, n); break;
        case OpKind::Rope: rope(k, n); break;
        case OpKind::Attention: st = attention(k, n); break;
        case OpKind::GatedAct: gatedAct(k, n); break;
        case OpKind::Router: st = router(k, n); break;
        case OpKind::Experts: st = experts(k, n); break;
        case OpKind::Add: {
            const auto& a = k.acts[static_cast<std::size_t>(n.inputs[0])];
            const auto& b = k.acts[static_cast<std::size_t>(n.inputs[1])];
            auto& o = k.acts[static_cast<std::size_t>(n.outputs[0])];
            o.resize(a.size());
            for (std::size_t i = 0; i < a.size(); ++i)
                o[i] = a[i] + b[i];
            break;
        }
        case OpKind::Logits: break;
        }
        range.reset();
        TP_RETURN_IF_ERROR(st);
        sp.endUs = nowUs(k);
        k.spans.push_back(sp);
        for (int ci : m_nodeCollectives[static_cast<std::size_t>(ni)])
            TP_RETURN_IF_ERROR(collective(k, n, ci));
        TP_RETURN_IF_ERROR(afterCollectives(k, n));
        // Each graph tensor must have the width the plan preview promised for this rank.
        for (int t : n.outputs) {
            const auto& L = m_g.tensors[static_cast<std::size_t>(t)];
            if (L.layout != Layout::Partial && width(k, t) != L.local[static_cast<std::size_t>(k.r)])
                return fail(k, n, fmt::format("output has {} features, the sharded graph says {}", width(k, t),
                                              L.local[static_cast<std::size_t>(k.r)]));
        }
        if (n.kind == OpKind::Logits && k.r == 0)
            m_rank0Logits = k.acts[static_cast<std::size_t>(n.inputs[0])];
        return {};
    }

    // Rowwise biases are added once, after the reduction (as Transformers does).
    Status afterCollectives(Rank& k, const GraphNode& n)
    {
        if (n.kind != OpKind::Linear)
            return {};
        const ParamShard* w = shard(n.module, "weight");
        const ParamShard* b = shard(n.module, "bias");
        if (!w || !b || w->dim != 1)
            return {};
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        const auto& bias = weight(k, b);
        const std::int64_t width = static_cast<std::int64_t>(bias.size());
        for (std::int64_t t = 0; t < m_N; ++t)
            for (std::int64_t j = 0; j < width; ++j)
                y[static_cast<std::size_t>(t * width + j)] += bias[static_cast<std::size_t>(j)];
        return {};
    }

    Status collective(Rank& k, const GraphNode& n, int ci)
    {
        const Collective& c = m_g.collectives[static_cast<std::size_t>(ci)];
        Span sp{k.r, static_cast<int>(&n - m_g.graph.nodes.data()), ci, n.layer, nowUs(k), 0,
                c.bytes(m_o.batch, m_o.seq, static_cast<std::int64_t>(sizeof(float)))};
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        const NvtxRange range(m_nvtxNames[static_cast<std::size_t>(sp.node)] + "/" + collectiveName(c.kind));
        switch (c.kind) {
        case CollectiveKind::AllReduce: TP_RETURN_IF_ERROR(k.comm->allReduce(y)); break;
        case CollectiveKind::AllGather: {
            // Every rank's [N, w_p] → [N, Σ w_p], columns in rank order.
            std::vector<std::int64_t> widths(static_cast<std::size_t>(m_T));
            const ParamShard* w = shard(n.module, "weight");
            const int dim = n.kind == OpKind::Embedding ? 1 : 0;
            for (int p = 0; p < m_T; ++p)
                widths[static_cast<std::size_t>(p)] = w->shapes[static_cast<std::size_t>(p)][static_cast<std::size_t>(dim)];
            const std::int64_t W = std::accumulate(widths.begin(), widths.end(), std::int64_t(0));
            k.scratch.resize(static_cast<std::size_t>(W * m_N));
            TP_RETURN_IF_ERROR(k.comm->allGather(y, k.scratch));
            auto& full = k.gathered; // kept across iterations: no zero-filling of a fresh buffer
            full.resize(static_cast<std::size_t>(W * m_N));
            std::int64_t src = 0, col = 0;
            for (int p = 0; p < m_T; ++p) {
                const std::int64_t wp = widths[static_cast<std::size_t>(p)];
                for (std::int64_t t = 0; t < m_N; ++t)
                    std::copy_n(k.scratch.begin() + src + t * wp, wp, full.begin() + t * W + col);
                src += wp * m_N;
                col += wp;
            }
            y.swap(full);
            break;
        }
        case CollectiveKind::ReduceScatter: {
            const std::int64_t W = width(k, n.outputs[0]);
            std::vector<std::int64_t> counts;
            k.scratch.clear();
            for (const auto& iv : chunkSizes(W, m_T)) {
                counts.push_back(iv.size * m_N);
                for (std::int64_t t = 0; t < m_N; ++t)
                    k.scratch.insert(k.scratch.end(), y.begin() + t * W + iv.offset, y.begin() + t * W + iv.offset + iv.size);
            }
            std::vector<float> mine(static_cast<std::size_t>(counts[static_cast<std::size_t>(k.r)]));
            TP_RETURN_IF_ERROR(k.comm->reduceScatter(k.scratch, mine, counts));
            y = std::move(mine);
            break;
        }
        default: return fail(k, n, fmt::format("{} is not executable on the CPU engine", collectiveName(c.kind)));
        }
        sp.endUs = nowUs(k);
        k.spans.push_back(sp);
        return {};
    }

    // --- ops ----------------------------------------------------------------------------------
    Status embedding(Rank& k, const GraphNode& n)
    {
        const ParamShard* s = shard(n.module, "weight");
        const auto& W = weight(k, s);
        const auto& shape = s->shapes[static_cast<std::size_t>(k.r)];
        const std::int64_t rows = shape[0], cols = shape[1];
        const std::int64_t first = s->dim == 0 ? s->slices[static_cast<std::size_t>(k.r)][0].offset : 0;
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        y.resize(static_cast<std::size_t>(m_N * cols));
        if (!cpu::embedding(m_tokens.data(), m_N, W.data(), rows, cols, first, m_c.vocabSize, y.data()))
            return fail(k, n, fmt::format("a token id is outside the vocabulary of {}", m_c.vocabSize));
        return {};
    }

    Status norm(Rank& k, const GraphNode& n, bool perHead)
    {
        const auto& x = k.acts[static_cast<std::size_t>(n.inputs[0])];
        const auto& w = weight(k, shard(n.module, "weight"));
        const std::int64_t W = width(k, n.inputs[0]);
        const std::int64_t d = perHead ? n.headDim : W;
        if (d == 0 || W % d != 0 || static_cast<std::int64_t>(w.size()) != d)
            return fail(k, n, fmt::format("norm over {} of {} features with a weight of {}", d, W, w.size()));
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        y.resize(x.size());
        cpu::rmsNorm(x.data(), w.data(), y.data(), m_N * (W / d), d, static_cast<float>(m_c.rmsNormEps));
        return {};
    }

    Status linear(Rank& k, const GraphNode& n)
    {
        const ParamShard* ws = shard(n.module, "weight");
        const auto& W = weight(k, ws);
        const auto& shape = ws->shapes[static_cast<std::size_t>(k.r)];
        const std::int64_t out = shape[0], in = shape[1];
        const float* x = k.acts[static_cast<std::size_t>(n.inputs[0])].data();
        const std::int64_t xw = width(k, n.inputs[0]);
        std::vector<float> split;
        if (xw != in) {
            // rowwise_split_input: a whole input is split locally to this rank's columns.
            if (ws->dim != 1 || xw != m_spec.modules[static_cast<std::size_t>(n.module)].params[static_cast<std::size_t>(ws->param)].shape[1])
                return fail(k, n, fmt::format("input has {} features, the weight slice expects {}", xw, in));
            const std::int64_t off = ws->slices[static_cast<std::size_t>(k.r)][0].offset;
            split.resize(static_cast<std::size_t>(m_N * in));
            for (std::int64_t t = 0; t < m_N; ++t)
                std::copy_n(x + t * xw + off, in, split.begin() + t * in);
            x = split.data();
        }
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        y.resize(static_cast<std::size_t>(m_N * out));
        gemm(x, W.data(), y.data(), m_N, in, out);
        const ParamShard* bs = shard(n.module, "bias");
        if (bs && ws->dim != 1) {
            const auto& b = weight(k, bs);
            for (std::int64_t t = 0; t < m_N; ++t)
                for (std::int64_t j = 0; j < out; ++j)
                    y[static_cast<std::size_t>(t * out + j)] += b[static_cast<std::size_t>(j)];
        }
        return {};
    }

    Status split(Rank& k, const GraphNode& n)
    {
        const auto& x = k.acts[static_cast<std::size_t>(n.inputs[0])];
        const std::int64_t W = width(k, n.inputs[0]);
        std::int64_t off = 0;
        for (std::size_t i = 0; i < n.outputs.size(); ++i) {
            const std::int64_t w = n.parts[i];
            auto& y = k.acts[static_cast<std::size_t>(n.outputs[i])];
            y.resize(static_cast<std::size_t>(m_N * w));
            for (std::int64_t t = 0; t < m_N; ++t)
                std::copy_n(x.begin() + t * W + off, w, y.begin() + t * w);
            off += w;
        }
        return off == W ? Status() : fail(k, n, fmt::format("parts sum to {}, input has {}", off, W));
    }

    void rope(Rank& k, const GraphNode& n)
    {
        for (std::size_t i = 0; i < 2; ++i) {
            const auto& x = k.acts[static_cast<std::size_t>(n.inputs[i])];
            auto& y = k.acts[static_cast<std::size_t>(n.outputs[i])];
            y.resize(x.size());
            cpu::rope(x.data(), y.data(), m_N, width(k, n.inputs[i]), n.headDim, m_o.seq, m_invFreq);
        }
    }

    Status attention(Rank& k, const GraphNode& n)
    {
        const auto& q = k.acts[static_cast<std::size_t>(n.inputs[0])];
        const auto& kk = k.acts[static_cast<std::size_t>(n.inputs[1])];
        const auto& v = k.acts[static_cast<std::size_t>(n.inputs[2])];
        const std::int64_t hd = n.headDim, qw = width(k, n.inputs[0]), kw = width(k, n.inputs[1]);
        const std::int64_t heads = qw / hd, kvHeads = kw / hd, group = n.heads / n.kvHeads;
        if (heads != kvHeads * group)
            return fail(k, n, fmt::format("{} local q heads do not pair with {} kv heads in groups of {}", heads, kvHeads, group));
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        y.resize(static_cast<std::size_t>(m_N * qw)); // every element is written by the second GEMM
        cpu::attention(q.data(), kk.data(), v.data(), y.data(), m_o.batch, m_o.seq, heads, kvHeads, hd, k.scratch2);
        return {};
    }

    void gatedAct(Rank& k, const GraphNode& n)
    {
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        if (n.packed) { // [gate_l | up_l] per token (a strided shard keeps the halves paired)
            const auto& x = k.acts[static_cast<std::size_t>(n.inputs[0])];
            const std::int64_t W = width(k, n.inputs[0]), I = W / 2;
            y.resize(static_cast<std::size_t>(m_N * I));
            for (std::int64_t t = 0; t < m_N; ++t)
                for (std::int64_t j = 0; j < I; ++j)
                    y[static_cast<std::size_t>(t * I + j)] = silu(x[static_cast<std::size_t>(t * W + j)]) * x[static_cast<std::size_t>(t * W + I + j)];
            return;
        }
        const auto& g = k.acts[static_cast<std::size_t>(n.inputs[0])];
        const auto& u = k.acts[static_cast<std::size_t>(n.inputs[1])];
        y.resize(g.size());
        cpu::siluMul(g.data(), u.data(), y.data(), static_cast<std::int64_t>(g.size()));
    }

    Status router(Rank& k, const GraphNode& n)
    {
        const ParamShard* ws = shard(n.module, "weight");
        const auto& W = weight(k, ws);
        const std::int64_t E = n.experts, H = ws->shapes[static_cast<std::size_t>(k.r)][1];
        auto& probs = k.acts[static_cast<std::size_t>(n.outputs[0])];
        probs.resize(static_cast<std::size_t>(m_N * E));
        gemm(k.acts[static_cast<std::size_t>(n.inputs[0])].data(), W.data(), probs.data(), m_N, H, E);
        for (std::int64_t t = 0; t < m_N; ++t) {
            float* row = probs.data() + t * E;
            const float mx = *std::max_element(row, row + E);
            double sum = 0;
            for (std::int64_t e = 0; e < E; ++e)
                sum += (row[e] = std::exp(row[e] - mx));
            for (std::int64_t e = 0; e < E; ++e)
                row[e] = static_cast<float>(row[e] / sum);
        }
        return {};
    }

    Status experts(Rank& k, const GraphNode& n)
    {
        const auto& x = k.acts[static_cast<std::size_t>(n.inputs[0])];
        const auto& probs = k.acts[static_cast<std::size_t>(n.inputs[1])];
        const ParamShard* gus = shard(n.module, "gate_up_proj");
        const ParamShard* dns = shard(n.module, "down_proj");
        const auto& GU = weight(k, gus);
        const auto& D = weight(k, dns);
        const auto& gs = gus->shapes[static_cast<std::size_t>(k.r)];
        const std::int64_t El = gs[0], I2 = gs[1], H = gs[2], I = I2 / 2, E = n.experts, K = n.topK;
        const std::int64_t e0 = gus->dim == 0 ? gus->slices[static_cast<std::size_t>(k.r)][0].offset : 0;
        const bool normalize = m_c.family == Family::Mixtral || m_c.normTopkProb;
        // Top-k per token (ties to the lower expert id, as torch.topk on CPU).
        std::vector<std::vector<std::pair<std::int64_t, float>>> routed(static_cast<std::size_t>(El));
        std::vector<std::int64_t> idx(static_cast<std::size_t>(E));
        for (std::int64_t t = 0; t < m_N; ++t) {
            const float* row = probs.data() + t * E;
            std::iota(idx.begin(), idx.end(), 0);
            std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                              [&](std::int64_t a, std::int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
            double sum = 0;
            for (std::int64_t j = 0; j < K; ++j)
                sum += row[idx[static_cast<std::size_t>(j)]];
            for (std::int64_t j = 0; j < K; ++j) {
                const std::int64_t e = idx[static_cast<std::size_t>(j)];
                const float w = normalize ? static_cast<float>(row[e] / sum) : row[e];
                if (e >= e0 && e < e0 + El)
                    routed[static_cast<std::size_t>(e - e0)].push_back({t, w});
            }
        }
        auto& y = k.acts[static_cast<std::size_t>(n.outputs[0])];
        y.assign(static_cast<std::size_t>(m_N * H), 0.0f);
        std::vector<float> xe, h, a, out;
        for (std::int64_t e = 0; e < El; ++e) {
            const auto& rows = routed[static_cast<std::size_t>(e)];
            const std::int64_t M = static_cast<std::int64_t>(rows.size());
            if (M == 0)
                continue;
            xe.resize(static_cast<std::size_t>(M * H));
            for (std::int64_t i = 0; i < M; ++i)
                std::copy_n(x.begin() + rows[static_cast<std::size_t>(i)].first * H, H, xe.begin() + i * H);
            h.resize(static_cast<std::size_t>(M * I2));
            gemm(xe.data(), GU.data() + e * I2 * H, h.data(), M, H, I2);
            a.resize(static_cast<std::size_t>(M * I));
            for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < I; ++j)
                    a[static_cast<std::size_t>(i * I + j)] = silu(h[static_cast<std::size_t>(i * I2 + j)]) * h[static_cast<std::size_t>(i * I2 + I + j)];
            out.resize(static_cast<std::size_t>(M * H));
            gemm(a.data(), D.data() + e * H * I, out.data(), M, I, H);
            for (std::int64_t i = 0; i < M; ++i) {
                const auto [t, w] = rows[static_cast<std::size_t>(i)];
                for (std::int64_t j = 0; j < H; ++j)
                    y[static_cast<std::size_t>(t * H + j)] += w * out[static_cast<std::size_t>(i * H + j)];
            }
        }
        return {};
    }

    const ModelSpec& m_spec;
    const ShardedGraph& m_g;
    const WeightSource& m_weights;
    const RunOptions& m_o;
    const ModelConfig& m_c;
    const int m_T;
    const std::int64_t m_N;
    std::vector<std::vector<int>> m_nodeCollectives;
    std::vector<std::int32_t> m_tokens;
    std::vector<std::string> m_nvtxNames;
    std::vector<double> m_invFreq;
    std::mutex m_errorMutex;
    Status m_firstError;

public:
    std::vector<float> m_rank0Logits;
};

} // namespace

std::string cpuExecutableProblem(const ModelSpec& spec, const ShardedGraph& g)
{
    const ModelConfig& c = spec.config;
    if (!executableFamily(c.family))
        return fmt::format("the CPU engine does not run {} yet (it runs llama, mistral, qwen2, qwen3, phi3, mixtral "
                           "and qwen3_moe; MLA, attention sinks, Gemma's scaled embeddings and soft-capping and "
                           "Llama 4's chunked attention are not implemented)",
                           familyName(c.family));
    if (!c.ropeScaling.type.empty() && c.ropeScaling.type != "llama3" && c.ropeScaling.type != "linear")
        return fmt::format("rope scaling '{}' is not implemented in the CPU engine", c.ropeScaling.type);
    // Styles whose forward the engine does not model (their effect is more than placements + the
    // collectives of the sharded graph).
    static const char* const kNotExecutable[] = {"sequence_parallel", "moe_identity_expert", "megamoe_router",
                                                 "megamoe_experts", "ep_router", "local", "gather", "local_colwise",
                                                 "local_rowwise", "local_packed_rowwise", "mla_kv_a_proj",
                                                 "local_params", "packed_rowwise", "all_reduce"};
    const Plan& plan = *g.plan;
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const Style* s = g.match.entryStyles[i];
        if (!s || g.match.entryMatches[i] == 0)
            continue;
        for (const char* name : kNotExecutable)
            if (s->name == name)
                return fmt::format("style '{}' (on '{}') is not executable on the CPU engine yet", s->name,
                                   plan.entries[i].key);
    }
    for (const auto& col : g.collectives)
        if (col.kind == CollectiveKind::AllToAll)
            return fmt::format("style '{}' on '{}' dispatches tokens with all-to-all, which the CPU engine does not "
                               "execute yet",
                               col.style, col.where);
    return {};
}

namespace {

Status checkRunnable(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights, const RunOptions& options)
{
    if (!g.valid()) {
        std::string errors;
        for (const auto& d : g.diagnostics)
            if (d.severity == Severity::Error)
                errors += fmt::format("\n  {}: {}", d.where, d.message);
        return Status(StatusCode::FailedPrecondition, "the plan has errors; nothing ran:" + errors);
    }
    if (const std::string why = cpuExecutableProblem(spec, g); !why.empty())
        return Status(StatusCode::Unimplemented, why);
    if (options.batch < 1 || options.seq < 1)
        return invalidArgument("batch and sequence must be at least 1");
    if (!options.tokens.empty() && static_cast<std::int64_t>(options.tokens.size()) != options.batch * options.seq)
        return invalidArgument(fmt::format("{} token ids given for batch {} × sequence {}", options.tokens.size(),
                                           options.batch, options.seq));
    return checkWeights(spec, weights);
}

} // namespace

Result<RunResult> runModel(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                           const RunOptions& options)
{
    TP_RETURN_IF_ERROR(checkRunnable(spec, g, weights, options));
    Runner runner(spec, g, weights, options);
    TP_ASSIGN_OR_RETURN(RunResult r, runner.run());
    r.logits = std::move(runner.m_rank0Logits);
    return r;
}

Result<RunResult> runModelRank(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                               const RunOptions& options, Communicator& comm)
{
    if (comm.size() != g.tpSize)
        return invalidArgument(fmt::format("{} processes for tp_size {}: start one process per rank", comm.size(), g.tpSize));
    TP_RETURN_IF_ERROR(checkRunnable(spec, g, weights, options));
    Runner runner(spec, g, weights, options);
    return runner.runOne(comm);
}

} // namespace tp
