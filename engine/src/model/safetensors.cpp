// safetensors.cpp — header-only reading of safetensors files and sharded indexes.
#include "tp/model/safetensors.h"

#include "tp/core/json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace tp {

std::int64_t TensorInfo::numel() const
{
    std::int64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

namespace {

// RAII file descriptor.
class Fd
{
public:
    explicit Fd(int fd)
        : m_fd(fd)
    {
    }
    ~Fd()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return m_fd; }

private:
    int m_fd;
};

Status readExactly(int fd, char* buf, std::uint64_t n, std::uint64_t offset, const std::string& path)
{
    std::uint64_t done = 0;
    while (done < n) {
        ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return dataLoss(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
        }
        if (r == 0)
            return dataLoss(fmt::format("{}: unexpected end of file at byte {}", path, offset + done));
        done += static_cast<std::uint64_t>(r);
    }
    return {};
}

Result<TensorInfo> parseTensorEntry(const std::string& name, const nlohmann::json& e, const std::string& file)
{
    auto bad = [&](const std::string& m) {
        return invalidArgument(fmt::format("{}: tensor '{}': {}", file, name, m));
    };
    if (!e.is_object())
        return bad("entry must be an object with dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    t.file = file;

    auto dt = e.find("dtype");
    if (dt == e.end() || !dt->is_string())
        return bad("missing or non-string 'dtype'");
    auto d = dtypeFromSafetensors(dt->get_ref<const std::string&>());
    if (!d)
        return bad(fmt::format("unknown dtype '{}'", dt->get_ref<const std::string&>()));
    t.dtype = *d;

    auto sh = e.find("shape");
    if (sh == e.end() || !sh->is_array())
        return bad("missing or non-list 'shape'");
    if (sh->size() > 16)
        return bad(fmt::format("shape has {} dimensions (at most 16 supported)", sh->size()));
    std::uint64_t numel = 1;
    for (const auto& dim : *sh) {
        if (!dim.is_number_unsigned())
            return bad(fmt::format("shape entry {} is not a non-negative integer", jsonExcerpt(dim)));
        const std::uint64_t v = dim.get<std::uint64_t>();
        if (v > (1ull << 48) || (v != 0 && numel > (1ull << 56) / v))
            return bad(fmt::format("shape {} is too large", sh->dump()));
        numel *= v;
        t.shape.push_back(static_cast<std::int64_t>(v));
    }

    auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned()
        || !(*off)[1].is_number_unsigned())
        return bad("'data_offsets' must be a list of two non-negative integers");
    t.begin = (*off)[0].get<std::uint64_t>();
    t.end = (*off)[1].get<std::uint64_t>();
    if (t.end < t.begin)
        return bad(fmt::format("data_offsets [{}, {}] end before they begin", t.begin, t.end));
    const auto need = static_cast<std::uint64_t>(dtypeBytes(t.dtype, static_cast<std::int64_t>(numel)));
    if (t.end - t.begin != need)
        return bad(fmt::format("shape [{}] of {} needs {} bytes but data_offsets [{}, {}] span {}",
                               fmt::join(t.shape, ", "), dtypeName(t.dtype), need, t.begin, t.end,
                               t.end - t.begin));
    return t;
}

} // namespace

Result<SafetensorsHeader> parseSafetensorsHeader(std::string_view headerJson, std::uint64_t fileBytes,
                                                 const std::string& file)
{
    SafetensorsHeader h;
    h.file = file;
    h.headerBytes = headerJson.size();
    h.dataOffset = 8 + headerJson.size();
    h.fileBytes = fileBytes;
    if (h.dataOffset > fileBytes)
        return dataLoss(fmt::format("{}: header of {} bytes runs past the end of the file ({} bytes)", file,
                                    headerJson.size(), fileBytes));

    TP_ASSIGN_OR_RETURN(nlohmann::json j, parseJson(headerJson, file, "the header"));
    if (!j.is_object())
        return invalidArgument(fmt::format("{}: the header must be a JSON object", file));

    h.tensors.reserve(j.size());
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object())
                return invalidArgument(fmt::format("{}: '__metadata__' must be an object of strings", file));
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    return invalidArgument(fmt::format("{}: '__metadata__' key {} must map to a string", file,
                                                       jsonExcerpt(nlohmann::json(m.key()))));
                h.metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        if (const std::string why = badName(it.key()); !why.empty())
            return invalidArgument(fmt::format("{}: tensor name {}", file, why));
        TP_ASSIGN_OR_RETURN(TensorInfo t, parseTensorEntry(it.key(), *it, file));
        h.tensors.push_back(std::move(t));
    }

    // The data block must be covered exactly, in order, without overlaps or holes (as the reference
    // reader requires), and must fit in the file.
    std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t expect = 0;
    const TensorInfo* prev = nullptr;
    for (const auto& t : h.tensors) {
        if (t.begin < expect)
            return invalidArgument(fmt::format("{}: tensors '{}' and '{}' overlap (bytes {}..{} and {}..{})", file,
                                               prev->name, t.name, prev->begin, prev->end, t.begin, t.end));
        if (t.begin > expect)
            return invalidArgument(fmt::format("{}: tensor '{}' starts at byte {} but the previous tensor ends at {}"
                                               " (a hole in the data block)",
                                               file, t.name, t.begin, expect));
        expect = t.end;
        prev = &t;
    }
    if (h.dataOffset + expect > fileBytes)
        return dataLoss(fmt::format("{}: truncated: tensor data ends at byte {} but the file has {} bytes{}", file,
                                    h.dataOffset + expect, fileBytes,
                                    prev ? fmt::format(" (last tensor '{}')", prev->name) : std::string()));
    if (h.dataOffset + expect < fileBytes)
        return invalidArgument(fmt::format("{}: {} bytes after the last tensor's data are not described by the header",
                                           file, fileBytes - h.dataOffset - expect));
    return h;
}

Result<SafetensorsHeader> readSafetensorsHeader(const std::string& path)
{
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0)
        return notFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0)
        return dataLoss(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode))
        return invalidArgument(fmt::format("{}: is {}, not a safetensors file", path,
                                           S_ISDIR(st.st_mode) ? "a directory" : "not a regular file (a FIFO, socket or device)"));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < 8)
        return dataLoss(fmt::format("{}: truncated: {} bytes, too short for the 8-byte header length", path, size));
    unsigned char lenBytes[8];
    TP_RETURN_IF_ERROR(readExactly(fd.get(), reinterpret_cast<char*>(lenBytes), 8, 0, path));
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | lenBytes[i];
    if (n > kMaxSafetensorsHeaderBytes)
        return invalidArgument(fmt::format("{}: header length {} exceeds the {} byte limit (corrupt or not a "
                                           "safetensors file)",
                                           path, n, kMaxSafetensorsHeaderBytes));
    if (8 + n > size)
        return dataLoss(fmt::format("{}: truncated: header length {} runs past the end of the file ({} bytes)", path,
                                    n, size));
    std::string header(n, '\0');
    TP_RETURN_IF_ERROR(readExactly(fd.get(), header.data(), n, 8, path));
    return parseSafetensorsHeader(header, size, path);
}

Result<SafetensorsIndex> parseSafetensorsIndex(std::string_view json, const std::string& file)
{
    TP_ASSIGN_OR_RETURN(nlohmann::json j, parseJson(json, file, "the index"));
    if (!j.is_object())
        return invalidArgument(fmt::format("{}: the index must be a JSON object", file));
    SafetensorsIndex idx;
    idx.file = file;
    if (auto m = j.find("metadata"); m != j.end() && m->is_object())
        for (auto it = m->begin(); it != m->end(); ++it)
            idx.metadata[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object())
        return invalidArgument(fmt::format("{}: key 'weight_map' is missing or not an object", file));
    idx.weightMap.reserve(wm->size());
    for (auto it = wm->begin(); it != wm->end(); ++it) {
        if (!it->is_string())
            return invalidArgument(fmt::format("{}: key 'weight_map.{}' must name a file", file, it.key()));
        const auto& shard = it->get_ref<const std::string&>();
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
            return invalidArgument(
                fmt::format("{}: key 'weight_map.{}' names '{}', not a file beside the index", file, it.key(), shard));
        idx.weightMap.emplace_back(it.key(), shard);
        idx.shardFiles.push_back(shard);
    }
    std::sort(idx.shardFiles.begin(), idx.shardFiles.end());
    idx.shardFiles.erase(std::unique(idx.shardFiles.begin(), idx.shardFiles.end()), idx.shardFiles.end());
    return idx; // nlohmann objects iterate in key order: weightMap is sorted
}

namespace {
Result<std::string> readSmallFile(const std::string& path, std::uint64_t limit)
{
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec)
        return notFound(fmt::format("{}: cannot open: {}", path, ec.message()));
    if (size > limit)
        return invalidArgument(fmt::format("{}: {} bytes is over the {} byte limit for this file", path, size, limit));
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return notFound(fmt::format("{}: cannot open", path));
    std::string s(size, '\0');
    in.read(s.data(), static_cast<std::streamsize>(size));
    if (static_cast<std::uint64_t>(in.gcount()) != size)
        return dataLoss(fmt::format("{}: short read", path));
    return s;
}
} // namespace

Result<SafetensorsIndex> readSafetensorsIndex(const std::string& path)
{
    TP_ASSIGN_OR_RETURN(std::string text, readSmallFile(path, 256ull << 20));
    return parseSafetensorsIndex(text, path);
}

Result<Checkpoint> readCheckpoint(const std::string& pathOrIndex)
{
    Checkpoint ck;
    if (!pathOrIndex.ends_with(".index.json")) {
        TP_ASSIGN_OR_RETURN(SafetensorsHeader h, readSafetensorsHeader(pathOrIndex));
        ck.files.push_back(pathOrIndex);
        ck.totalBytes = h.fileBytes;
        ck.tensors = std::move(h.tensors);
        std::sort(ck.tensors.begin(), ck.tensors.end(),
                  [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
        return ck;
    }

    TP_ASSIGN_OR_RETURN(SafetensorsIndex idx, readSafetensorsIndex(pathOrIndex));
    const fs::path dir = fs::path(pathOrIndex).parent_path();
    const std::size_t n = idx.shardFiles.size();
    std::vector<Result<SafetensorsHeader>> headers(n, Result<SafetensorsHeader>(internalError("not read")));

    // Shards are independent: read them on all cores.
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t i = next++; i < n; i = next++)
            headers[i] = readSafetensorsHeader((dir / idx.shardFiles[i]).string());
    };
    const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads && t < n; ++t)
        pool.emplace_back(worker);
    worker();
    for (auto& t : pool)
        t.join();

    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (!headers[i].ok())
            return Status(headers[i].status()).withContext(fmt::format("shard listed in {}", pathOrIndex));
        total += headers[i]->tensors.size();
        ck.totalBytes += headers[i]->fileBytes;
        ck.files.push_back(headers[i]->file);
    }
    ck.tensors.reserve(total);
    for (auto& h : headers)
        for (auto& t : h->tensors)
            ck.tensors.push_back(std::move(t));
    std::sort(ck.tensors.begin(), ck.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    for (std::size_t i = 1; i < ck.tensors.size(); ++i)
        if (ck.tensors[i].name == ck.tensors[i - 1].name)
            return invalidArgument(fmt::format("{}: tensor '{}' appears in both {} and {}", pathOrIndex,
                                               ck.tensors[i].name, ck.tensors[i - 1].file, ck.tensors[i].file));

    // Cross-check: both lists are sorted by name.
    std::size_t ti = 0;
    std::size_t unlisted = 0;
    std::string firstUnlisted;
    for (const auto& [name, shard] : idx.weightMap) {
        while (ti < ck.tensors.size() && ck.tensors[ti].name < name) {
            if (unlisted++ == 0)
                firstUnlisted = ck.tensors[ti].name;
            ++ti;
        }
        if (ti == ck.tensors.size() || ck.tensors[ti].name != name)
            return dataLoss(fmt::format("{}: key 'weight_map.{}' names shard {}, which has no such tensor",
                                        pathOrIndex, name, shard));
        if (fs::path(ck.tensors[ti].file).filename() != shard)
            return invalidArgument(fmt::format("{}: key 'weight_map.{}' names shard {}, but the tensor is in {}",
                                               pathOrIndex, name, shard, ck.tensors[ti].file));
        ++ti;
    }
    unlisted += ck.tensors.size() - ti;
    if (firstUnlisted.empty() && ti < ck.tensors.size())
        firstUnlisted = ck.tensors[ti].name;
    if (unlisted > 0)
        ck.diagnostics.push_back({Severity::Warning, pathOrIndex,
                                  fmt::format("{} tensor(s) in the shards are not listed in weight_map (first: '{}'); "
                                              "Transformers will not load them",
                                              unlisted, firstUnlisted),
                                  ""});
    return ck;
}

Status writeSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata)
{
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    std::uint64_t offset = 0;
    const bool sparse = std::all_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.data.empty(); });
    for (const auto& t : tensors) {
        std::int64_t numel = 1;
        for (auto d : t.shape)
            numel *= d;
        const auto bytes = static_cast<std::uint64_t>(dtypeBytes(t.dtype, numel));
        if (!sparse && t.data.size() != bytes)
            return invalidArgument(
                fmt::format("{}: tensor '{}' has {} bytes of data, its shape needs {}", path, t.name, t.data.size(), bytes));
        header[t.name] = {{"dtype", std::string(dtypeName(t.dtype))},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
    }
    std::string hs = header.dump();
    hs.append((8 - hs.size() % 8) % 8, ' ');
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
        return notFound(fmt::format("{}: cannot create", path));
    unsigned char len[8];
    std::uint64_t n = hs.size();
    for (int i = 0; i < 8; ++i)
        len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    if (!sparse)
        for (const auto& t : tensors)
            out.write(t.data.data(), static_cast<std::streamsize>(t.data.size()));
    out.close();
    if (!out)
        return dataLoss(fmt::format("{}: write failed", path));
    if (sparse) {
        std::error_code ec;
        fs::resize_file(path, 8 + n + offset, ec);
        if (ec)
            return dataLoss(fmt::format("{}: cannot extend to {} bytes: {}", path, 8 + n + offset, ec.message()));
    }
    return {};
}

} // namespace tp
