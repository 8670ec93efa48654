// tst_safetensors — header reading, sharded indexes, and every malformed-file case.
#include "tp/model/safetensors.h"

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace tp;

namespace {
// Writes 8-byte length + header + `dataBytes` zero bytes; `lengthOverride` fakes the length field.
std::string writeRaw(const QTemporaryDir& dir, const char* name, const std::string& header, std::size_t dataBytes,
                     std::int64_t lengthOverride = -1)
{
    const std::string path = dir.filePath(name).toStdString();
    std::ofstream out(path, std::ios::binary);
    std::uint64_t n = lengthOverride >= 0 ? std::uint64_t(lengthOverride) : header.size();
    for (int i = 0; i < 8; ++i)
        out.put(char((n >> (8 * i)) & 0xff));
    out << header << std::string(dataBytes, '\0');
    return path;
}
} // namespace

class TestSafetensors : public QObject
{
    Q_OBJECT
private slots:
    void roundTrip()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("m.safetensors").toStdString();
        std::vector<TensorToWrite> ts = {{"a.weight", DType::BF16, {4, 3}, std::string(24, 'x')},
                                         {"b", DType::F32, {2}, std::string(8, 'y')},
                                         {"empty", DType::F16, {0, 5}, {}}};
        QVERIFY(writeSafetensors(path, ts, {{"format", "pt"}}).ok());
        auto h = readSafetensorsHeader(path);
        QVERIFY2(h.ok(), h.status().message().c_str());
        QCOMPARE(h->tensors.size(), std::size_t(3));
        QCOMPARE(h->metadata.at("format"), std::string("pt"));
        QCOMPARE(h->dataOffset % 8, std::uint64_t(0)); // header padded as the reference writer does
        const TensorInfo& a = *std::find_if(h->tensors.begin(), h->tensors.end(), [](auto& t) { return t.name == "a.weight"; });
        QCOMPARE(a.dtype, DType::BF16);
        QCOMPARE(a.shape, (std::vector<std::int64_t>{4, 3}));
        QCOMPARE(a.bytes(), std::uint64_t(24));
    }

    void subByteDtypes()
    {
        // F4 packs two per byte: [3, 5] = 15 elements → 8 bytes.
        const std::string hdr = R"({"w": {"dtype": "F4", "shape": [3, 5], "data_offsets": [0, 8]}})";
        auto h = parseSafetensorsHeader(hdr, 8 + hdr.size() + 8, "f4.safetensors");
        QVERIFY2(h.ok(), h.status().message().c_str());
    }

    void malformed_data()
    {
        QTest::addColumn<QString>("header");
        QTest::addColumn<int>("dataBytes");
        QTest::addColumn<qint64>("lengthOverride");
        QTest::addColumn<QString>("expected");
        const QString ok1 = R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
        QTest::addRow("header length past end") << ok1 << 16 << 5000ll << "truncated: header length 5000 runs past the end of the file";
        QTest::addRow("header over 100 MB") << ok1 << 16 << 200000000ll << "header length 200000000 exceeds the 100000000 byte limit";
        QTest::addRow("data truncated") << ok1 << 10 << -1ll << "truncated: tensor data ends at byte";
        QTest::addRow("invalid JSON") << R"({"w": {"dtype": "F32", )" << 0 << -1ll << "the header is not valid JSON";
        QTest::addRow("not an object") << "[]" << 0 << -1ll << "the header must be a JSON object";
        QTest::addRow("unknown dtype") << R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 2]}})" << 2 << -1ll
                                       << "tensor 'w': unknown dtype 'F12'";
        QTest::addRow("shape/bytes disagree") << R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 16]}})" << 16 << -1ll
                                              << "tensor 'w': shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 16] span 16";
        QTest::addRow("offsets reversed") << R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}})" << 4 << -1ll
                                          << "tensor 'w': data_offsets [4, 0] end before they begin";
        QTest::addRow("overlap") << R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})"
                                 << 6 << -1ll << "tensors 'a' and 'b' overlap";
        QTest::addRow("hole") << R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})"
                              << 6 << -1ll << "tensor 'b' starts at byte 4 but the previous tensor ends at 2";
        QTest::addRow("offsets outside data") << R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}})" << 4 << -1ll
                                              << "truncated: tensor data ends at byte";
        QTest::addRow("trailing bytes") << R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})" << 5 << -1ll
                                        << "3 bytes after the last tensor's data are not described by the header";
        QTest::addRow("negative dim") << R"({"w": {"dtype": "U8", "shape": [-2], "data_offsets": [0, 2]}})" << 2 << -1ll
                                      << "tensor 'w': shape entry -2 is not a non-negative integer";
        QTest::addRow("missing offsets") << R"({"w": {"dtype": "U8", "shape": [2]}})" << 2 << -1ll
                                         << "tensor 'w': 'data_offsets' must be a list of two non-negative integers";
        QTest::addRow("bad metadata") << R"({"__metadata__": {"format": 3}})" << 0 << -1ll
                                      << "'__metadata__' key \"format\" must map to a string";
        QTest::addRow("overflowing shape") << R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})"
                                           << 4 << -1ll << "tensor 'w': shape [4294967296,4294967296] is too large";
    }
    void malformed()
    {
        QFETCH(QString, header);
        QFETCH(int, dataBytes);
        QFETCH(qint64, lengthOverride);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        const std::string path = writeRaw(dir, "bad.safetensors", header.toStdString(), std::size_t(dataBytes), lengthOverride);
        auto h = readSafetensorsHeader(path);
        QVERIFY(!h.ok());
        const QString msg = QString::fromStdString(h.status().message());
        QVERIFY2(msg.startsWith(QString::fromStdString(path) + ": "), qPrintable(msg)); // names the file
        QVERIFY2(msg.contains(expected), qPrintable(msg));
    }

    void tooShort()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath("short.safetensors").toStdString();
        std::ofstream(path) << "abc";
        auto h = readSafetensorsHeader(path);
        QVERIFY(!h.ok());
        QCOMPARE(h.status().code(), StatusCode::DataLoss);
        QVERIFY(h.status().message().find("too short for the 8-byte header length") != std::string::npos);
    }

    void shardedIndex()
    {
        QTemporaryDir dir;
        QVERIFY(writeSafetensors(dir.filePath("a.safetensors").toStdString(), {{"x", DType::F32, {2}, std::string(8, 0)}}).ok());
        QVERIFY(writeSafetensors(dir.filePath("b.safetensors").toStdString(),
                                 {{"y", DType::F32, {1}, std::string(4, 0)}, {"z", DType::F32, {1}, std::string(4, 0)}})
                    .ok());
        const std::string index = dir.filePath("model.safetensors.index.json").toStdString();
        std::ofstream(index) << R"({"metadata": {"total_size": 16}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})";
        auto ck = readCheckpoint(index);
        QVERIFY2(ck.ok(), ck.status().message().c_str());
        QCOMPARE(ck->tensors.size(), std::size_t(3));
        QCOMPARE(ck->files.size(), std::size_t(2));
        // z is in a shard but not in the index: Transformers would not load it.
        QCOMPARE(ck->diagnostics.size(), std::size_t(1));
        QVERIFY(ck->diagnostics[0].message.find("'z'") != std::string::npos);
    }

    void badIndex_data()
    {
        QTest::addColumn<QString>("index");
        QTest::addColumn<QString>("expected");
        QTest::addRow("no weight_map") << R"({"metadata": {}})" << "key 'weight_map' is missing or not an object";
        QTest::addRow("tensor not in shard") << R"({"weight_map": {"x": "a.safetensors", "q": "a.safetensors"}})"
                                             << "key 'weight_map.q' names shard a.safetensors, which has no such tensor";
        QTest::addRow("wrong shard") << R"({"weight_map": {"x": "c.safetensors"}})" << "key 'weight_map.x' names shard c.safetensors";
        QTest::addRow("path traversal") << R"({"weight_map": {"x": "../a.safetensors"}})" << "not a file beside the index";
        QTest::addRow("missing shard") << R"({"weight_map": {"x": "nope.safetensors"}})" << "nope.safetensors: cannot open";
        QTest::addRow("not a string") << R"({"weight_map": {"x": 3}})" << "key 'weight_map.x' must name a file";
    }
    void badIndex()
    {
        QFETCH(QString, index);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        QVERIFY(writeSafetensors(dir.filePath("a.safetensors").toStdString(), {{"x", DType::F32, {2}, std::string(8, 0)}}).ok());
        QVERIFY(writeSafetensors(dir.filePath("c.safetensors").toStdString(), {{"w", DType::F32, {2}, std::string(8, 0)}}).ok());
        const std::string path = dir.filePath("model.safetensors.index.json").toStdString();
        std::ofstream(path) << index.toStdString();
        auto ck = readCheckpoint(path);
        QVERIFY(!ck.ok());
        const QString msg = QString::fromStdString(ck.status().message());
        QVERIFY2(msg.contains(expected), qPrintable(msg));
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "tst_safetensors.moc"
