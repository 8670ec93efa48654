// safetensors.h — safetensors headers (single files and sharded indexes), read without tensor data.
//
// File layout: 8 bytes little-endian header length N, N bytes of JSON
// {"__metadata__": {...}, "<name>": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}},
// then the data block; offsets are relative to the start of the data block.
// Every structural rule is checked and each error names the file and the tensor key.
#pragma once

#include "tp/core/diagnostic.h"
#include "tp/core/status.h"
#include "tp/model/dtype.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tp {

inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000; // as the reference reader

struct TensorInfo
{
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;   // byte offset within the data block
    std::uint64_t end = 0;
    std::string file;          // absolute path of the .safetensors file holding it

    std::int64_t numel() const;
    std::uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader
{
    std::string file;
    std::uint64_t headerBytes = 0;       // N
    std::uint64_t dataOffset = 0;        // 8 + N: where the data block starts in the file
    std::uint64_t fileBytes = 0;
    std::map<std::string, std::string> metadata;
    std::vector<TensorInfo> tensors;     // in file order of data offsets
};

// Parses a header already in memory. `fileBytes` is the total file size (the data block must fit in it).
Result<SafetensorsHeader> parseSafetensorsHeader(std::string_view headerJson, std::uint64_t fileBytes,
                                                 const std::string& file);
// Reads and parses the header of one file (reads 8 + N bytes, never the data).
Result<SafetensorsHeader> readSafetensorsHeader(const std::string& path);

// A sharded checkpoint's `model.safetensors.index.json`: tensor name → shard file name.
struct SafetensorsIndex
{
    std::string file;
    std::map<std::string, std::string> metadata;
    std::vector<std::pair<std::string, std::string>> weightMap; // (tensor, shard file), sorted by tensor
    std::vector<std::string> shardFiles;                        // distinct, sorted
};
Result<SafetensorsIndex> parseSafetensorsIndex(std::string_view json, const std::string& file);
Result<SafetensorsIndex> readSafetensorsIndex(const std::string& path);

// All tensors of a checkpoint: one file, or every shard of an index (read in parallel), with the
// index cross-checked against the shards (a tensor listed for a shard that lacks it is an error).
struct Checkpoint
{
    std::vector<std::string> files;
    std::vector<TensorInfo> tensors; // sorted by name
    std::uint64_t totalBytes = 0;
    std::vector<Diagnostic> diagnostics; // e.g. shard tensors the index does not list
};
Result<Checkpoint> readCheckpoint(const std::string& pathOrIndex);

// Writes a safetensors file. `data` holds each tensor's bytes (size must equal its byte size); when
// `data` is empty, the data block is left as a hole (a sparse file), which is how test tooling makes
// checkpoints of full-size models without writing their data.
struct TensorToWrite
{
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::string data;
};
Status writeSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

} // namespace tp
