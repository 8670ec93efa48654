// tst_shard — the sharded graph: per-rank shards, activation layouts, collectives with their bytes,
// memory, and the layout/shape diagnostics (facts from hf-tp-semantics.md §1, §2, §4.1, §6, §8).
#include "tp/model/catalog.h"
#include "tp/model/dtype.h"
#include "tp/model/loader.h"
#include "tp/core/units.h"
#include "tp/plan/plan_io.h"
#include "tp/plan/shipped.h"
#include "tp/shard/sharded_graph.h"

#include "testutils.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using namespace tp;

namespace {

ModelSpec spec(const char* id) { return tptest::openSpec(id); }

int count(const ShardedGraph& g, CollectiveKind kind, const std::string& genericWhere = {})
{
    return static_cast<int>(std::count_if(g.collectives.begin(), g.collectives.end(), [&](const Collective& c) {
        return c.kind == kind && (genericWhere.empty() || genericName(c.where) == genericWhere);
    }));
}

const ParamShard& shard(const ShardedGraph& g, const std::string& path)
{
    for (const auto& p : g.params)
        if (p.path == path)
            return p;
    qFatal("no parameter %s", path.c_str());
}

bool hasDiag(const ShardedGraph& g, Severity sev, const std::string& where, const std::string& text)
{
    return std::any_of(g.diagnostics.begin(), g.diagnostics.end(), [&](const Diagnostic& d) {
        return d.severity == sev && d.where == where && d.message.find(text) != std::string::npos;
    });
}

std::string dump(const ShardedGraph& g)
{
    std::string s;
    for (const auto& d : g.diagnostics)
        s += std::string(severityName(d.severity)) + " " + d.where + ": " + d.message
           + (d.follows.empty() ? "" : " [follows " + d.follows + "]") + (d.hint.empty() ? "" : " (hint: " + d.hint + ")") + "\n";
    return s;
}

// The default plan with some keys' styles replaced ("" removes the key).
Plan edited(const ModelSpec& s, int tp, const std::vector<std::pair<std::string, std::string>>& edits)
{
    Plan p = defaultPlan(s, tp);
    for (const auto& [key, style] : edits) {
        auto it = std::find_if(p.entries.begin(), p.entries.end(), [&](const PlanEntry& e) { return e.key == key; });
        if (style.empty()) {
            if (it != p.entries.end())
                p.entries.erase(it);
        } else if (it != p.entries.end()) {
            it->style = style;
        } else {
            p.entries.push_back({key, style});
        }
    }
    return p;
}

} // namespace

class TestShard : public QObject
{
    Q_OBJECT
private slots:
    void llama8bDefaultPlanAtT8()
    {
        // §8: 2 all-reduces per layer (o_proj, down_proj) + the logits all-gather; 4 MiB each at B=1,
        // S=512, bf16, h=4096. Transformers 5.24 also injects embed_tokens: embedding_rowwise (one more).
        const ModelSpec s = spec("llama-3.1-8b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8), {.batch = 1, .seq = 512, .activationDtype = DType::BF16});
        QVERIFY2(g.valid(), dump(g).c_str());
        QCOMPARE(count(g, CollectiveKind::AllReduce, "model.layers.*.self_attn.o_proj"), 32);
        QCOMPARE(count(g, CollectiveKind::AllReduce, "model.layers.*.mlp.down_proj"), 32);
        QCOMPARE(count(g, CollectiveKind::AllReduce, "model.embed_tokens"), 1);
        QCOMPARE(count(g, CollectiveKind::AllReduce), 65);
        QCOMPARE(count(g, CollectiveKind::AllGather, "lm_head"), 1);
        QCOMPARE(count(g, CollectiveKind::AllGather), 1);
        QCOMPARE(int(g.collectives.size()), 66);
        for (const auto& c : g.collectives)
            if (c.kind == CollectiveKind::AllReduce)
                QCOMPARE(c.bytes(1, 512, 2), std::int64_t(4) << 20);
        const auto logits = std::find_if(g.collectives.begin(), g.collectives.end(),
                                         [](const Collective& c) { return c.kind == CollectiveKind::AllGather; });
        QCOMPARE(logits->bytes(1, 512, 2), std::int64_t(512) * 128256 * 2);

        // The reference's plan (no embedding entry): exactly 64 all-reduces + 1 all-gather.
        const ShardedGraph ref = shardModel(s, edited(s, 8, {{"model.embed_tokens", ""}}), {.activationDtype = DType::BF16});
        QVERIFY2(ref.valid(), dump(ref).c_str());
        QCOMPARE(count(ref, CollectiveKind::AllReduce), 64);
        QCOMPARE(count(ref, CollectiveKind::AllGather), 1);
    }

    void perRankShapes()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8));
        const auto& q = shard(g, "model.layers.0.self_attn.q_proj.weight");
        QCOMPARE(q.dim, 0);
        for (int r = 0; r < 8; ++r) {
            QCOMPARE(q.shapes[std::size_t(r)], (std::vector<std::int64_t>{512, 4096}));
            QCOMPARE(q.slices[std::size_t(r)], (std::vector<Interval>{{512 * r, 512}}));
        }
        const auto& o = shard(g, "model.layers.0.self_attn.o_proj.weight");
        QCOMPARE(o.dim, 1);
        QCOMPARE(o.shapes[3], (std::vector<std::int64_t>{4096, 512}));
        const auto& norm = shard(g, "model.layers.0.input_layernorm.weight");
        QCOMPARE(norm.dim, -1);
        QCOMPARE(norm.shapes[7], (std::vector<std::int64_t>{4096}));
        const auto& emb = shard(g, "model.embed_tokens.weight");
        QCOMPARE(emb.dim, 0); // vocab rows
        QCOMPARE(emb.shapes[0], (std::vector<std::int64_t>{16032, 4096}));
    }

    void unevenChunksLeaveEmptyTrailingShards()
    {
        // 10 rows over 3 ranks → 4, 4, 2 (G3's uneven tests); rowwise input shards match colwise ones.
        const ModelSpec s = tptest::specFromConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 10,
            "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": 8, "num_hidden_layers": 1, "vocab_size": 99})");
        const ShardedGraph g = shardModel(s, edited(s, 3, {{"lm_head", "colwise"}, {"lm_head", ""}}));
        const auto& gate = shard(g, "model.layers.0.mlp.gate_proj.weight");
        QCOMPARE(gate.shapes[0][0], 4);
        QCOMPARE(gate.shapes[1][0], 4);
        QCOMPARE(gate.shapes[2][0], 2);
        QCOMPARE(shard(g, "model.layers.0.mlp.down_proj.weight").shapes[2][1], 2);
        QVERIFY(hasDiag(g, Severity::Warning, "model.layers.*.mlp.gate_proj.weight", "uneven shard: 10 over 3 ranks gives 4, 4, 2"));
        // 16 over 14: 2 × 8, then six empty shards.
        const ModelSpec t = tptest::specFromConfig(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 16,
            "num_attention_heads": 14, "num_key_value_heads": 14, "head_dim": 4, "num_hidden_layers": 1, "vocab_size": 98})");
        const ShardedGraph h = shardModel(t, defaultPlan(t, 14));
        const auto& up = shard(h, "model.layers.0.mlp.up_proj.weight");
        QCOMPARE(up.shapes[7][0], 2);
        QCOMPARE(up.shapes[8][0], 0);
        QCOMPARE(up.bytes[13], 0);
        QCOMPARE(up.slices[13], (std::vector<Interval>{{16, 0}}));
    }

    void packedGateUpSlicesPairGateAndUp()
    {
        // Qwen3-30B-A3B experts.gate_up_proj [128, 2·768, 2048] packed_colwise at T=4: rank r holds
        // gate rows [192r, 192r+192) and the matching up rows [768+192r, …).
        const ModelSpec s = spec("qwen3-30b-a3b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 4));
        QVERIFY2(g.valid(), dump(g).c_str());
        const auto& gu = shard(g, "model.layers.0.mlp.experts.gate_up_proj");
        QCOMPARE(gu.dim, 1);
        for (int r = 0; r < 4; ++r) {
            QCOMPARE(gu.slices[std::size_t(r)], (std::vector<Interval>{{192 * r, 192}, {768 + 192 * r, 192}}));
            QCOMPARE(gu.shapes[std::size_t(r)], (std::vector<std::int64_t>{128, 384, 2048}));
        }
        const auto& down = shard(g, "model.layers.0.mlp.experts.down_proj");
        QCOMPARE(down.dim, 2);
        QCOMPARE(down.shapes[1], (std::vector<std::int64_t>{128, 2048, 192}));
        QCOMPARE(count(g, CollectiveKind::AllReduce, "model.layers.*.mlp.experts"), 48);
    }

    void tpSizesAllowed_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QList<int>>("valid");
        QTest::addRow("qwen3-30b-a3b: T ≤ 4 (4 KV heads)") << "qwen3-30b-a3b" << QList<int>{1, 2, 4};
        QTest::addRow("llama-3.1-8b: 32 H / 8 KV") << "llama-3.1-8b" << QList<int>{1, 2, 4, 8};
        QTest::addRow("mixtral-8x7b (w1/w2/w3 fused, sharded)") << "mixtral-8x7b" << QList<int>{1, 2, 4, 8};
        QTest::addRow("phi-3-mini: gathers need 9216, 16384, 32064 divisible") << "phi-3-mini-4k" << QList<int>{1, 2, 4, 8, 16};
        QTest::addRow("gemma-3-27b: 32 H / 16 KV") << "gemma-3-27b" << QList<int>{1, 2, 4, 8, 16};
        QTest::addRow("deepseek-v3: MoE only, 256 experts") << "deepseek-v3" << QList<int>{1, 2, 4, 8, 16};
    }
    void tpSizesAllowed()
    {
        QFETCH(QString, model);
        QFETCH(QList<int>, valid);
        const ModelSpec s = spec(model.toUtf8().constData());
        for (int t = 1; t <= 16; ++t) {
            const ShardedGraph g = shardModel(s, defaultPlan(s, t));
            QVERIFY2(g.valid() == valid.contains(t), qPrintable(QString("T=%1\n%2").arg(t).arg(dump(g).c_str())));
        }
    }

    void phi3TwoAllGathersPerLayer()
    {
        const ModelSpec s = spec("phi-3-mini-4k");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 4), {.activationDtype = DType::BF16});
        QVERIFY2(g.valid(), dump(g).c_str());
        for (int l = 0; l < 32; ++l) {
            int gathers = 0, reduces = 0;
            for (const auto& c : g.collectives)
                if (c.layer == l)
                    (c.kind == CollectiveKind::AllGather ? gathers : reduces) += 1;
            QCOMPARE(gathers, 2);
            QCOMPARE(reduces, 2);
        }
        // qkv gathers (H + 2 KV)·hd = 9216 features; gate_up 2·8192.
        QCOMPARE(count(g, CollectiveKind::AllGather, "model.layers.*.self_attn.qkv_proj"), 32);
        const auto it = std::find_if(g.collectives.begin(), g.collectives.end(), [](const Collective& c) {
            return genericName(c.where) == "model.layers.*.mlp.gate_up_proj";
        });
        QCOMPARE(it->featuresPerToken, 16384);
        // Attention compute is replicated: every rank caches all KV heads.
        QCOMPARE(g.memory[0].kvCacheBytesPerToken, std::int64_t(32) * 2 * 3072 * 2);
    }

    // Megatron's TP+SP (the Ultra-Scale Playbook): with the layers' norms and the final norm
    // sequence_parallel, every rowwise reduction is a reduce-scatter of token rows and every norm
    // output an all-gather of rows, each moving the all-reduce's bytes; norms and residual adds
    // work on the rank's rows.
    void sequenceParallel()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        const ShardOptions o{.batch = 1, .seq = 512, .activationDtype = DType::BF16};
        const std::vector<std::pair<std::string, std::string>> norms = {
            {"model.layers.*.input_layernorm", "sequence_parallel"},
            {"model.layers.*.post_attention_layernorm", "sequence_parallel"},
            {"model.norm", "sequence_parallel"}};
        const ShardedGraph tp = shardModel(s, defaultPlan(s, 8), o), sp = shardModel(s, edited(s, 8, norms), o);
        QVERIFY2(sp.valid(), dump(sp).c_str());
        QCOMPARE(count(sp, CollectiveKind::AllReduce), 0);
        QCOMPARE(count(sp, CollectiveKind::ReduceScatter, "model.embed_tokens"), 1);
        QCOMPARE(count(sp, CollectiveKind::ReduceScatter, "model.layers.*.self_attn.o_proj"), 32);
        QCOMPARE(count(sp, CollectiveKind::ReduceScatter, "model.layers.*.mlp.down_proj"), 32);
        QCOMPARE(count(sp, CollectiveKind::AllGather, "model.layers.*.input_layernorm"), 32);
        QCOMPARE(count(sp, CollectiveKind::AllGather, "model.layers.*.post_attention_layernorm"), 32);
        QCOMPARE(count(sp, CollectiveKind::AllGather, "model.norm"), 1);
        QCOMPARE(count(sp, CollectiveKind::AllGather, "lm_head"), 1);
        QCOMPARE(int(sp.collectives.size()), 131);
        for (const auto& c : sp.collectives)
            if (c.where != "lm_head") {
                QVERIFY(c.sequence && c.pieces.empty());
                QCOMPARE(c.bytes(1, 512, 2), std::int64_t(4) << 20);
                if (c.kind == CollectiveKind::AllGather)
                    QCOMPARE(c.style, std::string("sequence_parallel"));
                else
                    QVERIFY2(c.style == "rowwise" || c.style == "embedding_rowwise", c.style.c_str());
            }
        // The residual stream between the layers stays split by rows; the norms and adds run on rows.
        int onRows = 0;
        for (std::size_t n = 0; n < sp.graph.nodes.size(); ++n)
            if (sp.nodes[n].sequenceRows) {
                ++onRows;
                QVERIFY(sp.graph.nodes[n].kind == OpKind::Norm || sp.graph.nodes[n].kind == OpKind::Add);
            }
        QCOMPARE(onRows, 4 * 32 + 1);
        // The peak is the MLP's (its intermediate on every row), which sequence parallelism leaves whole.
        QCOMPARE(sp.memory[0].activationPeakBytes, tp.memory[0].activationPeakBytes);
        QVERIFY2(hasDiag(sp, Severity::Warning, "sequence_parallel", "takes each rank's whole input as that rank's sequence shard"),
                 dump(sp).c_str());

        // Logits at the last positions only: the final norm runs on B rows, so the last residual add
        // gathers its rows instead.
        ShardOptions last = o;
        last.lastPositionLogits = true;
        const ShardedGraph spLast = shardModel(s, edited(s, 8, norms), last);
        QVERIFY2(spLast.valid(), dump(spLast).c_str());
        QCOMPARE(count(spLast, CollectiveKind::AllGather, "model.norm"), 0);
        QCOMPARE(count(spLast, CollectiveKind::AllGather, "model.layers.31:residual_mlp"), 1);
        QCOMPARE(count(spLast, CollectiveKind::AllReduce), 0); // the last down_proj reduce-scatters into that add
        // Only the final norm sequence-parallel: the last layer's down_proj scatters, its add and
        // the norm run on rows, then the rows are gathered for the head.
        const ShardedGraph finalOnly = shardModel(s, edited(s, 8, {norms.back()}), o);
        QVERIFY2(finalOnly.valid(), dump(finalOnly).c_str());
        QCOMPARE(count(finalOnly, CollectiveKind::ReduceScatter, "model.layers.*.mlp.down_proj"), 1);
        QCOMPARE(count(finalOnly, CollectiveKind::AllReduce), 64);
        QCOMPARE(count(finalOnly, CollectiveKind::AllGather, "model.norm"), 1);

        // Without the final norm's key the stream is gathered after the last layer too; at T = 1
        // nothing moves.
        auto noFinal = norms;
        noFinal.pop_back();
        const ShardedGraph layersOnly = shardModel(s, edited(s, 8, noFinal), o);
        QCOMPARE(count(layersOnly, CollectiveKind::AllGather, "model.layers.31:residual_mlp"), 1);
        QCOMPARE(count(layersOnly, CollectiveKind::AllReduce), 0);
        const ShardedGraph one = shardModel(s, edited(s, 1, norms), o);
        QVERIFY(one.valid());
        QVERIFY(one.collectives.empty());

        // Gemma's norms after attention and the MLP take o_proj's and down_proj's rows straight.
        const ModelSpec gemma = spec("gemma-3-27b");
        auto gemmaNorms = norms;
        gemmaNorms.push_back({"model.layers.*.pre_feedforward_layernorm", "sequence_parallel"});
        gemmaNorms.push_back({"model.layers.*.post_feedforward_layernorm", "sequence_parallel"});
        const ShardedGraph g = shardModel(gemma, edited(gemma, 8, gemmaNorms), o);
        QVERIFY2(g.valid(), dump(g).c_str());
        QCOMPARE(count(g, CollectiveKind::AllReduce), 0);
        QCOMPARE(count(g, CollectiveKind::AllGather, "model.layers.*.post_attention_layernorm"), 0);
        QCOMPARE(count(g, CollectiveKind::AllGather, "model.layers.*.pre_feedforward_layernorm"), 62);
    }

    void invalidPlans_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addColumn<QStringList>("edits"); // key=style, key= removes
        QTest::addColumn<QString>("where");
        QTest::addColumn<QString>("message");
        QTest::addRow("colwise feeding colwise")
            << "llama-3.1-8b" << 2 << QStringList{"model.layers.*.mlp.down_proj=colwise"} << "model.layers.*.mlp.down_proj"
            << "colwise feeding colwise";
        QTest::addRow("q sharded while k/v replicated")
            << "llama-3.1-8b" << 2
            << QStringList{"model.layers.*.self_attn.k_proj=replicate", "model.layers.*.self_attn.v_proj=replicate"}
            << "model.layers.*.self_attn" << "queries are sharded while keys/values are replicated";
        QTest::addRow("logits left vocab-sharded")
            << "llama-3.1-8b" << 2 << QStringList{"lm_head=colwise"} << "lm_head" << "logits are left vocab-sharded";
        QTest::addRow("rowwise on a whole input")
            << "llama-3.1-8b" << 2
            << QStringList{"model.layers.*.mlp.gate_proj=replicate", "model.layers.*.mlp.up_proj=replicate"}
            << "model.layers.*.mlp.down_proj" << "expects an input sharded on its last dim";
        QTest::addRow("split input twice")
            << "llama-3.1-8b" << 2 << QStringList{"model.layers.*.mlp.down_proj=rowwise_split_input"}
            << "model.layers.*.mlp.down_proj" << "it would be split twice";
        QTest::addRow("partial sums never reduced")
            << "llama-3.1-8b" << 2 << QStringList{"model.layers.*.mlp.down_proj=", "model.layers.*.mlp.down_proj.weight=rowwise"}
            << "model.layers.*:residual_mlp" << "partial sums from 'model.layers.*.mlp.down_proj'";
        QTest::addRow("gate and up split differently")
            << "llama-3.1-8b" << 2 << QStringList{"model.layers.*.mlp.up_proj=replicate"} << "model.layers.*.mlp:act"
            << "gate (Shard(-1) [7168, 7168]) and up (Replicate";
        QTest::addRow("plain colwise on packed gate_up (Phi-3)")
            << "phi-3-mini-4k" << 2 << QStringList{"model.layers.*.mlp.gate_up_proj=colwise", "model.layers.*.mlp.down_proj=rowwise"}
            << "model.layers.*.mlp.gate_up_proj" << "gives rank 0 only gate rows";
        QTest::addRow("fused qkv split while sharded (Phi-3)")
            << "phi-3-mini-4k" << 2 << QStringList{"model.layers.*.self_attn.qkv_proj=colwise"}
            << "model.layers.*.self_attn:split_qkv" << "cuts the fused output by its global sizes [3072, 3072, 3072]";
        QTest::addRow("experts sharded without moe_tp_experts")
            << "mixtral-8x7b" << 2 << QStringList{"model.layers.*.mlp.experts="} << "model.layers.*.mlp.experts"
            << "no style on the experts module sums";
        QTest::addRow("plain split of packed experts")
            << "mixtral-8x7b" << 2 << QStringList{"model.layers.*.mlp.experts.gate_up_proj=colwise"}
            << "model.layers.*.mlp.experts.gate_up_proj" << "separates gate rows from up rows";
        QTest::addRow("experts split differently")
            << "mixtral-8x7b" << 2 << QStringList{"model.layers.*.mlp.experts.down_proj=replicate"}
            << "model.layers.*.mlp.experts" << "split differently";
        QTest::addRow("experts split by id without ep_dispatch_experts")
            << "mixtral-8x7b" << 2
            << QStringList{"model.layers.*.mlp.experts.gate_up_proj=grouped_gemm", "model.layers.*.mlp.experts.down_proj=grouped_gemm"}
            << "model.layers.*.mlp.experts" << "Transformers then runs each rank's own experts under the global expert ids";
        QTest::addRow("KV heads not divisible, valid sizes listed")
            << "qwen3-30b-a3b" << 8 << QStringList{} << "num_key_value_heads" << "4 key/value heads are not divisible by tp_size 8";
        QTest::addRow("vocab not divisible for the gathered head")
            << "gpt-oss-120b" << 3 << QStringList{} << "lm_head" << "201088 output features are not divisible by tp_size 3";
        QTest::addRow("sinks stay whole while heads are sharded")
            << "gpt-oss-120b" << 8
            << QStringList{"model.layers.*.self_attn.q_proj=colwise", "model.layers.*.self_attn.k_proj=colwise",
                           "model.layers.*.self_attn.v_proj=colwise", "model.layers.*.self_attn.o_proj=rowwise"}
            << "model.layers.*.self_attn.sinks" << "per-head sinks stay whole";
        QTest::addRow("tied pair placed differently")
            << "gemma-3-27b" << 2 << QStringList{"model.embed_tokens=embedding_colwise"} << "lm_head.weight"
            << "places them differently";
        QTest::addRow("router sharded")
            << "mixtral-8x7b" << 2 << QStringList{"model.layers.*.mlp.gate=colwise"} << "model.layers.*.mlp.gate"
            << "every rank needs all 8 expert scores";
        QTest::addRow("linear style on a norm")
            << "llama-3.1-8b" << 2 << QStringList{"model.norm=colwise"} << "model.norm" << "is a RMSNorm";
        QTest::addRow("sequence_parallel on a head norm")
            << "qwen3-32b" << 2 << QStringList{"model.layers.*.self_attn.q_norm=sequence_parallel"}
            << "model.layers.*.self_attn.q_norm" << "which is not a norm of the hidden state";
        QTest::addRow("sequence_parallel on a projection")
            << "llama-3.1-8b" << 2 << QStringList{"lm_head=sequence_parallel"} << "lm_head"
            << "which is not a norm of the hidden state";
        QTest::addRow("partial sums into a sequence-parallel norm")
            << "llama-3.1-8b" << 2
            << QStringList{"model.layers.*.post_attention_layernorm=sequence_parallel", "model.layers.*.self_attn.o_proj=",
                           "model.layers.*.self_attn.o_proj.weight=rowwise"}
            << "model.layers.*:residual_attn" << "partial sums from 'model.layers.*.self_attn.o_proj'";
        QTest::addRow("all_reduce of a replicated output")
            << "llama-3.1-8b" << 2 << QStringList{"lm_head=all_reduce"} << "lm_head" << "the result is 2× too large";
        QTest::addRow("unknown style")
            << "llama-3.1-8b" << 2 << QStringList{"lm_head=colwize"} << "lm_head" << "Unsupported tensor parallel style 'colwize'";
        QTest::addRow("key matching nothing")
            << "llama-3.1-8b" << 2 << QStringList{"model.layers.*.mlp.gate=colwise"} << "model.layers.*.mlp.gate"
            << "does not match any module or parameter";
    }
    void invalidPlans()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        QFETCH(QStringList, edits);
        QFETCH(QString, where);
        QFETCH(QString, message);
        const ModelSpec s = spec(model.toUtf8().constData());
        std::vector<std::pair<std::string, std::string>> e;
        for (const auto& x : edits)
            e.emplace_back(x.section('=', 0, 0).toStdString(), x.section('=', 1).toStdString());
        const ShardedGraph g = shardModel(s, edited(s, tp, e));
        QVERIFY(!g.valid());
        QVERIFY2(hasDiag(g, Severity::Error, where.toStdString(), message.toStdString()), dump(g).c_str());
    }

    // One mistake, one cause: the errors it sets off downstream say which error they follow from and
    // point there, and the cause's hint restores the layout its siblings share.
    // Issue 38: KV heads fewer than T — the diagnosis stays (Transformers fails), with what vLLM's
    // replication would cost a rank: one head's rows of every k_proj and v_proj and its cache.
    void kvHeadsBelowTSayWhatReplicationCosts()
    {
        const ModelSpec s = tptest::openSpec("llama-3.1-405b");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 16), {.batch = 1, .seq = 512});
        const Diagnostic* d = nullptr;
        for (const Diagnostic& x : g.diagnostics)
            if (x.where == "num_key_value_heads")
                d = &x;
        QVERIFY(d && d->severity == Severity::Error);
        std::int64_t kv = 0, layers = 0;
        for (const ModuleSpec& m : s.modules)
            if (m.name == "k_proj" || m.name == "v_proj") {
                kv += dtypeBytes(m.params[0].dtype, m.params[0].shape[0] * m.params[0].shape[1]);
                layers += m.name == "k_proj";
            }
        const std::int64_t N = s.config.numKvHeads;
        const std::string want = fmt::format("each key/value head on {} ranks", 16 / N);
        QVERIFY2(d->message.find(want) != std::string::npos, d->message.c_str());
        QVERIFY2(d->message.find(humanBytes(double(kv / N)) + " of k_proj and v_proj weights (of " + humanBytes(double(kv)) + " whole)")
                     != std::string::npos,
                 d->message.c_str());
        QVERIFY2(d->message.find(humanBytes(double(layers * 2 * s.config.headDim * 2)) + " of KV cache a token in BF16") != std::string::npos,
                 d->message.c_str());
        // T not a multiple of the KV heads: no replication figure (vLLM needs T % N == 0 too).
        const ShardedGraph three = shardModel(s, defaultPlan(s, 3), {.batch = 1, .seq = 512});
        for (const Diagnostic& x : three.diagnostics)
            if (x.where == "num_key_value_heads")
                QVERIFY(x.message.find("Replicated") == std::string::npos);
    }

    // Issue 38, outcome 2: KV heads fewer than T replicated as vLLM does (Plan::replicateKvHeads): rank r holds the
    // whole KV head floor(r·KV/T) of every k_proj and v_proj (weight and bias), q heads still split T ways, each
    // rank's q heads of its own KV head, one head's k and v cached per layer, and no collective added. Every
    // expected figure comes from the catalog's config.json values.
    void replicatedKvHeads_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addRow("llama-3.1-70b: 8 KV heads at T=16") << "llama-3.1-70b" << 16;
        QTest::addRow("llama-3.1-70b: 8 KV heads at T=32") << "llama-3.1-70b" << 32;
        QTest::addRow("qwen2.5-72b: k/v biases at T=16") << "qwen2.5-72b" << 16;
        QTest::addRow("qwen3-30b-a3b: 4 KV heads, k_norm, MoE at T=8") << "qwen3-30b-a3b" << 8;
    }
    void replicatedKvHeads()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        std::ifstream in(tptest::sourceDir() + "/resources/catalog/" + model.toStdString() + ".json");
        QVERIFY(in.good());
        const auto c = nlohmann::json::parse(in);
        const std::int64_t H = c["hidden_size"], heads = c["num_attention_heads"], KV = c["num_key_value_heads"],
                           L = c["num_hidden_layers"];
        const std::int64_t hd = c.contains("head_dim") && !c["head_dim"].is_null() ? c["head_dim"].get<std::int64_t>() : H / heads;
        QCOMPARE(c["torch_dtype"].get<std::string>(), std::string("bfloat16"));
        const std::int64_t e = 2;
        const bool bias = c["model_type"] == "qwen2"; // Qwen2's q, k and v projections have biases
        const std::int64_t T = tp, replicas = T / KV;

        const ModelSpec s = spec(model.toUtf8().constData());
        Plan p = defaultPlan(s, tp);
        p.replicateKvHeads = true;
        const ShardedGraph g = shardModel(s, p, {.batch = 1, .seq = 512});
        QVERIFY2(g.valid(), dump(g).c_str());
        QCOMPARE(g.kvHeadReplicas, int(replicas));

        for (const char* proj : {"k_proj", "v_proj"}) {
            std::vector<std::string> names{fmt::format("model.layers.0.self_attn.{}.weight", proj)};
            if (bias)
                names.push_back(fmt::format("model.layers.0.self_attn.{}.bias", proj));
            for (const std::string& name : names) {
                const ParamShard& w = shard(g, name);
                const bool isBias = name.ends_with(".bias");
                QCOMPARE(w.dim, 0);
                QCOMPARE(w.replicas, int(replicas));
                std::int64_t total = 0;
                for (std::int64_t r = 0; r < T; ++r) {
                    const std::int64_t head = r * KV / T; // rank r's KV head: T / KV ranks share each
                    const std::vector<std::int64_t> want = isBias ? std::vector<std::int64_t>{hd} : std::vector<std::int64_t>{hd, H};
                    QCOMPARE(w.shapes[std::size_t(r)], want);
                    QCOMPARE(w.slices[std::size_t(r)], (std::vector<Interval>{{head * hd, hd}}));
                    total += w.bytes[std::size_t(r)];
                }
                // Over all ranks: the whole KV·hd rows, T / KV times.
                QCOMPARE(total, replicas * KV * hd * (isBias ? 1 : H) * e);
            }
        }
        // q heads still split T ways, each rank's all of its KV head's group (q head h reads KV head h / (heads / KV)).
        const ParamShard& q = shard(g, "model.layers.0.self_attn.q_proj.weight");
        for (std::int64_t r = 0; r < T; ++r) {
            QCOMPARE(q.shapes[std::size_t(r)], (std::vector<std::int64_t>{heads / T * hd, H}));
            const std::int64_t first = q.slices[std::size_t(r)][0].offset / hd, last = first + heads / T - 1;
            QCOMPARE(first / (heads / KV), r * KV / T);
            QCOMPARE(last / (heads / KV), r * KV / T);
        }
        // Attention runs the rank's heads / T query heads against its one KV head.
        int attentions = 0;
        for (const GraphNode& n : g.graph.nodes)
            if (n.kind == OpKind::Attention) {
                ++attentions;
                for (std::int64_t r = 0; r < T; ++r) {
                    QCOMPARE(g.tensors[std::size_t(n.inputs[0])].local[std::size_t(r)], heads / T * hd);
                    QCOMPARE(g.tensors[std::size_t(n.inputs[1])].local[std::size_t(r)], hd);
                    QCOMPARE(g.tensors[std::size_t(n.inputs[2])].local[std::size_t(r)], hd);
                    QCOMPARE(g.tensors[std::size_t(n.outputs[0])].local[std::size_t(r)], heads / T * hd);
                }
            }
        QCOMPARE(attentions, int(L));
        // The cache: one head's k and v per layer on every rank.
        for (const RankMemory& m : g.memory)
            QCOMPARE(m.kvCacheBytesPerToken, L * 2 * hd * e);
        // No collective added: the attention output is still o_proj's all-reduce, and the forward runs the same
        // collectives, place by place, as the even split at T = KV.
        QCOMPARE(count(g, CollectiveKind::AllReduce, "model.layers.*.self_attn.o_proj"), int(L));
        const ShardedGraph even = shardModel(s, defaultPlan(s, int(KV)), {.batch = 1, .seq = 512});
        QVERIFY2(even.valid(), dump(even).c_str());
        std::multiset<std::pair<CollectiveKind, std::string>> mine, theirs;
        for (const Collective& x : g.collectives)
            mine.emplace(x.kind, genericName(x.where));
        for (const Collective& x : even.collectives)
            theirs.emplace(x.kind, genericName(x.where));
        QVERIFY(mine == theirs);
        for (const Collective& x : g.collectives)
            if (genericName(x.where) == "model.layers.*.self_attn.o_proj")
                QCOMPARE(x.bytes(1, 512, e), 512 * H * e);
        // The plan is valid for the planner, with a warning that says what the pinned Transformers does and what
        // replication costs a rank: 2·L heads of k_proj/v_proj rows and one head's k and v a layer in the cache.
        const Diagnostic* d = nullptr;
        for (const Diagnostic& x : g.diagnostics)
            if (x.where == "num_key_value_heads")
                d = &x;
        QVERIFY2(d && d->severity == Severity::Warning, dump(g).c_str());
        for (const std::string& part :
             {std::string("the pinned Transformers 5.24 cannot load this plan"), std::string("fails in the first forward"),
              std::string("vLLM and SGLang"), fmt::format("each key/value head on {} ranks", replicas),
              fmt::format("a rank holds {} of k_proj and v_proj weights", humanBytes(double(L * 2 * hd * H * e))),
              fmt::format("{} with an even split", humanBytes(double(L * 2 * KV * hd * H * e / T))),
              fmt::format("{} of KV cache a token", humanBytes(double(L * 2 * hd * e))),
              fmt::format("{} with an even split)", humanBytes(double(L * 2 * KV * hd * e / T)))})
            QVERIFY2(d->message.find(part) != std::string::npos, (part + " not in: " + d->message).c_str());

        // The option travels with the plan file (a TP Studio key beside tp_plan) and gives the same shards back.
        const std::string json = planToJson(p, &s);
        QCOMPARE(nlohmann::json::parse(json)["replicate_kv_heads"].get<bool>(), true);
        auto back = parsePlanJson(json, "replicated.json", VersionProfile::G3);
        QVERIFY2(back.ok(), back.status().message().c_str());
        QVERIFY(back->replicateKvHeads);
        const ShardedGraph b = shardModel(s, resolveOverrides(s, *back), {.batch = 1, .seq = 512});
        QCOMPARE(b.params.size(), g.params.size());
        for (std::size_t i = 0; i < b.params.size(); ++i)
            QCOMPARE(b.params[i].slices, g.params[i].slices);
        QVERIFY(!nlohmann::json::parse(planToJson(defaultPlan(s, tp), &s)).contains("replicate_kv_heads"));
    }

    // With the option off today's error stays (its hint names the option); with it on, T must be a multiple of
    // the KV heads, and where the heads split evenly it changes nothing.
    void replicatedKvHeadsDiagnostics_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("tp");
        QTest::addColumn<bool>("replicate");
        QTest::addColumn<int>("severity"); // of the finding at `where`
        QTest::addColumn<QString>("where");
        QTest::addColumn<QString>("message");
        QTest::addColumn<QString>("hint");
        QTest::addRow("off: Transformers' failure, an error")
            << "llama-3.1-70b" << 16 << false << int(Severity::Error) << "num_key_value_heads"
            << "8 key/value heads are not divisible by tp_size 16; Transformers does not replicate KV heads and fails in "
               "the first forward"
            << "or replicate them as vLLM does (\"replicate_kv_heads\": true, --replicate-kv-heads)";
        QTest::addRow("on: replicated, a warning")
            << "llama-3.1-70b" << 16 << true << int(Severity::Warning) << "num_key_value_heads"
            << "8 key/value heads on tp_size 16: replicated (replicate_kv_heads), each key/value head on 2 ranks"
            << "serve it with vLLM or SGLang";
        QTest::addRow("on: T not a multiple of the KV heads")
            << "llama-3.1-70b" << 12 << true << int(Severity::Error) << "num_key_value_heads"
            << "8 key/value heads are not divisible by tp_size 12, and replicate_kv_heads cannot replicate them: tp_size "
               "must be a multiple of 8"
            << "tp sizes that replicate them: 16, 32, 64";
        QTest::addRow("on: 4 KV heads, T=6")
            << "qwen3-30b-a3b" << 6 << true << int(Severity::Error) << "num_key_value_heads"
            << "replicate_kv_heads cannot replicate them: tp_size must be a multiple of 4" << "8, 16, 32";
        QTest::addRow("on: q heads not divisible either")
            << "llama-3.1-70b" << 48 << true << int(Severity::Error) << "num_attention_heads"
            << "64 attention heads are not divisible by tp_size 48" << "";
        QTest::addRow("on: KV heads split evenly, no effect")
            << "llama-3.1-70b" << 8 << true << int(Severity::Info) << "replicate_kv_heads"
            << "no effect at tp_size 8: the 8 key/value heads split evenly" << "";
    }
    void replicatedKvHeadsDiagnostics()
    {
        QFETCH(QString, model);
        QFETCH(int, tp);
        QFETCH(bool, replicate);
        QFETCH(int, severity);
        QFETCH(QString, where);
        QFETCH(QString, message);
        QFETCH(QString, hint);
        const ModelSpec s = spec(model.toUtf8().constData());
        Plan p = defaultPlan(s, tp);
        p.replicateKvHeads = replicate;
        const ShardedGraph g = shardModel(s, p, {.batch = 1, .seq = 512});
        const auto sev = Severity(severity);
        QVERIFY2(hasDiag(g, sev, where.toStdString(), message.toStdString()), dump(g).c_str());
        if (!hint.isEmpty())
            QVERIFY2(std::any_of(g.diagnostics.begin(), g.diagnostics.end(), [&](const Diagnostic& d) {
                         return d.where == where.toStdString() && d.message.find(message.toStdString()) != std::string::npos
                             && d.hint.find(hint.toStdString()) != std::string::npos;
                     }),
                     dump(g).c_str());
        QCOMPARE(g.valid(), sev != Severity::Error);
        // Replicable KV heads blocked by the query heads: the query heads' error alone, not one about the KV heads.
        if (replicate && where == "num_attention_heads")
            QVERIFY2(std::none_of(g.diagnostics.begin(), g.diagnostics.end(), [](const Diagnostic& d) { return d.where == "num_key_value_heads"; }),
                     dump(g).c_str());
        // Nothing is replicated where the plan is invalid or the heads split evenly.
        if (sev != Severity::Warning) {
            QCOMPARE(g.kvHeadReplicas, 1);
            for (const ParamShard& x : g.params)
                QCOMPARE(x.replicas, 1);
        }
        // At an even split the option changes no shard.
        if (sev == Severity::Info) {
            const ShardedGraph plain = shardModel(s, defaultPlan(s, tp), {.batch = 1, .seq = 512});
            for (std::size_t i = 0; i < g.params.size(); ++i)
                QCOMPARE(g.params[i].slices, plain.params[i].slices);
        }
    }

    // Issue 38: fp8 block scales. DeepSeek-V3's public config gives weight_block_size [128, 128];
    // a rank's share of a quantized weight must be whole blocks (Transformers shards weight_scale_inv
    // with it): the experts' 2048-wide intermediate allows T up to 16, T=32 cuts blocks — an error naming
    // the module and the sizes that keep whole blocks.
    void fp8ShardsKeepWholeBlocks()
    {
        const ModelSpec s = tptest::openSpec("deepseek-v3");
        const nlohmann::json q = nlohmann::json::parse(findCatalogEntry("deepseek-v3")->configJson)["quantization_config"];
        QCOMPARE(s.config.quantBlock, (std::vector<std::int64_t>{q["weight_block_size"][0], q["weight_block_size"][1]}));
        auto blockErrors = [&](int T) {
            std::vector<Diagnostic> out;
            for (const Diagnostic& d : shardModel(s, defaultPlan(s, T), {.batch = 1, .seq = 512}).diagnostics)
                if (d.message.find("cuts its fp8 scale blocks") != std::string::npos)
                    out.push_back(d);
            return out;
        };
        for (const int T : {2, 4, 8, 16})
            QVERIFY2(blockErrors(T).empty(), qPrintable(QStringLiteral("T=%1").arg(T)));
        const auto at32 = blockErrors(32);
        const std::int64_t moe = s.config.moeIntermediateSize, b = s.config.quantBlock[1];
        QVERIFY(moe / 32 % b != 0);
        const Diagnostic* down = nullptr;
        for (const Diagnostic& d : at32)
            if (d.where == "model.layers.*.mlp.experts.down_proj")
                down = &d;
        QVERIFY(down && down->severity == Severity::Error);
        QVERIFY2(down->message.find(fmt::format("splits its {} input features into {} per rank", moe, moe / 32)) != std::string::npos,
                 down->message.c_str());
        std::vector<std::string> good;
        for (int t = 1; t <= 64; ++t)
            if (moe % t == 0 && (moe / t) % b == 0)
                good.push_back(std::to_string(t));
        QCOMPARE(down->hint, fmt::format("tp sizes that keep whole blocks here: {}", fmt::join(good, ", ")));
        // The packed gate_up_proj: each half's share is what must be whole blocks.
        QVERIFY(std::any_of(at32.begin(), at32.end(), [](const Diagnostic& d) {
            return d.where == "model.layers.*.mlp.experts.gate_up_proj" && d.message.find("2 packed parts of 64") != std::string::npos;
        }));
        // Each rank's bytes count the fp8 weights and their float32 block scales (weight_scale_inv), by hand
        // from the public config: the routed experts' down_proj [E, hidden, moe_intermediate] rowwise at T=8.
        {
            const nlohmann::json c = nlohmann::json::parse(findCatalogEntry("deepseek-v3")->configJson);
            const std::int64_t E = c["n_routed_experts"], H = c["hidden_size"], I = c["moe_intermediate_size"];
            const std::int64_t bo = c["quantization_config"]["weight_block_size"][0], bi = c["quantization_config"]["weight_block_size"][1];
            const ShardedGraph g8 = shardModel(s, defaultPlan(s, 8), {.batch = 1, .seq = 512});
            const ParamShard* sh = nullptr;
            for (const ParamShard& p : g8.params)
                if (p.path == "model.layers.3.mlp.experts.down_proj")
                    sh = &p;
            QVERIFY(sh);
            const std::int64_t local = I / 8;
            const std::int64_t want = E * H * local * 1 + E * ((H + bo - 1) / bo) * ((local + bi - 1) / bi) * 4;
            for (std::size_t r = 0; r < 8; ++r)
                QCOMPARE(sh->bytes[r], want);
            // At T=1 the whole parameter: its data and its scales, as ParamSpec::bytes says.
            const ParamSpec& whole = s.modules[std::size_t(sh->module)].params[std::size_t(sh->param)];
            QCOMPARE(whole.bytes(), E * H * I + E * ((H + bo - 1) / bo) * ((I + bi - 1) / bi) * 4);
            QVERIFY(s.bytesByDtype().at(DType::F32) > 0); // the scales, counted apart from the fp8 data
        }
        // Without block scales (a bf16 model) nothing is said.
        const ModelSpec l = tptest::openSpec("llama-3.1-70b");
        for (const Diagnostic& d : shardModel(l, defaultPlan(l, 64), {.batch = 1, .seq = 512}).diagnostics)
            QVERIFY(d.message.find("fp8 scale blocks") == std::string::npos);
    }

    // Issue 38: AWQ and GPTQ. Each decoder Linear's weight [out, in] is stored packed (gptqmodel's layouts, which the
    // pinned Transformers' quantizers use): GPTQ qweight [in·b/32, out] + g_idx [in], AWQ qweight [in, out·b/32], both
    // with qzeros [in/g, out·b/32] int32 and scales [in/g, out] float16. Transformers does not shard them (buffers its
    // plan never lists): every rank holds them whole and a plan that shards them is an error naming the first module
    // and the tp sizes a serving engine could use.
    void awqAndGptqWeightsAreCountedAndNotSplit_data()
    {
        QTest::addColumn<QString>("method");
        QTest::addRow("awq") << "awq";
        QTest::addRow("gptq") << "gptq";
    }
    void awqAndGptqWeightsAreCountedAndNotSplit()
    {
        QFETCH(QString, method);
        const bool gptq = method == "gptq";
        nlohmann::json c = nlohmann::json::parse(findCatalogEntry("llama-3.1-8b")->configJson);
        c["dtype"] = "float16";
        c["quantization_config"] = gptq ? nlohmann::json{{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", false}}
                                        : nlohmann::json{{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"},
                                                         {"modules_to_not_convert", {"mlp.down_proj"}}};
        QTemporaryDir dir;
        std::ofstream(dir.filePath("config.json").toStdString()) << c.dump();
        auto om = openModel(dir.path().toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        const ModelSpec& s = om->spec;
        const std::int64_t H = c["hidden_size"], I = c["intermediate_size"], L = c["num_hidden_layers"], heads = c["num_attention_heads"],
                           kv = c["num_key_value_heads"], V = c["vocab_size"], hd = H / heads, g = 128;
        auto packed = [&](std::int64_t out, std::int64_t in) {
            const std::int64_t words = gptq ? in * 4 / 32 * out : in * (out * 4 / 32);
            return (words + in / g * (out * 4 / 32) + (gptq ? in : 0)) * 4 + in / g * out * 2;
        };
        // AWQ leaves down_proj (modules_to_not_convert) in float16.
        const std::int64_t layer = packed(heads * hd, H) + 2 * packed(kv * hd, H) + packed(H, heads * hd) + 2 * packed(I, H)
                                 + (gptq ? packed(H, I) : H * I * 2) + 2 * H * 2;
        const std::int64_t want = L * layer + 2 * V * H * 2 + H * 2; // embeddings and lm_head float16, the final norm
        QCOMPARE(s.parameterBytes(), want);
        const ShardedGraph g1 = shardModel(s, defaultPlan(s, 1), {.batch = 1, .seq = 512});
        QCOMPARE(g1.memory[0].weightBytes, want);
        QVERIFY(std::none_of(g1.diagnostics.begin(), g1.diagnostics.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; }));
        // T=2: the packed weights stay whole on each rank (the embedding and lm_head split), and the plan is an error.
        const ShardedGraph g2 = shardModel(s, defaultPlan(s, 2), {.batch = 1, .seq = 512});
        const Diagnostic* e = nullptr;
        for (const Diagnostic& d : g2.diagnostics)
            if (d.message.find("does not split") != std::string::npos)
                e = &d;
        QVERIFY(e && e->severity == Severity::Error);
        QCOMPARE(e->where, std::string("model.layers.*.self_attn.q_proj"));
        QVERIFY2(e->message.find(fmt::format("{} 4-bit weight (group_size 128)", gptq ? "a GPTQ" : "an AWQ")) != std::string::npos, e->message.c_str());
        QVERIFY2(e->message.find(fmt::format("({} such weights in all)", L * (gptq ? 7 : 6))) != std::string::npos, e->message.c_str());
        // Row-parallel o_proj (in = 4096) and down_proj (GPTQ: in = 14336 = 112 groups) keep whole groups; column-parallel
        // outputs whole int32 words.
        std::vector<std::string> tps;
        for (std::int64_t t = 1; t <= 64; ++t)
            if (H % t == 0 && (H / t) % g == 0 && (!gptq || (I % t == 0 && (I / t) % g == 0)) && (kv * hd) % t == 0 && (kv * hd / t) * 4 % 32 == 0)
                tps.push_back(std::to_string(t));
        QVERIFY2(e->hint.find(fmt::format("at tp sizes {} here", fmt::join(tps, ", "))) != std::string::npos, e->hint.c_str());
        for (const ParamShard& p : g2.params)
            if (p.path == "model.layers.0.self_attn.q_proj.weight")
                QCOMPARE(p.bytes, (std::vector<std::int64_t>{packed(H, H), packed(H, H)}));
        // bytesByDtype: the packed words and zeros as I32, the scales as F16 with the unquantized tensors.
        QVERIFY(s.bytesByDtype().at(DType::I32) > 0 && s.bytesByDtype().at(DType::F16) > 0);
    }

    // Issue 38: MXFP4 (gpt-oss's experts, [E, in, out] in four bits): each weight counts its E8M0 scales, one byte per
    // 32 inputs (the checkpoint's *_scales [E, out, in/32]), and a split of the input that cuts those blocks is an error.
    void mxfp4ExpertsCountTheirScales()
    {
        const ModelSpec s = tptest::openSpec("gpt-oss-120b");
        const nlohmann::json c = nlohmann::json::parse(findCatalogEntry("gpt-oss-120b")->configJson);
        QCOMPARE(c["quantization_config"]["quant_method"], "mxfp4");
        const std::int64_t E = c["num_local_experts"], H = c["hidden_size"], I = c["intermediate_size"];
        const ParamSpec* gu = nullptr;
        const ParamSpec* down = nullptr;
        for (const ParamSpec& p : s.find("model.layers.0.mlp.experts")->params) {
            if (p.name == "gate_up_proj")
                gu = &p;
            if (p.name == "down_proj")
                down = &p;
        }
        QVERIFY(gu && down);
        QCOMPARE(gu->bytes(), E * H * 2 * I / 2 + E * 2 * I * ((H + 31) / 32));
        QCOMPARE(down->bytes(), E * I * H / 2 + E * H * ((I + 31) / 32));
        QVERIFY(s.bytesByDtype().at(DType::F8E8M0) > 0);
        // Under the expert-parallel plan every rank holds E/T whole experts, scales and all.
        const auto ep = loadPlanFile(TP_SOURCE_DIR "/plans/gpt_oss/expert-parallel.json", VersionProfile::G3);
        QVERIFY2(ep.ok(), ep.status().message().c_str());
        Plan p = resolveOverrides(s, *ep);
        p.tpSize = 8;
        const ShardedGraph g = shardModel(s, p, {.batch = 1, .seq = 512});
        for (const ParamShard& sh : g.params)
            if (sh.path == "model.layers.0.mlp.experts.down_proj")
                QCOMPARE(sh.bytes[3], down->bytes() / 8);
        // Splitting down_proj's inputs (I = 2880, 90 blocks): whole blocks at T = 2, not at T = 4 (720 = 22.5 blocks).
        auto cut = [&](int T) {
            Plan q = defaultPlan(s, T);
            q.entries.push_back({"model.layers.*.mlp.experts.down_proj", "colwise"});
            for (const Diagnostic& d : shardModel(s, q, {.batch = 1, .seq = 512}).diagnostics)
                if (d.message.find("cuts its MXFP4 blocks") != std::string::npos)
                    return d;
            return Diagnostic{};
        };
        QVERIFY(cut(2).message.empty());
        const Diagnostic d = cut(4);
        QCOMPARE(d.where, std::string("model.layers.*.mlp.experts.down_proj"));
        QVERIFY2(d.message.find(fmt::format("splits its {} input features into {} per rank", I, I / 4)) != std::string::npos, d.message.c_str());
        std::vector<std::string> good;
        for (int t = 1; t <= 64; ++t)
            if (I % t == 0 && (I / t) % 32 == 0)
                good.push_back(std::to_string(t));
        QCOMPARE(d.hint, fmt::format("tp sizes that keep whole blocks here: {}", fmt::join(good, ", ")));
    }

    // Issue 38: AWQ/GPTQ's quantization_config is read strictly: bits, group_size and modules_to_not_convert.
    void awqGptqConfigIsChecked()
    {
        for (const char* bad : {R"("bits": 5)", R"("bits": "4")", R"("group_size": 0)", R"("group_size": -2)", R"("modules_to_not_convert": "lm_head")"}) {
            const std::string text = fmt::format(R"({{"model_type": "llama", "quantization_config": {{"quant_method": "gptq", {}}}}})", bad);
            const auto r = parseConfig(text, "config.json", nullptr);
            QVERIFY2(!r.ok(), bad);
            QVERIFY2(r.status().message().find("'quantization_config.") != std::string::npos, r.status().message().c_str());
        }
        const auto ok = parseConfig(R"({"model_type": "llama", "quantization_config": {"quant_method": "awq", "group_size": -1}})", "config.json", nullptr);
        QVERIFY2(ok.ok(), ok.status().message().c_str());
        QCOMPARE(ok->quantBits, 4);
        QCOMPARE(ok->quantGroup, std::int64_t(-1));
    }

    // Issue 38: coverage. A plan whose experts (or MLPs) stay whole on every rank — transformers
    // issue 48308's 60 GB a rank instead of 15 — is a warning with the bytes, the largest groups and
    // the class's own keys that shard them; the default plans of the catalog say nothing.
    void replicatedWeightsAreNamed_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("whole"); // keys containing this are set to 'replicate'; "" = the default plan
        QTest::addColumn<QString>("group");
        QTest::addRow("mixtral default") << "mixtral-8x7b" << "" << "";
        QTest::addRow("llama-3.1-70b default") << "llama-3.1-70b" << "" << "";
        QTest::addRow("deepseek-v3 default") << "deepseek-v3" << "" << "";
        QTest::addRow("qwen3-30b-a3b default") << "qwen3-30b-a3b" << "" << "";
        QTest::addRow("mixtral experts whole") << "mixtral-8x7b" << "experts" << "model.layers.*.mlp.experts";
        QTest::addRow("llama mlp whole") << "llama-3.1-70b" << "mlp." << "model.layers.*.mlp.";
    }
    void replicatedWeightsAreNamed()
    {
        QFETCH(QString, model);
        QFETCH(QString, whole);
        QFETCH(QString, group);
        const ModelSpec s = tptest::openSpec(model.toStdString().c_str());
        Plan p = defaultPlan(s, 8);
        for (PlanEntry& e : p.entries)
            if (!whole.isEmpty() && QString::fromStdString(e.key).contains(whole))
                e.style = "replicate";
        const ShardedGraph g = shardModel(s, p, {.batch = 1, .seq = 512});
        const Diagnostic* warning = nullptr;
        for (const Diagnostic& d : g.diagnostics)
            if (d.message.find("whole on every rank at tp_size") != std::string::npos)
                warning = &d;
        if (group.isEmpty()) {
            QVERIFY2(!warning, warning ? warning->message.c_str() : "");
            return;
        }
        QVERIFY(warning);
        QCOMPARE(warning->severity, Severity::Warning);
        QVERIFY2(QString::fromStdString(warning->message).contains(group), warning->message.c_str());
        // The bytes: every whole weight of those modules on rank 0, counted here from the shards.
        std::int64_t bytes = 0;
        for (const ParamShard& sh : g.params)
            if (sh.dim < 0 && QString::fromStdString(sh.path).contains(whole) && sh.path.find("layers") != std::string::npos
                && s.modules[std::size_t(sh.module)].params[std::size_t(sh.param)].shape.size() >= 2)
                bytes += sh.bytes[0];
        QVERIFY(bytes * 4 > g.memory[0].weightBytes);
        QVERIFY2(QString::fromStdString(warning->message).contains(QString::fromStdString(humanBytes(double(bytes)))), warning->message.c_str());
        // The hint gives the class's own entries for them.
        for (const PlanEntry& d : s.defaultTpPlan)
            if (QString::fromStdString(d.key).contains(whole))
                QVERIFY2(warning->hint.find("'" + d.key + "': '" + d.style + "'") != std::string::npos, warning->hint.c_str());
        // The coverage view's rows (wholeWeights): the groups under those keys sum to the same bytes, each with the
        // default plan's style for it, largest first.
        const std::vector<WholeWeights> rows = wholeWeights(s, g, VersionProfile::G3);
        std::int64_t listed = 0;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            QVERIFY(i == 0 || rows[i - 1].bytes >= rows[i].bytes);
            if (QString::fromStdString(rows[i].key).contains(whole) && rows[i].key.find("layers") != std::string::npos) {
                listed += rows[i].bytes;
                QVERIFY2(!rows[i].defaultStyle.empty(), rows[i].key.c_str());
            }
        }
        QCOMPARE(listed, bytes);
    }

    void rootCausesAreMarked_data()
    {
        QTest::addColumn<QStringList>("edits");
        QTest::addColumn<QStringList>("roots");      // where of every error that follows from nothing
        QTest::addColumn<QString>("rootHint");       // in the first root's hint
        QTest::addColumn<int>("consequences");       // at least that many errors follow from the roots
        QTest::addRow("q_proj rowwise") << QStringList{"model.layers.*.self_attn.q_proj=rowwise"}
                                        << QStringList{"model.layers.*.self_attn.q_proj"}
                                        << "make it 'colwise', like 'model.layers.*.self_attn.k_proj' and "
                                           "'model.layers.*.self_attn.v_proj'"
                                        << 2;
        QTest::addRow("o_proj colwise after colwise")
            << QStringList{"model.layers.*.self_attn.o_proj=colwise"} << QStringList{"model.layers.*.self_attn.o_proj"}
            << "make 'model.layers.*.self_attn.o_proj' rowwise" << 1;
        QTest::addRow("down_proj colwise after colwise")
            << QStringList{"model.layers.*.mlp.down_proj=colwise"} << QStringList{"model.layers.*.mlp.down_proj"}
            << "make 'model.layers.*.mlp.down_proj' rowwise" << 1;
        QTest::addRow("gate_proj rowwise") << QStringList{"model.layers.*.mlp.gate_proj=rowwise"}
                                           << QStringList{"model.layers.*.mlp.gate_proj"}
                                           << "make it 'colwise', like 'model.layers.*.mlp.up_proj'" << 1;
        QTest::addRow("q_proj without a style") << QStringList{"model.layers.*.self_attn.q_proj="}
                                                << QStringList{"model.layers.*.self_attn"}
                                                << "give 'model.layers.*.self_attn.q_proj' the style of "
                                                   "'model.layers.*.self_attn.k_proj' and 'model.layers.*.self_attn.v_proj'"
                                                << 1;
        // Two independent mistakes stay two causes: the head's is not a consequence of the layers'.
        QTest::addRow("two independent causes")
            << QStringList{"model.layers.*.self_attn.q_proj=rowwise", "lm_head=colwise"}
            << QStringList{"model.layers.*.self_attn.q_proj", "lm_head"} << "like 'model.layers.*.self_attn.k_proj'" << 2;
    }
    void rootCausesAreMarked()
    {
        QFETCH(QStringList, edits);
        QFETCH(QStringList, roots);
        QFETCH(QString, rootHint);
        QFETCH(int, consequences);
        const ModelSpec s = spec("llama-3.1-8b");
        std::vector<std::pair<std::string, std::string>> e;
        for (const auto& x : edits)
            e.emplace_back(x.section('=', 0, 0).toStdString(), x.section('=', 1).toStdString());
        const ShardedGraph g = shardModel(s, edited(s, 2, e));
        QStringList found;
        int following = 0;
        for (const auto& d : g.diagnostics) {
            if (d.severity != Severity::Error)
                continue;
            if (d.follows.empty()) {
                found << QString::fromStdString(d.where);
                continue;
            }
            ++following;
            QVERIFY2(roots.contains(QString::fromStdString(d.follows)), dump(g).c_str());
            // A consequence points at its cause instead of asking to restyle itself.
            QVERIFY2(d.hint.find("'" + d.follows + "'") != std::string::npos, d.hint.c_str());
            QVERIFY2(d.hint.find("make '" + d.where + "'") == std::string::npos, d.hint.c_str());
        }
        QCOMPARE(found, roots);
        QVERIFY2(following >= consequences, dump(g).c_str());
        const auto first = std::find_if(g.diagnostics.begin(), g.diagnostics.end(),
                                        [&](const Diagnostic& d) { return d.where == roots.front().toStdString(); });
        QVERIFY2(first->hint.find(rootHint.toStdString()) != std::string::npos, first->hint.c_str());
    }

    // A hint names what a style can go on: a module, never an op such as 'model.layers.*.mlp:act'.
    void hintsNameModules()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        const ShardedGraph g = shardModel(s, edited(s, 2, {{"model.layers.*.mlp.down_proj", "replicate"}}));
        QVERIFY(!g.valid());
        const auto d = std::find_if(g.diagnostics.begin(), g.diagnostics.end(), [](const Diagnostic& x) {
            return x.severity == Severity::Error && x.where == "model.layers.*.mlp.down_proj";
        });
        QVERIFY2(d != g.diagnostics.end(), dump(g).c_str());
        QVERIFY2(d->hint.find("make 'model.layers.*.mlp.down_proj' rowwise") != std::string::npos, d->hint.c_str());
        QVERIFY2(d->hint.find("make 'model.layers.*.mlp:act'") == std::string::npos, d->hint.c_str());
        // A colwise o_proj into the residual add: one comma before "but".
        const ShardedGraph r = shardModel(s, edited(s, 2, {{"model.layers.*.self_attn.o_proj", "colwise"}}));
        const auto residual = std::find_if(r.diagnostics.begin(), r.diagnostics.end(), [](const Diagnostic& x) {
            return x.message.find("residual stream") != std::string::npos;
        });
        QVERIFY2(residual != r.diagnostics.end(), dump(r).c_str());
        QVERIFY2(residual->message.find("must be whole, but") != std::string::npos, residual->message.c_str());
    }

    void packedSizesThatDropRows()
    {
        // moe_intermediate_size 100 at T=8: halves of 100 rows do not split evenly.
        const ModelSpec s = tptest::specFromConfig(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 8,
            "num_key_value_heads": 8, "head_dim": 8, "num_hidden_layers": 1, "vocab_size": 128, "num_experts": 4,
            "num_experts_per_tok": 2, "moe_intermediate_size": 100, "intermediate_size": 96})");
        const ShardedGraph g = shardModel(s, defaultPlan(s, 8));
        QVERIFY2(hasDiag(g, Severity::Error, "model.layers.*.mlp.experts.gate_up_proj",
                         "holds 2 blocks of 100 rows, which do not split evenly over tp_size 8"),
                 dump(g).c_str());
    }

    void warnings()
    {
        // gpt-oss: an EP plan, a TP plan that shards only the embedding and the head.
        const ModelSpec oss = spec("gpt-oss-120b");
        const ShardedGraph g = shardModel(oss, defaultPlan(oss, 8));
        QVERIFY(g.valid());
        QVERIFY(hasDiag(g, Severity::Warning, "GptOssForCausalLM", "has an expert-parallel plan but this TP plan shards no layer weights"));
        // An empty plan at T > 1 is refused by Transformers.
        const ModelSpec llama = spec("llama-3.1-8b");
        Plan empty;
        empty.tpSize = 2;
        QVERIFY(hasDiag(shardModel(llama, empty), Severity::Error, "LlamaForCausalLM", "empty tp_plan"));
        // Llama 4's experts: Transformers reduces every expert's rows before their sum over the
        // experts (what the collective audit measured), [E · B·S, H].
        const ModelSpec scout = spec("llama-4-scout");
        const ShardedGraph l4 = shardModel(scout, defaultPlan(scout, 4));
        QVERIFY(l4.valid());
        int experts = 0;
        for (const Collective& c : l4.collectives)
            if (c.style == "moe_tp_experts") {
                ++experts;
                QCOMPARE(c.kind, CollectiveKind::AllReduce);
                QCOMPARE(c.bytes(1, 16, 2), std::int64_t(16) * 16 * 5120 * 2);
            } else {
                QCOMPARE(c.tokensPerToken, std::int64_t(1));
            }
        QCOMPARE(experts, 48); // every layer of Scout is a MoE layer
    }

    void memoryPerRank()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        const ShardedGraph one = shardModel(s, defaultPlan(s, 1), {.batch = 1, .seq = 512, .activationDtype = DType::BF16});
        QCOMPARE(one.memory[0].weightBytes, s.parameterBytes());
        // KV cache: 32 layers × (k + v) × 8 heads × 128 × 2 bytes = 128 KiB per token; 16 KiB per rank at T=8.
        QCOMPARE(one.memory[0].kvCacheBytesPerToken, std::int64_t(128) << 10);
        const ShardedGraph eight = shardModel(s, defaultPlan(s, 8), {.batch = 1, .seq = 512, .activationDtype = DType::BF16});
        QCOMPARE(eight.memory[5].kvCacheBytesPerToken, std::int64_t(16) << 10);
        // Sharded weights split 8 ways, norms stay whole on every rank.
        std::int64_t norms = 0;
        for (const auto& p : eight.params)
            if (p.dim < 0 && !p.tied)
                norms += p.bytes[0];
        QCOMPARE(eight.memory[0].weightBytes, (s.parameterBytes() - norms) / 8 + norms);
        // Activations: the logits [512, 128256] dominate, and the gathered logits are whole at T=8 too.
        QVERIFY(one.memory[0].activationPeakBytes >= std::int64_t(512) * 128256 * 2);
        QCOMPARE(eight.memory[0].activationPeakBytes, one.memory[0].activationPeakBytes);
        // MLA: Transformers caches the latent (kv_lora_rank 512) and the rope key (64), 61 layers, whole on every rank
        // whether or not the heads are split.
        const ModelSpec ds = spec("deepseek-v3");
        for (const Plan& p : {defaultPlan(ds, 8), *parsePlanJson(R"({"tp_size": 8, "tp_plan": {
                                  "model.layers.*.self_attn.q_b_proj": "colwise", "model.layers.*.self_attn.kv_b_proj": "colwise",
                                  "model.layers.*.self_attn.o_proj": "rowwise"}})",
                                                                     "plan.json", VersionProfile::G3)}) {
            const ShardedGraph d = shardModel(ds, p, {.activationDtype = DType::BF16});
            QVERIFY(d.valid());
            for (const RankMemory& m : d.memory)
                QCOMPARE(m.kvCacheBytesPerToken, std::int64_t(61) * (512 + 64) * 2);
        }
    }

    void customStyles()
    {
        // A colwise with a gathered output is colwise_gather_output under another name.
        auto gather = makeCustomStyle({"my_gather", "colwise", Layout::Replicate, Layout::Replicate});
        QVERIFY(gather.ok());
        QCOMPARE(gather->forward, CollectiveKind::AllGather);
        auto scatter = makeCustomStyle({"row_scatter", "rowwise", Layout::ShardLast, Layout::ShardLast});
        QVERIFY(scatter.ok());
        QCOMPARE(scatter->forward, CollectiveKind::ReduceScatter);
        QVERIFY(!makeCustomStyle({"colwise", "colwise", Layout::Replicate, Layout::Replicate}).ok());
        QVERIFY(!makeCustomStyle({"x", "diagonal", Layout::Replicate, Layout::Replicate}).ok());
        QVERIFY(!makeCustomStyle({"x", "colwise", Layout::ShardLast, Layout::Replicate}).ok());

        const ModelSpec s = spec("llama-3.1-8b");
        Plan p = edited(s, 8, {{"lm_head", "my_gather"}});
        p.customStyles.push_back(*gather);
        const ShardedGraph g = shardModel(s, p);
        QVERIFY2(g.valid(), dump(g).c_str());
        QCOMPARE(count(g, CollectiveKind::AllGather, "lm_head"), 1);
        // A reduce-scatter leaves the residual stream sharded: refused at the add.
        Plan q = edited(s, 2, {{"model.layers.*.mlp.down_proj", "row_scatter"}});
        q.customStyles.push_back(*scatter);
        const ShardedGraph h = shardModel(s, q);
        QCOMPARE(count(h, CollectiveKind::ReduceScatter), 32);
        QVERIFY(hasDiag(h, Severity::Error, "model.layers.*:residual_mlp", "leaves its output sharded"));
    }

    void exportRoundTripIsLossless_data()
    {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("edits");
        QTest::addRow("default llama") << "llama-3.1-8b" << QStringList{};
        QTest::addRow("attention replicated") << "llama-3.1-8b"
            << QStringList{"model.layers.*.self_attn.q_proj=", "model.layers.*.self_attn.k_proj=",
                           "model.layers.*.self_attn.v_proj=", "model.layers.*.self_attn.o_proj="};
        QTest::addRow("custom style") << "mixtral-8x7b" << QStringList{"lm_head=my_gather"};
        QTest::addRow("deepseek default") << "deepseek-v3" << QStringList{};
    }
    void exportRoundTripIsLossless()
    {
        QFETCH(QString, model);
        QFETCH(QStringList, edits);
        const ModelSpec s = spec(model.toUtf8().constData());
        std::vector<std::pair<std::string, std::string>> e;
        for (const auto& x : edits)
            e.emplace_back(x.section('=', 0, 0).toStdString(), x.section('=', 1).toStdString());
        Plan p = edited(s, 4, e);
        p.customStyles.push_back(*makeCustomStyle({"my_gather", "colwise", Layout::Replicate, Layout::Replicate}));
        const std::string json = planToJson(p, &s);
        auto back = parsePlanJson(json, "export.json", VersionProfile::G3);
        QVERIFY2(back.ok(), back.status().message().c_str());
        const Plan loaded = resolveOverrides(s, *back);
        QCOMPARE(loaded.tpSize, 4);
        QCOMPARE(planToJson(loaded, &s), json);
        // Same placements and collectives, parameter by parameter.
        const ShardedGraph a = shardModel(s, p), b = shardModel(s, loaded);
        QCOMPARE(a.params.size(), b.params.size());
        for (std::size_t i = 0; i < a.params.size(); ++i) {
            QCOMPARE(a.params[i].dim, b.params[i].dim);
            QCOMPARE(a.params[i].shapes, b.params[i].shapes);
        }
        QCOMPARE(a.collectives.size(), b.collectives.size());
        // A dropped default key comes back as "replicate", so Transformers' merge cannot restore it.
        if (!e.empty() && e[0].second.empty())
            QVERIFY(json.find("\"" + e[0].first + "\": \"replicate\"") != std::string::npos);
    }

    void shippedPlansHoldTheirClaims()
    {
        // plans/index.json: every (file, model) pair validates for exactly the T in 1..8 it claims.
        std::ifstream in(TP_SOURCE_DIR "/plans/index.json");
        QVERIFY(in.good());
        const auto index = nlohmann::json::parse(in);
        QCOMPARE(index.at("schema").get<std::string>(), std::string("tpstudio.plans/1"));
        std::set<std::string> families;
        int checked = 0;
        for (const auto& e : index.at("plans")) {
            const std::string file = e.at("file"), model = e.at("model");
            const auto claimed = e.at("tp").get<std::vector<int>>();
            QVERIFY2(!claimed.empty(), file.c_str());
            auto plan = loadPlanFile(std::string(TP_SOURCE_DIR "/plans/") + file, VersionProfile::G3);
            QVERIFY2(plan.ok(), plan.status().message().c_str());
            const ModelSpec s = spec(model.c_str());
            families.insert(familyName(s.config.family));
            // The binaries carry the same file for the model (what plan search and the Advisor try), described.
            if (!file.ends_with("/default.json")) {
                const auto shipped = shippedPlans(s);
                QVERIFY2(shipped.ok(), shipped.status().message().c_str());
                const auto it = std::find_if(shipped->begin(), shipped->end(), [&](const ShippedPlan& p) { return p.file == file; });
                QVERIFY2(it != shipped->end(), qPrintable(QString("%1 is not among %2's shipped plans").arg(file.c_str(), model.c_str())));
                QCOMPARE(it->description, e.at("description").get<std::string>());
                QCOMPARE(planToJson(it->plan, &s), planToJson(resolveOverrides(s, *plan), &s));
            }
            for (int t = 1; t <= 8; ++t) {
                Plan p = resolveOverrides(s, *plan);
                p.tpSize = t;
                const ShardedGraph g = shardModel(s, p);
                const bool claims = std::find(claimed.begin(), claimed.end(), t) != claimed.end();
                QVERIFY2(g.valid() == claims, qPrintable(QString("%1 on %2 at T=%3: claimed %4\n%5")
                                                             .arg(file.c_str(), model.c_str()).arg(t).arg(claims)
                                                             .arg(dump(g).c_str())));
                ++checked;
            }
        }
        // A plan for every architecture of the catalog.
        for (const auto& c : catalog()) {
            const ModelSpec s = spec(c.id.c_str());
            QVERIFY2(families.contains(familyName(s.config.family)), c.id.c_str());
        }
        QVERIFY(checked >= 200);
    }

    void overridesMergeUnderG3ReplaceBefore()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        auto over = parsePlanJson(R"({"tp_size": 2, "tp_plan": {"model.layers.*.mlp.down_proj": "rowwise_split_input"}})",
                                  "override.json", VersionProfile::G3);
        QVERIFY(over.ok());
        const Plan merged = resolveOverrides(s, *over);
        QCOMPARE(merged.entries.size(), s.defaultTpPlan.size());
        QCOMPARE(shardModel(s, merged).valid(), false); // colwise up/gate → rowwise_split_input: split twice
        over->profile = VersionProfile::G2;
        QCOMPARE(resolveOverrides(s, *over).entries.size(), std::size_t(1));
    }
};

QTEST_GUILESS_MAIN(TestShard)
#include "tst_shard.moc"
