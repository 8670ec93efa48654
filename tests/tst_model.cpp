// tst_model — module trees, default plans and checkpoint reconciliation, checked against what
// Transformers itself builds (fixtures written by tests/fixtures/make_fixtures.py).
#include "tp/graph/layer_graph.h"
#include "tp/model/catalog.h"
#include "tp/model/loader.h"
#include "tp/model/synthetic.h"
#include "tp/plan/plan.h"
#include "tp/shard/sharded_graph.h"

#include <nlohmann/json.hpp>

#include <QTemporaryDir>
#include "testutils.h"

#include <QtTest>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace tp;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {
const std::string kFixtures = std::string(TP_SOURCE_DIR) + "/tests/fixtures";

ojson readJson(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        qFatal("cannot read %s", path.c_str());
    return ojson::parse(in);
}

// The model a config.json's text opens (written to a temporary folder).
Result<OpenedModel> openConfig(const std::string& text)
{
    QTemporaryDir dir;
    std::ofstream(dir.filePath("config.json").toStdString()) << text;
    return openModel(dir.path().toStdString());
}

// The model an architecture fixture's config.json opens.
Result<OpenedModel> openFixture(const std::string& modelType)
{
    return openConfig(readJson(kFixtures + "/architectures/" + modelType + ".json")["config"].dump(1));
}

// The first node of `kind` in the graph, or null.
const GraphNode* firstNode(const LayerGraph& g, OpKind kind)
{
    const auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const GraphNode& n) { return n.kind == kind; });
    return it == g.nodes.end() ? nullptr : &*it;
}

const char* torchDtype(DType t)
{
    switch (t) {
    case DType::F32: return "float32";
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    default: return "?";
    }
}

// Compares a spec with Transformers' description: state_dict names, shapes (and dtypes), parameter
// count, tp_plan and ep_plan in Transformers' order. Returns the first difference, or empty.
QString compareWithTransformers(const ModelSpec& spec, const ojson& expected, bool checkDtypes)
{
    if (spec.className != expected["class"].get<std::string>())
        return QString("class %1 vs %2").arg(spec.className.c_str(), expected["class"].get<std::string>().c_str());
    if (spec.parameterCount() != expected["num_parameters"].get<std::int64_t>())
        return QString("parameter count %1 vs %2").arg(spec.parameterCount()).arg(expected["num_parameters"].get<std::int64_t>());
    std::map<std::string, const ParamSpec*> ours;
    for (const auto& [name, p] : spec.allParams())
        ours[name] = p;
    const auto& sd = expected["state_dict"];
    if (ours.size() != sd.size())
        return QString("%1 state_dict entries vs %2").arg(ours.size()).arg(sd.size());
    for (auto it = sd.begin(); it != sd.end(); ++it) {
        auto o = ours.find(it.key());
        if (o == ours.end())
            return QString("missing %1").arg(it.key().c_str());
        if (o->second->shape != it.value()["shape"].get<std::vector<std::int64_t>>())
            return QString("shape of %1").arg(it.key().c_str());
        if (checkDtypes && it.value()["dtype"].get<std::string>() != torchDtype(o->second->dtype))
            return QString("dtype of %1").arg(it.key().c_str());
    }
    auto planEq = [](const std::vector<PlanEntry>& plan, const ojson& j) {
        if (plan.size() != j.size())
            return false;
        std::size_t i = 0;
        for (auto it = j.begin(); it != j.end(); ++it, ++i)
            if (plan[i].key != it.key() || plan[i].style != it.value().get<std::string>())
                return false;
        return true;
    };
    if (!planEq(spec.defaultTpPlan, expected["tp_plan"]))
        return QString("tp_plan differs: %1").arg(expected["tp_plan"].dump().c_str());
    if (!planEq(spec.defaultEpPlan, expected["ep_plan"]))
        return QString("ep_plan differs: %1").arg(expected["ep_plan"].dump().c_str());
    return {};
}

std::vector<Diagnostic> errorsOf(const ModelSpec& s)
{
    std::vector<Diagnostic> out;
    for (const auto& d : s.diagnostics)
        if (d.severity == Severity::Error)
            out.push_back(d);
    return out;
}

ModelSpec catalogSpec(const char* id) { return tptest::openSpec(id); }
} // namespace

class TestModel : public QObject
{
    Q_OBJECT
private slots:
    // A quantized model opened from its config stores what its checkpoint would: DeepSeek-V3's fp8
    // (the decoder layers' Linear and expert weights in one byte), gpt-oss's mxfp4 experts in four
    // bits; embeddings, the head, norms and routers in the model's dtype.
    void quantizedConfigsStoreTheirDtypes()
    {
        std::map<std::string, DType> want{{"model.layers.0.self_attn.q_a_proj.weight", DType::F8E4M3},
                                          {"model.layers.5.mlp.experts.gate_up_proj", DType::F8E4M3},
                                          {"model.layers.0.mlp.down_proj.weight", DType::F8E4M3},
                                          {"model.embed_tokens.weight", DType::BF16},
                                          {"lm_head.weight", DType::BF16},
                                          {"model.layers.0.input_layernorm.weight", DType::BF16}};
        const ModelSpec ds = tptest::openSpec("deepseek-v3");
        int seen = 0;
        for (const ModuleSpec& m : ds.modules)
            for (const ParamSpec& p : m.params)
                if (auto it = want.find(m.paramPath(p)); it != want.end()) {
                    QVERIFY2(p.dtype == it->second, it->first.c_str());
                    ++seen;
                }
        QCOMPARE(seen, int(want.size()));
        // 671B parameters in about 627 GiB, not the 1.22 TiB of bf16.
        QVERIFY(ds.parameterBytes() < std::int64_t(640) << 30 && ds.parameterBytes() > std::int64_t(600) << 30);
        const ModelSpec oss = tptest::openSpec("gpt-oss-120b");
        for (const ModuleSpec& m : oss.modules)
            for (const ParamSpec& p : m.params)
                if (m.kind == ModuleKind::Experts && p.shape.size() == 3)
                    QVERIFY2(p.dtype == DType::F4, m.paramPath(p).c_str());
                else if (m.kind == ModuleKind::Linear)
                    QVERIFY2(p.dtype != DType::F4 && p.dtype != DType::F8E4M3, m.paramPath(p).c_str());
    }

    // Issue 41: every catalog entry is modelled in the dtype it ships in. A config that names its dtype
    // (top level or text_config) is held to it; one that names none (gpt-oss-120b's public config)
    // carries the checkpoint's, said in an Info note; none falls back to float32.
    void catalogCarriesShippedDtypes()
    {
        for (const CatalogEntry& e : catalog()) {
            const auto cfg = nlohmann::json::parse(e.configJson);
            std::string named;
            for (const auto* c : {&cfg, cfg.contains("text_config") ? &cfg["text_config"] : nullptr})
                for (const char* key : {"dtype", "torch_dtype"})
                    if (c && named.empty() && c->contains(key) && (*c)[key].is_string())
                        named = (*c)[key].get<std::string>();
            const ModelSpec s = catalogSpec(e.id.c_str());
            QVERIFY2(named.empty() == !e.shippedDtype.empty(), e.id.c_str()); // a shipped dtype only where the config names none
            const std::string want = named.empty() ? std::string(e.shippedDtype) : named;
            QCOMPARE(s.config.dtype, dtypeFromTorch(want).value());
            QVERIFY2(std::none_of(s.diagnostics.begin(), s.diagnostics.end(),
                                  [](const Diagnostic& d) { return d.message.find("assuming float32") != std::string::npos; }),
                     e.id.c_str());
            if (named.empty())
                QVERIFY2(std::any_of(s.diagnostics.begin(), s.diagnostics.end(),
                                     [&](const Diagnostic& d) {
                                         return d.severity == Severity::Info && d.message.find("names no dtype") != std::string::npos
                                             && d.message.find(e.repoId) != std::string::npos;
                                     }),
                         e.id.c_str());
        }
        QCOMPARE(catalogSpec("gpt-oss-120b").config.dtype, DType::BF16);
    }

    // Without a dtype in config.json, Transformers' dtype="auto" takes the checkpoint's: the first
    // floating tensor by name (fp8 and fp4 skipped) of the first file (modeling_utils.get_state_dict_dtype).
    void checkpointDtypeWhenTheConfigNamesNone()
    {
        QTemporaryDir dir;
        auto cfg = readJson(kFixtures + "/models/llama/config.json");
        cfg.erase("dtype");
        cfg.erase("torch_dtype");
        std::ofstream(dir.filePath("config.json").toStdString()) << cfg.dump();
        const ModelSpec base = openModel(kFixtures + "/models/llama").value().spec;
        std::vector<TensorToWrite> ts = checkpointLayout(base);
        for (auto& t : ts)
            t.dtype = DType::BF16;
        ts.push_back({"model.aaa_fp8_first_by_name", DType::F8E4M3, {4}, {}});
        QVERIFY(writeSyntheticCheckpoint(dir.path().toStdString(), ts, 1ull << 40).ok());
        auto om = openModel(dir.path().toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        QCOMPARE(om->spec.config.dtype, DType::BF16);
        QVERIFY(std::any_of(om->spec.diagnostics.begin(), om->spec.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Info && d.message.find("names no dtype; Transformers takes the checkpoint's, BF16")
                != std::string::npos;
        }));
    }

    // A GPTQ checkpoint (gptqmodel's layout: qweight [in·b/32, out], qzeros, scales, g_idx) reconciles with the
    // packed weights: nothing missing, the quantization tensors named once; a qweight of the wrong shape is an error.
    void gptqCheckpointReconciles()
    {
        for (const bool wrong : {false, true}) {
            QTemporaryDir dir;
            auto cfg = readJson(kFixtures + "/models/llama/config.json");
            cfg["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}};
            std::ofstream(dir.filePath("config.json").toStdString()) << cfg.dump();
            const ModelSpec base = openModel(kFixtures + "/models/llama").value().spec;
            std::vector<TensorToWrite> ts;
            for (const TensorToWrite& t : checkpointLayout(base)) {
                const bool linear = t.name.starts_with("model.layers.") && t.name.ends_with("_proj.weight");
                if (!linear) {
                    ts.push_back(t);
                    continue;
                }
                const std::string m = t.name.substr(0, t.name.size() - 6);
                const std::int64_t out = t.shape[0], in = t.shape[1];
                ts.push_back({m + "qweight", DType::I32, {in * 4 / 32 + (wrong ? 1 : 0), out}, {}});
                ts.push_back({m + "qzeros", DType::I32, {in / 32, out * 4 / 32}, {}});
                ts.push_back({m + "scales", DType::F16, {in / 32, out}, {}});
                ts.push_back({m + "g_idx", DType::I32, {in}, {}});
            }
            QVERIFY(writeSyntheticCheckpoint(dir.path().toStdString(), ts, 1ull << 40).ok());
            auto om = openModel(dir.path().toStdString());
            QVERIFY2(om.ok(), om.status().message().c_str());
            std::string errors;
            for (const Diagnostic& d : om->spec.diagnostics)
                if (d.severity == Severity::Error)
                    errors += d.where + ": " + d.message + "\n";
            if (wrong) {
                QVERIFY2(errors.find("does not match") != std::string::npos && errors.find("(int32, 4-bit GPTQ)") != std::string::npos,
                         errors.c_str());
                continue;
            }
            QVERIFY2(errors.empty(), errors.c_str());
            QVERIFY(std::any_of(om->spec.diagnostics.begin(), om->spec.diagnostics.end(), [](const Diagnostic& d) {
                return d.severity == Severity::Info && d.message.find("quantization tensor(s) of the gptq checkpoint") != std::string::npos;
            }));
            QCOMPARE(om->spec.find("model.layers.0.self_attn.q_proj")->params[0].packBits, 4);
        }
    }

    // Tiny checkpoints saved by Transformers' save_pretrained, opened by folder.
    void transformersCheckpoints_data()
    {
        QTest::addColumn<QString>("family");
        for (const auto& e : fs::directory_iterator(kFixtures + "/models"))
            QTest::addRow("%s", e.path().filename().c_str()) << QString::fromStdString(e.path().filename().string());
    }
    void transformersCheckpoints()
    {
        QFETCH(QString, family);
        const std::string dir = kFixtures + "/models/" + family.toStdString();
        auto om = openModel(dir);
        QVERIFY2(om.ok(), om.status().message().c_str());
        QVERIFY(om->checkpoint.has_value());
        const QString diff = compareWithTransformers(om->spec, readJson(dir + "/expected.json"), true);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        const auto errors = errorsOf(om->spec);
        QVERIFY2(errors.empty(), errors.empty() ? "" : (errors[0].where + ": " + errors[0].message).c_str());
        // Every parameter (tied ones aside) is backed by checkpoint tensors.
        for (const auto& [name, p] : om->spec.allParams())
            QVERIFY2(p->inCheckpoint || !p->tiedTo.empty(), name.c_str());
    }

    // Every built-in catalog config against Transformers on the meta device.
    void catalogMatchesTransformers_data()
    {
        QTest::addColumn<QString>("id");
        for (const auto& e : catalog())
            QTest::addRow("%s", e.id.c_str()) << QString::fromStdString(e.id);
    }
    void catalogMatchesTransformers()
    {
        QFETCH(QString, id);
        static const ojson expected = readJson(kFixtures + "/catalog_expected.json");
        const ModelSpec spec = catalogSpec(id.toStdString().c_str());
        const QString diff = compareWithTransformers(spec, expected[id.toStdString()], false);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
    }

    // Every tensor-parallel causal LM of the pinned Transformers (fixtures/architectures, written by
    // make_fixtures.py from a shrunk config holding each layer kind of the class's default pattern):
    // its config.json, as save_pretrained writes it (class defaults omitted), opens. A model type TP
    // Studio knows gives Transformers' tree, parameter count and default tp_plan / ep_plan, and its
    // default plan shards at T=2 without errors; one it does not know is refused with a message that
    // names the model type and claims nothing about Transformers.
    void architecturesMatchTransformers_data()
    {
        QTest::addColumn<QString>("modelType");
        const ojson index = readJson(kFixtures + "/architectures/index.json");
        for (const auto& [t, v] : index["model_types"].items())
            QTest::addRow("%s", t.c_str()) << QString::fromStdString(t);
    }
    void architecturesMatchTransformers()
    {
        QFETCH(QString, modelType);
        const std::string t = modelType.toStdString();
        const ojson fixture = readJson(kFixtures + "/architectures/" + t + ".json");
        auto om = openFixture(t);
        const auto& known = knownModelTypes();
        if (std::none_of(known.begin(), known.end(), [&](const KnownModelType& k) { return k.modelType == t; })) {
            QVERIFY(!om.ok());
            const std::string why = om.status().message();
            QVERIFY2(why.find("'" + t + "'") != std::string::npos && why.find("Transformers") == std::string::npos,
                     why.c_str());
            QSKIP(qPrintable(QString("TP Studio does not open model_type '%1' yet").arg(modelType)));
        }
        QVERIFY2(om.ok(), om.status().message().c_str());
        // compareWithTransformers' form: state_dict {name: {shape, dtype}}, plans as ordered objects.
        ojson expected = fixture;
        ojson sd = ojson::object();
        for (const auto& [name, v] : fixture["state_dict"].items())
            sd[name] = {{"shape", v[0]}, {"dtype", v[1]}};
        expected["state_dict"] = sd;
        for (const char* plan : {"tp_plan", "ep_plan"}) {
            ojson ordered = ojson::object();
            for (const auto& e : fixture[plan])
                ordered[e[0].get<std::string>()] = e[1];
            expected[plan] = ordered;
        }
        const QString diff = compareWithTransformers(om->spec, expected, false);
        QVERIFY2(diff.isEmpty(), qPrintable(diff));
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 2));
        // Default plans Transformers itself cannot run at T=2 (scripts/tp_verify.py on the fixture): the preview
        // says why. Doge: "RuntimeError: The size of tensor a (2) must match the size of tensor b (4)".
        // Inkling: "AssertionError" in DTensor's redistribution of embed_tokens' partial rows, inside embed_norm.
        static const std::map<std::string, std::string> failsInTransformers = {
            {"doge", "the dynamic mask (dt_proj)"}, {"inkling_text", "norms each rank's partial rows"}};
        if (const auto f = failsInTransformers.find(t); f != failsInTransformers.end()) {
            QVERIFY(std::any_of(g.diagnostics.begin(), g.diagnostics.end(), [&](const Diagnostic& d) {
                return d.severity == Severity::Error && d.message.find(f->second) != std::string::npos;
            }));
            return;
        }
        for (const Diagnostic& d : g.diagnostics)
            QVERIFY2(d.severity != Severity::Error, (d.where + ": " + d.message).c_str());
    }

    // What one sequence's cache holds on a rank (T=1) is what Transformers' cache held after a bf16 prefill of the
    // architecture fixture (fixtures/cache.json, make_fixtures.py): keys and values (a latent, windows capped) per
    // token, and the linear-attention and SSM layers' convolution and recurrent states per sequence — at two prompt
    // lengths, so that a per-token error and a per-sequence one show apart.
    void cacheMatchesTransformers_data()
    {
        QTest::addColumn<QString>("modelType");
        QTest::addColumn<std::int64_t>("seq");
        const ojson cache = readJson(kFixtures + "/cache.json");
        for (const auto& [t, bySeq] : cache["model_types"].items())
            for (const auto& [n, v] : bySeq.items())
                QTest::addRow("%s seq=%s", t.c_str(), n.c_str()) << QString::fromStdString(t) << std::int64_t(std::stoll(n));
    }
    void cacheMatchesTransformers()
    {
        QFETCH(QString, modelType);
        QFETCH(std::int64_t, seq);
        const std::string t = modelType.toStdString();
        const ojson recorded = readJson(kFixtures + "/cache.json")["model_types"][t][std::to_string(seq)];
        auto om = openFixture(t);
        if (!om.ok())
            QSKIP(qPrintable(QString("TP Studio does not open model_type '%1' yet").arg(modelType)));
        std::int64_t kv = 0, state = 0;
        for (const auto& [name, v] : recorded["tensors"].items()) {
            std::int64_t bytes = v[1] == "float32" || v[1] == "int32" ? 4 : v[1] == "bfloat16" ? 2 : v[1] == "int64" ? 8 : 0;
            QVERIFY2(bytes > 0, (name + ": " + v[1].dump()).c_str());
            for (const auto& d : v[0])
                bytes *= d.get<std::int64_t>();
            const bool isState = name.find("conv_states") != std::string::npos || name.find("recurrent_states") != std::string::npos
                              || name.find("linear_cache") != std::string::npos;
            (isState ? state : kv) += bytes;
        }
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 1), {.batch = 1, .seq = seq, .activationDtype = DType::BF16});
        const RankMemory& m = g.memory.at(0);
        // Not modelled yet (issue 38's notes): Dory's recurrent layers cache every loop (n_recurrent_loops,
        // recurrent_kv_cache_mode per_loop); DeepSeek-V4's compressed layers cache their compressor's buffers and
        // pooled keys beside the window.
        if (t == "dory" || t == "deepseek_v4")
            QEXPECT_FAIL("", "the planner does not model this model type's cache yet", Continue);
        QCOMPARE(m.kvCacheBytesAt(seq), kv + state);
        if (t == "dory" || t == "deepseek_v4")
            return;
        QCOMPARE(m.stateBytes, state);
        QCOMPARE(m.kvCacheBytesAt(seq) - m.stateBytes, kv);
    }

    // A sequence mixer (Qwen3-Next's gated delta rule, layer 0 of its fixture) runs on whole tensors:
    // Transformers' default plan gathers its input projections and out_proj (colwise_gather_output),
    // and a projection left sharded is an error at the mixer. The engine refuses to run it.
    void sequenceMixersPlanOnWholeTensors()
    {
        auto om = openFixture("qwen3_next");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const LayerGraph lg = buildLayerGraph(om->spec);
        const GraphNode* mixer = firstNode(lg, OpKind::Mixer);
        QVERIFY(mixer);
        QCOMPARE(mixer->name, std::string("model.layers.0.linear_attn"));
        // q, k, v, z cut from in_proj_qkvz and b, a from in_proj_ba, per key head (2 key heads of 8, 4 value heads of 8).
        QStringList inputs;
        for (int t : mixer->inputs) {
            const GraphNode& split = lg.nodes[static_cast<std::size_t>(lg.tensors[static_cast<std::size_t>(t)].producer)];
            QCOMPARE(split.splitGroups, std::int64_t(2));
            inputs << QStringLiteral("%1=%2").arg(QString::fromStdString(lg.tensors[static_cast<std::size_t>(t)].name).section(':', -1))
                          .arg(lg.tensors[static_cast<std::size_t>(t)].features);
        }
        QCOMPARE(inputs.join(' '), QString("q=16 k=16 v=32 z=32 b=4 a=4"));
        QCOMPARE(lg.tensors[static_cast<std::size_t>(mixer->outputs[0])].features, 32); // 4 value heads of 8
        QCOMPARE(std::count_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.kind == OpKind::Mixer; }), 1);
        QVERIFY2(lg.unsupported.empty(), lg.unsupported.c_str()); // the engine computes it

        Plan p = defaultPlan(om->spec, 2);
        const ShardedGraph g = shardModel(om->spec, p);
        QVERIFY(g.valid());
        QCOMPARE(std::count_if(g.collectives.begin(), g.collectives.end(), [](const Collective& c) {
                     return c.kind == CollectiveKind::AllGather && c.where.find(".linear_attn.") != std::string::npos;
                 }),
                 3);
        for (PlanEntry& e : p.entries)
            if (e.key == "model.layers.*.linear_attn.in_proj_qkvz")
                e.style = "colwise";
        const ShardedGraph bad = shardModel(om->spec, p);
        QVERIFY(!bad.valid());
        QVERIFY(std::any_of(bad.diagnostics.begin(), bad.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Error && d.where == "model.layers.*.linear_attn"
                && d.message.find("runs its convolution and recurrent state over all channels") != std::string::npos;
        }));
    }

    // Nemotron-H: one block a layer under one norm (Mamba 2, attention, a ReLU² MLP, experts), the experts
    // without a gate: up_proj [E, I, H] split plainly (colwise) beside down_proj rowwise; split otherwise, an error.
    void blockPerLayerUngatedExperts()
    {
        auto om = openFixture("nemotron_h");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const LayerGraph lg = buildLayerGraph(om->spec);
        QStringList norms;
        for (const GraphNode& n : lg.nodes)
            if (n.kind == OpKind::Norm)
                norms << QString::fromStdString(n.name);
        QCOMPARE(norms.join(','), QString("model.layers.0.norm,model.layers.1.norm,model.layers.2.norm,model.layers.3.norm,model.norm_f"));
        QCOMPARE(std::count_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.kind == OpKind::Rope; }), 0);
        const auto act = std::find_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.3.mixer:act"; });
        QVERIFY(act != lg.nodes.end());
        QCOMPARE(act->inputs.size(), std::size_t(1)); // relu²(up), no gate
        QCOMPARE(om->spec.config.hiddenAct, std::string("relu2"));

        Plan p = defaultPlan(om->spec, 2);
        const ShardedGraph g = shardModel(om->spec, p);
        QVERIFY(g.valid());
        const GraphNode* experts = firstNode(lg, OpKind::Experts);
        QVERIFY(experts);
        const ParamShard* up = g.expertsUp(experts->module);
        QVERIFY(up && up->path == "model.layers.1.mixer.experts.up_proj");
        const std::int64_t E = om->spec.config.numExperts, I = om->spec.config.moeIntermediateSize, H = om->spec.config.hiddenSize;
        QCOMPARE(up->shapes[1], (std::vector<std::int64_t>{E, I / 2, H}));
        QCOMPARE(std::count_if(g.collectives.begin(), g.collectives.end(), [](const Collective& c) {
                     return c.kind == CollectiveKind::AllReduce && c.where.find(".experts") != std::string::npos;
                 }),
                 1);
        for (PlanEntry& e : p.entries)
            if (e.key == "model.layers.*.mixer.experts.up_proj")
                e.style = "rowwise"; // [E, I, H] split along H: not down_proj's intermediate split
        const ShardedGraph bad = shardModel(om->spec, p);
        QVERIFY(std::any_of(bad.diagnostics.begin(), bad.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Error && d.message.find("up_proj (") == 0 && d.message.find("split differently") != std::string::npos;
        }));
    }

    // Gemma 4: a shared layer attends over the keys and values its type's last computing layer made (it has no
    // k_proj / v_proj); a full layer with attention_k_eq_v takes its values from its keys; the experts beside the MLP
    // are routed from the residual stream; each layer adds its slice of the per-layer embeddings. (Checked against
    // Transformers for this config: the same tree, and scripts/tp_verify.py at T=2 sees 13 of 13 all_reduces.)
    void gemma4SharedKeysExpertsAndPerLayerInputs()
    {
        auto om = openConfig(R"({"model_type": "gemma4_text", "num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 96,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32, "attention_k_eq_v": true,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"], "num_kv_shared_layers": 2,
            "vocab_size": 128, "vocab_size_per_layer_input": 96, "hidden_size_per_layer_input": 8, "enable_moe_block": true,
            "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 16})");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        QVERIFY(om->spec.find("model.layers.1.self_attn.k_proj") && !om->spec.find("model.layers.1.self_attn.v_proj"));
        QVERIFY(!om->spec.find("model.layers.2.self_attn.k_proj") && !om->spec.find("model.layers.3.self_attn.k_norm"));
        const LayerGraph lg = buildLayerGraph(om->spec);
        std::map<int, const GraphNode*> attention;
        const GraphNode* perLayerSplit = nullptr;
        for (const GraphNode& n : lg.nodes) {
            if (n.kind == OpKind::Attention)
                attention[n.layer] = &n;
            if (n.name == "model:per_layer_inputs")
                perLayerSplit = &n;
        }
        QCOMPARE(attention.size(), std::size_t(4));
        QCOMPARE(attention[3]->inputs[1], attention[1]->inputs[1]); // layer 3 (full, shared) reuses layer 1's keys
        QCOMPARE(attention[2]->inputs[2], attention[0]->inputs[2]); // layer 2 (sliding, shared) layer 0's values
        QCOMPARE(attention[1]->headDim, 32);
        const auto& t = lg.tensors;
        const int values = t[static_cast<std::size_t>(attention[1]->inputs[2])].producer; // k_eq_v: k_proj's output, not normed
        QCOMPARE(lg.nodes[static_cast<std::size_t>(values)].name, std::string("model.layers.1.self_attn.k_proj"));
        QVERIFY(perLayerSplit);
        QCOMPARE(perLayerSplit->outputs.size(), std::size_t(4));
        const GraphNode* router = firstNode(lg, OpKind::Router);
        QVERIFY(router && router->name == "model.layers.0.router.proj");
        QCOMPARE(t[static_cast<std::size_t>(router->inputs[0])].name, std::string("model.layers.0:residual_attn:out")); // the residual
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 2));
        QVERIFY(g.valid());
        QCOMPARE(std::count_if(g.collectives.begin(), g.collectives.end(), [](const Collective& c) {
                     return c.kind == CollectiveKind::AllReduce && c.where.find(".experts") != std::string::npos;
                 }),
                 4); // one a layer
        // The cache: layers 0 and 1 only, 2 key/value heads of 16 and of 32, keys and values, f32, half a rank's.
        QCOMPARE(g.memory[0].kvCacheBytesPerToken, (2 * 16 + 2 * 32) * 2 * 4 / 2);
    }

    // Doge: dt_proj turns all heads' values into a mask per key/value head. Its default plan (dt_proj rowwise beside
    // colwise heads) leaves every rank the whole mask for half the heads, and Transformers fails (measured by
    // scripts/tp_verify.py: a size mismatch); with self_attn replicated it runs, and so does the preview (tp_verify:
    // all_gather 1/1, all_reduce 2/2).
    void dogeDynamicMask()
    {
        auto om = openFixture("doge");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        Plan p = defaultPlan(om->spec, 2);
        QVERIFY(!shardModel(om->spec, p).valid());
        for (const char* name : {"q_proj", "k_proj", "v_proj", "dt_proj", "o_proj"})
            for (PlanEntry& e : p.entries)
                if (e.key == std::string("model.layers.*.self_attn.") + name)
                    e.style = "replicate";
        const ShardedGraph g = shardModel(om->spec, p);
        QVERIFY(g.valid());
        QCOMPARE(g.collectives.size(), std::size_t(3)); // embedding, down_proj, lm_head
    }

    // Laguna: each layer's own head count (4 and 8 in the fixture) and a softplus gate per head, g_proj
    // [heads, H], that scales head_dim values each; colwise on g_proj keeps a rank's gates beside its heads.
    void perLayerHeadsAndPerHeadGate()
    {
        auto om = openFixture("laguna");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const LayerGraph lg = buildLayerGraph(om->spec);
        std::vector<std::int64_t> heads;
        for (const GraphNode& n : lg.nodes)
            if (n.kind == OpKind::Attention)
                heads.push_back(n.heads);
        QCOMPARE(heads, (std::vector<std::int64_t>{4, 8}));
        const auto gate = std::find_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) {
            return n.name == "model.layers.1.self_attn:gate";
        });
        QVERIFY(gate != lg.nodes.end());
        QCOMPARE(gate->act, Activation::Softplus);
        QCOMPARE(gate->gateSpan, om->spec.config.headDim);
        QCOMPARE(lg.tensors[static_cast<std::size_t>(gate->inputs[0])].features, 8);
        QVERIFY2(lg.unsupported.empty(), lg.unsupported.c_str()); // computed (tst_families checks it against Transformers)

        Plan p = defaultPlan(om->spec, 2);
        const ShardedGraph g = shardModel(om->spec, p);
        QVERIFY(g.valid());
        const auto gateAt = static_cast<std::size_t>(gate - lg.nodes.begin());
        QCOMPARE(g.tensors[static_cast<std::size_t>(gate->inputs[0])].local, (std::vector<std::int64_t>{4, 4}));
        QCOMPARE(g.tensors[static_cast<std::size_t>(g.graph.nodes[gateAt].outputs[0])].local,
                 (std::vector<std::int64_t>{4 * om->spec.config.headDim, 4 * om->spec.config.headDim}));
        for (PlanEntry& e : p.entries) // the gates whole, the heads split: they no longer line up
            if (e.key == "model.layers.*.self_attn.g_proj")
                e.style = "colwise_gather_output";
        const ShardedGraph bad = shardModel(om->spec, p);
        QVERIFY(std::any_of(bad.diagnostics.begin(), bad.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Error && d.where == "model.layers.*.self_attn:gate";
        }));
    }

    // LFM3's switches: use_attention_gate false leaves out g_proj, use_sandwich_norm false the norms after
    // the operator and the MLP (Lfm3Attention, Lfm3DecoderLayer); the rest is the fixture's state_dict.
    void lfm3Switches()
    {
        ojson fixture = readJson(kFixtures + "/architectures/lfm3.json");
        fixture["config"]["use_attention_gate"] = false;
        fixture["config"]["use_sandwich_norm"] = false;
        QTemporaryDir dir;
        std::ofstream(dir.filePath("config.json").toStdString()) << fixture["config"].dump(1);
        auto om = openModel(dir.path().toStdString());
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        std::int64_t expected = fixture["num_parameters"].get<std::int64_t>();
        for (const auto& [name, v] : fixture["state_dict"].items()) {
            if (name.find(".g_proj.") == std::string::npos && name.find(".post_operator_norm.") == std::string::npos
                && name.find(".post_ffn_norm.") == std::string::npos)
                continue;
            std::int64_t n = 1;
            for (const auto& d : v[0])
                n *= d.get<std::int64_t>();
            expected -= n;
        }
        QCOMPARE(om->spec.parameterCount(), expected);
        const LayerGraph lg = buildLayerGraph(om->spec);
        QVERIFY(std::none_of(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) {
            return n.name.find("g_proj") != std::string::npos || n.name.find("post_") != std::string::npos;
        }));
        QVERIFY(shardModel(om->spec, defaultPlan(om->spec, 2)).valid());
    }

    // A.X K2: q_gate_proj over [q_a_layernorm(q_a) | q_a] yields per head [q | gate], the gate a sigmoid on the attention
    // output; input_layernorm on every layer and post_attention_layernorm on the sparse one (layer 1) are gated RMSNorms.
    void mlaQueryGateAndGatedNorms()
    {
        auto om = openFixture("axk2");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelConfig& c = om->spec.config;
        const LayerLayout& l = c.layout;
        QVERIFY(l.mlaQueryGate && l.gatedNorms);
        const LayerGraph lg = buildLayerGraph(om->spec);
        auto named = [&](const std::string& name) {
            const auto it = std::find_if(lg.nodes.begin(), lg.nodes.end(), [&](const GraphNode& n) { return n.name == name; });
            return it == lg.nodes.end() ? nullptr : &*it;
        };
        const GraphNode* qg = named("model.layers.0.self_attn.q_gate_proj");
        QVERIFY(qg && qg->module >= 0);
        QCOMPARE(qg->inputs.size(), std::size_t(2)); // the normed and the raw low-rank query
        const GraphNode* gate = named("model.layers.0.self_attn:gate");
        QVERIFY(gate);
        QCOMPARE(gate->act, Activation::Sigmoid);
        QCOMPARE(lg.tensors[static_cast<std::size_t>(gate->inputs[0])].features, c.numHeads * c.vHeadDim);
        for (const char* gated : {"model.layers.0.input_layernorm.norm", "model.layers.1.input_layernorm.norm",
                                  "model.layers.1.post_attention_layernorm.norm", "model.layers.1.post_attention_layernorm:gate"})
            QVERIFY2(named(gated), gated);
        QVERIFY(named("model.layers.0.post_attention_layernorm")); // the dense layer's is a plain RMSNorm
        QVERIFY(!named("model.layers.0.post_attention_layernorm.norm"));

        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 2));
        QVERIFY(g.valid());
        const auto at = static_cast<std::size_t>(gate - lg.nodes.data());
        const std::int64_t half = c.numHeads / 2;
        QCOMPARE(g.tensors[static_cast<std::size_t>(g.graph.nodes[at].inputs[0])].local, (std::vector<std::int64_t>{half * c.vHeadDim, half * c.vHeadDim}));
        QCOMPARE(g.tensors[static_cast<std::size_t>(g.graph.nodes[at].inputs[1])].local, (std::vector<std::int64_t>{half * c.vHeadDim, half * c.vHeadDim}));
    }

    // Dots 3: layer 2 (sliding) has its own MLA sizes from per_layer_config (2 heads, kv_lora_rank 32, nope 16), a
    // sigmoid gate per head from g_proj, and the shared rope key normed; only the indexed layers have the indexer.
    void mlaSizesPerLayer()
    {
        auto om = openFixture("dots3_note_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelConfig& c = om->spec.config;
        QCOMPARE(c.headsAt(2), 2);
        QCOMPARE(c.mlaAt(2).kvLoraRank, 32);
        QCOMPARE(c.mlaAt(0).kvLoraRank, 16);
        QVERIFY(om->spec.find("model.layers.0.self_attn.indexer.wq_b"));
        QVERIFY(!om->spec.find("model.layers.2.self_attn.indexer"));
        const LayerGraph lg = buildLayerGraph(om->spec);
        std::vector<std::int64_t> heads, kvWidths;
        for (const GraphNode& n : lg.nodes)
            if (n.kind == OpKind::Attention) {
                heads.push_back(n.heads);
                kvWidths.push_back(lg.tensors[static_cast<std::size_t>(n.inputs[1])].features);
            }
        QCOMPARE(heads, (std::vector<std::int64_t>{4, 4, 2}));
        QCOMPARE(kvWidths, (std::vector<std::int64_t>{4 * (8 + 16), 4 * (8 + 16), 2 * (16 + 16)}));
        const auto gate = std::find_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.2.self_attn:gate"; });
        QVERIFY(gate != lg.nodes.end());
        QCOMPARE(gate->gateSpan, 16); // one gate value per head of v_head_dim values
        QCOMPARE(lg.tensors[static_cast<std::size_t>(gate->inputs[0])].features, 2);
        QVERIFY(std::any_of(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.0.self_attn.k_rope_only_layernorm"; }));

        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 2));
        QVERIFY(g.valid());
        const auto at = static_cast<std::size_t>(gate - lg.nodes.begin());
        QCOMPARE(g.tensors[static_cast<std::size_t>(g.graph.nodes[at].inputs[0])].local, (std::vector<std::int64_t>{1, 1}));
        QCOMPARE(tpSizesDividingHeads(c, 8), (std::vector<int>{1, 2})); // layer 2's two heads
        QVERIFY(!shardModel(om->spec, defaultPlan(om->spec, 4)).valid());
    }

    // HRM: one layer a stack, H_cycles 2 × (L_cycles 3 + 1) = 8 runs: L, L, L, H, L, L, L, H. Each run is a graph layer with
    // its own KV cache slot, as Transformers' cycle_offset gives it; the weights are the two stacks' only.
    void hierarchicalStacksUnrolled()
    {
        auto om = openFixture("hrm_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelConfig& c = om->spec.config;
        QCOMPARE(c.numLayers, 8);
        QCOMPARE(c.layersPerStack, 1);
        QVERIFY(om->spec.find("model.L_module.layers.0.self_attn.gate_proj"));
        QVERIFY(!om->spec.find("model.norm"));
        const LayerGraph lg = buildLayerGraph(om->spec);
        std::string runs;
        for (const GraphNode& n : lg.nodes)
            if (n.kind == OpKind::Attention) {
                runs += n.name.starts_with("model.H_module.layers.0.") ? 'H' : n.name.starts_with("model.L_module.layers.0.") ? 'L' : '?';
                QCOMPARE(n.layer, static_cast<int>(runs.size()) - 1);
            }
        QCOMPARE(runs, std::string("LLLHLLLH"));
        const ShardedGraph g = shardModel(om->spec, defaultPlan(om->spec, 2));
        QVERIFY(g.valid());
        // 8 runs × (k + v) × 2 local heads of 16 × 4 bytes.
        QCOMPARE(g.memory[0].kvCacheBytesPerToken, 8 * 2 * 2 * 16 * 4);
        QCOMPARE(std::count_if(g.collectives.begin(), g.collectives.end(), [](const Collective& x) { return x.kind == CollectiveKind::AllReduce; }),
                 1 + 2 * 8);
    }

    // Gemma 3n: layer 1 reuses layer 0's keys and values (no k_proj, v_proj, k_norm or v_norm, no KV cache of its own); each
    // layer predicts and corrects AltUp's streams through its router and adds LAuReL's low-rank branch; the model projects
    // the embedding into altup_num_inputs - 1 more streams and back.
    void altUpLaurelAndSharedKv()
    {
        auto om = openFixture("gemma3n_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QVERIFY(s.find("model.layers.0.self_attn.v_norm"));
        QVERIFY(s.find("model.layers.0.self_attn.v_norm")->params.empty());
        QVERIFY(!s.find("model.layers.1.self_attn.k_proj"));
        QVERIFY(!s.find("model.layers.1.self_attn.v_norm"));
        QCOMPARE(s.config.denseIntermediateSizeAt(1), 96);
        const LayerGraph lg = buildLayerGraph(s);
        auto count = [&](std::string_view part) {
            return std::count_if(lg.nodes.begin(), lg.nodes.end(), [&](const GraphNode& n) { return n.name.find(part) != std::string::npos; });
        };
        QCOMPARE(count(":altup_predict"), 2);
        QCOMPARE(count(":altup_correct"), 2);
        QCOMPARE(count(".laurel.linear_left"), 2);
        QCOMPARE(count("model.altup_projections."), 3);
        QCOMPARE(count("model.altup_unembed_projections."), 3);
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY(g.valid());
        // One cache (layer 0's): k and v, 2 KV heads of 16 split over 2 ranks, 4 bytes.
        QCOMPARE(g.memory[0].kvCacheBytesPerToken, 2 * 1 * 16 * 4);
    }

    // HY-V4: MLA with a sink logit per head (sharded with the heads, f32), a sigmoid gate_proj on its output, the indexer
    // only on "full" indexer layers (layer 2 reuses layer 1's top-k), and hyper-connection parameters in f32.
    void mlaSinksIndexerTypesHyperConnections()
    {
        auto om = openFixture("hy_v4");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QCOMPARE(s.config.indexerTypes, (std::vector<std::string>{"full", "full", "shared"}));
        QVERIFY(s.find("model.layers.1.self_attn.indexer"));
        QVERIFY(!s.find("model.layers.2.self_attn.indexer"));
        QCOMPARE(s.find("model.layers.0.attn_hc")->params[0].shape, (std::vector<std::int64_t>{8, 4 * 64}));
        auto bf = openConfig(R"({"model_type": "hy_v4", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "dtype": "bfloat16"})");
        QVERIFY2(bf.ok(), bf.ok() ? "" : bf.status().message().c_str());
        for (const char* path : {"model.layers.0.attn_hc", "model.hc_head", "model.layers.0.self_attn"})
            for (const ParamSpec& p : bf->spec.find(path)->params)
                if (p.name != "weight")
                    QCOMPARE(p.dtype, DType::F32);
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY2(g.valid(), g.diagnostics.empty() ? "" : g.diagnostics.front().message.c_str());
        const ParamShard* sinks = g.param(s.indexOf("model.layers.0.self_attn"), "sinks");
        QVERIFY(sinks && sinks->dim == 0);
        const auto gate = std::find_if(g.graph.nodes.begin(), g.graph.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.0.self_attn:gate"; });
        QVERIFY(gate != g.graph.nodes.end());
        QCOMPARE(g.tensors[static_cast<std::size_t>(gate->inputs[0])].local, (std::vector<std::int64_t>{2 * 16, 2 * 16}));
    }

    // Qwen4-Exp: the residual stream is hc_count (4) copies of the hidden state; each block reads it through a gated residual
    // whose low-rank input_mix_weight_down the default plan splits (rowwise_split_input: an all-reduce of hc_lowrank values),
    // and the model's hyper_connection_mixer stands where the final norm would.
    void gatedResidualStreams()
    {
        auto om = openFixture("qwen4_exp_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QVERIFY(!s.find("model.norm"));
        QVERIFY(!s.find("model.layers.0.input_layernorm"));
        QVERIFY(!s.find("model.hyper_connection_mixer.block_inject_weight"));
        const LayerGraph lg = buildLayerGraph(s);
        const auto residual = std::find_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.1:residual_mlp"; });
        QVERIFY(residual != lg.nodes.end());
        QCOMPARE(lg.tensors[static_cast<std::size_t>(residual->outputs[0])].features, 4 * 64);
        QVERIFY(std::any_of(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.1.self_attn.indexer.index_qk_proj"; }));
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY(g.valid());
        std::int64_t mixReductions = 0;
        for (const Collective& c : g.collectives)
            if (c.kind == CollectiveKind::AllReduce && c.where.find("input_mix_weight_down") != std::string::npos) {
                ++mixReductions;
                QCOMPARE(c.featuresPerToken, 8); // hc_lowrank values a token
            }
        QCOMPARE(mixReductions, 2 * 2 + 1);
    }

    // Inkling: its router scores the shared experts too ([E + n_shared, H]), which are stacked parameters run on every
    // token; sliding layers take swa_* sizes. Its default plan shards the normed embedding's vocabulary, and embed_norm runs
    // inside that module's forward, before the reduction (Transformers fails there at T=2), and splits the packed
    // gate_up_proj plainly ('colwise'), which pairs gate rows with gate rows.
    void inklingSharedExpertsAndRefusedDefault()
    {
        auto om = openFixture("inkling_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QCOMPARE(s.find("model.layers.0.mlp.gate")->params[0].shape, (std::vector<std::int64_t>{4 + 1, 64}));
        QCOMPARE(s.find("model.layers.0.mlp.shared_experts")->kind, ModuleKind::Experts);
        QVERIFY(s.config.slidingLayer(0));
        const LayerGraph lg = buildLayerGraph(s);
        const auto shared = std::find_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.name == "model.layers.0.mlp.shared_experts"; });
        QVERIFY(shared != lg.nodes.end());
        QCOMPARE(shared->experts, 1);
        QCOMPARE(shared->topK, 1);
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        for (const char* where : {"model.embed_tokens.embed_norm", "model.layers.*.mlp.experts.gate_up_proj"})
            QVERIFY2(std::any_of(g.diagnostics.begin(), g.diagnostics.end(),
                                 [&](const Diagnostic& d) { return d.severity == Severity::Error && d.where == where; }),
                     where);
        QVERIFY(shardModel(s, defaultPlan(s, 1)).valid()); // nothing is split at T=1
    }

    // Inkling 2 Loop: the loop's layers [2, 4) run three passes, each visit a graph layer of its own (Transformers gives
    // each pass its own cache layers), so the experts reduce 2 + 3·2 + 1 times. Its plan's 'colwise' gate_up_proj splits
    // the checkpoint's interleaved w13_weight, which the loader de-interleaves per rank: a packed split, noted as Info.
    void inklingTwoLoopAndInterleavedExperts()
    {
        auto om = openFixture("inkling2_loop_text");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QCOMPARE(s.find("lm_head")->params[0].shape[0], std::int64_t{120}); // unpadded_vocab_size
        QVERIFY(s.find("model.layers.2.q_message_gate") && !s.find("model.layers.1.q_message_gate"));
        QCOMPARE(s.find("model.message_input")->params[0].shape, (std::vector<std::int64_t>{2, 4, 64}));
        const LayerGraph lg = buildLayerGraph(s);
        QCOMPARE(std::count_if(lg.nodes.begin(), lg.nodes.end(), [](const GraphNode& n) { return n.kind == OpKind::Experts; }), 9);
        QCOMPARE(layerSlots(lg), std::size_t{9 + 1});
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY(g.valid());
        const ParamShard* gu = g.param(s.indexOf("model.layers.0.mlp.experts"), "gate_up_proj");
        QVERIFY(gu);
        QCOMPARE(gu->placement, Placement::strided(1, 2));
        QVERIFY(std::any_of(g.diagnostics.begin(), g.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Info && d.where == "model.layers.*.mlp.experts.gate_up_proj"
                && d.message.find("interleaved") != std::string::npos;
        }));
    }

    // DeepSeek-V4: hash-routed layers pick experts by token id (tid2eid, no score bias); compressed sparse layers have the
    // indexer; one key head read as the value, which Transformers' cache stores as keys and as values.
    void deepseekV4CompressedAttention()
    {
        auto om = openFixture("deepseek_v4");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        const ModuleSpec* hash = s.find("model.layers.0.mlp.gate");
        QCOMPARE(hash->params.size(), std::size_t{2});
        QCOMPARE(hash->params[1].name, std::string("tid2eid"));
        QCOMPARE(hash->params[1].dtype, DType::I64);
        QCOMPARE(s.find("model.layers.1.mlp.gate")->params[1].name, std::string("e_score_correction_bias"));
        QVERIFY(s.find("model.layers.1.self_attn.compressor.indexer.scorer.weights_proj"));
        QVERIFY(!s.find("model.layers.0.self_attn.compressor.indexer"));
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY(g.valid());
        const std::int64_t hd = s.config.headDim;
        QCOMPARE(g.memory[0].kvCacheBytesPerToken, s.config.numLayers * 2 * hd * 4);
    }

    // Phi-4-multimodal: Phi-3's text layers plus the image and audio encoders under embed_tokens_extend, built from
    // vision_config and audio_config over their classes' defaults; no plan key reaches them, so every rank holds them whole.
    void multimodalEncodersReplicated()
    {
        auto om = openFixture("phi4_multimodal");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QCOMPARE(s.find("model.embed_tokens_extend.audio_embed.encoder.embed.out")->params[0].shape, (std::vector<std::int64_t>{64, 16 * 10}));
        QCOMPARE(s.find("model.embed_tokens_extend.image_embed.img_processor.embeddings.position_embedding")->params[0].shape,
                 (std::vector<std::int64_t>{32 * 32, 64}));
        const ShardedGraph g = shardModel(s, defaultPlan(s, 2));
        QVERIFY(g.valid());
        for (const ParamShard& p : g.params)
            if (p.path.find("embed_tokens_extend") != std::string::npos)
                QCOMPARE(p.dim, -1);
        // Audio defaults: 24 Conformer blocks of 1024 unless audio_config says otherwise.
        auto bare = openConfig(R"({"model_type": "phi4_multimodal", "num_hidden_layers": 1, "vision_config": {"num_hidden_layers": 0}})");
        QVERIFY2(bare.ok(), bare.ok() ? "" : bare.status().message().c_str());
        QCOMPARE(bare->spec.config.audio.blocks, 24);
        QCOMPARE(bare->spec.config.audio.hidden, 1024);
        QVERIFY(bare->spec.find("model.embed_tokens_extend.audio_embed.encoder.encoders.23"));
    }

    // HunYuan's router projection is gate.wg, one level below the MoE block: the graph's router node.
    void routerOneLevelDown()
    {
        auto om = openFixture("hunyuan_v1_moe");
        QVERIFY2(om.ok(), om.ok() ? "" : om.status().message().c_str());
        const LayerGraph lg = buildLayerGraph(om->spec);
        const GraphNode* router = firstNode(lg, OpKind::Router);
        QVERIFY(router);
        QCOMPARE(router->name, std::string("model.layers.0.mlp.gate.wg"));
        QVERIFY(router->module >= 0);
    }

    // The fixtures and resources/model_types.json come from the same Transformers and list the same
    // model types; how many of them TP Studio opens is printed.
    void architectureCoverage()
    {
        const ojson index = readJson(kFixtures + "/architectures/index.json");
        QCOMPARE(QString::fromStdString(index["transformers"].get<std::string>()),
                 QString::fromStdString(pinnedTransformersVersion()));
        std::vector<std::string> listed;
        for (const auto& [t, v] : index["model_types"].items())
            listed.push_back(t);
        QCOMPARE(listed, transformersTpModelTypes());
        int opened = 0;
        for (const KnownModelType& k : knownModelTypes())
            opened += index["model_types"].contains(k.modelType);
        qInfo("TP Studio opens %d of the %zu tensor-parallel causal LMs of Transformers %s", opened, listed.size(),
              pinnedTransformersVersion().c_str());
        QVERIFY(opened >= 13);
    }

    // Every scaled rope of the fixtures and the catalog (yarn: gpt-oss, DeepSeek-V3; llama3; linear:
    // Gemma 3's full layers) has Transformers' inv_freq and cos/sin scaling (fixtures/rope.json,
    // written by Transformers' rope init functions).
    void ropeMatchesTransformers()
    {
        std::ifstream in(TP_SOURCE_DIR "/tests/fixtures/rope.json");
        QVERIFY(in.good());
        const auto ref = nlohmann::json::parse(in);
        std::set<std::string> kinds;
        for (const auto& [name, r] : ref.items()) {
            const bool fixture = std::filesystem::exists(TP_SOURCE_DIR "/tests/fixtures/models/" + name);
            const ModelSpec spec = tptest::openSpec(fixture ? (TP_SOURCE_DIR "/tests/fixtures/models/" + name).c_str() : name.c_str());
            const LayerGraph g = buildLayerGraph(spec);
            QVERIFY2(g.unsupported.empty(), g.unsupported.c_str());
            const RopeTable& t = g.ropes.at(0); // the full layers' (Gemma 3: rope 1 is the sliding layers')
            const auto want = r.at("inv_freq").get<std::vector<double>>();
            QCOMPARE(t.invFreq.size(), want.size());
            for (std::size_t i = 0; i < want.size(); ++i)
                QVERIFY2(std::abs(t.invFreq[i] - want[i]) <= 1e-6 * std::abs(want[i]),
                         qPrintable(QString("%1 inv_freq[%2]: %3, Transformers %4").arg(name.c_str()).arg(i).arg(t.invFreq[i]).arg(want[i])));
            QVERIFY2(std::abs(t.attentionScaling - r.at("attention_scaling").get<double>()) < 1e-6,
                     qPrintable(QString("%1 scaling %2").arg(name.c_str()).arg(t.attentionScaling)));
            kinds.insert(r.at("rope_type").get<std::string>());
        }
        QCOMPARE(kinds, (std::set<std::string>{"linear", "llama3", "yarn"}));
    }

    void knownParameterCounts_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<qint64>("params");
        // Published totals of the released checkpoints.
        QTest::addRow("llama-3.1-8b") << "llama-3.1-8b" << 8030261248ll;
        QTest::addRow("llama-3.1-70b") << "llama-3.1-70b" << 70553706496ll;
        QTest::addRow("llama-3.1-405b") << "llama-3.1-405b" << 405853388800ll;
        QTest::addRow("mixtral-8x7b") << "mixtral-8x7b" << 46702792704ll;
        QTest::addRow("mistral-7b-v0.3") << "mistral-7b-v0.3" << 7248023552ll;
        QTest::addRow("phi-3-mini") << "phi-3-mini-4k" << 3821079552ll;
    }
    void knownParameterCounts()
    {
        QFETCH(QString, id);
        QFETCH(qint64, params);
        QCOMPARE(catalogSpec(id.toStdString().c_str()).parameterCount(), params);
    }

    void validTpSizes()
    {
        QCOMPARE(tpSizesDividingHeads(catalogSpec("llama-3.1-8b").config, 16), (std::vector<int>{1, 2, 4, 8}));
        QCOMPARE(tpSizesDividingHeads(catalogSpec("qwen3-30b-a3b").config, 16), (std::vector<int>{1, 2, 4}));
        QCOMPARE(tpSizesDividingHeads(catalogSpec("llama-4-scout").config, 16), (std::vector<int>{1, 2, 4, 8}));
    }

    void tiedEmbeddings()
    {
        const ModelSpec g = catalogSpec("gemma-3-27b");
        const ModuleSpec* head = g.find("lm_head");
        QVERIFY(head);
        QCOMPARE(QString::fromStdString(head->params[0].tiedTo), QString("model.embed_tokens.weight"));
        QVERIFY(g.supportsTpPlan);
    }

    // Synthetic checkpoints in the released layout: per-expert tensors, legacy Mixtral names, FP8
    // scales and an MTP layer all reconcile without errors.
    void syntheticLayouts_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<bool>("fp8");
        QTest::addColumn<int>("extraLayers");
        QTest::addRow("mixtral") << "mixtral-8x7b" << false << 0;
        QTest::addRow("qwen3-moe") << "qwen3-30b-a3b" << false << 0;
        QTest::addRow("deepseek fp8 + mtp") << "deepseek-v3" << true << 1;
        QTest::addRow("gpt-oss") << "gpt-oss-120b" << false << 0;
    }
    void syntheticLayouts()
    {
        QFETCH(QString, id);
        QFETCH(bool, fp8);
        QFETCH(int, extraLayers);
        const ModelSpec spec = catalogSpec(id.toStdString().c_str());
        SyntheticOptions so;
        so.fp8BlockScales = fp8;
        so.extraLayers = extraLayers;
        QTemporaryDir dir;
        QVERIFY(writeSyntheticCheckpoint(dir.path().toStdString(), checkpointLayout(spec, so), so.maxShardBytes,
                                         std::string(findCatalogEntry(id.toStdString())->configJson))
                    .ok());
        auto om = openModel(dir.path().toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        QVERIFY(om->checkpoint->files.size() > 1);
        const auto errors = errorsOf(om->spec);
        QVERIFY2(errors.empty(), errors.empty() ? "" : (errors[0].where + ": " + errors[0].message).c_str());
        QCOMPARE(om->spec.parameterCount(), spec.parameterCount());
        for (const auto& d : om->spec.diagnostics)
            QVERIFY2(d.severity != Severity::Warning, d.message.c_str());
    }

    void reconciliationFindings()
    {
        // A llama checkpoint with one tensor of the wrong shape, one missing and one unknown.
        QTemporaryDir dir;
        const std::string src = kFixtures + "/models/llama";
        fs::copy_file(src + "/config.json", dir.filePath("config.json").toStdString());
        auto ck = readCheckpoint(src + "/model.safetensors");
        QVERIFY(ck.ok());
        std::vector<TensorToWrite> ts;
        for (const auto& t : ck->tensors) {
            if (t.name == "model.layers.1.mlp.up_proj.weight")
                continue; // missing
            auto shape = t.shape;
            if (t.name == "model.layers.0.self_attn.k_proj.weight")
                shape[0] += 1; // wrong shape
            ts.push_back({t.name, t.dtype, shape, {}});
        }
        ts.push_back({"model.layers.0.self_attn.rotary.inv_freq", DType::F32, {4}, {}});
        QVERIFY(writeSyntheticCheckpoint(dir.path().toStdString(), ts, 1ull << 40).ok());
        auto om = openModel(dir.path().toStdString());
        QVERIFY(om.ok());
        auto has = [&](Severity s, const std::string& where, const std::string& text) {
            return std::any_of(om->spec.diagnostics.begin(), om->spec.diagnostics.end(), [&](const Diagnostic& d) {
                return d.severity == s && d.where == where && d.message.find(text) != std::string::npos;
            });
        };
        QVERIFY(has(Severity::Error, "model.layers.0.self_attn.k_proj.weight", "checkpoint shape [17, 32]"));
        QVERIFY(has(Severity::Error, "model.layers.*.mlp.up_proj.weight", "have no tensor in the checkpoint"));
        QVERIFY(has(Severity::Error, "model.layers.*.self_attn.k_proj.weight", "first: 'model.layers.0.self_attn.k_proj.weight'"));
        QVERIFY(has(Severity::Warning, "model.layers.*.self_attn.rotary.inv_freq", "match no parameter"));
    }

    void pickleRefused()
    {
        QTemporaryDir dir;
        std::ofstream(dir.filePath("pytorch_model.bin").toStdString()) << "\x80\x02not really";
        auto om = openModel(dir.path().toStdString());
        QVERIFY(!om.ok());
        QVERIFY2(om.status().message().find("pickle checkpoints (.bin/.pt/.pth) are not read") != std::string::npos,
                 om.status().message().c_str());
        auto direct = openModel(dir.filePath("pytorch_model.bin").toStdString());
        QVERIFY(!direct.ok());
    }

    void unknownArchitectureFallsBackToNames()
    {
        QTemporaryDir dir;
        std::ofstream(dir.filePath("config.json").toStdString())
            << R"({"model_type": "mystery", "architectures": ["MysteryForCausalLM"], "hidden_size": 8,
                   "num_attention_heads": 2, "num_hidden_layers": 2, "vocab_size": 16})";
        QVERIFY(writeSafetensors(dir.filePath("model.safetensors").toStdString(),
                                 {{"transformer.wte.weight", DType::F32, {16, 8}, {}},
                                  {"transformer.h.0.attn.c_attn.weight", DType::F32, {24, 8}, {}},
                                  {"transformer.h.0.ln_1.weight", DType::F32, {8}, {}},
                                  {"lm_head.weight", DType::F32, {16, 8}, {}}})
                    .ok());
        auto om = openModel(dir.path().toStdString());
        QVERIFY2(om.ok(), om.status().message().c_str());
        const ModelSpec& s = om->spec;
        QCOMPARE(QString::fromStdString(s.className), QString("MysteryForCausalLM"));
        QVERIFY(s.find("transformer.h.0.attn.c_attn"));
        QCOMPARE(s.find("transformer.h.0.attn.c_attn")->kind, ModuleKind::Linear);
        QCOMPARE(s.find("transformer.wte")->kind, ModuleKind::Embedding);
        QCOMPARE(s.find("transformer.h.0.ln_1")->kind, ModuleKind::RmsNorm);
        QCOMPARE(s.parameterCount(), 16 * 8 + 24 * 8 + 8 + 16 * 8);
        QVERIFY(std::any_of(s.diagnostics.begin(), s.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Warning && d.message.find("unknown architecture") != std::string::npos;
        }));
        // A plan shards it, and the preview says what it cannot predict instead of printing zeros.
        Plan plan;
        plan.tpSize = 2;
        plan.entries = {{"transformer.h.*.attn.c_attn", "colwise"}};
        const ShardedGraph g = shardModel(s, plan);
        QVERIFY(g.valid());
        const ParamShard* cAttn = g.param(s.indexOf("transformer.h.0.attn.c_attn"), "weight");
        QVERIFY(cAttn && cAttn->dim == 0 && cAttn->shapes[1] == std::vector<std::int64_t>({12, 8}));
        QVERIFY(std::any_of(g.diagnostics.begin(), g.diagnostics.end(), [](const Diagnostic& d) {
            return d.severity == Severity::Warning && d.message.find("no dataflow graph for model_type 'mystery'") != std::string::npos;
        }));
    }

    void openByConfigAndFile()
    {
        const std::string dir = kFixtures + "/models/qwen3";
        for (const std::string& p : {dir + "/config.json", dir + "/model.safetensors"}) {
            auto om = openModel(p);
            QVERIFY2(om.ok(), om.status().message().c_str());
            QVERIFY(om->checkpoint.has_value());
            QCOMPARE(QString::fromStdString(om->spec.className), QString("Qwen3ForCausalLM"));
        }
    }

    void hubCache()
    {
        QTemporaryDir home;
        const fs::path repo = fs::path(home.path().toStdString()) / "hub" / "models--acme--tiny-llama";
        fs::create_directories(repo / "snapshots" / "abc123");
        fs::create_directories(repo / "refs");
        std::ofstream(repo / "refs" / "main") << "abc123";
        fs::copy(kFixtures + "/models/llama", repo / "snapshots" / "abc123", fs::copy_options::recursive);
        qputenv("HF_HUB_CACHE", QByteArray());
        qputenv("HF_HOME", home.path().toUtf8());
        auto snap = resolveHubCache("acme/tiny-llama");
        QVERIFY2(snap.ok(), snap.status().message().c_str());
        QCOMPARE(QString::fromStdString(*snap), QString::fromStdString((repo / "snapshots" / "abc123").string()));
        auto om = openModel("acme/tiny-llama");
        QVERIFY2(om.ok(), om.status().message().c_str());
        QCOMPARE(QString::fromStdString(om->spec.className), QString("LlamaForCausalLM"));
        auto missing = openModel("acme/not-there");
        QVERIFY(!missing.ok());
        QVERIFY2(missing.status().message().find("not in the local Hugging Face cache (looked in:") != std::string::npos,
                 missing.status().message().c_str());
        QVERIFY(!resolveHubCache("../etc").ok());
        // An uncached repo id of a catalog model is an error that points at the catalog id, not a
        // silent open of the catalog's config.
        auto uncached = openModel("meta-llama/Llama-3.1-8B");
        QVERIFY(!uncached.ok());
        QVERIFY2(uncached.status().message().find("not in the local Hugging Face cache") != std::string::npos,
                 uncached.status().message().c_str());
        QVERIFY2(uncached.status().message().find("open 'llama-3.1-8b'") != std::string::npos, uncached.status().message().c_str());
        QVERIFY(openModel("llama-3.1-8b").ok());
        qunsetenv("HF_HOME");
    }

    void genericNames_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("generic");
        QTest::addRow("layer index") << "model.layers.12.mlp.down_proj.weight" << "model.layers.*.mlp.down_proj.weight";
        QTest::addRow("digits inside names stay") << "experts.3.w1" << "experts.*.w1";
        QTest::addRow("trailing index") << "model.layers.7" << "model.layers.*";
        QTest::addRow("leading segment stays") << "0.weight" << "0.weight";
        QTest::addRow("mixed segment stays") << "h.1a.x" << "h.1a.x";
    }
    void genericNames()
    {
        QFETCH(QString, name);
        QFETCH(QString, generic);
        QCOMPARE(QString::fromStdString(genericName(name.toStdString())), generic);
    }

    void notFoundNamesCatalog()
    {
        auto om = openModel("no-such-model");
        QVERIFY(!om.ok());
        QVERIFY(om.status().message().find("not a catalog id (example, llama-3.1-8b") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestModel)
#include "tst_model.moc"
