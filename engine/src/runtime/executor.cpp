// executor.cpp — one thread per rank walking the lowered sharded graph. No arithmetic happens here:
// each node is a call of the rank's Backend on views into buffers allocated once, each collective a
// call of its Communicator; the executor owns the order, the events that time it, cancellation,
// fault injection and the report.
//
// Per node: [compute] op on the compute stream between two events. Per collective: pack the pieces
// (reduce_scatter) on the compute stream, hand over to the communication stream, collective, hand
// back, unpack the pieces or add the bias after the reduction (all_gather, rowwise bias), with
// events at the four points; the span is the whole of it.
#include "tp/runtime/executor.h"

#include "program.h"
#include "tp/core/units.h"
#include "tp/model/arch_traits.h"
#include "tp/profile/host_load.h"
#include "tp/profile/nvtx.h"
#include "tp/runtime/backend.h"
#include "tp/runtime/communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <mutex>
#include <optional>
#include <thread>

namespace tp {

std::string engineExecutableProblem(const ModelSpec& spec, const ShardedGraph& g)
{
    const ModelConfig& c = spec.config;
    if (const std::string lacks = c.engineLacks.empty() ? archTraits(c.family).engineLacks : c.engineLacks; !lacks.empty()) {
        std::vector<std::string> runs;
        for (const KnownModelType& k : knownModelTypes())
            if (k.engineLacks.empty())
                runs.push_back(k.modelType);
        return fmt::format("the engine does not run model_type '{}': it lacks {} (it runs {})", c.modelType, lacks,
                           fmt::join(runs, ", "));
    }
    if (!g.graph.unsupported.empty())
        return g.graph.unsupported;
    if (c.isMoe() && c.expertsPerToken < 1)
        return fmt::format("{}: num_experts_per_tok is null or 0, and the engine routes every token to at least one expert",
                           spec.source);
    if (g.kvHeadReplicas > 1)
        return fmt::format("the plan replicates key/value heads (replicate_kv_heads: each KV head on {} of the {} ranks), "
                           "which the engine does not run: its attention pairs a rank's query heads with its KV heads by "
                           "the model's global group size; preview the plan instead, or pick a tp size that divides the KV "
                           "heads",
                           g.kvHeadReplicas, g.tpSize);
    // Styles whose forward the engine does not run, and why.
    static constexpr std::pair<const char*, const char*> kNotExecutable[] = {
        {"moe_identity_expert",
         "it divides an identity (zero) expert's input by tp_size for a later sum (longcat_flash), and no catalog "
         "architecture has such an expert"},
        {"megamoe_router", "it feeds DeepGEMM's Mega MoE kernel (dispatch, experts and combine in one CUDA kernel), "
                           "which the engine does not have; use ep_plan's grouped_gemm + ep_dispatch_experts"},
        {"megamoe_experts", "it needs DeepGEMM's Mega MoE kernel (dispatch, experts and combine in one CUDA kernel), "
                            "which the engine does not have; use ep_plan's grouped_gemm + ep_dispatch_experts"},
        {"local", "G1's IsolatedParallel divides the module's parameters by tp_size at load so that a parent 'gather' "
                  "sums T scaled copies, and only a linear map sums back to itself that way (for a gated MLP it does "
                  "not), so the engine does not rescale weights for it"},
    };
    const Plan& plan = *g.plan;
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const Style* s = g.match.entryStyles[i];
        if (!s || g.match.entryMatches[i] == 0)
            continue;
        for (const auto& [name, why] : kNotExecutable)
            if (s->name == name)
                return fmt::format("style '{}' (on '{}') is not executable on the engine: {}", s->name, plan.entries[i].key, why);
    }
    // packed_rowwise places a packed last dim: the experts' [E, H, 2I] (Llama 4), which the experts
    // op reads as it is; on a Linear it would split the input features in strided blocks.
    for (const ParamShard& p : g.params)
        if (p.placement.kind == Placement::Kind::StridedShard
            && p.dim == static_cast<int>(p.shapes.empty() ? 0 : p.shapes[0].size()) - 1
            && spec.modules[static_cast<std::size_t>(p.module)].kind != ModuleKind::Experts)
            return fmt::format("'{}' is split along its packed last dim (packed_rowwise), which the engine executes on "
                               "fused experts only",
                               p.path);
    return {};
}

namespace {

using Clock = std::chrono::steady_clock;
using detail::RankProgram;

// Event slots of one iteration: its start, two per node, four per collective.
struct EventMap
{
    int nodes = 0, collectives = 0;
    int begin(int node) const { return 1 + 2 * node; }
    int end(int node) const { return 2 + 2 * node; }
    int collective(int c, int point) const { return 1 + 2 * nodes + 4 * c + point; } // 0 begin, 1 ready, 2 done, 3 end
    // The d-th dispatched experts node's later compute: 0, 1 its experts, 2, 3 its combine.
    int part(int d, int point) const { return 1 + 2 * nodes + 4 * collectives + 4 * d + point; }
    int count(int dispatched) const { return 1 + 2 * nodes + 4 * collectives + 4 * dispatched; }
};

// A rank's heartbeat for the progress watchdog: bumped at every node and every weight loaded.
struct Progress
{
    std::atomic<std::int64_t> beats{0};
    std::atomic<int> node{-1};                 // the node it is in, -1: loading weights
    std::atomic<bool> done{false};
    void beat(int at)
    {
        node.store(at, std::memory_order_relaxed);
        beats.fetch_add(1, std::memory_order_relaxed);
    }
};

// The tensors of one phase (prefill, or a decode step) on one rank.
struct PhaseTensors
{
    std::vector<Tensor> t;                     // per phase program tensor (t[0]: the token ids)
    Tensor positions;                          // I32 [1, rows]
};

struct Rank
{
    int r = 0;
    Backend* be = nullptr;
    Communicator* comm = nullptr;
    const RankProgram* prog = nullptr;
    DeviceBuffer weightMem, arenaMem, inputMem;
    std::vector<Tensor> weights;               // per ShardedGraph param
    std::vector<PhaseTensors> ph;              // per phase
    std::vector<Tensor> cache;                 // the KV caches (RankProgram::cache)
    Tensor decodePositions;                    // I32 [1, decodeSteps · B]: step j's positions at [j·B, +B)
    std::vector<Tensor> ropes;                 // per graph rope table
    int phase = 0;                             // what the rank runs now
    std::int64_t past = 0;                     // and how many positions its sequences have cached
    std::vector<std::int32_t> ids;             // the last tokens sampled, per sequence (decoding)
    std::unique_lock<std::mutex> turn;         // emulation: this rank holds the device (Executor::compute)
    // Everything below is sized in setUp, before the warm-up: the iterations only write into it.
    std::vector<Span> lastSpans;               // the forward just timed
    std::vector<Span> spans;                   // the last iteration's prefill
    std::vector<std::vector<Span>> stepSpans;  // the last iteration's sampled decode steps (every spanStride-th)
    std::size_t sampledSteps = 0;              // of stepSpans, filled
    // Per timed prefill iteration, per layer slot (layer + 1): compute µs then comm µs of this rank,
    // flat [iteration][slot][compute, comm]; reserved in setUp.
    std::vector<double> layerSums;
    std::vector<double> iterations, steps;     // timed prefills and decode steps
    // Per phase, per collective: the elements each rank contributes or keeps (rows · piece width).
    std::vector<std::vector<std::vector<std::int64_t>>> counts;
    // An all-to-all dispatch's host side: the picks, the rows sorted by expert, each rank's counts.
    struct Dispatch
    {
        std::vector<std::int32_t> ids, sendIndex, slots, recvExperts;
        // perExpert goes out as it is and received comes back: int64, as Transformers' AllToAllEP.
        std::vector<std::int64_t> perExpert, received, cursor, split, sendCounts, recvCounts;
    } dispatch;
    std::vector<unsigned char> staging;        // 16-bit logits on their way to fp32 (rank 0)
    std::vector<float> row;                    // one row of logits (rank 0, logits not kept)
    double loadSeconds = 0;
    int node = -1;                             // where the rank is (for errors raised as exceptions)
    Progress* progress = nullptr;

    std::vector<Tensor>& t() { return ph[static_cast<std::size_t>(phase)].t; }
    const std::vector<Tensor>& t() const { return ph[static_cast<std::size_t>(phase)].t; }
    const detail::PhaseProgram& pp() const { return prog->phases[static_cast<std::size_t>(phase)]; }
};

class Runner
{
public:
    Runner(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights, const RunOptions& o)
        : m_spec(spec)
        , m_g(g)
        , m_weights(weights)
        , m_o(o)
        , m_T(g.tpSize)
        , m_N(o.batch * o.seq)
        , m_context(o.seq + o.decodeSteps)
    {
        m_events.nodes = static_cast<int>(g.graph.nodes.size());
        m_events.collectives = static_cast<int>(g.collectives.size());
        for (const NodeSharding& ns : g.nodes)
            m_dispatchOrdinal.push_back(ns.dispatch >= 0 ? m_dispatched++ : -1);
        for (const auto& n : g.graph.nodes)
            m_nvtx.push_back(nvtxName(n.name, n.layer));
        m_layerSlots = tp::layerSlots(g.graph);
        m_tokens = o.tokens;
        if (m_tokens.empty())
            for (std::int64_t i = 0; i < m_N; ++i)
                m_tokens.push_back(static_cast<std::int32_t>((i * 7919 + 13) % spec.config.vocabSize));
        for (std::int64_t i = 0; i < m_N; ++i)
            m_positions.push_back(static_cast<std::int32_t>(i % o.seq)); // prefill: every sequence from 0
        for (std::int64_t j = 0; j < o.decodeSteps; ++j) // decode step j: every sequence at seq + j
            for (std::int64_t b = 0; b < o.batch; ++b)
                m_decodePositions.push_back(static_cast<std::int32_t>(o.seq + j));
        for (const RopeTable& rt : g.graph.ropes)
            m_ropeTables.push_back(rt.cosSin(m_context, o.seq)); // prefill's rows at its length, a decode step's at its own
        // What each collective call takes besides its tensors, made once: its label, and where each
        // rank's columns end (column gathers).
        for (const Collective& c : g.collectives) {
            m_labels.push_back(m_nvtx[static_cast<std::size_t>(c.node)] + "/" + collectiveName(c.kind));
            auto& off = m_offsets.emplace_back(1, 0);
            for (const Interval& iv : c.pieces)
                off.push_back(iv.offset + iv.size);
        }
    }

    // Every rank a thread of this process.
    Result<RunResult> runThreads()
    {
        std::vector<std::unique_ptr<Backend>> backends;
        std::vector<Backend*> raw;
        for (int r = 0; r < m_T; ++r) {
            auto be = m_o.device == DeviceKind::Cuda ? makeCudaBackend(m_o.emulate ? 0 : r, m_o.dtype) : makeCpuBackend(m_o.dtype);
            if (!be)
                return be.status().withContext(fmt::format("rank {}", r));
            (*be)->setStop(m_o.stop);
            raw.push_back(be->get());
            backends.push_back(std::move(*be));
        }
        std::shared_ptr<CommGroup> group;
        if (m_o.device == DeviceKind::Cpu) {
            group = makeLocalGroup(m_T, m_o.collectiveTimeout);
        } else {
            auto made = m_o.emulate ? makeDeviceGroup(raw, m_o.collectiveTimeout) : makeNcclGroup(raw, m_o.collectiveTimeout);
            if (!made)
                return made.status();
            group = *made;
        }
        TP_RETURN_IF_ERROR(lower(raw, group->rank(0).gathersColumns()));
        TP_RETURN_IF_ERROR(checkMemory(raw, m_o.emulate || m_o.device == DeviceKind::Cpu));
        m_ranks.resize(static_cast<std::size_t>(m_T));
        m_progress = std::make_unique<Progress[]>(static_cast<std::size_t>(m_T));
        if (m_o.emulate)
            m_allSpans.reserve(static_cast<std::size_t>(m_T) * spansPerForward());
        std::vector<std::thread> threads;
        std::vector<Communicator*> comms;
        for (int r = 0; r < m_T; ++r) {
            Rank& k = m_ranks[static_cast<std::size_t>(r)];
            k.r = r;
            k.be = raw[static_cast<std::size_t>(r)];
            k.comm = &group->rank(r);
            k.prog = &m_programs[static_cast<std::size_t>(r)];
            k.progress = &m_progress[static_cast<std::size_t>(r)];
            comms.push_back(k.comm);
        }
        std::jthread watchdog = progressWatchdog(comms, 0);
        const HostLoadSampler hostLoad;
        for (int r = 0; r < m_T; ++r)
            threads.emplace_back([this, r] {
                Rank& k = m_ranks[static_cast<std::size_t>(r)];
                Status st = guarded(k);
                if (!st.ok()) {
                    {
                        // The cause wins over its consequences: ranks abandoned because of another
                        // rank's failure report Cancelled, which never replaces a real error.
                        std::lock_guard lock(m_errorMutex);
                        if (m_firstError.ok()
                            || (m_firstError.code() == StatusCode::Cancelled && st.code() != StatusCode::Cancelled))
                            m_firstError = st;
                    }
                    k.comm->abort(st.message());
                }
                k.progress->done.store(true, std::memory_order_release);
            });
        for (auto& t : threads)
            t.join();
        watchdog = {};
        if (!m_firstError.ok())
            return m_firstError;
        RunResult res = result(raw);
        res.hostOtherCores = hostLoad.otherCores();
        const int sample = representativeSample(m_ranks[0]);
        res.decode.spanStep = sample < 0 ? -1 : sample * spanStride();
        for (const Rank& k : m_ranks) {
            res.loadSeconds = std::max(res.loadSeconds, k.loadSeconds);
            res.spans.insert(res.spans.end(), k.spans.begin(), k.spans.end());
            if (sample >= 0) {
                const auto& step = k.stepSpans[static_cast<std::size_t>(sample)];
                res.decode.spans.insert(res.decode.spans.end(), step.begin(), step.end());
            }
            res.footprint.push_back(footprint(k));
        }
        res.iterationSeconds = m_ranks[0].iterations;
        res.decode.stepSeconds = m_ranks[0].steps;
        {
            std::vector<std::vector<double>> decodeSums;
            std::vector<const std::vector<double>*> prefill, decode;
            for (const Rank& k : m_ranks) {
                prefill.push_back(&k.layerSums);
                decodeSums.push_back(decodeLayerSums(k));
            }
            for (const auto& d : decodeSums)
                decode.push_back(&d);
            res.layerSamplesUs = foldLayerSums(prefill);
            if (m_o.decodeSteps > 0)
                res.decode.layerSamplesUs = foldLayerSums(decode);
        }
        m_ranks.clear(); // device memory goes back before the backends and communicators do
        return res;
    }

    // This process is one rank; every rank's spans are gathered to rank 0 as integers.
    Result<RunResult> runProcess(Communicator& host)
    {
        const int r = host.rank();
        auto be = m_o.device == DeviceKind::Cuda ? makeCudaBackend(mpiLocalRank(), m_o.dtype) : makeCpuBackend(m_o.dtype);
        if (!be)
            return be.status().withContext(fmt::format("rank {}", r));
        (*be)->setStop(m_o.stop);
        std::unique_ptr<Communicator> nccl;
        Communicator* comm = &host;
        if (m_o.device == DeviceKind::Cuda) {
            TP_ASSIGN_OR_RETURN(nccl, makeNcclCommunicator(host, **be, m_o.collectiveTimeout));
            comm = nccl.get();
        }
        m_programs.resize(static_cast<std::size_t>(m_T));
        TP_ASSIGN_OR_RETURN(m_programs[static_cast<std::size_t>(r)], detail::lowerForRank(m_spec, m_g, r, m_o.batch, m_o.seq, m_o.decodeSteps,
                                                                                               m_o.lastPositionLogits, **be,
                                                                                               comm->gathersColumns()));
        const std::vector<Backend*> mineBackend{be->get()};
        TP_RETURN_IF_ERROR(checkMemory(mineBackend, false, r));
        m_ranks.resize(1);
        m_progress = std::make_unique<Progress[]>(1);
        Rank& k = m_ranks[0];
        k.r = r;
        k.be = be->get();
        k.comm = comm;
        k.prog = &m_programs[static_cast<std::size_t>(r)];
        k.progress = &m_progress[0];
        std::jthread watchdog = progressWatchdog({comm}, r);
        Status st = guarded(k);
        k.progress->done.store(true, std::memory_order_release);
        watchdog = {};
        if (std::lock_guard lock(m_errorMutex); !m_firstError.ok() && (st.ok() || st.code() == StatusCode::Cancelled))
            st = m_firstError; // the watchdog's cause, not its consequence
        const RankFootprint mine = footprint(k);
        const std::vector<Span> spans = std::move(k.spans);
        const int mySample = representativeSample(k);
        const std::vector<double> prefillSums = std::move(k.layerSums);
        const std::vector<double> decodeSums = decodeLayerSums(k);
        const std::vector<std::vector<Span>> stepSpans = std::move(k.stepSpans);
        RunResult res = result(mineBackend);
        res.loadSeconds = k.loadSeconds;
        res.iterationSeconds = std::move(k.iterations);
        res.decode.stepSeconds = std::move(k.steps);
        m_ranks.clear(); // device memory goes back before the backend and communicator do
        if (!st.ok()) {
            comm->abort(st.message());
            return st;
        }
        std::vector<std::int64_t> all, counts;
        // Rank 0's representative decode step is every rank's.
        TP_RETURN_IF_ERROR(host.exchange(r == 0 ? std::vector<std::int64_t>{mySample} : std::vector<std::int64_t>{}, all, counts));
        const int sample = all.size() == 1 ? static_cast<int>(all[0]) : -1;
        if (sample >= static_cast<int>(stepSpans.size()))
            return Status(StatusCode::Internal, fmt::format("rank 0 chose decode sample {} of {}", sample, stepSpans.size()));
        res.decode.spanStep = sample < 0 ? -1 : sample * spanStride();
        TP_RETURN_IF_ERROR(host.exchange(std::vector<std::int64_t>{mine.weightBytes, mine.workspaceBytes, mine.allocations}, all, counts));
        for (std::size_t i = 0; i + 2 < all.size(); i += 3)
            res.footprint.push_back({all[i], all[i + 1], all[i + 2]});
        // Every rank's per-layer sums (prefill iterations, then decode samples) as integer ns.
        for (const auto* sums : {&prefillSums, &decodeSums}) {
            std::vector<std::int64_t> ns;
            ns.reserve(sums->size());
            for (double us : *sums)
                ns.push_back(std::llround(us * 1e3));
            TP_RETURN_IF_ERROR(host.exchange(ns, all, counts));
            std::vector<std::vector<double>> perRank(static_cast<std::size_t>(m_T));
            std::size_t from = 0;
            for (int p = 0; p < m_T && p < static_cast<int>(counts.size()); ++p)
                for (std::int64_t i = 0; i < counts[static_cast<std::size_t>(p)] && from < all.size(); ++i)
                    perRank[static_cast<std::size_t>(p)].push_back(static_cast<double>(all[from++]) / 1e3);
            std::vector<const std::vector<double>*> ranks;
            for (const auto& v : perRank)
                ranks.push_back(&v);
            (sums == &prefillSums ? res.layerSamplesUs : res.decode.layerSamplesUs) = foldLayerSums(ranks);
        }
        if (m_o.decodeSteps == 0)
            res.decode.layerSamplesUs.clear();
        std::vector<std::int64_t> packed; // node, collective, start ns, end ns, phase (0 prefill, 1 decode)
        auto pack = [&](const std::vector<Span>& from, std::int64_t phase) {
            for (const Span& s : from)
                packed.insert(packed.end(), {s.node, s.collective, std::llround(s.startUs * 1e3), std::llround(s.endUs * 1e3), phase});
        };
        pack(spans, 0);
        if (sample >= 0)
            pack(stepSpans[static_cast<std::size_t>(sample)], 1);
        TP_RETURN_IF_ERROR(host.exchange(packed, all, counts));
        std::size_t at = 0;
        for (int p = 0; p < m_T; ++p)
            for (std::int64_t i = 0; i < counts[static_cast<std::size_t>(p)]; i += 5, at += 5) {
                Span s;
                s.rank = p;
                s.node = static_cast<int>(all[at]);
                s.collective = static_cast<int>(all[at + 1]);
                s.startUs = static_cast<double>(all[at + 2]) / 1e3;
                s.endUs = static_cast<double>(all[at + 3]) / 1e3;
                if (s.node < 0 || static_cast<std::size_t>(s.node) >= m_g.graph.nodes.size()
                    || s.collective >= static_cast<int>(m_g.collectives.size()))
                    return Status(StatusCode::Internal, fmt::format("rank {} reported a span of node {}", p, s.node));
                s.layer = m_g.graph.nodes[static_cast<std::size_t>(s.node)].layer;
                const bool decoding = all[at + 4] == 1;
                s.bytes = s.collective >= 0 ? collectiveBytes(s.collective, decoding ? 1 : m_o.seq) : 0;
                (decoding ? res.decode.spans : res.spans).push_back(s);
            }
        return res;
    }

private:
    // A run of one rank has no collective whose watchdog would notice a rank that stops: it must
    // make progress (a node, a weight loaded) within the collective timeout, else the run ends with
    // the node named and its communicator aborted. (With more ranks a stuck one leaves the others
    // waiting in a collective or barrier, whose watchdog names it.) `firstRank`: the rank of comms[0].
    std::jthread progressWatchdog(const std::vector<Communicator*>& comms, int firstRank)
    {
        if (m_T > 1)
            return {};
        return std::jthread([this, comms, firstRank](std::stop_token stop) {
            const std::size_t n = comms.size();
            std::vector<std::int64_t> seen(n, -1);
            std::vector<Clock::time_point> since(n, Clock::now());
            while (!stop.stop_requested()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                for (std::size_t i = 0; i < n; ++i) {
                    const Progress& p = m_progress[i];
                    if (p.done.load(std::memory_order_acquire) || comms[i]->aborted())
                        continue;
                    if (const std::int64_t b = p.beats.load(std::memory_order_relaxed); b != seen[i]) {
                        seen[i] = b;
                        since[i] = Clock::now();
                        continue;
                    }
                    if (Clock::now() - since[i] < m_o.collectiveTimeout)
                        continue;
                    const int node = p.node.load(std::memory_order_relaxed);
                    const std::string why = fmt::format(
                        "rank {}, {}: no progress for {} ms (watchdog)", firstRank + static_cast<int>(i),
                        node < 0 ? std::string("loading weights")
                                 : fmt::format("node {}", m_g.graph.nodes[static_cast<std::size_t>(node)].name),
                        m_o.collectiveTimeout.count());
                    {
                        std::lock_guard lock(m_errorMutex);
                        if (m_firstError.ok() || m_firstError.code() == StatusCode::Cancelled)
                            m_firstError = Status(StatusCode::DeadlineExceeded, why);
                    }
                    for (Communicator* c : comms)
                        c->abort(why);
                    return;
                }
            }
        });
    }

    Status lower(const std::vector<Backend*>& backends, bool columnGather)
    {
        for (int r = 0; r < m_T; ++r) {
            TP_ASSIGN_OR_RETURN(auto p, detail::lowerForRank(m_spec, m_g, r, m_o.batch, m_o.seq, m_o.decodeSteps,
                                                             m_o.lastPositionLogits, *backends[static_cast<std::size_t>(r)],
                                                             columnGather));
            m_programs.push_back(std::move(p));
        }
        return {};
    }

    // Token ids and positions of prefill and of the decode steps, and the rotary tables.
    std::int64_t inputBytes() const
    {
        auto aligned = [](std::int64_t n) { return (n + 255) / 256 * 256; };
        std::int64_t b = 2 * aligned(4 * m_N) + aligned(4 * m_o.batch) + aligned(4 * m_o.batch * m_o.decodeSteps);
        for (const auto& t : m_ropeTables)
            b += aligned(static_cast<std::int64_t>(t.size()) * 4);
        return b;
    }

    // Refuses before allocating what does not fit: per device, or summed when ranks share one (the
    // host's memory also holds rank 0's logits when they come back whole).
    Status checkMemory(const std::vector<Backend*>& backends, bool shared, int firstRank = 0) const
    {
        auto need = [&](std::size_t i) {
            const RankProgram& p = m_programs[static_cast<std::size_t>(firstRank) + i];
            return p.weightBytes + p.arenaBytes + inputBytes();
        };
        std::int64_t total = 0;
        for (std::size_t i = 0; i < backends.size(); ++i)
            total += need(i);
        // fp32 on the host, and the stored values on their way there when they are 16-bit.
        const std::int64_t logits = m_o.keepLogits && firstRank == 0
            ? ((m_o.lastPositionLogits ? m_o.batch : m_N) + m_o.decodeSteps * m_o.batch) * m_spec.config.vocabSize * (4 + (m_o.dtype == DType::F32 ? 0 : dtypeBytes(m_o.dtype, 1)))
            : 0;
        for (std::size_t i = 0; i < backends.size(); ++i) {
            const int r = firstRank + static_cast<int>(i);
            const RankProgram& p = m_programs[static_cast<std::size_t>(r)];
            const bool host = backends[i]->device() == DeviceKind::Cpu;
            const std::int64_t want = (shared ? total : need(i)) + (host ? logits : 0);
            const bool budget = host && m_o.maxHostBytes > 0;
            const std::int64_t have = budget ? m_o.maxHostBytes : backends[i]->availableBytes();
            if (want > have)
                return Status(StatusCode::ResourceExhausted,
                              fmt::format("rank {} needs {} ({} weights, {} activations, KV cache and scratch){}{} but {} has {} "
                                          "{}; nothing was allocated",
                                          r, humanBytes(static_cast<double>(need(i))), humanBytes(static_cast<double>(p.weightBytes)),
                                          humanBytes(static_cast<double>(p.arenaBytes)),
                                          shared && backends.size() > 1 ? fmt::format(", {} for all {} ranks together", humanBytes(static_cast<double>(total)), backends.size()) : "",
                                          host && logits > 0 ? fmt::format(", and {} for the logits", humanBytes(static_cast<double>(logits))) : "",
                                          backends[i]->name(), humanBytes(static_cast<double>(have)),
                                          budget ? "in the --max-memory budget" : "available"));
        }
        return {};
    }

    RunResult result(const std::vector<Backend*>& backends)
    {
        RunResult res;
        res.tpSize = m_T;
        res.vocab = m_spec.config.vocabSize;
        res.emulated = m_o.emulate;
        res.logits = std::move(m_logits);
        res.stepLogits = std::move(m_stepLogits);
        res.decode.steps = m_o.decodeSteps;
        res.decode.batch = m_o.decodeSteps > 0 ? m_o.batch : 0;
        for (std::int64_t b = 0; b < res.decode.batch; ++b) { // per token every sequence's → per sequence its tokens
            auto& tokens = res.decode.generated.emplace_back();
            for (std::size_t i = 0; i < m_generatedCount; ++i)
                tokens.push_back(m_generated[i][static_cast<std::size_t>(b)]);
        }
        std::vector<std::string> names;
        for (const Backend* b : backends)
            if (std::find(names.begin(), names.end(), b->name()) == names.end())
                names.push_back(b->name());
        res.devices = fmt::format("{}", fmt::join(names, ", "));
        return res;
    }

    // Layer slots of a forward: one per decoder layer and one (slot 0) for what lies outside them.
    std::size_t layerSlots() const { return m_layerSlots; }

    // Appends one forward's per-slot compute and comm µs of one rank to `out` ([slot][compute, comm]).
    void addLayerSums(const std::vector<Span>& spans, std::vector<double>& out) const
    {
        const std::size_t L = layerSlots(), at = out.size();
        out.resize(at + 2 * L, 0.0);
        for (const Span& s : spans) {
            const auto slot = static_cast<std::size_t>(s.layer + 1);
            if (slot < L)
                out[at + 2 * slot + (s.collective >= 0 ? 1 : 0)] += s.endUs - s.startUs;
        }
    }

    // Every rank's sums ([sample][slot][compute, comm], one vector per rank) folded as the record
    // folds a forward's spans: per layer the slowest rank's compute plus the slowest rank's comm.
    // Returns [slot][sample]; empty when the ranks disagree on the number of samples.
    std::vector<std::vector<double>> foldLayerSums(const std::vector<const std::vector<double>*>& ranks) const
    {
        const std::size_t L = layerSlots();
        if (ranks.empty() || L == 0 || ranks[0]->size() % (2 * L) != 0)
            return {};
        const std::size_t samples = ranks[0]->size() / (2 * L);
        for (const auto* r : ranks)
            if (r->size() != samples * 2 * L)
                return {};
        std::vector<std::vector<double>> out(L, std::vector<double>(samples, 0.0));
        for (std::size_t i = 0; i < samples; ++i)
            for (std::size_t l = 0; l < L; ++l) {
                double c = 0, m = 0;
                for (const auto* r : ranks) {
                    c = std::max(c, (*r)[(i * L + l) * 2]);
                    m = std::max(m, (*r)[(i * L + l) * 2 + 1]);
                }
                out[l][i] = c + m;
            }
        return out;
    }

    // One rank's sums of the last iteration's sampled decode steps.
    std::vector<double> decodeLayerSums(const Rank& k) const
    {
        std::vector<double> out;
        for (const auto& step : k.stepSpans)
            addLayerSums(step, out);
        return out;
    }

    // Spans are kept for at most kSpanSamples evenly spaced steps of the last iteration (memory
    // bounded whatever the number of steps): every spanStride()-th step.
    static constexpr int kSpanSamples = 64;
    int spanStride() const { return std::max(1, (m_o.decodeSteps + kSpanSamples - 1) / kSpanSamples); }

    // The sampled step of the last iteration whose time is the median of the sampled steps' (an
    // index into stepSpans; -1: no decode).
    int representativeSample(const Rank& k) const
    {
        const int n = m_o.decodeSteps, stride = spanStride();
        const int samples = static_cast<int>(k.stepSpans.size());
        if (n == 0 || static_cast<int>(k.steps.size()) < n || samples != (n + stride - 1) / stride)
            return -1;
        std::vector<int> order(static_cast<std::size_t>(samples));
        std::iota(order.begin(), order.end(), 0);
        const double* last = k.steps.data() + (k.steps.size() - static_cast<std::size_t>(n));
        std::nth_element(order.begin(), order.begin() + samples / 2, order.end(),
                         [&](int a, int b) { return last[a * stride] < last[b * stride]; });
        return order[static_cast<std::size_t>(samples / 2)];
    }

    static RankFootprint footprint(const Rank& k)
    {
        return {k.prog->weightBytes, k.prog->arenaBytes, k.be->stats().allocations};
    }

    // The full tensor's bytes of a collective, in prefill (seq tokens per sequence) or a decode step (1).
    std::int64_t collectiveBytes(int c, std::int64_t seq) const
    {
        return m_g.collectives[static_cast<std::size_t>(c)].bytes(m_o.batch, seq, dtypeBytes(m_o.dtype, 1));
    }

    // --- one rank -----------------------------------------------------------------------------
    // Nothing may escape a rank's thread: exceptions (allocation failures above all) become errors
    // that name the rank and the node.
    Status guarded(Rank& k)
    {
        auto where = [&] {
            return k.node >= 0 ? fmt::format("rank {}, node {}", k.r, m_g.graph.nodes[static_cast<std::size_t>(k.node)].name)
                               : fmt::format("rank {}, loading weights", k.r);
        };
        try {
            TP_RETURN_IF_ERROR(setUp(k));
            return iterate(k);
        } catch (const std::bad_alloc&) {
            return Status(StatusCode::ResourceExhausted, fmt::format("{}: out of memory", where()));
        } catch (const std::exception& e) {
            return Status(StatusCode::Internal, fmt::format("{}: {}", where(), e.what()));
        } catch (...) {
            return Status(StatusCode::Internal, fmt::format("{}: unknown exception", where()));
        }
    }

    // Allocates the rank's three buffers, places every tensor, loads the weights and the inputs.
    Status setUp(Rank& k)
    {
        const auto t0 = Clock::now();
        Backend& be = *k.be;
        const RankProgram& p = *k.prog;
        TP_ASSIGN_OR_RETURN(k.weightMem, be.allocate(p.weightBytes));
        TP_ASSIGN_OR_RETURN(k.arenaMem, be.allocate(p.arenaBytes));
        TP_ASSIGN_OR_RETURN(k.inputMem, be.allocate(inputBytes()));
        const DeviceKind dev = be.device();
        for (std::size_t i = 0; i < m_g.params.size(); ++i) {
            const auto [rows, cols] = p.weightShapes[i];
            k.weights.push_back(Tensor::contiguous(static_cast<char*>(k.weightMem.data()) + p.weightOffsets[i], be.storage(),
                                                   rows, cols, dev));
        }
        auto inArena = [&](const detail::ProgramTensor& pt) {
            char* base = pt.block < 0 ? nullptr
                                      : static_cast<char*>(k.arenaMem.data()) + p.blocks[static_cast<std::size_t>(pt.block)].offset + pt.within;
            Tensor t = Tensor::contiguous(base, pt.dtype, pt.rows, pt.cols, dev);
            if (pt.stride > 0)
                t.stride = pt.stride; // a rank's columns of a gathered output
            return t;
        };
        for (const detail::PhaseProgram& phase : p.phases) {
            PhaseTensors& pt = k.ph.emplace_back();
            for (const auto& t : phase.tensors)
                pt.t.push_back(inArena(t));
        }
        for (const auto& t : p.cache)
            k.cache.push_back(inArena(t));
        // Inputs: token ids, positions, rotary tables.
        char* in = static_cast<char*>(k.inputMem.data());
        auto place = [&](DType dt, std::int64_t rows, std::int64_t cols) {
            Tensor t = Tensor::contiguous(in, dt, rows, cols, dev);
            in += (t.bytes() + 255) / 256 * 256;
            return t;
        };
        // Graph tensor 0 is input_ids (the one tensor no node produces): the prompt in prefill; a
        // decode step's, written by the sampling that ends the forward before it.
        PhaseTensors& prefill = k.ph[0];
        prefill.t[0] = place(DType::I32, 1, m_N);
        TP_RETURN_IF_ERROR(be.upload(m_tokens.data(), prefill.t[0]));
        prefill.positions = place(DType::I32, 1, m_N);
        TP_RETURN_IF_ERROR(be.upload(m_positions.data(), prefill.positions));
        if (m_o.decodeSteps > 0) {
            k.ph[1].t[0] = place(DType::I32, 1, m_o.batch);
            k.decodePositions = place(DType::I32, 1, m_o.batch * m_o.decodeSteps);
            TP_RETURN_IF_ERROR(be.upload(m_decodePositions.data(), k.decodePositions));
        }
        for (std::size_t i = 0; i < m_ropeTables.size(); ++i) {
            k.ropes.push_back(place(DType::F32, m_context, m_g.graph.ropes[i].headDim));
            TP_RETURN_IF_ERROR(be.upload(m_ropeTables[i].data(), k.ropes.back()));
        }
        TP_RETURN_IF_ERROR(loadWeights(k));
        TP_RETURN_IF_ERROR(be.reserveEvents(m_events.count(m_dispatched)));
        prepareIterations(k);
        TP_RETURN_IF_ERROR(be.synchronize());
        k.loadSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
        return {};
    }

    // Everything the iterations write on the host, at its final size, before the warm-up: nothing is
    // allocated (nor grows, nor faults its pages in for the first time) inside the timed loop.
    void prepareIterations(Rank& k)
    {
        const RankProgram& p = *k.prog;
        k.counts.resize(p.phases.size());
        for (std::size_t ph = 0; ph < p.phases.size(); ++ph)
            for (std::size_t ci = 0; ci < m_g.collectives.size(); ++ci) {
                const int out = p.phases[ph].collectives[ci].output;
                const std::int64_t rows = out < 0 ? 0 : p.phases[ph].tensors[static_cast<std::size_t>(out)].rows;
                auto& counts = k.counts[ph].emplace_back();
                const Collective& c = m_g.collectives[ci];
                if (c.sequence) // each rank's token rows, all features
                    for (int r = 0; r < m_T; ++r)
                        counts.push_back(sequenceRows(p.phases[ph].tokens, m_T, r).size * c.featuresPerToken);
                for (const Interval& iv : c.pieces)
                    counts.push_back(rows * iv.size);
            }
        // A dispatch's tables at their largest: this rank's picks, every rank's received.
        std::size_t picks = 0, received = 0;
        for (const detail::PhaseProgram& ph : p.phases)
            for (const detail::DispatchProgram& d : ph.dispatch)
                if (d.dispatch >= 0) {
                    picks = std::max(picks, static_cast<std::size_t>(ph.tensors[static_cast<std::size_t>(d.slots)].cols));
                    received = std::max(received, static_cast<std::size_t>(ph.tensors[static_cast<std::size_t>(d.recv)].rows));
                }
        if (m_dispatched > 0) {
            const auto E = static_cast<std::size_t>(p.phases[0].experts[static_cast<std::size_t>(firstDispatched())].experts);
            Rank::Dispatch& d = k.dispatch;
            d.ids.assign(picks, 0);
            d.sendIndex.assign(picks, 0);
            d.slots.assign(picks, 0);
            d.recvExperts.assign(received, 0);
            d.perExpert.assign(E, 0);
            d.cursor.assign(E + 1, 0);
            d.received.assign(E, 0); // T ranks' counts of El = E / T experts
            d.split.assign(static_cast<std::size_t>(m_T), static_cast<std::int64_t>(E) / m_T);
            d.sendCounts.assign(static_cast<std::size_t>(m_T), 0);
            d.recvCounts.assign(static_cast<std::size_t>(m_T), 0);
        }
        // The communicator's label holds the longest one from now on.
        std::size_t longest = 0;
        for (const std::string& l : m_labels)
            longest = std::max(longest, l.size());
        k.comm->setLabel(std::string(longest, ' '));
        k.comm->setLabel("");
        const std::size_t spans = spansPerForward();
        k.lastSpans.reserve(spans);
        k.spans.reserve(spans);
        k.stepSpans.resize(static_cast<std::size_t>(m_o.decodeSteps > 0 ? (m_o.decodeSteps + spanStride() - 1) / spanStride() : 0));
        for (auto& step : k.stepSpans)
            step.reserve(spans);
        k.iterations.reserve(static_cast<std::size_t>(std::max(m_o.iterations, 1)));
        k.layerSums.reserve(static_cast<std::size_t>(std::max(m_o.iterations, 1)) * 2 * layerSlots());
        k.steps.reserve(static_cast<std::size_t>(std::max(m_o.iterations, 1)) * static_cast<std::size_t>(m_o.decodeSteps));
        if (m_o.decodeSteps > 0)
            k.ids.assign(static_cast<std::size_t>(m_o.batch), 0);
        const GraphNode* logits = logitsNode();
        if (k.r != 0 || !logits)
            return;
        // Rank 0's logits of the last iteration: prefill's (all positions, or the last ones) and every
        // decode step's, each in its place; the generated tokens.
        auto logitsOf = [&](std::size_t ph) { return p.phases[ph].tensors[static_cast<std::size_t>(logits->inputs[0])]; };
        std::int64_t widest = 0;
        if (m_o.keepLogits) {
            const detail::ProgramTensor prefill = logitsOf(0);
            m_logits.assign(static_cast<std::size_t>(prefill.rows * prefill.cols), 0.0f);
            widest = prefill.rows * prefill.cols;
            if (m_o.decodeSteps > 0) {
                const detail::ProgramTensor step = logitsOf(1);
                m_stepLogits.assign(static_cast<std::size_t>(m_o.decodeSteps * step.rows * step.cols), 0.0f);
                widest = std::max(widest, step.rows * step.cols);
            }
        } else {
            k.row.assign(static_cast<std::size_t>(logitsOf(0).cols), 0.0f);
            widest = logitsOf(0).cols;
        }
        if (m_o.dtype != DType::F32)
            k.staging.assign(static_cast<std::size_t>(dtypeBytes(m_o.dtype, widest)), 0);
        if (m_o.decodeSteps > 0)
            m_generated.assign(static_cast<std::size_t>(m_o.decodeSteps) + 1, std::vector<std::int32_t>(static_cast<std::size_t>(m_o.batch), 0));
        m_generatedCount = 0;
    }

    // Spans of one forward: one per node, one per collective, two more per dispatched experts node
    // (its experts and its combine, between its all-to-alls).
    std::size_t spansPerForward() const
    {
        return m_g.graph.nodes.size() + m_g.collectives.size() + 2 * static_cast<std::size_t>(m_dispatched);
    }
    int firstDispatched() const
    {
        return static_cast<int>(std::find_if(m_dispatchOrdinal.begin(), m_dispatchOrdinal.end(), [](int d) { return d >= 0; })
                                - m_dispatchOrdinal.begin());
    }

    Status loadWeights(Rank& k)
    {
        std::vector<float> wide;            // one parameter as fp32 (checkpoints)
        std::vector<unsigned char> stored;  // … in the storage dtype
        for (std::size_t i = 0; i < m_g.params.size(); ++i) {
            k.progress->beat(-1);
            const ParamShard& s = m_g.params[i];
            const Tensor& w = k.weights[i];
            if (s.tied && std::any_of(m_g.params.begin(), m_g.params.begin() + static_cast<std::ptrdiff_t>(i),
                                      [&](const ParamShard& o) { return k.weights[static_cast<std::size_t>(&o - m_g.params.data())].data == w.data; }))
                continue; // shares its owner's tensor, already loaded
            if (!m_weights.checkpoint) {
                TP_RETURN_IF_ERROR(k.be->fillUniform(w, randomParamShard(m_spec, m_g, i, k.r, m_weights.seed)));
                continue;
            }
            wide.resize(static_cast<std::size_t>(w.numel()));
            TP_RETURN_IF_ERROR(readParamShard(m_spec, m_g, i, k.r, *m_weights.checkpoint, wide.data()));
            if (const ValueCheck c = checkValues(wide.data(), w.numel(), w.dtype); c.nonFinite + c.outOfRange > 0)
                return invalidArgument(
                    c.nonFinite > 0
                        ? fmt::format("parameter '{}' holds {} NaN or infinite values in the checkpoint", s.path, c.nonFinite)
                        : fmt::format("parameter '{}' holds {} values beyond what {} storage can hold (e.g. {}); run it "
                                      "with --dtype bf16 or f32",
                                      s.path, c.outOfRange, dtypeName(w.dtype), c.first));
            stored.resize(static_cast<std::size_t>(w.bytes()));
            fromFloat(wide.data(), w.dtype, stored.data(), w.numel());
            TP_RETURN_IF_ERROR(k.be->upload(stored.data(), w));
        }
        return {};
    }

    // One forward of the current phase: every node, then (decoding) the greedy pick of each
    // sequence's next token into the decode step's ids; returns when the device is done.
    Status forward(Rank& k)
    {
        // A rank that fails while it holds the device lets the others on (they are then aborted).
        struct Release
        {
            Rank& k;
            ~Release()
            {
                if (k.turn.owns_lock())
                    k.turn.unlock();
            }
        } release{k};
        TP_RETURN_IF_ERROR(k.be->record(0, Stream::Compute));
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            k.node = static_cast<int>(ni);
            k.progress->beat(k.node);
            if (m_o.stop.stop_requested())
                return Status(StatusCode::Cancelled, fmt::format("rank {}: run cancelled", k.r));
            TP_RETURN_IF_ERROR(node(k, static_cast<int>(ni)));
        }
        TP_RETURN_IF_ERROR(yieldDevice(k));
        if (m_o.decodeSteps > 0)
            TP_RETURN_IF_ERROR(k.be->argmax(lastLogits(k), k.ph[1].t[0]));
        TP_RETURN_IF_ERROR(k.comm->synchronize()); // the watchdog sees a hung collective here
        TP_RETURN_IF_ERROR(k.be->synchronize());
        if (m_o.decodeSteps > 0)
            TP_RETURN_IF_ERROR(k.be->download(k.ph[1].t[0], k.ids.data()));
        return {};
    }

    // Spans of the forward just run, when they are kept (`keep`) or emulation needs them: emulated
    // runs re-time the forward as T devices would (rank 0 computes it once every rank's spans are
    // in) and return that time instead of `measured`.
    Result<double> spansOf(Rank& k, double measured, bool keep)
    {
        if (!keep && !m_o.emulate)
            return measured;
        TP_RETURN_IF_ERROR(collectSpans(k));
        if (!m_o.emulate)
            return measured;
        TP_RETURN_IF_ERROR(k.comm->barrier());
        if (k.r == 0)
            m_emulatedSeconds = emulatedIteration();
        TP_RETURN_IF_ERROR(k.comm->barrier());
        return m_emulatedSeconds;
    }

    Status iterate(Rank& k)
    {
        const int total = m_o.warmup + std::max(m_o.iterations, 1);
        for (int it = 0; it < total; ++it) {
            const bool warm = it < m_o.warmup, last = it + 1 == total;
            k.phase = 0;
            k.past = 0;
            TP_RETURN_IF_ERROR(k.comm->barrier());
            const auto t0 = Clock::now();
            TP_RETURN_IF_ERROR(forward(k));
            TP_RETURN_IF_ERROR(k.comm->barrier());
            TP_ASSIGN_OR_RETURN(const double secs, spansOf(k, std::chrono::duration<double>(Clock::now() - t0).count(), !warm));
            if (!warm) {
                k.iterations.push_back(secs);
                addLayerSums(k.lastSpans, k.layerSums); // within the capacity setUp reserved
            }
            if (last) {
                k.spans = k.lastSpans;
                if (k.r == 0)
                    TP_RETURN_IF_ERROR(readLogits(k)); // before a decode step reuses the arena
            }
            if (k.r == 0 && m_o.progress)
                m_o.progress(warm ? it : it - m_o.warmup, warm, secs);
            // Decode: each step reads the token the last forward picked and appends to the caches.
            k.phase = 1;
            if (last)
                k.sampledSteps = 0;
            for (int j = 0; j < m_o.decodeSteps; ++j) {
                if (last && k.r == 0)
                    m_generated[m_generatedCount++] = k.ids;
                k.past = m_o.seq + j;
                k.ph[1].positions = k.decodePositions.columns(j * m_o.batch, m_o.batch);
                const auto s0 = Clock::now();
                TP_RETURN_IF_ERROR(forward(k));
                const bool sampled = last && j % spanStride() == 0;
                TP_ASSIGN_OR_RETURN(const double step, spansOf(k, std::chrono::duration<double>(Clock::now() - s0).count(), sampled));
                if (!warm)
                    k.steps.push_back(step);
                if (last) {
                    if (sampled)
                        k.stepSpans[k.sampledSteps++] = k.lastSpans; // into the capacity setUp reserved
                    if (k.r == 0)
                        TP_RETURN_IF_ERROR(readLogits(k));
                }
                if (k.r == 0 && m_o.stepProgress)
                    m_o.stepProgress(warm ? it : it - m_o.warmup, warm, j, step);
            }
            if (last && k.r == 0 && m_o.decodeSteps > 0)
                m_generated[m_generatedCount++] = k.ids;
            TP_RETURN_IF_ERROR(k.comm->barrier());
        }
        k.stepSpans.resize(k.sampledSteps); // (all of them, when the last iteration finished)
        return {};
    }

    const GraphNode* logitsNode() const
    {
        const auto n = std::find_if(m_g.graph.nodes.begin(), m_g.graph.nodes.end(),
                                    [](const GraphNode& x) { return x.kind == OpKind::Logits; });
        return n == m_g.graph.nodes.end() ? nullptr : &*n;
    }

    // Rows seq − 1, 2·seq − 1, … of a [B·seq, n] tensor: each sequence's last position.
    Tensor lastPositions(const Tensor& x, std::int64_t seq) const
    {
        if (x.rows == m_o.batch)
            return x; // already one row per sequence
        Tensor t = x.rowRange(seq - 1, 1);
        t.rows = m_o.batch;
        t.stride *= seq;
        return t;
    }

    // The logits that pick each sequence's next token: its last position's row.
    Tensor lastLogits(const Rank& k) const
    {
        return lastPositions(k.t()[static_cast<std::size_t>(logitsNode()->inputs[0])], k.pp().seq);
    }

    // Rank 0's logits of the forward just run, in the last iteration: kept whole (keepLogits), or
    // read a row at a time where the finiteness check needs them (every sequence's last position,
    // of prefill and of the last decode step). Either way they must be finite numbers.
    Status readLogits(Rank& k)
    {
        const GraphNode* logits = logitsNode();
        if (!logits)
            return {};
        const bool decoding = k.phase == 1;
        if (!m_o.keepLogits && decoding && k.past + 1 < m_context)
            return {};
        const Tensor& t = k.t()[static_cast<std::size_t>(logits->inputs[0])];
        auto read = [&](const Tensor& part, float* into) { return downloadFloat(k, part, into); };
        std::int64_t bad = 0, seen = 0;
        if (m_o.keepLogits) { // into their place in the buffers prepareIterations sized
            std::vector<float>& into = decoding ? m_stepLogits : m_logits;
            const std::size_t at = decoding ? static_cast<std::size_t>((k.past - m_o.seq) * t.numel()) : 0;
            if (at + static_cast<std::size_t>(t.numel()) > into.size())
                return Status(StatusCode::Internal, fmt::format("rank 0: logits of {} values beyond the {} set aside",
                                                                at + static_cast<std::size_t>(t.numel()), into.size()));
            TP_RETURN_IF_ERROR(read(t, into.data() + at));
            bad = checkValues(into.data() + at, t.numel(), DType::F32).nonFinite;
            seen = t.numel();
        } else { // one row at a time, through one row's buffer
            const Tensor rows = lastLogits(k);
            for (std::int64_t b = 0; b < m_o.batch; ++b) {
                TP_RETURN_IF_ERROR(read(rows.rowRange(b, 1), k.row.data()));
                bad += checkValues(k.row.data(), t.cols, DType::F32).nonFinite;
                seen += t.cols;
            }
        }
        if (bad > 0) {
            m_nonFiniteLogits = true;
            return Status(StatusCode::DataLoss,
                          fmt::format("rank 0: {} of {} logits{}{} are NaN or infinite: the activations overflowed {} "
                                      "storage, or the weights hold NaN",
                                      bad, seen, m_o.keepLogits ? "" : " at the sequences' last positions",
                                      decoding ? fmt::format(" of decode step {}", k.past - m_o.seq) : "", dtypeName(m_o.dtype)));
        }
        return {};
    }

    // A tensor of any storage dtype as fp32 on the host (the device finished writing it).
    Status downloadFloat(Rank& k, const Tensor& part, float* into)
    {
        if (part.dtype == DType::F32)
            return k.be->download(part, into);
        if (k.staging.size() < static_cast<std::size_t>(part.bytes())) // only checkFinite's reads are wider than the logits
            k.staging.resize(static_cast<std::size_t>(part.bytes()));
        TP_RETURN_IF_ERROR(k.be->download(part, k.staging.data()));
        toFloat(k.staging.data(), part.dtype, into, part.numel());
        return {};
    }

    // RunOptions::checkFinite: the node's outputs, after its collective, must be finite numbers.
    Status checkNodeFinite(Rank& k, const GraphNode& n)
    {
        TP_RETURN_IF_ERROR(k.be->synchronize());
        std::vector<float> v;
        for (int o : n.outputs) {
            const Tensor& t = k.t()[static_cast<std::size_t>(o)];
            if (t.numel() == 0)
                continue;
            v.resize(static_cast<std::size_t>(t.numel()));
            TP_RETURN_IF_ERROR(downloadFloat(k, t, v.data()));
            if (const auto c = checkValues(v.data(), t.numel(), DType::F32); c.nonFinite > 0)
                return Status(StatusCode::DataLoss,
                              fmt::format("the first non-finite activation is the output of node {} ({}) on rank {}: {} of "
                                          "{} values are NaN or infinite, every earlier node's are finite",
                                          n.name, opKindName(n.kind), k.r, c.nonFinite, t.numel()));
        }
        return {};
    }

public:
    bool nonFiniteLogits() const { return m_nonFiniteLogits; }

private:

    Status collectSpans(Rank& k)
    {
        k.lastSpans.clear();
        for (std::size_t ni = 0; ni < m_g.graph.nodes.size(); ++ni) {
            const int n = static_cast<int>(ni);
            const GraphNode& gn = m_g.graph.nodes[ni];
            TP_ASSIGN_OR_RETURN(const double s, k.be->elapsedUs(0, m_events.begin(n)));
            TP_ASSIGN_OR_RETURN(const double e, k.be->elapsedUs(0, m_events.end(n)));
            k.lastSpans.push_back({k.r, n, -1, gn.layer, s, e, 0});
            if (const int d = m_dispatchOrdinal[ni]; d >= 0) { // the all-to-alls and the compute between them
                auto collectiveSpan = [&](int c) -> Status {
                    TP_ASSIGN_OR_RETURN(const double cs, k.be->elapsedUs(0, m_events.collective(c, 0)));
                    TP_ASSIGN_OR_RETURN(const double ce, k.be->elapsedUs(0, m_events.collective(c, 3)));
                    k.lastSpans.push_back({k.r, n, c, gn.layer, cs, ce, collectiveBytes(c, k.pp().seq)});
                    return {};
                };
                auto computeSpan = [&](int part) -> Status {
                    TP_ASSIGN_OR_RETURN(const double ps, k.be->elapsedUs(0, m_events.part(d, 2 * part)));
                    TP_ASSIGN_OR_RETURN(const double pe, k.be->elapsedUs(0, m_events.part(d, 2 * part + 1)));
                    k.lastSpans.push_back({k.r, n, -1, gn.layer, ps, pe, 0});
                    return {};
                };
                const int c = m_g.nodes[ni].dispatch; // counts, rows, experts, rows back, combine
                TP_RETURN_IF_ERROR(collectiveSpan(c));
                TP_RETURN_IF_ERROR(collectiveSpan(c + 1));
                TP_RETURN_IF_ERROR(computeSpan(0));
                TP_RETURN_IF_ERROR(collectiveSpan(c + 2));
                TP_RETURN_IF_ERROR(computeSpan(1));
            }
            if (const int c = k.prog->collectiveOf[ni]; c >= 0) {
                TP_ASSIGN_OR_RETURN(const double cs, k.be->elapsedUs(0, m_events.collective(c, 0)));
                TP_ASSIGN_OR_RETURN(const double ce, k.be->elapsedUs(0, m_events.collective(c, 3)));
                k.lastSpans.push_back({k.r, n, c, gn.layer, cs, ce, collectiveBytes(c, k.pp().seq)});
            }
        }
        return {};
    }

    double emulatedIteration()
    {
        std::vector<Span>& all = m_allSpans; // reserved for every rank's spans before the ranks start
        all.clear();
        for (const Rank& k : m_ranks)
            all.insert(all.end(), k.lastSpans.begin(), k.lastSpans.end());
        const double us = emulateTimeline(all, m_T, [&](const Span& s) {
            const Collective& c = m_g.collectives[static_cast<std::size_t>(s.collective)];
            return 1e6 * m_o.commModel->collectiveSeconds(c.kind, s.bytes, m_T);
        });
        std::size_t at = 0;
        for (Rank& k : m_ranks)
            for (Span& s : k.lastSpans)
                s = all[at++];
        return us / 1e6;
    }

    // --- one node -----------------------------------------------------------------------------
    Status injectFault(Rank& k, const GraphNode& n)
    {
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

    Status node(Rank& k, int ni)
    {
        const GraphNode& n = m_g.graph.nodes[static_cast<std::size_t>(ni)];
        if (k.r == m_o.failRank && n.name == m_o.failNode)
            return injectFault(k, n);
        const int d = m_dispatchOrdinal[static_cast<std::size_t>(ni)];
        if (Status st = d >= 0 ? dispatchedExperts(k, n, ni, d)
                               : compute(k, m_events.begin(ni), m_events.end(ni), ni, [&] { return op(k, n, ni); });
            !st.ok())
            return st.withContext(fmt::format("rank {}, node {}", k.r, n.name));
        if (const int c = k.prog->collectiveOf[static_cast<std::size_t>(ni)]; c >= 0)
            if (Status st = collective(k, c); !st.ok())
                return st.withContext(fmt::format("node {}", n.name)); // the communicator names the rank
        if (m_o.checkFinite)
            return checkNodeFinite(k, n);
        return {};
    }

    // A node's compute between events `begin` and `end`. Emulation: one rank on the device at a
    // time, from its first op after a collective to the next collective (yieldDevice), so that each
    // op is timed alone and yet queued behind the one before, as on a GPU of its own. (Waiting for
    // every op before the next paid a launch from an idle stream per op: at T=8 on Llama-3.1-8B's
    // shapes that tripled the emulated per-rank compute on an H200.)
    template<typename Op>
    Status compute(Rank& k, int begin, int end, int ni, Op&& op)
    {
        Backend& be = *k.be;
        if (m_o.emulate && !k.turn.owns_lock())
            k.turn = std::unique_lock(m_turnstile);
        const NvtxRange range(m_nvtx[static_cast<std::size_t>(ni)]);
        TP_RETURN_IF_ERROR(be.record(begin, Stream::Compute));
        TP_RETURN_IF_ERROR(op());
        return be.record(end, Stream::Compute);
    }

    // Emulation: the rank's ops so far are done; the device is the other ranks' until its next op.
    // Before every collective (they wait for every rank) and at the end of the forward.
    Status yieldDevice(Rank& k)
    {
        if (!k.turn.owns_lock())
            return {};
        const Status st = k.be->synchronize();
        k.turn.unlock();
        return st;
    }

    // Experts whose tokens an all-to-all dispatches, as Transformers' AllToAllEP: this rank's token
    // rows pick their experts; the (token, expert) pairs, sorted by expert (so by owner), go to the
    // experts' ranks, with every rank's per-expert counts exchanged first (the layer's host sync);
    // each rank runs its experts on what it received, top-1 with weight 1; a second all-to-all brings
    // the outputs back, and the sender weights and sums them into its rows of the output (the node's
    // all-gather, after this, joins the rows).
    Status dispatchedExperts(Rank& k, const GraphNode& n, int ni, int d)
    {
        Backend& be = *k.be;
        Communicator& comm = *k.comm;
        const detail::DispatchProgram& p = k.pp().dispatch[static_cast<std::size_t>(ni)];
        const ExpertsShape& s = k.pp().experts[static_cast<std::size_t>(ni)];
        const Interval& mine = k.pp().rows;
        auto T = [&](int i) -> const Tensor& { return k.t()[static_cast<std::size_t>(i)]; };
        const std::int64_t K = s.topK, E = s.experts, El = s.localExperts, H = T(p.send).cols, picks = mine.size * K;
        Rank::Dispatch& h = k.dispatch;
        std::int64_t sent = 0, received = 0;
        // The picks, and the rows to send sorted by expert (a counting sort on the host).
        TP_RETURN_IF_ERROR(compute(k, m_events.begin(ni), m_events.end(ni), ni, [&]() -> Status {
            TP_RETURN_IF_ERROR(be.route(in(k, n, 1).rowRange(mine.offset, mine.size), s, T(p.ids), T(p.weights), scratch(k, ni),
                                        scoreBias(k, n)));
            TP_RETURN_IF_ERROR(be.download(T(p.ids), h.ids.data()));
            std::fill(h.perExpert.begin(), h.perExpert.end(), 0);
            for (std::int64_t i = 0; i < picks; ++i)
                if (const std::int32_t e = h.ids[static_cast<std::size_t>(i)]; e >= 0 && e < E) // −1: only NaN scores
                    ++h.perExpert[static_cast<std::size_t>(e)];
            h.cursor[0] = 0; // where each expert's rows start, then the next free one
            for (std::int64_t e = 0; e < E; ++e)
                h.cursor[static_cast<std::size_t>(e + 1)] = h.cursor[static_cast<std::size_t>(e)] + h.perExpert[static_cast<std::size_t>(e)];
            sent = h.cursor[static_cast<std::size_t>(E)];
            for (std::int64_t i = 0; i < picks; ++i) {
                const std::int32_t e = h.ids[static_cast<std::size_t>(i)];
                const std::int64_t at = e >= 0 && e < E ? h.cursor[static_cast<std::size_t>(e)]++ : -1;
                if (at >= 0)
                    h.sendIndex[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(i / K);
                h.slots[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(at);
            }
            TP_RETURN_IF_ERROR(be.upload(h.perExpert.data(), T(p.counts))); // int64, as Transformers sends them
            TP_RETURN_IF_ERROR(be.upload(h.sendIndex.data(), T(p.sendIndex)));
            TP_RETURN_IF_ERROR(be.upload(h.slots.data(), T(p.slots)));
            return be.embedding(T(p.sendIndex).columns(0, sent), in(k, n, 0).rowRange(mine.offset, mine.size),
                                T(p.send).rowRange(0, sent), 0);
        }));
        // Every rank's picks of this rank's experts (its El counts from each), read back: the
        // layer's one host sync, the rows' split sizes.
        TP_RETURN_IF_ERROR(exchangeRows(k, p.dispatch, [&] { return comm.allToAll(T(p.counts), h.split, T(p.received), h.split); }));
        TP_RETURN_IF_ERROR(be.download(T(p.received), h.received.data()));
        for (int r = 0; r < m_T; ++r) {
            std::int64_t out = 0, in = 0;
            for (std::int64_t e = r * El; e < (r + 1) * El; ++e) // rank r's experts
                out += h.perExpert[static_cast<std::size_t>(e)];
            for (std::int64_t e = 0; e < El; ++e) { // what rank r sends this rank's experts, by expert
                const std::int64_t count = h.received[static_cast<std::size_t>(r * El + e)];
                if (count < 0 || received + in + count > static_cast<std::int64_t>(h.recvExperts.size()))
                    return Status(StatusCode::Internal, fmt::format("rank {}: rank {} sends {} rows for expert {}, beyond the {} "
                                                                    "picks of the whole batch",
                                                                    k.r, r, count, s.firstExpert + e, h.recvExperts.size()));
                for (std::int64_t j = 0; j < count; ++j)
                    h.recvExperts[static_cast<std::size_t>(received + in++)] = static_cast<std::int32_t>(e);
            }
            h.sendCounts[static_cast<std::size_t>(r)] = out * H;
            h.recvCounts[static_cast<std::size_t>(r)] = in * H;
            received += in;
        }
        // The rows, sorted by expert: each owner's in one piece.
        TP_RETURN_IF_ERROR(exchangeRows(k, p.dispatch + 1, [&] {
            return comm.allToAll(T(p.send).rowRange(0, sent), h.sendCounts, T(p.recv).rowRange(0, received), h.recvCounts);
        }));
        // This rank's experts on what it received.
        TP_RETURN_IF_ERROR(compute(k, m_events.part(d, 0), m_events.part(d, 1), ni, [&]() -> Status {
            TP_RETURN_IF_ERROR(be.upload(h.recvExperts.data(), T(p.recvExperts).rowRange(0, received)));
            return be.experts(T(p.recv).rowRange(0, received), T(p.recvExperts).rowRange(0, received), expertsUp(k, n),
                              *weight(k, n, "down_proj"), T(p.out).rowRange(0, received), p.given, scratch(k, ni),
                              weight(k, n, "gate_up_proj_bias"), weight(k, n, "down_proj_bias"));
        }));
        // Combine: the outputs back in the order sent, weighted and summed per row.
        TP_RETURN_IF_ERROR(exchangeRows(k, p.dispatch + 2, [&] {
            return comm.allToAll(T(p.out).rowRange(0, received), h.recvCounts, T(p.back).rowRange(0, sent), h.sendCounts);
        }));
        const Tensor& y = k.t()[static_cast<std::size_t>(k.pp().opOutput[static_cast<std::size_t>(ni)])];
        return compute(k, m_events.part(d, 2), m_events.part(d, 3), ni,
                       [&] { return be.combine(T(p.back), T(p.slots), T(p.weights), y); });
    }

    // An all-to-all of a dispatch, timed as a collective (its events, its label).
    template<typename Exchange>
    Status exchangeRows(Rank& k, int ci, Exchange&& exchange)
    {
        Backend& be = *k.be;
        TP_RETURN_IF_ERROR(yieldDevice(k));
        const NvtxRange range(m_labels[static_cast<std::size_t>(ci)]);
        k.comm->setLabel(m_labels[static_cast<std::size_t>(ci)]);
        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 0), Stream::Compute));
        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 1), Stream::Compute));
        TP_RETURN_IF_ERROR(be.wait(Stream::Comm, m_events.collective(ci, 1)));
        if (Status st = exchange(); !st.ok())
            return st.withContext(m_labels[static_cast<std::size_t>(ci)]);
        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 2), Stream::Comm));
        TP_RETURN_IF_ERROR(be.wait(Stream::Compute, m_events.collective(ci, 2)));
        return be.record(m_events.collective(ci, 3), Stream::Compute);
    }

    const Tensor& in(const Rank& k, const GraphNode& n, std::size_t i) const { return k.t()[static_cast<std::size_t>(n.inputs[i])]; }
    const Tensor& out(const Rank& k, const GraphNode& n, std::size_t i) const { return k.t()[static_cast<std::size_t>(n.outputs[i])]; }
    // This rank's tensor of parameter `name` of module `module` (a node's own by default).
    const Tensor* weight(const Rank& k, int module, std::string_view name) const
    {
        const ParamShard* s = m_g.param(module, name);
        return s ? &k.weights[static_cast<std::size_t>(s - m_g.params.data())] : nullptr;
    }
    const Tensor* weight(const Rank& k, const GraphNode& n, std::string_view name) const { return weight(k, n.module, name); }
    // An experts node's gate_up_proj, or up_proj where they have no gate (lowering has checked one is there).
    const Tensor& expertsUp(const Rank& k, const GraphNode& n) const
    {
        return k.weights[static_cast<std::size_t>(m_g.expertsUp(n.module) - m_g.params.data())];
    }
    const Tensor& rope(const Rank& k, const GraphNode& n) const { return k.ropes[static_cast<std::size_t>(n.rope)]; }
    // The Router node whose scores an Experts node reads.
    const GraphNode& routerOf(const GraphNode& experts) const
    {
        const int producer = m_g.graph.tensors[static_cast<std::size_t>(experts.inputs[1])].producer;
        return m_g.graph.nodes[static_cast<std::size_t>(producer)];
    }
    // DeepSeek's e_score_correction_bias of an Experts node's router: the router's, its child's (ERNIE 4.5's
    // moe_statics) or its MoE block's (MiniMax-M2, HY-V3, AFMoE).
    const Tensor* scoreBias(const Rank& k, const GraphNode& experts) const
    {
        const int router = routerOf(experts).module;
        if (router < 0)
            return nullptr;
        const ModuleSpec& r = m_spec.modules[static_cast<std::size_t>(router)];
        std::vector<int> holders = {router};
        holders.insert(holders.end(), r.children.begin(), r.children.end());
        for (int up = r.parent, i = 0; up >= 0 && i < 2; up = m_spec.modules[static_cast<std::size_t>(up)].parent, ++i)
            holders.push_back(up); // the block, or above the router's own linear (AFMoE's router.gate)
        for (int m : holders)
            for (const char* name : {"e_score_correction_bias", "expert_bias"}) // …, AFMoE's and LFM2-MoE's name
                if (const Tensor* b = weight(k, m, name))
                    return b;
        return nullptr;
    }
    Tensor scratch(const Rank& k, int ni) const
    {
        const int s = k.pp().scratch[static_cast<std::size_t>(ni)];
        return s < 0 ? Tensor{} : k.t()[static_cast<std::size_t>(s)];
    }

    Status op(Rank& k, const GraphNode& n, int ni)
    {
        Backend& be = *k.be;
        const Tensor& y = k.t()[static_cast<std::size_t>(k.pp().opOutput[static_cast<std::size_t>(ni)])];
        // A node at the last positions only whose op reads a dense input: each sequence's last row of
        // it, copied together first.
        if (const int gi = k.pp().gathered[static_cast<std::size_t>(ni)]; gi >= 0) {
            const Tensor& x = k.t()[static_cast<std::size_t>(gi)];
            TP_RETURN_IF_ERROR(be.copy(lastPositions(in(k, n, 0), k.pp().seq), x));
            return n.kind == OpKind::Norm ? be.rmsNorm(x, weight(k, n, "weight"), y, x.cols, n.eps, n.normOffset)
                                          : Status(StatusCode::Internal, fmt::format("{} reads gathered rows", opKindName(n.kind)));
        }
        // Sequence parallelism: a norm or residual add on this rank's token rows, reading a whole
        // input at those rows.
        if (m_g.nodes[static_cast<std::size_t>(ni)].sequenceRows) {
            const Interval& mine = k.pp().rows;
            auto rows = [&](std::size_t i) {
                const Tensor& x = in(k, n, i);
                return m_g.tensors[static_cast<std::size_t>(n.inputs[i])].layout == Layout::ShardSeq ? x : x.rowRange(mine.offset, mine.size);
            };
            if (n.kind == OpKind::Norm)
                return be.rmsNorm(rows(0), weight(k, n, "weight"), y, y.cols, n.eps, n.normOffset);
            if (n.kind == OpKind::Add)
                return be.add(rows(0), rows(1), y);
            return Status(StatusCode::Internal, fmt::format("{} on token rows", opKindName(n.kind)));
        }
        switch (n.kind) {
        case OpKind::Embedding: {
            const ParamShard* s = m_g.param(n.module, "weight");
            const std::int64_t first = s->dim == 0 ? s->slices[static_cast<std::size_t>(k.r)][0].offset : 0; // vocab shard
            TP_RETURN_IF_ERROR(be.embedding(in(k, n, 0), *weight(k, n, "weight"), y, first));
            // Gemma's scaled embeddings: times sqrt(hidden) rounded to the activation dtype, as
            // Transformers multiplies by it.
            return n.scale > 0 ? be.scale(y, y, roundedTo(be.storage(), static_cast<float>(n.scale)), 0) : Status();
        }
        case OpKind::Norm:
            if (n.layerNorm)
                return be.layerNorm(in(k, n, 0), weight(k, n, "weight"), weight(k, n, "bias"), y, n.eps, n.normOffset);
            return be.rmsNorm(in(k, n, 0), weight(k, n, "weight"), y, in(k, n, 0).cols, n.eps, n.normOffset);
        case OpKind::HeadNorm: // no module: Llama 4's L2 norm, without a weight
            return be.rmsNorm(in(k, n, 0), weight(k, n, "weight"), y, n.headDim, n.eps, n.normOffset);
        case OpKind::Linear:
        case OpKind::Router: {
            Tensor x = in(k, n, 0);
            if (const auto& slice = m_g.nodes[static_cast<std::size_t>(ni)].inputSlice; !slice.empty()) // rowwise_split_input
                x = x.columns(slice[static_cast<std::size_t>(k.r)].offset, slice[static_cast<std::size_t>(k.r)].size);
            if (k.pp().lastPositions[static_cast<std::size_t>(ni)]) // the head at each sequence's last position only
                x = lastPositions(x, k.pp().seq);
            const int c = k.prog->collectiveOf[static_cast<std::size_t>(ni)];
            const bool biasAfter = c >= 0 && m_g.collectives[static_cast<std::size_t>(c)].bias >= 0;
            TP_RETURN_IF_ERROR(be.gemm(x, *weight(k, n, "weight"), biasAfter ? nullptr : weight(k, n, "bias"), y, scratch(k, ni)));
            if (n.kind != OpKind::Router || n.sparseMixer || n.logitChoice) // these read the logits
                return {};
            return n.sigmoid ? be.sigmoid(y, y) : be.softmax(y, y);
        }
        case OpKind::Split: {
            // This rank's groups [part 0 | part 1 | …] (one when not grouped): [rows, local · group] seen as
            // [rows · local, group], a group a row, so that each part is one strided copy.
            const Tensor x = in(k, n, 0);
            const std::int64_t groups = std::max<std::int64_t>(n.splitGroups, 1);
            const std::int64_t group = std::accumulate(n.parts.begin(), n.parts.end(), std::int64_t(0)) / groups;
            const std::int64_t local = x.cols / group, rows = x.rows * local;
            const Tensor xg = local > 1 ? x.reshaped(rows, group) : x;
            std::int64_t off = 0;
            for (std::size_t i = 0; i < n.outputs.size(); ++i) {
                const std::int64_t w = n.parts[i] / groups;
                const Tensor& y = out(k, n, i);
                if (local > 1 && (!x.isContiguous() || !y.isContiguous()))
                    return internalError(fmt::format("{}: a grouped split's tensors are not single blocks", n.name));
                TP_RETURN_IF_ERROR(be.copy(xg.columns(off, w), local > 1 ? y.reshaped(rows, w) : y));
                off += w;
            }
            return {};
        }
        case OpKind::Rope:
            for (std::size_t i = 0; i < 2; ++i)
                TP_RETURN_IF_ERROR(be.rope(in(k, n, i), out(k, n, i), n.headDim, k.ph[static_cast<std::size_t>(k.phase)].positions,
                                           rope(k, n), n.interleavedRope, n.ropeLeading));
            return {};
        case OpKind::Attention: {
            // This forward's keys and values join the caches at their positions, then attention reads
            // every position so far.
            const auto [kc, vc] = k.prog->kvCache[static_cast<std::size_t>(ni)];
            const Tensor& K = k.cache[static_cast<std::size_t>(kc)];
            const Tensor& V = k.cache[static_cast<std::size_t>(vc)];
            AttentionShape s = k.pp().attention[static_cast<std::size_t>(ni)];
            s.past = k.past;
            const Tensor& positions = k.ph[static_cast<std::size_t>(k.phase)].positions;
            for (std::int64_t b = 0; b < s.batch; ++b) {
                const Tensor kb = K.rowRange(b * m_context + s.past, s.seq), vb = V.rowRange(b * m_context + s.past, s.seq);
                if (n.mlaRope > 0) { // MLA: each head's key [k_nope | k_pe], k_pe turned at its positions
                    TP_RETURN_IF_ERROR(be.mlaKv(in(k, n, 1).rowRange(b * s.seq, s.seq), in(k, n, 2).rowRange(b * s.seq, s.seq),
                                                kb, vb, s.heads, s.headDim - n.mlaRope));
                    TP_RETURN_IF_ERROR(be.rope(kb, kb, s.headDim, positions.columns(b * s.seq, s.seq), rope(k, n),
                                               n.interleavedRope));
                    continue;
                }
                TP_RETURN_IF_ERROR(be.copy(in(k, n, 1).rowRange(b * s.seq, s.seq), kb));
                TP_RETURN_IF_ERROR(be.copy(in(k, n, 2).rowRange(b * s.seq, s.seq), vb));
            }
            if (n.mlaRope > 0) // the rope part of every query head, in place
                TP_RETURN_IF_ERROR(be.rope(in(k, n, 0), in(k, n, 0), s.headDim, positions, rope(k, n), n.interleavedRope));
            if (n.temperatureFloor > 0) // Llama 4's NoPE layers: the queries' temperature, in place
                TP_RETURN_IF_ERROR(be.temperature(in(k, n, 0), in(k, n, 0), positions, n.temperatureFloor, n.temperatureScale));
            return be.attention(in(k, n, 0), K, V, y, s, scratch(k, ni), weight(k, n.ownerModule, "sinks")); // sinks: gpt-oss
        }
        case OpKind::GatedAct:
            if (n.packed) { // [gate_l | up_l] per token (a strided shard keeps the halves paired)
                const Tensor& x = in(k, n, 0);
                return be.gatedAct(x.columns(0, x.cols / 2), x.columns(x.cols / 2, x.cols / 2), y, n.act);
            }
            if (n.inputs.size() == 1) // an ungated MLP
                return be.activation(in(k, n, 0), y, n.act);
            return be.gatedAct(in(k, n, 0), in(k, n, 1), y, n.act, n.gateSpan);
        case OpKind::Experts:
            return be.experts(in(k, n, 0), in(k, n, 1), expertsUp(k, n), *weight(k, n, "down_proj"), y,
                              k.pp().experts[static_cast<std::size_t>(ni)], scratch(k, ni), weight(k, n, "gate_up_proj_bias"),
                              weight(k, n, "down_proj_bias"), scoreBias(k, n));
        case OpKind::Add:
            if (n.scale != 0) // the block's output scaled in place: only this sum reads it
                TP_RETURN_IF_ERROR(be.scale(in(k, n, 1), in(k, n, 1), n.scale, 0));
            return be.add(in(k, n, 0), in(k, n, 1), y);
        case OpKind::Logits: // whole on every rank here; scaled (Granite, Cohere) and soft-capped (Gemma 2) in place
            return n.softcap > 0 || n.scale != 0 ? be.scale(in(k, n, 0), in(k, n, 0), n.scale != 0 ? n.scale : 1, n.softcap) : Status();
        case OpKind::Mixer:
            return n.mixer == LayerLayout::Mixer::Mamba2      ? mamba2(k, n, ni, y)
                 : n.mixer == LayerLayout::Mixer::ShortConv ? shortConv(k, n, ni, y)
                                                            : gatedDeltaNet(k, n, ni, y);
        }
        return {};
    }

    // Mamba 2 (Transformers' BambaMixer after in_proj): [z | x B C | dt] → causal conv1d + SiLU over x B C, the
    // selective scan over x, B, C and dt, then the gated norm rms_norm(y · silu(z)) · w over groups of inner / groups.
    Status mamba2(Rank& k, const GraphNode& n, int ni, const Tensor& y)
    {
        Backend& be = *k.be;
        const auto [convState, scanState] = k.prog->mixerState[static_cast<std::size_t>(ni)];
        if (convState < 0)
            return internalError(fmt::format("{}: no state", n.name));
        const std::int64_t inner = n.heads * n.headDim, gs = n.groups * n.ssmState, conv = inner + 2 * gs;
        const Tensor& in0 = in(k, n, 0);
        const Tensor xbc = scratch(k, ni);
        const bool prefill = k.past == 0;
        const int convModule = child(n.module, "conv1d");
        const Tensor* convW = weight(k, convModule, "weight");
        if (!convW)
            return internalError(fmt::format("{}: no conv1d.weight", n.name));
        TP_RETURN_IF_ERROR(be.causalConv(in0.columns(inner, conv), *convW, weight(k, convModule, "bias"),
                                         k.cache[static_cast<std::size_t>(convState)], xbc, Activation::Silu, prefill));
        const Tensor *aLog = weight(k, n, "A_log"), *d = weight(k, n, "D"), *dtBias = weight(k, n, "dt_bias");
        if (!aLog || !d || !dtBias)
            return internalError(fmt::format("{}: A_log, D or dt_bias missing", n.name));
        ScanShape s{.batch = k.pp().tokens / k.pp().seq, .heads = n.heads, .headDim = n.headDim, .groups = n.groups, .state = n.ssmState,
                    .fresh = prefill};
        if (prefill) { // Transformers' decode step (selective_state_update) does not clamp the time step
            s.dtMin = n.dtMin;
            s.dtMax = n.dtMax;
        }
        TP_RETURN_IF_ERROR(be.ssmScan(xbc.columns(0, inner), in0.columns(inner + conv, n.heads), xbc.columns(inner, gs),
                                      xbc.columns(inner + gs, gs), *aLog, *d, *dtBias, k.cache[static_cast<std::size_t>(scanState)], y, s));
        TP_RETURN_IF_ERROR(be.gatedAct(in0.columns(0, inner), y, y, Activation::Silu));
        return be.rmsNorm(y, weight(k, n.ownerModule, "weight"), y, inner / n.groups, n.eps);
    }
    // Gated DeltaNet (Transformers' Qwen3NextGatedDeltaNet after its projections): q, k and v each through the causal
    // conv1d + SiLU (their parts of its weight and state), the gated delta rule, then the norm per value head times
    // silu(z).
    Status gatedDeltaNet(Rank& k, const GraphNode& n, int ni, const Tensor& y)
    {
        Backend& be = *k.be;
        const auto [convState, ruleState] = k.prog->mixerState[static_cast<std::size_t>(ni)];
        const Tensor* convW = weight(k, child(n.module, "conv1d"), "weight");
        const Tensor *aLog = weight(k, n, "A_log"), *dtBias = weight(k, n, "dt_bias");
        if (convState < 0 || !convW || !aLog || !dtBias)
            return internalError(fmt::format("{}: no state, conv1d.weight, A_log or dt_bias", n.name));
        const bool prefill = k.past == 0;
        const Tensor qkv = scratch(k, ni), &state = k.cache[static_cast<std::size_t>(convState)];
        std::int64_t at = 0;
        for (std::size_t i = 0; i < 3; ++i) { // q, k, v: channels [at, at + width) of the convolution
            const std::int64_t w = in(k, n, i).cols;
            TP_RETURN_IF_ERROR(be.causalConv(in(k, n, i), convW->rowRange(at, w), nullptr, state.columns(at, w), qkv.columns(at, w),
                                             Activation::Silu, prefill));
            at += w;
        }
        const std::int64_t keys = in(k, n, 0).cols;
        const DeltaShape s{.batch = k.pp().tokens / k.pp().seq, .keyHeads = n.kvHeads, .valueHeads = n.heads, .keyDim = n.headDim,
                           .valueDim = n.vHeadDim, .fresh = prefill};
        TP_RETURN_IF_ERROR(be.deltaRule(qkv.columns(0, keys), qkv.columns(keys, keys), qkv.columns(2 * keys, y.cols), in(k, n, 4),
                                        in(k, n, 5), *aLog, *dtBias, k.cache[static_cast<std::size_t>(ruleState)], y, s));
        TP_RETURN_IF_ERROR(be.rmsNorm(y, weight(k, n.ownerModule, "weight"), y, n.vHeadDim, n.eps));
        return be.gatedAct(in(k, n, 3), y, y, Activation::Silu);
    }
    // LFM2's gated short convolution (Transformers' Lfm2ShortConv after in_proj): [B | C | x] → C · conv(B · x), the
    // convolution without an activation.
    Status shortConv(Rank& k, const GraphNode& n, int ni, const Tensor& y)
    {
        Backend& be = *k.be;
        const int convState = k.prog->mixerState[static_cast<std::size_t>(ni)].first;
        const int conv = child(n.module, "conv");
        const Tensor* w = weight(k, conv, "weight");
        if (convState < 0 || !w)
            return internalError(fmt::format("{}: no state or conv.weight", n.name));
        const Tensor& bcx = in(k, n, 0);
        const std::int64_t H = y.cols;
        const Tensor work = scratch(k, ni).reshaped(2 * y.rows, H), bx = work.rowRange(0, y.rows), conved = work.rowRange(y.rows, y.rows);
        TP_RETURN_IF_ERROR(be.gatedAct(bcx.columns(0, H), bcx.columns(2 * H, H), bx, Activation::Identity));
        TP_RETURN_IF_ERROR(be.causalConv(bx, *w, weight(k, conv, "bias"), k.cache[static_cast<std::size_t>(convState)], conved, std::nullopt,
                                         k.past == 0));
        return be.gatedAct(bcx.columns(H, H), conved, y, Activation::Identity);
    }
    // The child of `module` named `name`, -1: none.
    int child(int module, std::string_view name) const
    {
        if (module >= 0)
            for (int c : m_spec.modules[static_cast<std::size_t>(module)].children)
                if (m_spec.modules[static_cast<std::size_t>(c)].name == name)
                    return c;
        return -1;
    }

    Status collective(Rank& k, int ci)
    {
        TP_RETURN_IF_ERROR(yieldDevice(k));
        Backend& be = *k.be;
        Communicator& comm = *k.comm;
        const Collective& c = m_g.collectives[static_cast<std::size_t>(ci)];
        const detail::CollectivePlan& p = k.pp().collectives[static_cast<std::size_t>(ci)];
        const Tensor& input = k.t()[static_cast<std::size_t>(p.input)];
        const Tensor& output = k.t()[static_cast<std::size_t>(p.output)];
        const std::string& label = m_labels[static_cast<std::size_t>(ci)];
        const NvtxRange range(label);
        comm.setLabel(label); // within the capacity setUp gave it
        const std::int64_t rows = output.rows;
        // A rank's piece of a staging buffer, [rows, width] at its place.
        auto piece = [&](int rank) {
            const Interval& iv = c.pieces[static_cast<std::size_t>(rank)];
            const Tensor& st = k.t()[static_cast<std::size_t>(p.staging)];
            return Tensor::contiguous(st.as<char>() + rows * iv.offset * st.elementBytes(), st.dtype, rows, iv.size, st.device);
        };
        const std::vector<std::int64_t>& counts = k.counts[static_cast<std::size_t>(k.phase)][static_cast<std::size_t>(ci)];

        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 0), Stream::Compute));
        if (c.kind == CollectiveKind::ReduceScatter && !c.sequence) // pack each rank's columns into its contiguous piece
            for (int r = 0; r < m_T; ++r)
                TP_RETURN_IF_ERROR(be.copy(input.columns(c.pieces[static_cast<std::size_t>(r)].offset, c.pieces[static_cast<std::size_t>(r)].size), piece(r)));
        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 1), Stream::Compute));
        TP_RETURN_IF_ERROR(be.wait(Stream::Comm, m_events.collective(ci, 1)));
        switch (c.kind) {
        case CollectiveKind::AllReduce: TP_RETURN_IF_ERROR(comm.allReduce(input)); break;
        case CollectiveKind::AllGather:
            if (c.sequence) { // token rows: the op wrote this rank's rows of the output
                TP_RETURN_IF_ERROR(comm.allGather(input.reshaped(1, input.numel()), output.reshaped(1, output.numel()), counts));
            } else if (p.staging < 0) { // the ops wrote their columns in place: the gather fills in the others'
                TP_RETURN_IF_ERROR(comm.allGatherColumns(output, m_offsets[static_cast<std::size_t>(ci)]));
            } else {
                TP_RETURN_IF_ERROR(comm.allGather(input.reshaped(1, input.numel()), k.t()[static_cast<std::size_t>(p.staging)], counts));
            }
            break;
        case CollectiveKind::ReduceScatter: {
            const Tensor& packed = c.sequence ? input.reshaped(1, input.numel()) : k.t()[static_cast<std::size_t>(p.staging)];
            TP_RETURN_IF_ERROR(comm.reduceScatter(packed, output.reshaped(1, output.numel()), counts));
            break;
        }
        default: return Status(StatusCode::Unimplemented, fmt::format("{} is not executable on the engine", collectiveName(c.kind)));
        }
        TP_RETURN_IF_ERROR(be.record(m_events.collective(ci, 2), Stream::Comm));
        TP_RETURN_IF_ERROR(be.wait(Stream::Compute, m_events.collective(ci, 2)));
        if (c.kind == CollectiveKind::AllReduce && p.input != p.output) // Llama 4: the reduced experts' rows summed
            TP_RETURN_IF_ERROR(be.sumBlocks(input, output));
        if (c.kind == CollectiveKind::AllGather && p.staging >= 0) // every rank's [N, w_p] → columns side by side
            for (int r = 0; r < m_T; ++r)
                TP_RETURN_IF_ERROR(be.copy(piece(r), output.columns(c.pieces[static_cast<std::size_t>(r)].offset, c.pieces[static_cast<std::size_t>(r)].size)));
        if (c.bias >= 0) { // Transformers adds a rowwise bias once, to the reduced sum (this rank's columns of it)
            const Tensor& b = k.weights[static_cast<std::size_t>(c.bias)];
            const std::int64_t off = c.pieces.empty() ? 0 : c.pieces[static_cast<std::size_t>(k.r)].offset;
            TP_RETURN_IF_ERROR(be.add(output, b.columns(off, output.cols), output));
        }
        return be.record(m_events.collective(ci, 3), Stream::Compute);
    }

    const ModelSpec& m_spec;
    const ShardedGraph& m_g;
    const WeightSource& m_weights;
    const RunOptions& m_o;
    const int m_T;
    const std::int64_t m_N;
    EventMap m_events;
    std::vector<int> m_dispatchOrdinal;    // per node: its place among the dispatched experts nodes, -1: not one
    int m_dispatched = 0;
    std::size_t m_layerSlots = 1;                 // decoder layers + 1 (slot 0: outside them)
    std::vector<std::string> m_nvtx;
    std::vector<std::string> m_labels;                    // per collective: "layer 3/self_attn.o_proj/all_reduce"
    std::vector<std::vector<std::int64_t>> m_offsets;     // per collective: 0, then where each rank's columns end
    const std::int64_t m_context;              // positions per sequence: prompt + decode steps
    std::vector<std::int32_t> m_tokens, m_positions, m_decodePositions;
    std::vector<std::vector<float>> m_ropeTables;
    std::vector<RankProgram> m_programs;
    std::vector<Rank> m_ranks;
    std::unique_ptr<Progress[]> m_progress;     // per rank of m_ranks
    std::mutex m_turnstile;
    bool m_nonFiniteLogits = false; // set by rank 0 (readLogits), read after the threads joined
    double m_emulatedSeconds = 0;
    std::vector<float> m_logits, m_stepLogits;
    std::vector<Span> m_allSpans;                        // emulation: every rank's spans of the forward
    std::vector<std::vector<std::int32_t>> m_generated; // rank 0, last iteration: per token, every sequence's
    std::size_t m_generatedCount = 0;                    // of m_generated, filled
    std::mutex m_errorMutex;
    Status m_firstError;
};

Status checkRunnable(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights, const RunOptions& o)
{
    if (!g.valid()) {
        std::string errors;
        for (const auto& d : g.diagnostics)
            if (d.severity == Severity::Error)
                errors += fmt::format("\n  {}: {}", d.where, d.message);
        return Status(StatusCode::FailedPrecondition, "the plan has errors; nothing ran:" + errors);
    }
    if (const std::string why = engineExecutableProblem(spec, g); !why.empty())
        return Status(StatusCode::Unimplemented, why);
    if (o.batch < 1 || o.seq < 1)
        return invalidArgument("batch and sequence must be at least 1");
    // Phi-3's generate() (and Phi-4-multimodal's, PhiMoE's) drops the KV cache and recomputes every position at the step
    // whose length first passes original_max_position_embeddings: with a longrope that changes the cached keys; the
    // engine's decode keeps its cache, as every other model's generate() does.
    const std::int64_t recompute = spec.config.recomputeCacheAfter;
    for (const RopeTable& rt : g.graph.ropes)
        if (rt.kind == RopeTable::Kind::LongRope && recompute > 0 && o.seq <= recompute && o.seq + o.decodeSteps > recompute)
            return Status(StatusCode::Unimplemented,
                          fmt::format("{}'s generate() recomputes the whole KV cache with longrope's long scaling when decoding "
                                      "passes original_max_position_embeddings ({}), which the engine does not: give a prompt "
                                      "longer than {} tokens, or at most {} decode steps",
                                      spec.config.causalLmClass, recompute, recompute, recompute - o.seq));
    if (o.decodeSteps < 0 || o.decodeSteps > (1 << 20))
        return invalidArgument(fmt::format("{} decode steps: give 0 to 2^20", o.decodeSteps));
    if (static_cast<std::int64_t>(std::max(o.iterations, 1)) * o.decodeSteps > (std::int64_t(1) << 22))
        return invalidArgument(fmt::format("{} iterations × {} decode steps is more timed steps than a run records (at "
                                           "most 2^22)",
                                           o.iterations, o.decodeSteps));
    if (o.batch > (std::int64_t(1) << 20) || o.seq > (std::int64_t(1) << 24) || o.batch * o.seq > (std::int64_t(1) << 26))
        return invalidArgument(fmt::format("batch {} × sequence {} is more tokens than one forward takes (at most 2^26)",
                                           o.batch, o.seq));
    if (o.batch * (o.seq + o.decodeSteps) > (std::int64_t(1) << 26))
        return invalidArgument(fmt::format("batch {} × (sequence {} + {} decode steps) is more positions than a KV cache "
                                           "holds here (at most 2^26)",
                                           o.batch, o.seq, o.decodeSteps));
    if (!isStorageDtype(o.dtype))
        return invalidArgument(fmt::format("storage dtype {} is not f32, bf16 or f16", dtypeName(o.dtype)));
    if (o.emulate && !o.commModel)
        return invalidArgument("emulation needs a hardware profile to model the collectives");
    if (o.lastPositionLogits != g.options.lastPositionLogits) // what runs is what the graph previews
        return invalidArgument(fmt::format("the run keeps the logits at {} (RunOptions::lastPositionLogits) but the graph "
                                           "was sharded for {}: shard it with ShardOptions::lastPositionLogits = {}",
                                           o.lastPositionLogits ? "each sequence's last position" : "every position",
                                           g.options.lastPositionLogits ? "the last positions" : "every position",
                                           o.lastPositionLogits));
    if (!o.tokens.empty() && static_cast<std::int64_t>(o.tokens.size()) != o.batch * o.seq)
        return invalidArgument(fmt::format("{} token ids given for batch {} × sequence {}", o.tokens.size(), o.batch, o.seq));
    for (const std::int32_t id : o.tokens)
        if (id < 0 || id >= spec.config.vocabSize)
            return invalidArgument(fmt::format("token id {} is outside the vocabulary of {}", id, spec.config.vocabSize));
    return checkWeights(spec, weights);
}

} // namespace

Result<RunResult> runModel(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights, const RunOptions& options)
{
    TP_RETURN_IF_ERROR(checkRunnable(spec, g, weights, options));
    Runner runner(spec, g, weights, options);
    auto r = runner.runThreads();
    if (r || !runner.nonFiniteLogits() || options.checkFinite)
        return r;
    // NaN logits: one more forward, every node's output checked, names where they began.
    RunOptions again = options;
    again.checkFinite = true;
    again.warmup = 0;
    again.iterations = 1;
    again.progress = {};
    again.stepProgress = {};
    auto second = Runner(spec, g, weights, again).runThreads();
    if (second || second.status().code() != StatusCode::DataLoss)
        return r;
    return Status(StatusCode::DataLoss, fmt::format("{}; {}", r.status().message(), second.status().message()));
}

Result<RunResult> runModelRank(const ModelSpec& spec, const ShardedGraph& g, const WeightSource& weights,
                               const RunOptions& options, Communicator& host)
{
    if (host.size() != g.tpSize)
        return invalidArgument(fmt::format("{} processes for tp_size {}: start one process per rank", host.size(), g.tpSize));
    if (options.emulate)
        return invalidArgument("emulation runs every rank in one process; it does not combine with mpirun");
    TP_RETURN_IF_ERROR(checkRunnable(spec, g, weights, options));
    return Runner(spec, g, weights, options).runProcess(host);
}

} // namespace tp
