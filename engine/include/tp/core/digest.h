// digest.h — 64-bit FNV-1a over strings and integers: equal inputs give equal digests on every
// machine (the MPI start-up handshake; a run record's model and plan digests). Not cryptographic:
// it tells a changed file from the one a record ran, not a forgery.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace tp {

struct Digest
{
    std::uint64_t h = 14695981039346656037ull;
    // The bytes, then the length (so that "ab" + "c" and "a" + "bc" differ).
    Digest& add(std::string_view s)
    {
        for (unsigned char ch : s)
            h = (h ^ ch) * 1099511628211ull;
        return add(static_cast<std::int64_t>(s.size()));
    }
    Digest& add(std::int64_t v)
    {
        for (int i = 0; i < 8; ++i)
            h = (h ^ static_cast<unsigned char>(v >> (8 * i))) * 1099511628211ull;
        return *this;
    }
    std::int64_t value() const { return static_cast<std::int64_t>(h); }
    std::string hex() const { return fmt::format("{:016x}", h); }
};

} // namespace tp
