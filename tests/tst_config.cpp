// tst_config — config.json parsing: family defaults, derived fields, wrappers, and bad input.
#include "tp/model/catalog.h"
#include "tp/model/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <QtTest>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace tp;

namespace {
ModelConfig parseOk(const std::string& json, std::vector<Diagnostic>* d = nullptr)
{
    auto r = parseConfig(json, "config.json", d);
    if (!r.ok())
        qFatal("unexpected error: %s", r.status().message().c_str());
    return *r;
}
ModelConfig catalogConfig(const char* id)
{
    const CatalogEntry* e = findCatalogEntry(id);
    if (!e)
        qFatal("no catalog entry %s", id);
    return parseOk(std::string(e->configJson));
}
} // namespace

class TestConfig : public QObject
{
    Q_OBJECT
private slots:
    // Real public configs: the fields Transformers reads, with derived values.
    void catalogFields_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<QString>("modelType");
        QTest::addColumn<qint64>("layers");
        QTest::addColumn<qint64>("heads");
        QTest::addColumn<qint64>("kvHeads");
        QTest::addColumn<qint64>("headDim");
        QTest::addColumn<qint64>("experts");
        QTest::addColumn<bool>("tied");
        QTest::addRow("llama-3.1-8b") << "llama-3.1-8b" << "llama" << 32ll << 32ll << 8ll << 128ll << 0ll << false;
        QTest::addRow("mistral (head_dim derived)") << "mistral-7b-v0.3" << "mistral" << 32ll << 32ll << 8ll << 128ll << 0ll << false;
        QTest::addRow("qwen3-32b (head_dim given)") << "qwen3-32b" << "qwen3" << 64ll << 64ll << 8ll << 128ll << 0ll << false;
        QTest::addRow("qwen3-30b-a3b") << "qwen3-30b-a3b" << "qwen3_moe" << 48ll << 32ll << 4ll << 128ll << 128ll << false;
        QTest::addRow("mixtral num_local_experts") << "mixtral-8x7b" << "mixtral" << 32ll << 32ll << 8ll << 128ll << 8ll << false;
        QTest::addRow("deepseek n_routed_experts") << "deepseek-v3" << "deepseek_v3" << 61ll << 128ll << 128ll << 64ll << 256ll << false;
        QTest::addRow("gpt-oss") << "gpt-oss-120b" << "gpt_oss" << 36ll << 64ll << 8ll << 64ll << 128ll << false;
        QTest::addRow("gemma3 text_config, tied by default") << "gemma-3-27b" << "gemma3_text" << 62ll << 32ll << 16ll << 128ll << 0ll << true;
        QTest::addRow("llama4 text_config") << "llama-4-scout" << "llama4_text" << 48ll << 40ll << 8ll << 128ll << 16ll << false;
        QTest::addRow("phi3") << "phi-3-mini-4k" << "phi3" << 32ll << 32ll << 32ll << 96ll << 0ll << false;
    }
    void catalogFields()
    {
        QFETCH(QString, id);
        QFETCH(QString, modelType);
        QFETCH(qint64, layers);
        QFETCH(qint64, heads);
        QFETCH(qint64, kvHeads);
        QFETCH(qint64, headDim);
        QFETCH(qint64, experts);
        QFETCH(bool, tied);
        const ModelConfig c = catalogConfig(id.toStdString().c_str());
        QCOMPARE(QString::fromStdString(c.modelType), modelType);
        QCOMPARE(c.numLayers, layers);
        QCOMPARE(c.numHeads, heads);
        QCOMPARE(c.numKvHeads, kvHeads);
        QCOMPARE(c.headDim, headDim);
        QCOMPARE(c.numExperts, experts);
        QCOMPARE(c.tieWordEmbeddings, tied);
        if (c.dtypeGiven)
            QCOMPARE(c.dtype, DType::BF16);
    }

    void specialFields()
    {
        const ModelConfig l = catalogConfig("llama-3.1-8b");
        QCOMPARE(QString::fromStdString(l.ropeScaling.type), QString("llama3"));
        QCOMPARE(l.ropeScaling.factor, 8.0);
        QCOMPARE(l.ropeScaling.originalMaxPositions, 8192ll);
        const ModelConfig d = catalogConfig("deepseek-v3");
        QCOMPARE(QString::fromStdString(d.ropeScaling.type), QString("yarn"));
        QVERIFY(d.qLoraRank.has_value());
        QCOMPARE(*d.qLoraRank, 1536ll);
        QCOMPARE(d.kvLoraRank, 512ll);
        QCOMPARE(d.sharedIntermediateSize, 2048ll);
        QVERIFY(!d.isMoeLayer(2));
        QVERIFY(d.isMoeLayer(3));
        QCOMPARE(QString::fromStdString(d.quantization.value_or("")), QString("fp8"));
        // DeepseekV3TopkRouter's fields (config.json, or DeepseekV3Config's defaults when absent).
        QCOMPARE(d.nGroup, 8ll);
        QCOMPARE(d.topkGroup, 4ll);
        QCOMPARE(d.routedScalingFactor, 2.5);
        QVERIFY(d.normTopkProb);
        QVERIFY(d.ropeInterleave);
        const ModelConfig bare = parseOk(R"({"model_type": "deepseek_v3", "n_routed_experts": 16, "num_experts_per_tok": 2,
                                             "rope_interleave": false})");
        QCOMPARE(bare.nGroup, 8ll);
        QVERIFY(bare.normTopkProb);
        QVERIFY(!bare.ropeInterleave);
        // Llama4TextConfig's derived fields: every 4th layer NoPE, the rope layers chunked.
        const ModelConfig l4 = catalogConfig("llama-4-scout");
        QCOMPARE(l4.noRopeLayers.size(), std::size_t(48));
        QCOMPARE(l4.noRopeLayers[3], 0ll);
        QCOMPARE(l4.noRopeLayers[4], 1ll);
        QCOMPARE(l4.attentionChunkSize.value_or(0), 8192ll);
        QCOMPARE(QString::fromStdString(l4.layerTypes[3]), QString("full_attention"));
        QCOMPARE(QString::fromStdString(l4.layerTypes[4]), QString("chunked_attention"));
        QVERIFY(l4.useQkNorm && l4.attnTemperatureTuning && l4.ropeInterleave);
        const ModelConfig g = catalogConfig("gpt-oss-120b");
        QCOMPARE(g.layerTypes.size(), std::size_t(36));
        QVERIFY(g.attentionBias);
        // Qwen2 has q/k/v biases whatever attention_bias says.
        QVERIFY(catalogConfig("qwen2.5-72b").attentionBias);
    }

    // Gemma's fields as Gemma2Config / Gemma3TextConfig derive them (Transformers 5.24).
    void gemmaFields()
    {
        const ModelConfig g2 = parseOk(R"({"model_type": "gemma2", "num_hidden_layers": 4})");
        QCOMPARE(g2.queryPreAttnScalar.value_or(0), 256.0);
        QCOMPARE(g2.attnLogitSoftcap.value_or(0), 50.0);
        QCOMPARE(g2.finalLogitSoftcap.value_or(0), 30.0);
        QCOMPARE(g2.layerTypes, (std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention", "full_attention"}));
        QVERIFY(!g2.slidingRope);
        const ModelConfig off = parseOk(R"({"model_type": "gemma2", "attn_logit_softcapping": null, "final_logit_softcapping": 12.5})");
        QVERIFY(!off.attnLogitSoftcap);
        QCOMPARE(off.finalLogitSoftcap.value_or(0), 12.5);
        // Gemma 3 from a v4 config (the catalog's 27B): 5 sliding layers to 1 full, rope_scaling on
        // the full layers only, the sliding ones at the local base 10000.
        const ModelConfig g3 = catalogConfig("gemma-3-27b");
        QCOMPARE(g3.layerTypes.size(), std::size_t(62));
        QCOMPARE(g3.layerTypes[4], std::string("sliding_attention"));
        QCOMPARE(g3.layerTypes[5], std::string("full_attention"));
        QCOMPARE(std::count(g3.layerTypes.begin(), g3.layerTypes.end(), "full_attention"), 10);
        QCOMPARE(QString::fromStdString(g3.ropeScaling.type), QString("linear"));
        QCOMPARE(g3.ropeScaling.factor, 8.0);
        QCOMPARE(g3.ropeTheta, 1e6);
        QVERIFY(g3.slidingRope && g3.slidingRope->theta == 1e4 && g3.slidingRope->scaling.type.empty());
        QCOMPARE(g3.queryPreAttnScalar.value_or(0), 168.0);
        QVERIFY(!g3.attnLogitSoftcap && !g3.finalLogitSoftcap);
        const ModelConfig local = parseOk(R"({"model_type": "gemma3_text", "rope_local_base_freq": 5000, "sliding_window_pattern": 2, "num_hidden_layers": 2})");
        QCOMPARE(local.slidingRope->theta, 5000.0);
        QCOMPARE(local.layerTypes, (std::vector<std::string>{"sliding_attention", "full_attention"}));
        // v5: rope_parameters per layer type.
        const ModelConfig v5 = parseOk(R"({"model_type": "gemma3_text", "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
        QCOMPARE(QString::fromStdString(v5.ropeScaling.type), QString("linear"));
        QCOMPARE(v5.ropeScaling.factor, 2.0);
        QCOMPARE(v5.slidingRope->theta, 1e4);
    }

    void defaults()
    {
        // Only model_type: the family defaults of the Transformers config class.
        const ModelConfig m = parseOk(R"({"model_type": "mistral"})");
        QCOMPARE(m.vocabSize, 32000ll);
        QCOMPARE(m.numKvHeads, 8ll);
        QCOMPARE(m.headDim, 128ll);
        QVERIFY(!m.headDimGiven);
        QCOMPARE(m.dtype, DType::F32);
        const ModelConfig l = parseOk(R"({"model_type": "llama", "num_attention_heads": 16, "hidden_size": 2048})");
        QCOMPARE(l.numKvHeads, 16ll); // None → num_attention_heads
        QCOMPARE(l.headDim, 128ll);
        const ModelConfig dtype = parseOk(R"({"model_type": "llama", "dtype": "float16"})");
        QCOMPARE(dtype.dtype, DType::F16);
        const ModelConfig q = parseOk(R"({"model_type": "qwen3_moe", "mlp_only_layers": [0, 2], "num_hidden_layers": 4})");
        QVERIFY(!q.isMoeLayer(0));
        QVERIFY(q.isMoeLayer(1));
        QVERIFY(!q.isMoeLayer(2));
    }

    // Keys read as Transformers' config class reads them (the defects of issue 34, as classes).
    void configClassDefaults()
    {
        // Qwen3MoeConfig declares no head_dim: without one the attention takes hidden / heads.
        const ModelConfig q = parseOk(R"({"model_type": "qwen3_moe", "hidden_size": 32, "num_attention_heads": 4})");
        QCOMPARE(q.headDim, 8ll);
        QCOMPARE(parseOk(R"({"model_type": "qwen3_moe"})").headDim, 2048ll / 32);
        // A model type on a template family's tree reads its own class's defaults (GemmaConfig:
        // head_dim 256, vocab 256000, tied), not the template's (LlamaConfig).
        const ModelConfig g = parseOk(R"({"model_type": "gemma", "num_hidden_layers": 2})");
        QCOMPARE(g.family, Family::Llama);
        QCOMPARE(g.causalLmClass, std::string("GemmaForCausalLM"));
        QCOMPARE(g.headDim, 256ll);
        QCOMPARE(g.vocabSize, 256000ll);
        QVERIFY(g.tieWordEmbeddings);
        QVERIFY(g.engineLacks.empty()); // its own forward is checked (family_checks.json)
        QVERIFY(!parseOk(R"({"model_type": "doge"})").engineLacks.empty()); // not yet
        // An option of a runnable type that the engine does not compute makes it refuse the model.
        QVERIFY(parseOk(R"({"model_type": "cohere"})").engineLacks.empty());
        // The routed experts' scale under the key the class declares, bounded there (HY-V3's router_scaling_factor);
        // a class without one (MiniMax-M2) ignores a stray key, as Transformers does.
        const auto zeroScale = parseConfig(R"({"model_type": "hy_v3", "router_scaling_factor": 0})", "config.json", nullptr);
        QVERIFY(!zeroScale.ok() && zeroScale.status().message().find("'router_scaling_factor' must be above 0") != std::string::npos);
        QCOMPARE(parseOk(R"({"model_type": "hy_v3", "router_scaling_factor": 2.5})").routedScalingFactor, 2.5);
        QCOMPARE(parseOk(R"({"model_type": "minimax_m2", "routed_scaling_factor": 3.0})").routedScalingFactor, 1.0);
        QVERIFY(parseOk(R"({"model_type": "cohere", "use_qk_norm": true})").engineLacks.find("use_qk_norm") != std::string::npos);
        QVERIFY(parseOk(R"({"model_type": "olmo", "clip_qkv": 8.0})").engineLacks.find("clip_qkv") != std::string::npos);
        QVERIFY(parseOk(R"({"model_type": "olmo", "clip_qkv": null})").engineLacks.empty());
        // exaone is LlamaForCausalLM itself, under its own checkpoint names: the engine runs it.
        QVERIFY(parseOk(R"({"model_type": "exaone"})").engineLacks.empty());
    }

    // The model types the engine runs are those whose forward is checked against Transformers: the twelve committed
    // fixture families (tests/fixtures/models), llama4 (their wrapper) and tests/fixtures/family_checks.json's (made
    // at test time, engine_matches_transformers_families). A type marked runnable without a check, or checked and
    // still refused, fails here.
    void engineRunsWhatIsChecked()
    {
        std::set<std::string> checked = {"llama4"};
        for (const auto& d : std::filesystem::directory_iterator(TP_SOURCE_DIR "/tests/fixtures/models"))
            checked.insert(d.path().filename().string());
        std::ifstream in(TP_SOURCE_DIR "/tests/fixtures/family_checks.json");
        const nlohmann::json checks = nlohmann::json::parse(in);
        for (const auto& [name, check] : checks.at("checks").items())
            checked.insert(check.value("model_type", name));
        std::set<std::string> runs;
        for (const KnownModelType& k : knownModelTypes())
            if (k.engineLacks.empty())
                runs.insert(k.modelType);
        QCOMPARE(runs, checked);
        QVERIFY(checked.size() >= 13 + 25);
        // Every other one is refused naming what the engine lacks, and the refusal says it.
        for (const KnownModelType& k : knownModelTypes())
            QVERIFY2(runs.contains(k.modelType) || k.engineLacks.size() > 20, k.modelType.c_str());
        const std::string jamba = R"({"model_type": "jamba", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                                   "vocab_size": 10, "num_key_value_heads": 2})";
        const ModelConfig c = parseOk(jamba);
        QVERIFY2(c.engineLacks.find("Mamba's selective scan") != std::string::npos, c.engineLacks.c_str());
    }

    // For a model type TP Studio does not know, a common key of another JSON type (Gemma 3n's
    // per-layer intermediate_size, a use_bidirectional_attention string not "all" or "vision") or experts per
    // token under another name is not an error: the key is ignored with a warning naming it.
    void unknownModelTypesReadLeniently()
    {
        std::vector<Diagnostic> d;
        const ModelConfig c = parseOk(R"({"model_type": "gemma9n_text", "hidden_size": 64, "num_attention_heads": 4,
                                          "num_hidden_layers": 2, "vocab_size": 10, "intermediate_size": [128, 256],
                                          "use_bidirectional_attention": "sometimes", "num_experts": 8})",
                                      &d);
        QCOMPARE(c.family, Family::Unknown);
        QCOMPARE(c.hiddenSize, 64ll);
        for (const char* key : {"'intermediate_size' must be an integer", "'use_bidirectional_attention' must be true, false"})
            QVERIFY2(std::any_of(d.begin(), d.end(), [&](const Diagnostic& x) {
                         return x.severity == Severity::Warning && x.message.find(key) != std::string::npos &&
                                x.message.find("ignored") != std::string::npos;
                     }),
                     key);
        // A known family stays strict.
        QVERIFY(!parseConfig(R"({"model_type": "llama", "intermediate_size": [128, 256]})", "config.json", nullptr).ok());
    }

    // Issue 38: fp8's weight_block_size is read (out, in); anything but two integers from 1 to 65536 is
    // refused naming the key.
    void fp8BlockSize()
    {
        const char* base = R"({"model_type": "llama", "quantization_config": {"quant_method": "fp8", "weight_block_size": %1}})";
        const ModelConfig c = parseOk(QString::fromLatin1(base).arg(QStringLiteral("[128, 64]")).toStdString());
        QCOMPARE(c.quantBlock, (std::vector<std::int64_t>{128, 64}));
        QVERIFY(parseOk(QString::fromLatin1(base).arg(QStringLiteral("null")).toStdString()).quantBlock.empty());
        for (const char* bad : {"[128]", "[0, 128]", "[128, 1e9]", "\"128x128\"", "[128.5, 128]", "[128, 128, 128]", "{}"}) {
            const auto r = parseConfig(QString::fromLatin1(base).arg(QLatin1String(bad)).toStdString(), "config.json", nullptr);
            QVERIFY2(!r.ok(), bad);
            QVERIFY2(r.status().message().find("'quantization_config.weight_block_size'") != std::string::npos, r.status().message().c_str());
        }
    }

    void unknownArchitectureWarns()
    {
        std::vector<Diagnostic> d;
        const ModelConfig c = parseOk(R"({"model_type": "falcon_h9", "hidden_size": 64, "num_attention_heads": 4,
                                          "num_hidden_layers": 2, "vocab_size": 10})",
                                      &d);
        QCOMPARE(c.family, Family::Unknown);
        QVERIFY(std::any_of(d.begin(), d.end(), [](const Diagnostic& x) {
            return x.severity == Severity::Warning && x.message.find("unknown model_type 'falcon_h9'") != std::string::npos
                // Issue 41: it says what is supported and where the list is.
                && x.message.find(fmt::format("TP Studio opens {} model types", knownModelTypes().size())) != std::string::npos
                && x.message.find("`tpstudio-cli families` lists them") != std::string::npos;
        }));
    }

    // Each bad config gives an error that names the file and the key.
    void badInput_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("expected");
        QTest::addRow("invalid JSON") << R"({"model_type": "llama",)" << "config.json: config is not valid JSON";
        // Python's non-finite literals (save_pretrained writes them) read as strings: a number key names itself.
        QTest::addRow("NaN literal") << R"({"model_type": "llama", "rms_norm_eps": NaN})"
                                     << "config.json: key 'rms_norm_eps' must be a number, found \"NaN\"";
        QTest::addRow("-Infinity literal") << R"({"model_type": "llama", "rope_theta": -Infinity})"
                                           << "config.json: key 'rope_theta' must be a number, found \"-Infinity\"";
        QTest::addRow("NaN word inside a string stays") << R"({"model_type": "llama", "hidden_act": "NaN", "hidden_size": NaN})"
                                                        << "config.json: key 'hidden_size' must be an integer, found \"NaN\"";
        QTest::addRow("not an object") << "[1, 2]" << "config.json: the top level must be a JSON object";
        QTest::addRow("string for int") << R"({"model_type": "llama", "hidden_size": "4096"})"
                                        << "config.json: key 'hidden_size' must be an integer, found \"4096\"";
        QTest::addRow("fractional int") << R"({"model_type": "llama", "num_hidden_layers": 2.5})"
                                        << "config.json: key 'num_hidden_layers' must be an integer, found 2.5";
        QTest::addRow("zero heads") << R"({"model_type": "llama", "num_attention_heads": 0})"
                                    << "config.json: key 'num_attention_heads' must be at least 1, found 0";
        QTest::addRow("negative vocab") << R"({"model_type": "llama", "vocab_size": -3})"
                                        << "config.json: key 'vocab_size' must be at least 1, found -3";
        QTest::addRow("huge") << R"({"model_type": "llama", "hidden_size": 1e300})"
                              << "config.json: key 'hidden_size' must be an integer, found 1e+300";
        QTest::addRow("kv does not divide heads") << R"({"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 6})"
                                                  << "config.json: num_attention_heads (32) is not a multiple of num_key_value_heads (6)";
        QTest::addRow("hidden not divisible, no head_dim") << R"({"model_type": "llama", "hidden_size": 100, "num_attention_heads": 32})"
                                                           << "config.json: hidden_size (100) is not divisible by num_attention_heads (32)";
        QTest::addRow("unknown dtype") << R"({"model_type": "llama", "torch_dtype": "float7"})"
                                       << "config.json: key 'torch_dtype' names an unknown dtype 'float7'";
        QTest::addRow("bool as string") << R"({"model_type": "llama", "tie_word_embeddings": "yes"})"
                                        << "config.json: key 'tie_word_embeddings' must be true or false";
        QTest::addRow("rope_scaling not object") << R"({"model_type": "llama", "rope_scaling": 3})"
                                                 << "config.json: key 'rope_scaling' must be an object or null";
        QTest::addRow("nested key named") << R"({"model_type": "llama", "rope_scaling": {"factor": "x"}})"
                                          << "config.json: key 'rope_scaling.factor' must be a number";
        QTest::addRow("text_config key named") << R"({"model_type": "gemma3", "text_config": {"num_hidden_layers": -1}})"
                                               << "config.json: key 'text_config.num_hidden_layers' must be at least 1";
        QTest::addRow("experts per token > experts") << R"({"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 3})"
                                                     << "config.json: num_experts_per_tok (3) must be between 1 and the number of experts (2)";
        QTest::addRow("layer_types length") << R"({"model_type": "gpt_oss", "num_hidden_layers": 2, "layer_types": ["full_attention"]})"
                                            << "config.json: layer_types has 1 entries but num_hidden_layers is 2";
        QTest::addRow("softcap not positive") << R"({"model_type": "gemma2", "attn_logit_softcapping": -1})"
                                              << "config.json: attn_logit_softcapping must be above 0 and at most 1e6 (or null), found -1";
        QTest::addRow("query_pre_attn_scalar zero") << R"({"model_type": "gemma2", "query_pre_attn_scalar": 0})"
                                                    << "config.json: query_pre_attn_scalar must be above 0 and at most 1e6 (or null), found 0";
        QTest::addRow("embedding_multiplier huge") << R"({"model_type": "granite", "embedding_multiplier": 1e300})"
                                                   << "config.json: embedding_multiplier must be above 0 and at most 1e6 (or null), found 1e+300";
        QTest::addRow("scale_emb huge") << R"({"model_type": "minicpm3", "scale_emb": 1e300})"
                                        << "config.json: key 'scale_emb' must be above 0 and at most 1e6, found 1e+300";
        QTest::addRow("scale_depth negative") << R"({"model_type": "minicpm3", "scale_depth": -5})"
                                              << "config.json: key 'scale_depth' must be above 0 and at most 1e6, found -5";
        QTest::addRow("per-layer rope not object") << R"({"model_type": "gemma3_text", "rope_parameters": {"sliding_attention": 7}})"
                                                   << "config.json: key 'rope_parameters.sliding_attention' must be an object or null";
        QTest::addRow("per-layer rope key named") << R"({"model_type": "gemma3_text", "rope_parameters": {"full_attention": {"rope_theta": "x"}}})"
                                                  << "config.json: key 'rope_parameters.full_attention.rope_theta' must be a number";
        QTest::addRow("local rope theta") << R"({"model_type": "gemma3_text", "rope_local_base_freq": -5})"
                                          << "config.json: the sliding layers' rope_theta must be above 0, found -5";
        QTest::addRow("n_group does not divide the experts")
            << R"({"model_type": "deepseek_v3", "n_routed_experts": 12, "n_group": 8})"
            << "config.json: n_group (8) must divide n_routed_experts (12) into groups of at least 2 (64 groups at most)";
        QTest::addRow("groups of one expert") << R"({"model_type": "deepseek_v3", "n_routed_experts": 8, "n_group": 8})"
                                              << "config.json: n_group (8) must divide n_routed_experts (8) into groups of at least 2";
        QTest::addRow("topk_group above n_group")
            << R"({"model_type": "deepseek_v3", "n_routed_experts": 16, "n_group": 4, "topk_group": 5})"
            << "config.json: topk_group (5) must be at most n_group (4)";
        QTest::addRow("top-k beyond the chosen groups")
            << R"({"model_type": "deepseek_v3", "n_routed_experts": 16, "n_group": 8, "topk_group": 1, "num_experts_per_tok": 3})"
            << "config.json: topk_group (1) must be at most n_group (8) and leave num_experts_per_tok (3) experts";
        QTest::addRow("routed_scaling_factor zero") << R"({"model_type": "deepseek_v3", "routed_scaling_factor": 0})"
                                                    << "config.json: key 'routed_scaling_factor' must be above 0 and at most 1e6, found 0";
        QTest::addRow("odd rope head dim") << R"({"model_type": "deepseek_v3", "qk_rope_head_dim": 7})"
                                           << "config.json: qk_rope_head_dim must be even (rotary pairs), found 7";
        QTest::addRow("no_rope_layers length") << R"({"model_type": "llama4_text", "num_hidden_layers": 3, "no_rope_layers": [1, 0]})"
                                               << "config.json: no_rope_layers has 2 entries but num_hidden_layers is 3";
        QTest::addRow("floor_scale zero") << R"({"model_type": "llama4_text", "floor_scale": 0})"
                                          << "config.json: floor_scale must be in 0.001..1e12 and attn_scale in -1000..1000, found 0";
        QTest::addRow("attn_scale huge") << R"({"model_type": "llama4_text", "attn_scale": 1e300})"
                                         << "config.json: floor_scale must be in 0.001..1e12 and attn_scale in -1000..1000";
        QTest::addRow("routed_scaling_factor huge") << R"({"model_type": "deepseek_v3", "routed_scaling_factor": 1e300})"
                                                    << "config.json: key 'routed_scaling_factor' must be above 0 and at most 1e6";
        QTest::addRow("chunked layers without a chunk size")
            << R"({"model_type": "llama4_text", "num_hidden_layers": 1, "attention_chunk_size": null, "layer_types": ["chunked_attention"]})"
            << "config.json: layer_types has chunked_attention layers but attention_chunk_size is null";
        QTest::addRow("mlp_only_layers out of range") << R"({"model_type": "qwen3_moe", "num_hidden_layers": 2, "mlp_only_layers": [5]})"
                                                      << "config.json: mlp_only_layers names layer 5 outside 0..1";
        QTest::addRow("mlp_layer_types length") << R"({"model_type": "exaone_moe", "num_hidden_layers": 2, "mlp_layer_types": ["sparse"]})"
                                                << "config.json: mlp_layer_types has 1 entries but num_hidden_layers is 2";
        QTest::addRow("mlp_layer_types value") << R"({"model_type": "exaone_moe", "num_hidden_layers": 1, "mlp_layer_types": ["moe"]})"
                                               << "config.json: mlp_layer_types has 'moe': each entry must be";
        // A null size keeps no value: refused by name, never divided by.
        QTest::addRow("mamba heads null") << R"({"model_type": "bamba", "hidden_size": 64, "mamba_n_heads": null})"
                                          << "config.json: mamba_n_heads and mamba_n_groups must each be at least 1, found 0 and 1";
        QTest::addRow("delta rule key heads null")
            << R"({"model_type": "qwen3_next", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                  "linear_num_key_heads": null})"
            << "config.json: linear_num_value_heads, linear_num_key_heads and linear_value_head_dim must each be at least 1";
        QTest::addRow("layers null") << R"({"model_type": "bamba", "hidden_size": 64, "num_hidden_layers": null})"
                                     << "config.json: num_hidden_layers must be at least 1";
        QTest::addRow("time step limit reversed") << R"({"model_type": "bamba", "hidden_size": 64, "time_step_limit": [0.5, 0]})"
                                                  << "config.json: key 'time_step_limit' must be [low, high] with 0 <= low <= high "
                                                     "(high may be Infinity), found [0.5,0]";
        QTest::addRow("mamba head dim") << R"({"model_type": "bamba", "hidden_size": 64, "mamba_n_heads": 4, "mamba_d_head": 16})"
                                        << "config.json: key 'mamba_d_head' (16) times mamba_n_heads (4) must be the Mamba width (128)";
        QTest::addRow("mamba heads do not divide") << R"({"model_type": "bamba", "hidden_size": 64, "mamba_n_heads": 3})"
                                                   << "config.json: mamba_n_heads (3) and mamba_n_groups (1) must divide the Mamba width (128: mamba_expand · hidden_size, or mamba_d_ssm)";
        QTest::addRow("delta rule heads") << R"({"model_type": "qwen3_next", "linear_num_value_heads": 3, "linear_num_key_heads": 2})"
                                          << "config.json: linear_num_value_heads (3) is not a multiple of linear_num_key_heads (2)";
        QTest::addRow("lfm2_moe without layer_types") << R"({"model_type": "lfm2_moe"})" << "config.json: layer_types is not set";
        QTest::addRow("per-layer top-k differs") << R"({"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "moe_topk": [8, 4]})"
                                                 << "config.json: key 'moe_topk' differs per layer";
        QTest::addRow("minimax-m3 sparse_attention_freq length")
            << R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 2, "sparse_attention_config": {"sparse_attention_freq": [1]}})"
            << "config.json: key 'sparse_attention_config.sparse_attention_freq' has 1 entries but num_hidden_layers is 2";
        QTest::addRow("jamba offset beyond period") << R"({"model_type": "jamba", "attn_layer_period": 2, "attn_layer_offset": 2})"
                                                    << "config.json: attn_layer_offset (2) and expert_layer_offset (1) must be below";
        QTest::addRow("per-layer heads length") << R"({"model_type": "laguna", "num_hidden_layers": 2, "num_attention_heads_per_layer": [8]})"
                                                << "config.json: num_attention_heads_per_layer has 1 entries for 2 layers";
        QTest::addRow("per-layer heads not grouped")
            << R"({"model_type": "laguna", "num_hidden_layers": 2, "num_key_value_heads": 4, "num_attention_heads_per_layer": [8, 6]})"
            << "config.json: num_attention_heads_per_layer[1] (6) must be a positive multiple of num_key_value_heads (4)";
        QTest::addRow("laguna gating") << R"({"model_type": "laguna", "gating": 1})"
                                       << "config.json: key 'gating' must be true, false or a string, found 1";
        QTest::addRow("olmo_hybrid without attention") << R"({"model_type": "olmo_hybrid", "num_hidden_layers": 1,
            "layer_types": ["linear_attention"]})" << "config.json: layer_types must have a linear_attention layer and an attention layer";
        QTest::addRow("kimi_linear layer past the end") << R"({"model_type": "kimi_linear", "num_hidden_layers": 2,
            "linear_attn_config": {"full_attn_layers": [2], "kda_layers": [3]}})"
            << "config.json: linear_attn_config names layer 3 outside 1..2 (its layers count from 1)";
        QTest::addRow("kimi_linear layer left out") << R"({"model_type": "kimi_linear", "num_hidden_layers": 3,
            "linear_attn_config": {"full_attn_layers": [2], "kda_layers": [1]}})"
            << "config.json: linear_attn_config's full_attn_layers and kda_layers leave layer 3 (counted from 1) out";
        QTest::addRow("kimi_linear config not an object") << R"({"model_type": "kimi_linear", "linear_attn_config": [1]})"
                                                          << "config.json: key 'linear_attn_config' must be an object or null";
        QTest::addRow("gemma4 bidirectional") << R"({"model_type": "gemma4_text", "use_bidirectional_attention": "text"})"
                                              << "config.json: key 'use_bidirectional_attention' must be true, false, \"all\" or "
                                                 "\"vision\", found \"text\"";
        QTest::addRow("gemma4 layer past the end") << R"({"model_type": "gemma4_text", "num_hidden_layers": 2,
            "per_layer_config": {"5": {"head_dim": 8}}})" << "config.json: key 'per_layer_config' names layer '5' outside 0..1";
        QTest::addRow("gemma4 size not read") << R"({"model_type": "gemma4_text", "num_hidden_layers": 2,
            "per_layer_config": {"1": {"rope_theta": 1}}})"
            << "config.json: key 'per_layer_config.1.rope_theta' is not a size TP Studio reads per layer";
        QTest::addRow("gemma4 sizes differ in a type") << R"({"model_type": "gemma4_text", "num_hidden_layers": 3,
            "layer_types": ["full_attention", "sliding_attention", "full_attention"], "per_layer_config": {"0": {"head_dim": 32}}})"
            << "config.json: per_layer_config gives layer 2 other sizes than layer 0, both full_attention";
        QTest::addRow("gemma4 every layer shared") << R"({"model_type": "gemma4_text", "num_hidden_layers": 2, "num_kv_shared_layers": 2})"
                                                   << "config.json: num_kv_shared_layers equals num_hidden_layers";
        QTest::addRow("gemma4 shared type never computed") << R"({"model_type": "gemma4_text", "num_hidden_layers": 3,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"], "num_kv_shared_layers": 1})"
            << "config.json: num_kv_shared_layers (1): no earlier layer computes the keys of the shared full_attention layers";
        QTest::addRow("gemma4 experts without sizes") << R"({"model_type": "gemma4_text", "enable_moe_block": true})"
                                                      << "config.json: enable_moe_block needs num_experts and moe_intermediate_size";
        QTest::addRow("gemma4 layer_types length") << R"({"model_type": "gemma4_text", "num_hidden_layers": 3,
            "layer_types": ["full_attention"]})" << "config.json: layer_types has 1 entries but num_hidden_layers is 3";
        QTest::addRow("doge CDMoE") << R"({"model_type": "doge", "is_moe": true})" << "config.json: is_moe: Doge's CDMoE";
        QTest::addRow("nemotron_h pattern letter") << R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M*X"})"
                                                   << "config.json: key 'hybrid_override_pattern' has 'X': each letter must be M, E, * or -";
        QTest::addRow("nemotron_h block type") << R"({"model_type": "nemotron_h", "layers_block_type": ["mamba", "conv"]})"
                                               << "config.json: layers_block_type has 'conv': each entry must be";
        QTest::addRow("nemotron_h no layers") << R"({"model_type": "nemotron_h", "layers_block_type": []})"
                                              << "config.json: layers_block_type must name 1 to";
        QTest::addRow("nemotron_h groups") << R"({"model_type": "nemotron_h", "mamba_num_heads": 3, "mamba_head_dim": 4, "n_groups": 5})"
                                           << "config.json: n_groups (5) must divide the Mamba width (12";
        QTest::addRow("minimax block size") << R"({"model_type": "minimax", "block_size": 0})"
                                            << "config.json: key 'block_size' must be";
        QTest::addRow("axk2 without q_lora_rank") << R"({"model_type": "axk2", "q_lora_rank": null})"
                                                  << "config.json: axk2 needs q_lora_rank: its q_gate_proj reads the low-rank query";
        QTest::addRow("axk2 gated norm rank") << R"({"model_type": "axk2", "gated_norm_rank": 0})"
                                              << "config.json: key 'gated_norm_rank' must be";
        QTest::addRow("dots3 per-layer key") << R"({"model_type": "dots3_note_text", "num_hidden_layers": 2, "per_layer_config": {"1": {"sliding_window": 4}}})"
                                             << "config.json: key 'per_layer_config.1.sliding_window' is not a size TP Studio reads per layer";
        QTest::addRow("dots3 per-layer outside") << R"({"model_type": "dots3_note_text", "num_hidden_layers": 2, "per_layer_config": {"2": {}}})"
                                                 << "config.json: key 'per_layer_config' names layer '2' outside 0..1";
        QTest::addRow("dots3 kv heads") << R"({"model_type": "dots3_note_text", "num_hidden_layers": 2, "per_layer_config": {"1": {"num_key_value_heads": 8}}})"
                                        << "config.json: layer 1's num_key_value_heads (8) must equal its num_attention_heads (128)";
        QTest::addRow("dots3 swa q_lora_rank") << R"({"model_type": "dots3_note_text", "num_hidden_layers": 4, "swa_q_lora_rank": null})"
                                               << "config.json: layer 2 has no q_lora_rank";
        QTest::addRow("dots3 layer types") << R"({"model_type": "dots3_note_text", "num_hidden_layers": 3, "layer_types": ["indexed_attention"]})"
                                           << "config.json: layer_types has 1 entries but num_hidden_layers is 3";
        QTest::addRow("hrm cycles") << R"({"model_type": "hrm_text", "H_cycles": 0})" << "config.json: key 'H_cycles' must be";
        QTest::addRow("hrm runs") << R"({"model_type": "hrm_text", "num_layers_per_stack": 4096, "H_cycles": 8, "L_cycles": 7})"
                                  << "config.json: num_layers_per_stack (4096) × H_cycles (8) × (L_cycles (7) + 1) layer runs is more than";
        QTest::addRow("gemma3n widths") << R"({"model_type": "gemma3n_text", "num_hidden_layers": 3, "intermediate_size": [8, 8]})"
                                        << "config.json: intermediate_size has 2 entries but num_hidden_layers is 3";
        QTest::addRow("gemma3n width entry") << R"({"model_type": "gemma3n_text", "num_hidden_layers": 2, "intermediate_size": [8, -1]})"
                                             << "config.json: key 'intermediate_size' has an entry -1 outside";
        QTest::addRow("gemma3n shared types") << R"({"model_type": "gemma3n_text", "num_hidden_layers": 6, "num_kv_shared_layers": 2})"
                                              << "config.json: num_kv_shared_layers (2): no earlier layer computes the keys of the shared full_attention layers";
        QTest::addRow("gemma3n active stream") << R"({"model_type": "gemma3n_text", "altup_num_inputs": 2, "altup_active_idx": 2})"
                                               << "config.json: key 'altup_active_idx' is implausibly large: 2 (at most 1 is accepted)";
        QTest::addRow("hy_v4 indexer types") << R"({"model_type": "hy_v4", "num_hidden_layers": 2, "indexer_types": ["shared", "full"]})"
                                             << "config.json: key 'indexer_types' entry 0 is 'shared': each is \"full\" or \"shared\", and layer 0 is full";
        QTest::addRow("hy_v4 indexer count") << R"({"model_type": "hy_v4", "num_hidden_layers": 2, "indexer_types": ["full"]})"
                                             << "config.json: key 'indexer_types' has 1 entries but num_hidden_layers is 2";
        QTest::addRow("qwen4_exp indexer") << R"({"model_type": "qwen4_exp_text", "indexer_n_heads": 2, "indexer_head_dim": 16})"
                                           << "config.json: Qwen4-Exp's attention layers need indexer_n_heads";
        QTest::addRow("qwen4_exp indexer kv heads")
            << R"({"model_type": "qwen4_exp_text", "indexer_n_heads": 2, "indexer_kv_heads": 2, "indexer_head_dim": 16, "indexer_budget": 8, "indexer_compress_ratio": 4})"
            << "config.json: key 'indexer_kv_heads' must be 1 (Qwen4-Exp's QSA indexer), found 2";
        QTest::addRow("qwen4_exp ple") << R"({"model_type": "qwen4_exp_text", "ple_layer_ids": [1], "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8, "indexer_compress_ratio": 4})"
                                       << "config.json: key 'ple_layer_ids' names layers with Qwen4-Exp's n-gram per-layer embeddings";
        QTest::addRow("qwen4_exp streams") << R"({"model_type": "qwen4_exp_text", "hc_count": 1})" << "config.json: key 'hc_count' must be";
        QTest::addRow("inkling layer type") << R"({"model_type": "inkling_text", "num_hidden_layers": 2, "layer_types": ["hybrid", "full_attention"]})"
                                            << "config.json: key 'layer_types' has 'full_attention': Inkling's layers are hybrid or hybrid_sliding";
        QTest::addRow("inkling shared experts") << R"({"model_type": "inkling_text", "n_shared_experts": 0})"
                                                << "config.json: key 'n_shared_experts' must be at least 1";
        QTest::addRow("inkling2 unpadded vocab") << R"({"model_type": "inkling2_text", "unpadded_vocab_size": 0})"
                                                 << "config.json: key 'unpadded_vocab_size' must be at least 1";
        QTest::addRow("inkling2 experts") << R"({"model_type": "inkling2_text", "n_routed_experts": 0})"
                                          << "config.json: key 'n_routed_experts' must be at least 1: every Inkling 2 layer has routed experts";
        QTest::addRow("deepseek_v4 experts") << R"({"model_type": "deepseek_v4", "n_routed_experts": 0})"
                                             << "config.json: key 'n_routed_experts' must be at least 1: every DeepSeek-V4 layer has routed experts";
        QTest::addRow("inkling2_loop passes") << R"({"model_type": "inkling2_loop_text", "loop_num_passes": 0})"
                                              << "config.json: key 'loop_num_passes' (0) must be at least 1";
        QTest::addRow("inkling2_loop start") << R"({"model_type": "inkling2_loop_text", "loop_layer_index_start": 0})"
                                             << "config.json: key 'loop_layer_index_start' (0) must be greater than 0";
        QTest::addRow("inkling2_loop block") << R"({"model_type": "inkling2_loop_text", "loop_config": {"core_start": 6, "core_end": 17}})"
                                             << "config.json: key 'loop_layer_index_end' (17) must be a multiple of n_layers_per_attn_res_block (6)";
        QTest::addRow("inkling2_loop end") << R"({"model_type": "inkling2_loop_text", "num_hidden_layers": 12})"
                                           << "config.json: key 'loop_layer_index_end' (18) must be from loop_layer_index_start (6) to num_hidden_layers (12)";
        QTest::addRow("inkling2_loop config") << R"({"model_type": "inkling2_loop_text", "loop_config": 3})"
                                              << "config.json: key 'loop_config' must be an object or null";
        QTest::addRow("inkling2_loop visits") << R"({"model_type": "inkling2_loop_text", "loop_num_passes": 1024, "num_hidden_layers": 1200, "loop_layer_index_end": 1200})"
                                              << "config.json: key 'loop_num_passes' (1024) × 1194 looped layers visits more than";
        QTest::addRow("deepseek_v4 layer type") << R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"]})"
                                                << "config.json: key 'layer_types' has 'full_attention': each is one of sliding_attention, compressed_sparse_attention, heavily_compressed_attention";
        QTest::addRow("deepseek_v4 mlp types") << R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "mlp_layer_types": ["moe"]})"
                                               << "config.json: key 'mlp_layer_types' has 1 entries but num_hidden_layers is 2";
        QTest::addRow("deepseek_v4 ratios") << R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "compress_ratios": [0, 5]})"
                                            << "config.json: key 'compress_ratios' has 5: each is 0, 4 or 128";
        QTest::addRow("deepseek_v4 rates") << R"({"model_type": "deepseek_v4", "compress_rates": {"compressed_sparse_attention": 0}})"
                                           << "config.json: key 'compress_rates.compressed_sparse_attention' must be at least 1";
        QTest::addRow("deepseek_v4 groups") << R"({"model_type": "deepseek_v4", "o_groups": 7})"
                                            << "config.json: key 'o_groups' (7) must divide num_attention_heads × head_dim (32768)";
        QTest::addRow("deepseek_v4 q rank") << R"({"model_type": "deepseek_v4", "q_lora_rank": null})"
                                            << "config.json: key 'q_lora_rank' must be set";
        QTest::addRow("phi4mm vision config") << R"({"model_type": "phi4_multimodal", "vision_config": [1]})"
                                              << "config.json: key 'vision_config' must be an object";
        QTest::addRow("phi4mm audio heads") << R"({"model_type": "phi4_multimodal", "audio_config": {"hidden_size": 100, "num_attention_heads": 16}})"
                                            << "config.json: key 'audio_config.hidden_size' (100) must be a multiple of num_attention_heads (16)";
        QTest::addRow("phi4mm patch") << R"({"model_type": "phi4_multimodal", "vision_config": {"patch_size": 14, "image_size": 7}})"
                                      << "config.json: key 'vision_config.image_size' must be at least 14, found 7";
        QTest::addRow("lfm2 ffn multiplier") << R"({"model_type": "lfm2", "block_auto_adjust_ff_dim": true, "block_ffn_dim_multiplier": -1})"
                                             << "config.json: block_ffn_dim_multiplier must be above 0 and at most 64, found -1";
    }

    // Which layers have a sequence mixer when layer_types is not written: each rule its config class's
    // (Qwen3-Next: full attention every full_attention_interval layers, 4 by default; Lara-mini: its
    // released pattern of five; Bamba:
    // attn_layer_indices; LFM2: full_attn_idxs, all layers without it).
    void mixerLayers_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("mixerLayers");
        QTest::addRow("qwen3_next default interval") << R"({"model_type": "qwen3_next", "num_hidden_layers": 8})" << "0,1,2,4,5,6";
        QTest::addRow("qwen3_next interval 2") << R"({"model_type": "qwen3_next", "num_hidden_layers": 4, "full_attention_interval": 2})"
                                               << "0,2";
        QTest::addRow("qwen3_next layer_types") << R"({"model_type": "qwen3_next", "num_hidden_layers": 2,
            "layer_types": ["full_attention", "linear_attention"]})" << "1";
        QTest::addRow("lara_mini pattern") << R"({"model_type": "lara_mini", "num_hidden_layers": 7})" << "0,2,5";
        QTest::addRow("bamba attn_layer_indices") << R"({"model_type": "bamba", "num_hidden_layers": 3, "attn_layer_indices": [1]})"
                                                  << "0,2";
        QTest::addRow("bamba all mamba") << R"({"model_type": "bamba", "num_hidden_layers": 2, "attn_layer_indices": null})" << "0,1";
        QTest::addRow("lfm2 full_attn_idxs") << R"({"model_type": "lfm2", "num_hidden_layers": 3, "full_attn_idxs": [2]})" << "0,1";
        QTest::addRow("lfm2 all attention") << R"({"model_type": "lfm2", "num_hidden_layers": 2})" << "";
        QTest::addRow("falcon_h1 every layer (beside attention)") << R"({"model_type": "falcon_h1", "num_hidden_layers": 2})" << "0,1";
        QTest::addRow("jamba attention period") << R"({"model_type": "jamba", "num_hidden_layers": 4, "attn_layer_period": 2,
            "attn_layer_offset": 1})" << "0,2";
        QTest::addRow("lfm3 pattern") << R"({"model_type": "lfm3", "num_hidden_layers": 6})" << "0,1,3,5";
        QTest::addRow("minimax alternating") << R"({"model_type": "minimax", "num_hidden_layers": 4})" << "1,3";
        QTest::addRow("olmo_hybrid every fourth attention") << R"({"model_type": "olmo_hybrid", "num_hidden_layers": 6})" << "0,1,2,4,5";
        QTest::addRow("olmo_hybrid last layer attention") << R"({"model_type": "olmo_hybrid", "num_hidden_layers": 2})" << "0";
        QTest::addRow("kimi_linear every fourth from 4") << R"({"model_type": "kimi_linear", "num_hidden_layers": 6})" << "0,1,2,3,5";
        QTest::addRow("kimi_linear checkpoint lists") << R"({"model_type": "kimi_linear", "num_hidden_layers": 3,
            "linear_attn_config": {"full_attn_layers": [1], "kda_layers": [2, 3]}})" << "1,2";
        QTest::addRow("bailing_hybrid groups") << R"({"model_type": "bailing_hybrid", "num_hidden_layers": 6, "layer_group_size": 3})"
                                               << "0,1,3,4";
        QTest::addRow("nemotron_h default") << R"({"model_type": "nemotron_h"})" << "0";
        QTest::addRow("nemotron_h legacy names") << R"({"model_type": "nemotron_h", "num_hidden_layers": 9,
            "layers_block_type": ["mamba", "attention", "mlp", "linear_attention", "moe"]})" << "0,3";
        QTest::addRow("nemotron_h pattern") << R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*E"})" << "0,2";
        QTest::addRow("llama none") << R"({"model_type": "llama", "num_hidden_layers": 2})" << "";
    }
    // HunYuan's config lists moe_topk per layer (one value for all taken) and carries a
    // moe_intermediate_size list its Transformers class does not use; ERNIE 4.5 has experts from
    // moe_layer_start_index to moe_layer_end_index every moe_layer_interval layers.
    void moeVariants()
    {
        auto h = parseConfig(R"({"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "intermediate_size": 96, "num_experts": 4,
                                 "moe_topk": [2, 2], "moe_intermediate_size": [32, 32]})",
                             "config.json", nullptr);
        QVERIFY2(h.ok(), h.ok() ? "" : h.status().message().c_str());
        QCOMPARE(h->expertsPerToken, 2);
        QCOMPARE(h->moeIntermediateSize, 96);
        QCOMPARE(h->sharedIntermediateSize, 96);
        auto e = parseConfig(R"({"model_type": "ernie4_5_moe", "num_hidden_layers": 8, "moe_layer_start_index": 2,
                                 "moe_layer_end_index": 6, "moe_layer_interval": 2, "moe_intermediate_size": 32,
                                 "moe_num_shared_experts": 2})",
                             "config.json", nullptr);
        QVERIFY2(e.ok(), e.ok() ? "" : e.status().message().c_str());
        QStringList moe;
        for (std::int64_t l = 0; l < e->numLayers; ++l)
            if (e->isMoeLayer(l))
                moe << QString::number(l);
        QCOMPARE(moe.join(','), QString("3,5"));
        QCOMPARE(e->sharedIntermediateSize, 64);
        // MiniMax-M3's checkpoint keys: sparse_attention_config and moe_layer_freq (its config class's mapping).
        auto m = parseConfig(R"({"model_type": "minimax_m3_vl_text", "num_hidden_layers": 3, "moe_layer_freq": [0, 1, 1],
                                 "sparse_attention_config": {"sparse_attention_freq": [0, 0, 1], "sparse_num_index_heads": 4,
                                                             "sparse_index_dim": 32}})",
                             "config.json", nullptr);
        QVERIFY2(m.ok(), m.ok() ? "" : m.status().message().c_str());
        QCOMPARE(m->layerTypes, (std::vector<std::string>{"full_attention", "full_attention", "minimax_m3_sparse"}));
        QCOMPARE(m->mlpLayerTypes, (std::vector<std::string>{"dense", "sparse", "sparse"}));
        QCOMPARE(m->indexHeads, 4);
        QCOMPARE(m->indexHeadDim, 32);
        QVERIFY(!m->isMoeLayer(0) && m->isMoeLayer(2));
        // LongCat-Flash: num_layers layers (of two sublayers each; its num_hidden_layers is twice that), zero experts.
        auto l = parseConfig(R"({"model_type": "longcat_flash", "num_layers": 3, "zero_expert_num": 2, "n_routed_experts": 4,
                                 "moe_topk": 2, "num_key_value_heads": 64})",
                             "config.json", nullptr);
        QVERIFY2(l.ok(), l.ok() ? "" : l.status().message().c_str());
        QCOMPARE(l->numLayers, 3);
        QCOMPARE(l->zeroExperts, 2);
        QCOMPARE(l->expertsPerToken, 2);
    }

    // Mamba's width: mamba_expand · hidden_size, or Falcon-H1's mamba_d_ssm; its norm and out_proj bias
    // Falcon-H1's own keys (mamba_rms_norm, projectors_bias).
    void mambaSizes()
    {
        auto b = parseConfig(R"({"model_type": "bamba", "hidden_size": 64, "mamba_expand": 2, "mamba_n_heads": 4, "mamba_proj_bias": true})",
                             "config.json", nullptr);
        QVERIFY2(b.ok(), b.ok() ? "" : b.status().message().c_str());
        QCOMPARE(b->mixer.inner, 128);
        QVERIFY(b->mixer.norm && b->mixer.outBias);
        auto f = parseConfig(R"({"model_type": "falcon_h1", "hidden_size": 64, "mamba_expand": 2, "mamba_n_heads": 4,
                                 "mamba_d_ssm": 96, "mamba_rms_norm": false, "mamba_proj_bias": true, "projectors_bias": false})",
                             "config.json", nullptr);
        QVERIFY2(f.ok(), f.ok() ? "" : f.status().message().c_str());
        QCOMPARE(f->mixer.inner, 96);
        QVERIFY(!f->mixer.norm && f->mixer.projBias && !f->mixer.outBias);
        // Jamba (Mamba 1): dt rank "auto" is ceil(hidden_size / 16); experts every expert_layer_period layers.
        auto j = parseConfig(R"({"model_type": "jamba", "hidden_size": 72, "num_attention_heads": 8, "num_key_value_heads": 8,
                                 "num_hidden_layers": 4, "mamba_dt_rank": "auto",
                                 "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 4})",
                             "config.json", nullptr);
        QVERIFY2(j.ok(), j.ok() ? "" : j.status().message().c_str());
        QCOMPARE(j->mixer.dtRank, 5);
        QVERIFY(!j->isMoeLayer(0) && j->isMoeLayer(1) && j->isMoeLayer(3));
    }

    // Nemotron-H: the layers from layers_block_type (num_hidden_layers its length), Mamba 2's width
    // mamba_num_heads · mamba_head_dim, a legacy mamba_* key above its new name, experts on the moe layers, the
    // shared experts' own width and the latent size; time_step_limit as Transformers writes it (Infinity).
    void nemotronHFields()
    {
        auto n = parseConfig(R"({"model_type": "nemotron_h", "num_hidden_layers": 7, "hidden_size": 64,
                                 "layers_block_type": ["linear_attention", "moe", "full_attention"], "mamba_num_heads": 4,
                                 "mamba_head_dim": 24, "n_groups": 1, "mamba_n_groups": 2, "conv_kernel": 4, "mamba_d_conv": 3,
                                 "use_conv_bias": true, "mamba_conv_bias": false, "use_bias": true, "attention_bias": true,
                                 "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48, "moe_latent_size": 16,
                                 "time_step_limit": [0.0, Infinity]})",
                             "config.json", nullptr);
        QVERIFY2(n.ok(), n.ok() ? "" : n.status().message().c_str());
        QCOMPARE(n->numLayers, 3);
        QCOMPARE(n->mixer.inner, 96);
        QCOMPARE(n->mixer.groups, 2);
        QCOMPARE(n->mixer.kernel, 3);
        QVERIFY(!n->mixer.convBias && n->mixer.projBias && n->mixer.outBias);
        QVERIFY(!n->attentionBias); // NemotronHAttention has none, whatever attention_bias says
        QVERIFY(!n->isMoeLayer(0) && n->isMoeLayer(1) && !n->isMoeLayer(2));
        QCOMPARE(n->sharedIntermediateSize, 48);
        QCOMPARE(n->moeLatentSize, 16);
        QCOMPARE(n->hiddenAct, std::string("relu2"));
        QCOMPARE(n->noRopeLayers, (std::vector<std::int64_t>{0, 0, 0}));
    }

    // OLMo-Hybrid's gated delta rule where its sizes are not written: a key and a value head per query head,
    // keys int(0.75 · hidden_size / key heads) wide, values twice that.
    void olmoHybridSizes()
    {
        auto o = parseConfig(R"({"model_type": "olmo_hybrid", "num_hidden_layers": 4, "hidden_size": 80, "num_attention_heads": 4})",
                             "config.json", nullptr);
        QVERIFY2(o.ok(), o.ok() ? "" : o.status().message().c_str());
        QCOMPARE(o->mixer.heads, 4);
        QCOMPARE(o->mixer.keyHeads, 4);
        QCOMPARE(o->mixer.keyDim, 15);
        QCOMPARE(o->mixer.valueDim, 30);
    }

    // Kimi delta attention's sizes: Kimi Linear's linear_* keys or its checkpoint's linear_attn_config above them;
    // Bailing's the attention's heads and head_dim (written before it becomes qk_rope_head_dim) and
    // short_conv_kernel_size. Dense MLPs below first_k_dense_replace (Kimi Linear: 1 when not written).
    void kimiDeltaSizes()
    {
        auto k = parseConfig(R"({"model_type": "kimi_linear", "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "linear_num_heads": 2,
                                 "linear_head_dim": 8, "linear_attn_config": {"head_dim": 16, "short_conv_kernel_size": 3}})",
                             "config.json", nullptr);
        QVERIFY2(k.ok(), k.ok() ? "" : k.status().message().c_str());
        QCOMPARE(k->mixer.heads, 2);
        QCOMPARE(k->mixer.valueDim, 16);
        QCOMPARE(k->mixer.kernel, 3);
        QCOMPARE(k->mlpLayerTypes, (std::vector<std::string>{"dense", "sparse", "sparse"}));
        auto b = parseConfig(R"({"model_type": "bailing_hybrid", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 24,
                                 "qk_rope_head_dim": 8, "short_conv_kernel_size": 5, "first_k_dense_replace": 0})",
                             "config.json", nullptr);
        QVERIFY2(b.ok(), b.ok() ? "" : b.status().message().c_str());
        QCOMPARE(b->mixer.heads, 4);
        QCOMPARE(b->mixer.valueDim, 24);
        QCOMPARE(b->mixer.kernel, 5);
        QCOMPARE(b->headDim, 8);
        QCOMPARE(b->mlpLayerTypes, (std::vector<std::string>{"sparse", "sparse"}));
    }

    // Dory's released configs list each layer as an attention and an mlp block (DoryConfig halves them).
    void doryLayerPairs()
    {
        auto d = parseConfig(R"({"model_type": "dory", "num_hidden_layers": 4,
                                 "layer_types": ["sliding_attention", "mlp", "full_attention", "mlp"]})",
                             "config.json", nullptr);
        QVERIFY2(d.ok(), d.ok() ? "" : d.status().message().c_str());
        QCOMPARE(d->numLayers, 2);
        QCOMPARE(d->layerTypes, (std::vector<std::string>{"sliding_attention", "full_attention"}));
    }

    // Gemma 4: the last layer full attention; the full layers' global_head_dim and, with attention_k_eq_v,
    // num_global_key_value_heads where per_layer_config is not written; the last num_kv_shared_layers reuse keys
    // and values, their MLPs twice as wide with use_double_wide_mlp; "vision" bidirectional attention leaves text causal.
    void gemma4Fields()
    {
        auto g = parseConfig(R"({"model_type": "gemma4_text", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
                                 "head_dim": 16, "global_head_dim": 64, "attention_k_eq_v": true, "num_global_key_value_heads": 2,
                                 "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"],
                                 "num_kv_shared_layers": 2, "use_double_wide_mlp": true, "intermediate_size": 32,
                                 "use_bidirectional_attention": "vision", "enable_moe_block": true, "num_experts": 4, "top_k_experts": 2,
                                 "moe_intermediate_size": 8})",
                             "config.json", nullptr);
        QVERIFY2(g.ok(), g.ok() ? "" : g.status().message().c_str());
        QCOMPARE(g->layerTypes.back(), std::string("full_attention"));
        QCOMPARE(g->headDimAt(0), 16);
        QCOMPARE(g->headDimAt(1), 64);
        QCOMPARE(g->kvHeadsAt(1), 2);
        QCOMPARE(g->kvHeadsAt(2), 4);
        QVERIFY(g->valuesAreKeys(1) && !g->valuesAreKeys(0));
        QVERIFY(!g->kvSharedAt(1) && g->kvSharedAt(2) && g->kvSharedAt(3));
        QCOMPARE(g->denseIntermediateSizeAt(1), 32);
        QCOMPARE(g->denseIntermediateSizeAt(2), 64);
        QVERIFY(!g->bidirectionalAttention);
        QCOMPARE(g->expertsPerToken, 2);
        QVERIFY(g->isMoeLayer(0));
        auto off = parseConfig(R"({"model_type": "gemma4_text", "num_experts": 4, "moe_intermediate_size": 8})", "config.json", nullptr);
        QVERIFY2(off.ok(), off.ok() ? "" : off.status().message().c_str());
        QVERIFY(!off->isMoe()); // enable_moe_block false
        QCOMPARE(off->perLayerInputSize, 256); // the class default
    }

    void mixerLayers()
    {
        QFETCH(QString, json);
        QFETCH(QString, mixerLayers);
        auto r = parseConfig(json.toStdString(), "config.json", nullptr);
        QVERIFY2(r.ok(), r.ok() ? "" : r.status().message().c_str());
        QStringList got;
        for (std::int64_t l = 0; l < r->numLayers; ++l)
            if (r->isMixerLayer(l))
                got << QString::number(l);
        QCOMPARE(got.join(','), mixerLayers);
    }
    void badInput()
    {
        QFETCH(QString, json);
        QFETCH(QString, expected);
        auto r = parseConfig(json.toStdString(), "config.json", nullptr);
        QVERIFY(!r.ok());
        const QString msg = QString::fromStdString(r.status().message());
        QVERIFY2(msg.startsWith(expected), qPrintable(msg));
    }

    void missingFile()
    {
        auto r = loadConfigFile("/nonexistent/dir/config.json", nullptr);
        QVERIFY(!r.ok());
        QCOMPARE(r.status().code(), StatusCode::NotFound);
        QVERIFY(r.status().message().find("/nonexistent/dir/config.json") != std::string::npos);
    }
};

QTEST_GUILESS_MAIN(TestConfig)
#include "tst_config.moc"
