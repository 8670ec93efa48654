// weights.cpp — per-rank parameter slices from safetensors or from a seed.
#include "tp/runtime/weights.h"

#include "tp/model/loader.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <unistd.h>

namespace tp {

namespace {

// Per dimension, the intervals kept: the split dim's slices, every other dim whole.
std::vector<std::vector<Interval>> regionOf(const ParamShard& s, const std::vector<std::int64_t>& shape, int rank)
{
    std::vector<std::vector<Interval>> region;
    for (std::size_t d = 0; d < shape.size(); ++d)
        region.push_back(static_cast<int>(d) == s.dim ? s.slices[static_cast<std::size_t>(rank)]
                                                       : std::vector<Interval>{{0, shape[d]}});
    return region;
}

// Calls fn(globalElementOffset, count) for each contiguous run of the region, in row-major order.
void forEachRun(const std::vector<std::int64_t>& shape, const std::vector<std::vector<Interval>>& region,
                const std::function<void(std::int64_t, std::int64_t)>& fn)
{
    if (shape.empty()) {
        fn(0, 1);
        return;
    }
    const std::size_t last = shape.size() - 1;
    std::function<void(std::size_t, std::int64_t)> walk = [&](std::size_t d, std::int64_t prefix) {
        for (const auto& iv : region[d]) {
            if (d == last) {
                if (iv.size > 0)
                    fn(prefix * shape[d] + iv.offset, iv.size);
                continue;
            }
            for (std::int64_t i = iv.offset; i < iv.offset + iv.size; ++i)
                walk(d + 1, prefix * shape[d] + i);
        }
    };
    walk(0, 0);
}

bool readable(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

class File
{
public:
    explicit File(const std::string& path)
        : m_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC))
    {
    }
    ~File()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    bool ok() const { return m_fd >= 0; }
    bool read(void* buf, std::size_t n, std::uint64_t off) const
    {
        auto* p = static_cast<char*>(buf);
        while (n > 0) {
            const ssize_t got = ::pread(m_fd, p, n, static_cast<off_t>(off));
            if (got <= 0)
                return false;
            p += got;
            n -= static_cast<std::size_t>(got);
            off += static_cast<std::uint64_t>(got);
        }
        return true;
    }
    // 8 + header length: where the data block starts.
    std::optional<std::uint64_t> dataOffset() const
    {
        unsigned char len[8];
        if (!read(len, 8, 0))
            return std::nullopt;
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i)
            n = n << 8 | len[i];
        return 8 + n;
    }

private:
    int m_fd;
};

// Reads `region` of tensor `t` into out[at…], converting to fp32.
Status readRegion(const TensorInfo& t, const std::vector<std::vector<Interval>>& region, float* out, std::size_t& at)
{
    File f(t.file);
    if (!f.ok())
        return notFound(fmt::format("{}: cannot open (tensor '{}')", t.file, t.name));
    const auto base = f.dataOffset();
    if (!base)
        return Status(StatusCode::DataLoss, fmt::format("{}: cannot read the header length", t.file));
    const std::int64_t eb = dtypeBytes(t.dtype, 1);
    std::vector<unsigned char> buf;
    Status st;
    forEachRun(t.shape, region, [&](std::int64_t off, std::int64_t n) {
        if (!st.ok())
            return;
        buf.resize(static_cast<std::size_t>(n * eb));
        const std::uint64_t pos = *base + t.begin + static_cast<std::uint64_t>(off * eb);
        if (pos + buf.size() > *base + t.end || !f.read(buf.data(), buf.size(), pos)) {
            st = Status(StatusCode::DataLoss, fmt::format("{}: tensor '{}' is truncated (reading {} bytes at {})",
                                                          t.file, t.name, buf.size(), pos));
            return;
        }
        toFloat(buf.data(), t.dtype, out + at, n);
        at += static_cast<std::size_t>(n);
    });
    return st;
}

const TensorInfo* findTensor(const Checkpoint& ck, const std::string& name)
{
    auto it = std::lower_bound(ck.tensors.begin(), ck.tensors.end(), name,
                               [](const TensorInfo& t, const std::string& n) { return t.name < n; });
    return it != ck.tensors.end() && it->name == name ? &*it : nullptr;
}

std::int64_t numel(const std::vector<std::int64_t>& shape)
{
    std::int64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

} // namespace

Status checkWeights(const ModelSpec& spec, const WeightSource& source)
{
    if (!source.checkpoint)
        return {};
    // A quantized checkpoint (gpt-oss's MXFP4 experts, DeepSeek's fp8 blocks): its weights are
    // blocks and scales the engine does not dequantize.
    if (spec.config.quantization)
        return Status(StatusCode::Unimplemented,
                      fmt::format("the checkpoint is quantized ('{}', quantization_config.quant_method): the engine reads "
                                  "F32, BF16 and F16 weights; dequantize it first (e.g. Transformers' from_pretrained with "
                                  "Mxfp4Config(dequantize=True), then save_pretrained), or run with seeded weights",
                                  *spec.config.quantization));
    if (hasErrors(spec.diagnostics))
        for (const auto& d : spec.diagnostics)
            if (d.severity == Severity::Error)
                return invalidArgument(fmt::format("{}: {}", d.where, d.message));
    for (const auto& m : spec.modules)
        for (const auto& p : m.params) {
            if (!p.tiedTo.empty() && p.checkpointTensors.empty())
                continue;
            if (!p.inCheckpoint)
                return notFound(fmt::format("parameter '{}' has no tensor in the checkpoint", m.paramPath(p)));
            for (const auto& name : p.checkpointTensors) {
                const TensorInfo* t = findTensor(*source.checkpoint, name);
                if (!t)
                    return notFound(fmt::format("tensor '{}' of '{}' is not in the checkpoint", name, m.paramPath(p)));
                if (!readable(t->dtype))
                    return Status(StatusCode::Unimplemented,
                                  fmt::format("tensor '{}' is {}: the engine reads F32, BF16 and F16", name,
                                              dtypeName(t->dtype)));
            }
        }
    return {};
}

UniformFill randomParamShard(const ModelSpec& spec, const ShardedGraph& g, std::size_t index, int rank, std::uint64_t seed)
{
    const ParamShard& s = g.params[index];
    const ModuleSpec& m = spec.modules[static_cast<std::size_t>(s.module)];
    const ParamSpec& p = m.params[static_cast<std::size_t>(s.param)];
    const bool norm = m.kind == ModuleKind::RmsNorm || p.shape.size() == 1;
    const double fanIn = p.shape.size() >= 2 ? static_cast<double>(p.shape.back()) : 1.0;
    UniformFill f;
    // A tied parameter is the same tensor as its owner: same key.
    f.key = std::hash<std::string>{}(p.tiedTo.empty() ? s.path : p.tiedTo) ^ seed;
    f.base = norm && p.name == "weight" ? 1.0f : 0.0f;
    f.scale = static_cast<float>(norm ? 0.1 : 1.0 / std::sqrt(fanIn));
    std::int64_t at = 0;
    forEachRun(p.shape, regionOf(s, p.shape, rank), [&](std::int64_t global, std::int64_t n) {
        if (!f.runs.empty() && f.runs.back().global + f.runs.back().count == global)
            f.runs.back().count += n; // consecutive in both: one run
        else
            f.runs.push_back({at, global, n});
        at += n;
    });
    return f;
}

Status readParamShard(const ModelSpec& spec, const ShardedGraph& g, std::size_t index, int rank, const Checkpoint& ck,
                      float* out)
{
    const ParamShard& s = g.params[index];
    const ModuleSpec& m = spec.modules[static_cast<std::size_t>(s.module)];
    const ParamSpec& p = m.params[static_cast<std::size_t>(s.param)];
    const auto region = regionOf(s, p.shape, rank);
    const std::size_t expected = static_cast<std::size_t>(numel(s.shapes[static_cast<std::size_t>(rank)]));
    std::size_t at = 0;
    const ParamSpec* src = &p;
    if (!p.tiedTo.empty() && p.checkpointTensors.empty()) // the tied copy lives under the owner's name
        for (const auto& mm : spec.modules)
            for (const auto& pp : mm.params)
                if (mm.paramPath(pp) == p.tiedTo)
                    src = &pp;
    if (src->checkpointTensors.size() == 1) {
        const TensorInfo* t = findTensor(ck, src->checkpointTensors[0]);
        if (!t)
            return notFound(fmt::format("tensor '{}' of '{}' is not in the checkpoint", src->checkpointTensors[0], s.path));
        if (t->shape != p.shape)
            return invalidArgument(fmt::format("tensor '{}' has shape of {} elements, '{}' expects another shape",
                                               t->name, t->numel(), s.path));
        return readRegion(*t, region, out, at);
    }
    // A fused expert parameter from per-expert tensors: gate_up [E, 2I, H] from gate [I, H] and up
    // [I, H] pieces, up [E, I, H] (ungated experts) from [I, H] pieces, down [E, H, I] from [H, I] pieces.
    if (p.shape.size() != 3 || src->checkpointTensors.empty())
        return notFound(fmt::format("parameter '{}' has no tensor in the checkpoint", s.path));
    const bool gateUp = p.name == "gate_up_proj";
    std::vector<const TensorInfo*> pieces(static_cast<std::size_t>(p.shape[0] * 2), nullptr);
    for (const auto& name : src->checkpointTensors) {
        auto piece = expertTensorOf(name, spec.config);
        const TensorInfo* t = findTensor(ck, name);
        if (!piece || !t || piece->expert >= p.shape[0])
            return notFound(fmt::format("tensor '{}' of '{}' is not in the checkpoint", name, s.path));
        pieces[static_cast<std::size_t>(piece->expert * 2 + (gateUp && piece->part == 1 ? 1 : 0))] = t;
    }
    const std::int64_t half = p.shape[1] / 2;
    for (const auto& e : region[0])
        for (std::int64_t ex = e.offset; ex < e.offset + e.size; ++ex) {
            if (!gateUp) {
                const TensorInfo* t = pieces[static_cast<std::size_t>(ex * 2)];
                if (!t)
                    return notFound(fmt::format("'{}': no tensor for expert {}", s.path, ex));
                TP_RETURN_IF_ERROR(readRegion(*t, {region[1], region[2]}, out, at));
                continue;
            }
            for (const auto& rows : region[1]) {
                // A run of gate_up rows may cross from the gate half into the up half.
                for (std::int64_t r0 = rows.offset; r0 < rows.offset + rows.size;) {
                    const int part = r0 < half ? 0 : 1;
                    const std::int64_t end = std::min(rows.offset + rows.size, part == 0 ? half : 2 * half);
                    const TensorInfo* t = pieces[static_cast<std::size_t>(ex * 2 + part)];
                    if (!t)
                        return notFound(fmt::format("'{}': no {} tensor for expert {}", s.path, part ? "up" : "gate", ex));
                    TP_RETURN_IF_ERROR(readRegion(*t, {{{r0 - part * half, end - r0}}, region[2]}, out, at));
                    r0 = end;
                }
            }
        }
    if (at != expected)
        return Status(StatusCode::Internal, fmt::format("'{}': read {} of {} elements", s.path, at, expected));
    return {};
}

} // namespace tp
