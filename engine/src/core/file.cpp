// file.cpp — bounded reads of input files.
#include "tp/core/file.h"

#include "tp/core/units.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tp {

Result<std::string> readInputFile(const std::string& path, std::int64_t maxBytes, std::string_view what)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return notFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    if (S_ISDIR(st.st_mode))
        return invalidArgument(fmt::format("{}: is a directory, not {}", path, what));
    if (!S_ISREG(st.st_mode))
        return invalidArgument(fmt::format("{}: is not a regular file (a FIFO, socket or device), not {}", path, what));
    if (st.st_size > maxBytes)
        return invalidArgument(fmt::format("{}: {} is larger than any {} ({} at most)", path,
                                           humanBytes(static_cast<double>(st.st_size)), what,
                                           humanBytes(static_cast<double>(maxBytes))));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return notFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t at = 0;
    for (;;) { // to the end, but no further than the limit (the file may grow while it is read)
        if (at == text.size()) {
            if (static_cast<std::int64_t>(text.size()) > maxBytes)
                break;
            text.resize(text.size() + 4096);
        }
        const ssize_t got = ::read(fd, text.data() + at, text.size() - at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            const int err = got < 0 ? errno : 0;
            ::close(fd);
            if (got < 0)
                return dataLoss(fmt::format("{}: cannot read: {}", path, std::strerror(err)));
            text.resize(at);
            return text;
        }
        at += static_cast<std::size_t>(got);
    }
    ::close(fd);
    return invalidArgument(fmt::format("{}: grew past {} while it was read, not {}", path,
                                       humanBytes(static_cast<double>(maxBytes)), what));
}

} // namespace tp
