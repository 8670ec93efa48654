// tst_plan — the style registry, Transformers' chunking rules and key matching
// (facts from hf-tp-semantics.md §1–§3, style names from the installed Transformers).
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/plan/plan.h"
#include "tp/plan/plan_io.h"

#include <nlohmann/json.hpp>

#include "testutils.h"

#include <QtTest>

#include <fstream>
#include <set>

using namespace tp;

namespace {
ModelSpec spec(const char* id) { return tptest::openSpec(id); }

const ParamAssignment& assignment(const ModelSpec& s, const PlanMatch& m, const std::string& paramPath)
{
    std::size_t i = 0;
    for (const auto& [name, p] : s.allParams()) {
        if (name == paramPath)
            return m.params[i];
        ++i;
    }
    qFatal("no parameter %s", paramPath.c_str());
}

bool hasDiag(const PlanMatch& m, Severity sev, const std::string& where, const std::string& text)
{
    return std::any_of(m.diagnostics.begin(), m.diagnostics.end(), [&](const Diagnostic& d) {
        return d.severity == sev && d.where == where && d.message.find(text) != std::string::npos;
    });
}

QString styleOf(const ParamAssignment& a) { return a.style ? QString::fromStdString(a.style->name) : QString(); }
} // namespace

class TestPlan : public QObject
{
    Q_OBJECT
private slots:
    void chunking_data()
    {
        QTest::addColumn<qint64>("n");
        QTest::addColumn<int>("tp");
        QTest::addColumn<QList<qint64>>("sizes");
        QTest::addRow("16/4") << 16ll << 4 << QList<qint64>{4, 4, 4, 4};
        QTest::addRow("16/3") << 16ll << 3 << QList<qint64>{6, 6, 4};
        QTest::addRow("10/3 (G3 uneven tests)") << 10ll << 3 << QList<qint64>{4, 4, 2};
        QTest::addRow("16/14 empty trailing") << 16ll << 14 << QList<qint64>{2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0};
        QTest::addRow("1/1") << 1ll << 1 << QList<qint64>{1};
    }
    void chunking()
    {
        QFETCH(qint64, n);
        QFETCH(int, tp);
        QFETCH(QList<qint64>, sizes);
        const auto chunks = chunkSizes(n, tp);
        QCOMPARE(int(chunks.size()), sizes.size());
        std::int64_t offset = 0;
        for (int r = 0; r < tp; ++r) {
            QCOMPARE(chunks[std::size_t(r)].size, sizes[r]);
            QCOMPARE(chunks[std::size_t(r)].offset, std::min<std::int64_t>(offset, n));
            offset += sizes[r];
        }
    }

    void packedSlicesPairGateAndUp()
    {
        // gate_up with I = 6 rows per half, T = 2: rank r holds gate[3r, 3r+3) and up[6+3r, 6+3r+3).
        const auto s = stridedChunks(12, 2, 2);
        QCOMPARE(s[0], (std::vector<Interval>{{0, 3}, {6, 3}}));
        QCOMPARE(s[1], (std::vector<Interval>{{3, 3}, {9, 3}}));
        // Uneven: I = 5, T = 2 → chunks 3 and 2 in each half.
        const auto u = stridedChunks(10, 2, 2);
        QCOMPARE(u[0], (std::vector<Interval>{{0, 3}, {5, 3}}));
        QCOMPARE(u[1], (std::vector<Interval>{{3, 2}, {8, 2}}));
    }

    void currentProfileMatchesTransformers()
    {
        std::ifstream in(TP_SOURCE_DIR "/tests/fixtures/styles.json");
        const auto j = nlohmann::json::parse(in);
        std::set<std::string> theirs;
        for (const auto& n : j["ALL_PARALLEL_STYLES"])
            theirs.insert(n.get<std::string>());
        const auto v = StyleRegistry::builtin().names(VersionProfile::G3);
        const std::set<std::string> ours(v.begin(), v.end());
        QCOMPARE(ours, theirs);
    }

    void profiles()
    {
        const auto& reg = StyleRegistry::builtin();
        QVERIFY(reg.find("local_colwise", VersionProfile::G1));
        QVERIFY(!reg.find("local_colwise", VersionProfile::G3));
        QVERIFY(!reg.find("colwise_rep", VersionProfile::G2)); // renamed in 5.1
        QCOMPARE(QString::fromStdString(reg.find("colwise_rep", VersionProfile::G3)->name), QString("colwise_gather_output"));
        QCOMPARE(QString::fromStdString(reg.find("colwise_rep", VersionProfile::G1)->name), QString("colwise_rep"));
        QVERIFY(reg.find("megamoe_experts", VersionProfile::G2));
        QVERIFY(reg.find("ep_router", VersionProfile::G2));
        // Every name the plan issue lists exists in some profile.
        for (const char* n : {"embedding_rowwise", "embedding_colwise", "colwise", "colwise_gather_output", "colwise_rep",
                              "rowwise", "rowwise_split_input", "rowwise_rep", "packed_colwise", "packed_rowwise",
                              "sequence_parallel", "replicated_with_grad_allreduce", "mla_kv_a_proj", "all_reduce",
                              "moe_tp_experts", "moe_identity_expert", "local_params", "grouped_gemm", "ep_router",
                              "megamoe_router", "megamoe_experts", "ep_dispatch_experts"})
            QVERIFY2(reg.find(n, VersionProfile::G1) || reg.find(n, VersionProfile::G2) || reg.find(n, VersionProfile::G3), n);
    }

    void styleSemantics()
    {
        const auto& reg = StyleRegistry::builtin();
        const Style* col = reg.find("colwise", VersionProfile::G3);
        QCOMPARE(col->weight2d.resolvedDim(2), 0);             // [out, in]: output features
        QCOMPARE(col->placementFor(2, true), Placement::shard(1)); // nn.Embedding: hidden
        QCOMPARE(col->forward, CollectiveKind::None);
        const Style* row = reg.find("rowwise", VersionProfile::G3);
        QCOMPARE(row->weight2d.resolvedDim(2), 1);
        QCOMPARE(row->bias, Placement::replicate());           // added once, after the reduction
        QCOMPARE(row->forward, CollectiveKind::AllReduce);
        QCOMPARE(reg.find("colwise_gather_output", VersionProfile::G3)->forward, CollectiveKind::AllGather);
        const Style* packed = reg.find("packed_colwise", VersionProfile::G3);
        QCOMPARE(packed->param3d.resolvedDim(3), 1);           // [E, 2I, H]
        QCOMPARE(packed->param3d.splitFactor, 2);
        QCOMPARE(packed->bias, Placement::shard(-1));          // contiguous, not strided
        QVERIFY(!reg.find("packed_rowwise", VersionProfile::G3)->installsForward);
        QCOMPARE(reg.find("grouped_gemm", VersionProfile::G3)->param3d, Placement::shard(0)); // expert dim
    }

    void llamaDefaultPlan()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        const PlanMatch m = matchPlan(s, defaultPlan(s, 8));
        QVERIFY(!hasErrors(m.diagnostics));
        for (std::size_t i = 0; i < m.entryMatches.size(); ++i)
            QVERIFY2(m.entryMatches[i] > 0, s.defaultTpPlan[i].key.c_str());
        const auto& q = assignment(s, m, "model.layers.5.self_attn.q_proj.weight");
        QCOMPARE(styleOf(q), QString("colwise"));
        QVERIFY(q.viaModuleKey); // q_proj covers q_proj.weight
        QCOMPARE(q.placement.resolvedDim(2), 0);
        QCOMPARE(assignment(s, m, "model.layers.5.self_attn.o_proj.weight").placement.resolvedDim(2), 1);
        QCOMPARE(assignment(s, m, "model.embed_tokens.weight").placement, Placement::shard(0)); // vocab
        QCOMPARE(styleOf(assignment(s, m, "lm_head.weight")), QString("colwise_gather_output"));
        QVERIFY(!assignment(s, m, "model.layers.5.input_layernorm.weight").style);
        QCOMPARE(m.entryMatches[2], 32); // q_proj key: one module per layer
    }

    void parameterKeyBeatsModuleKey()
    {
        const ModelSpec s = spec("qwen3-30b-a3b");
        const PlanMatch m = matchPlan(s, defaultPlan(s, 4));
        const auto& gu = assignment(s, m, "model.layers.3.mlp.experts.gate_up_proj");
        QCOMPARE(styleOf(gu), QString("packed_colwise"));
        QVERIFY(!gu.viaModuleKey);
        QCOMPARE(gu.placement, Placement::strided(-2, 2));
        QCOMPARE(styleOf(assignment(s, m, "model.layers.3.mlp.experts.down_proj")), QString("rowwise"));
        // The module key alone decides the experts' forward wrapper.
        const int experts = s.indexOf("model.layers.3.mlp.experts");
        QCOMPARE(QString::fromStdString(s.defaultTpPlan[std::size_t(m.moduleEntry[std::size_t(experts)])].style),
                 QString("moe_tp_experts"));
    }

    void digitsInNamesPerProfile()
    {
        // Mixtral's legacy per-expert names: G1 wildcarded the digit in w1 and never matched (#42016).
        ModelConfig cfg;
        cfg.modelType = "mixtral_legacy";
        Checkpoint ck;
        for (const char* n : {"model.layers.0.block_sparse_moe.experts.0.w1.weight", "model.layers.0.block_sparse_moe.experts.1.w1.weight"})
            ck.tensors.push_back({n, DType::BF16, {8, 4}, 0, 64, "x"});
        const ModelSpec s = specFromTensorNames(cfg, ck);
        Plan p;
        p.tpSize = 2;
        p.entries = {{"model.layers.*.block_sparse_moe.experts.*.w1", "colwise"}};
        for (VersionProfile prof : {VersionProfile::G2, VersionProfile::G3}) {
            p.profile = prof;
            QCOMPARE(matchPlan(s, p).entryMatches[0], 2);
        }
        p.profile = VersionProfile::G1;
        const PlanMatch g1 = matchPlan(s, p);
        QCOMPARE(g1.entryMatches[0], 0);
        QVERIFY(hasDiag(g1, Severity::Warning, p.entries[0].key, "does not match any module or parameter"));
        QCOMPARE(QString::fromStdString(wildcardName("experts.3.w1", VersionProfile::G1)), QString("experts.*.w*"));
    }

    void keysThatMatchNothing_data()
    {
        QTest::addColumn<QString>("key");
        QTest::addRow("star is not a name") << "*.q_proj";
        QTest::addRow("star is not a prefix") << "model.*.self_attn.q_proj";
        QTest::addRow("no glob inside segments") << "model.layers.1*.self_attn.q_proj";
        QTest::addRow("base-model key on the head class") << "layers.*.self_attn.q_proj";
        QTest::addRow("typo") << "model.layers.*.self_attn.qproj";
    }
    void keysThatMatchNothing()
    {
        QFETCH(QString, key);
        const ModelSpec s = spec("llama-3.1-8b");
        Plan p = defaultPlan(s, 2);
        p.entries.push_back({key.toStdString(), "colwise"});
        const PlanMatch m = matchPlan(s, p);
        QCOMPARE(m.entryMatches.back(), 0);
        // Current Transformers refuses an override key that names nothing (ValueError before sharding).
        QVERIFY(hasDiag(m, Severity::Error, key.toStdString(), "does not match any module or parameter of LlamaForCausalLM"));
        // … and the error says why this one is an error where the class's own dead keys only warn.
        QVERIFY(hasDiag(m, Severity::Error, key.toStdString(), "refuses a plan key that names nothing"));
        // Older generations only warned ("Layer pattern … does not match any parameters").
        p.profile = VersionProfile::G2;
        QVERIFY(hasDiag(matchPlan(s, p), Severity::Warning, key.toStdString(), "does not match any module or parameter"));
    }

    void deadKeysOfTheClassOwnPlanOnlyWarn()
    {
        // Llama4ForCausalLM's resolved plan repeats the base keys without "model."; they name nothing,
        // but Transformers accepts keys that are in the class's own plan.
        const ModelSpec s = spec("llama-4-scout");
        const PlanMatch m = matchPlan(s, defaultPlan(s, 2));
        QVERIFY(hasDiag(m, Severity::Warning, "layers.*.self_attn.q_proj", "does not match"));
        QVERIFY(hasDiag(m, Severity::Warning, "layers.*.self_attn.q_proj", "own default plan"));
        QVERIFY(!hasErrors(m.diagnostics));
        // Qwen3-MoE's own plan keeps the dense MLP's keys, which its all-MoE layers never build.
        const ModelSpec moe = spec("qwen3-30b-a3b");
        const PlanMatch q = matchPlan(moe, defaultPlan(moe, 4));
        QVERIFY(hasDiag(q, Severity::Warning, "model.layers.*.mlp.gate_proj", "own default plan"));
        QVERIFY(!hasErrors(q.diagnostics));
    }

    void indexedOverride()
    {
        const ModelSpec s = spec("llama-3.1-8b");
        Plan p = defaultPlan(s, 2);
        p.entries.insert(p.entries.begin(), {"model.layers.0.mlp.down_proj", "rowwise_split_input"});
        const PlanMatch g3 = matchPlan(s, p);
        QCOMPARE(styleOf(assignment(s, g3, "model.layers.0.mlp.down_proj.weight")), QString("rowwise_split_input"));
        QCOMPARE(styleOf(assignment(s, g3, "model.layers.1.mlp.down_proj.weight")), QString("rowwise"));
        QVERIFY(hasDiag(g3, Severity::Warning, "model.layers.0.mlp.down_proj", "exact-first lookup"));
        p.profile = VersionProfile::G2;
        const PlanMatch g2 = matchPlan(s, p);
        QCOMPARE(styleOf(assignment(s, g2, "model.layers.0.mlp.down_proj.weight")), QString("rowwise"));
        QCOMPARE(g2.entryMatches[0], 0);
    }

    void badStylesAndModules()
    {
        const ModelSpec s = spec("qwen3-32b");
        Plan p = defaultPlan(s, 2);
        p.entries.push_back({"model.layers.*.mlp.gate_proj", "colwise_typo"});
        p.entries.push_back({"model.layers.*.input_layernorm", "colwise"});
        const PlanMatch m = matchPlan(s, p);
        QVERIFY(hasDiag(m, Severity::Error, "model.layers.*.mlp.gate_proj",
                        "Unsupported tensor parallel style 'colwise_typo' for layer 'model.layers.*.mlp.gate_proj'"));
        QVERIFY(hasDiag(m, Severity::Error, "model.layers.0.input_layernorm", "is a RMSNorm (Qwen3RMSNorm)"));
        // The first gate_proj key (colwise) wins, as in a Python dict lookup.
        QCOMPARE(styleOf(assignment(s, m, "model.layers.0.mlp.gate_proj.weight")), QString("colwise"));
        // Old names are refused under the current profile.
        Plan old = defaultPlan(s, 2);
        old.entries = {{"model.layers.*.self_attn.q_proj", "local_colwise"}};
        QVERIFY(hasErrors(matchPlan(s, old).diagnostics));
    }

    void divisibility_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<int>("tp");
        QTest::addColumn<QString>("where");
        QTest::addRow("qwen3-30b-a3b T=8: 4 KV heads") << "qwen3-30b-a3b" << 8 << "num_key_value_heads";
        QTest::addRow("llama-3.1-8b T=3: 32 heads") << "llama-3.1-8b" << 3 << "num_attention_heads";
        QTest::addRow("llama-3.1-8b T=16: 8 KV heads") << "llama-3.1-8b" << 16 << "num_key_value_heads";
        QTest::addRow("phi-3 T=5: gathered qkv") << "phi-3-mini-4k" << 5 << "model.layers.*.self_attn.qkv_proj";
        QTest::addRow("mistral T=3: gathered lm_head vocab 32768") << "mistral-7b-v0.3" << 3 << "lm_head";
    }
    void divisibility()
    {
        QFETCH(QString, id);
        QFETCH(int, tp);
        QFETCH(QString, where);
        const ModelSpec s = spec(id.toLatin1().constData());
        const PlanMatch m = matchPlan(s, defaultPlan(s, tp));
        QVERIFY(std::any_of(m.diagnostics.begin(), m.diagnostics.end(), [&](const Diagnostic& d) {
            return d.severity == Severity::Error && QString::fromStdString(d.where) == where;
        }));
        // Every tp size that divides heads and KV heads is clean for these default plans.
        for (int t : tpSizesDividingHeads(s.config, 8))
            if (s.config.vocabSize % t == 0)
                QVERIFY2(!hasErrors(matchPlan(s, defaultPlan(s, t)).diagnostics), qPrintable(QString::number(t)));
    }

    void exportRoundTrip()
    {
        const ModelSpec s = spec("deepseek-v3");
        Plan p = defaultPlan(s, 8);
        // Module key first on purpose: the export must put the parameter keys before it.
        p.entries = {{"model.layers.*.mlp.experts", "moe_tp_experts"},
                     {"model.layers.*.mlp.experts.gate_up_proj", "packed_colwise"},
                     {"lm_head", "colwise_gather_output"},
                     {"model.layers.*.mlp.experts.down_proj", "rowwise"}};
        const std::string json = planToJson(p);
        auto back = parsePlanJson(json, "export.json", VersionProfile::G3);
        QVERIFY2(back.ok(), back.status().message().c_str());
        QCOMPARE(back->tpSize, 8);
        const std::vector<PlanEntry> expected = {{"model.layers.*.mlp.experts.gate_up_proj", "packed_colwise"},
                                                 {"model.layers.*.mlp.experts.down_proj", "rowwise"},
                                                 {"model.layers.*.mlp.experts", "moe_tp_experts"},
                                                 {"lm_head", "colwise_gather_output"}};
        QCOMPARE(back->entries, expected);
        QCOMPARE(planToJson(*back), json); // lossless
        // Expert parallelism goes to DistributedConfig's ep_plan (ep_size = tp_size), the tp_plan saying
        // "replicate" for those keys (ep_dispatch_experts fails to install from a tp_plan); it reads back.
        Plan e = defaultPlan(s, 4);
        e.entries = {{"lm_head", "colwise_gather_output"},
                     {"model.layers.*.mlp.experts.gate_up_proj", "grouped_gemm"},
                     {"model.layers.*.mlp.experts.down_proj", "grouped_gemm"},
                     {"model.layers.*.mlp.experts", "ep_dispatch_experts"}};
        const auto ej = nlohmann::json::parse(planToJson(e));
        QCOMPARE(ej["ep_size"].get<int>(), 4);
        QCOMPARE(ej["ep_plan"].size(), std::size_t(3));
        QCOMPARE(ej["ep_plan"]["model.layers.*.mlp.experts"].get<std::string>(), std::string("ep_dispatch_experts"));
        QCOMPARE(ej["tp_plan"]["model.layers.*.mlp.experts"].get<std::string>(), std::string("replicate"));
        QCOMPARE(ej["tp_plan"]["lm_head"].get<std::string>(), std::string("colwise_gather_output"));
        auto eback = parsePlanJson(planToJson(e), "ep.json", VersionProfile::G3);
        QVERIFY2(eback.ok(), eback.status().message().c_str());
        QCOMPARE(eback->entries, (std::vector<PlanEntry>{{"lm_head", "colwise_gather_output"},
                                                          {"model.layers.*.mlp.experts.gate_up_proj", "grouped_gemm"},
                                                          {"model.layers.*.mlp.experts.down_proj", "grouped_gemm"},
                                                          {"model.layers.*.mlp.experts", "ep_dispatch_experts"}}));
        QVERIFY(planToPython(e, s).find("ep_size=TP_SIZE, ep_plan=dict(EP_PLAN)") != std::string::npos);
        QVERIFY(!ej.contains("ep_implementation")); // "auto": Transformers' default, not written
        QVERIFY(planToPython(e, s).find("EP_IMPLEMENTATION = \"auto\"") != std::string::npos);
        // All-to-all dispatch (AllToAllEP) is written, read back, and handed to DistributedConfig.
        e.epImplementation = EpImplementation::AllToAll;
        QCOMPARE(nlohmann::json::parse(planToJson(e))["ep_implementation"].get<std::string>(), std::string("all_to_all"));
        auto a2a = parsePlanJson(planToJson(e), "ep.json", VersionProfile::G3);
        QVERIFY2(a2a.ok(), a2a.status().message().c_str());
        QCOMPARE(a2a->epImplementation, EpImplementation::AllToAll);
        QVERIFY(planToPython(e, s).find("EP_IMPLEMENTATION = \"all_to_all\"") != std::string::npos);
        QVERIFY(planToPython(e, s).find("ep_implementation=EP_IMPLEMENTATION") != std::string::npos);
        // The usage lines name the file the script is written to, never a name that could end the docstring.
        QVERIFY(planToPython(e, s, "/srv/plans/serve_mixtral.py").find("python3 serve_mixtral.py --check") != std::string::npos);
        QVERIFY(planToPython(e, s, "/srv/plans/serve_mixtral.py").find("plan.py") == std::string::npos);
        QVERIFY(planToPython(e, s, "/tmp/x\"\"\"y.py").find("python3 plan.py --check") != std::string::npos);
        // A bare dict imports too.
        auto bare = parsePlanJson(R"({"lm_head": "colwise_rep"})", "bare.json", VersionProfile::G1);
        QVERIFY(bare.ok());
        QCOMPARE(bare->entries.size(), std::size_t(1));
    }

    void badPlanFiles_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("expected");
        QTest::addRow("invalid") << "{\"tp_plan\": " << "plan.json: plan is not valid JSON";
        QTest::addRow("array") << "[]" << "plan.json: a plan must be a JSON object";
        QTest::addRow("auto") << R"({"tp_size": 2, "tp_plan": "auto"})" << "plan.json: key 'tp_plan' is \"auto\"";
        QTest::addRow("style not a string") << R"({"tp_plan": {"lm_head": 3}})" << "plan.json: key 'tp_plan.lm_head' must name a style, found 3";
        QTest::addRow("bad tp_size") << R"({"tp_size": 0, "tp_plan": {}})" << "plan.json: key 'tp_size' must be a positive integer, found 0";
        QTest::addRow("ep_size not tp_size") << R"({"tp_size": 4, "tp_plan": {}, "ep_size": 2, "ep_plan": {}})"
                                             << "plan.json: key 'ep_size' is 2 but tp_size is 4";
        QTest::addRow("ep_implementation unknown") << R"({"tp_size": 2, "tp_plan": {}, "ep_implementation": "ring"})"
                                                   << "plan.json: key 'ep_implementation' must be \"auto\", \"all_reduce\" or \"all_to_all\", found \"ring\"";
        QTest::addRow("ep_implementation not a string") << R"({"tp_size": 2, "tp_plan": {}, "ep_implementation": 3})"
                                                        << "plan.json: key 'ep_implementation' must be \"auto\", \"all_reduce\" or \"all_to_all\", found 3";
        QTest::addRow("ep_implementation needs a vendor kernel")
            << R"({"tp_size": 2, "tp_plan": {}, "ep_implementation": "deepgemm_megamoe"})"
            << "plan.json: key 'ep_implementation' is \"deepgemm_megamoe\", which needs DeepGEMM's Mega MoE CUDA kernel";
        QTest::addRow("replicate_kv_heads not a bool") << R"({"tp_size": 16, "tp_plan": {}, "replicate_kv_heads": "yes"})"
                                                       << "plan.json: key 'replicate_kv_heads' must be true or false, found \"yes\"";
        QTest::addRow("replicate_kv_heads a number") << R"({"tp_size": 16, "tp_plan": {}, "replicate_kv_heads": 1})"
                                                     << "plan.json: key 'replicate_kv_heads' must be true or false, found 1";
        QTest::addRow("ep_plan not an object") << R"({"tp_size": 2, "tp_plan": {}, "ep_plan": [1]})"
                                               << "plan.json: key 'ep_plan' must be an object of key → style";
        QTest::addRow("ep_plan style not a string") << R"({"tp_size": 2, "tp_plan": {}, "ep_plan": {"a": 1}})"
                                                    << "plan.json: key 'ep_plan.a' must name a style, found 1";
    }
    void badPlanFiles()
    {
        QFETCH(QString, json);
        QFETCH(QString, expected);
        auto r = parsePlanJson(json.toStdString(), "plan.json", VersionProfile::G3);
        QVERIFY(!r.ok());
        QVERIFY2(QString::fromStdString(r.status().message()).startsWith(expected), r.status().message().c_str());
    }

    void everyCatalogDefaultPlanMatches_data()
    {
        QTest::addColumn<QString>("id");
        for (const auto& e : catalog())
            QTest::addRow("%s", e.id.c_str()) << QString::fromStdString(e.id);
    }
    void everyCatalogDefaultPlanMatches()
    {
        QFETCH(QString, id);
        const ModelSpec s = spec(id.toLatin1().constData());
        const PlanMatch m = matchPlan(s, defaultPlan(s, 2));
        QVERIFY(!hasErrors(m.diagnostics));
        bool allMoe = s.config.isMoe();
        for (std::int64_t l = 0; l < s.config.numLayers; ++l)
            allMoe = allMoe && s.config.isMoeLayer(l);
        for (std::size_t i = 0; i < m.entryMatches.size(); ++i) {
            const std::string& key = s.defaultTpPlan[i].key;
            // Transformers' own dead keys: Llama4's unprefixed duplicates, and the dense-MLP keys of
            // a model whose every layer is MoE (Qwen3-30B-A3B, Llama-4-Scout).
            const bool unprefixed = s.config.family == Family::Llama4 && !key.starts_with("model.") && key != "lm_head";
            const bool denseMlp = allMoe && key.find("shared_expert") == std::string::npos
                && (key.ends_with("_proj") && (key.find(".mlp.") != std::string::npos || key.find(".feed_forward.") != std::string::npos))
                && key.find(".experts.") == std::string::npos;
            QVERIFY2((m.entryMatches[i] > 0) != (unprefixed || denseMlp), key.c_str());
        }
    }

    // Each parameter looks up the key equal to wildcardName(its full name): the lookup form built
    // from the module's wildcarded path plus the parameter name is the same string.
    void wildcardedLookupsAgreeWithWildcardName_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<int>("profile");
        for (const char* id : {"mixtral-8x7b", "llama-3.1-8b", "deepseek-v3"})
            for (VersionProfile p : {VersionProfile::G1, VersionProfile::G2, VersionProfile::G3})
                QTest::addRow("%s %s", id, profileName(p)) << QString(id) << int(p);
    }
    void wildcardedLookupsAgreeWithWildcardName()
    {
        QFETCH(QString, id);
        QFETCH(int, profile);
        const ModelSpec s = spec(id.toLatin1().constData());
        Plan p;
        p.tpSize = 2;
        p.profile = VersionProfile(profile);
        std::set<std::string> seen;
        for (const auto& [name, param] : s.allParams())
            if (seen.insert(wildcardName(name, p.profile)).second)
                p.entries.push_back({wildcardName(name, p.profile), "replicate"});
        const PlanMatch m = matchPlan(s, p);
        std::size_t i = 0;
        for (const auto& [name, param] : s.allParams()) {
            const ParamAssignment& a = m.params[i++];
            QVERIFY2(a.entry >= 0 && !a.viaModuleKey, name.c_str());
            QCOMPARE(p.entries[std::size_t(a.entry)].key, wildcardName(name, p.profile));
        }
    }

    // Matching is linear, counted rather than timed: the hash lookups grow with the model (2N
    // layers: about twice those of N) and not at all with the number of keys.
    void matchingCostIsLinear()
    {
        const auto deep = [](int layers) {
            auto j = nlohmann::json::parse(findCatalogEntry("llama-3.1-8b")->configJson);
            j["num_hidden_layers"] = layers;
            auto c = parseConfig(j.dump(), "deep", nullptr);
            if (!c)
                qFatal("%s", c.status().message().c_str());
            return buildModelSpec(*c).value();
        };
        const auto withKeys = [](const ModelSpec& s, int keys) {
            Plan p = defaultPlan(s, 2);
            for (int i = 0; i < keys; ++i)
                p.entries.push_back({"model.layers." + std::to_string(i) + ".mlp.gate_proj", "colwise"});
            return p;
        };
        const ModelSpec n = deep(500), n2 = deep(1000);
        const PlanMatch a = matchPlan(n, withKeys(n, 5000)), b = matchPlan(n2, withKeys(n2, 10000));
        std::size_t params = 0;
        for (const auto& m : n.modules)
            params += m.params.size();
        QVERIFY(a.keyLookups > 0);
        QVERIFY(a.keyLookups <= 2 * std::int64_t(n.modules.size() + params));
        QVERIFY2(double(b.keyLookups) <= 2.2 * double(a.keyLookups),
                 qPrintable(QString("%1 vs %2").arg(b.keyLookups).arg(a.keyLookups)));
        // Without the indexed keys every name also takes its wildcarded lookup (no exact hit); ten
        // times the keys (all past the last layer) cost no lookup at all.
        QVERIFY(matchPlan(n, withKeys(n, 0)).keyLookups <= a.keyLookups + n.config.numLayers * 2);
        QCOMPARE(matchPlan(n, withKeys(n, 50000)).keyLookups, a.keyLookups);
        // The keys still act: layer 0's gate_proj matched its indexed key, keys past the last layer nothing.
        QCOMPARE(a.entryMatches[n.defaultTpPlan.size()], 1); // the module (its weight follows via the module key)
        QCOMPARE(a.entryMatches[n.defaultTpPlan.size() + 4999], 0);
    }
};

QTEST_GUILESS_MAIN(TestPlan)
#include "tst_plan.moc"
