// outputs.cpp — output paths are checked before a verb does its work: a run that has measured for
// minutes must not then find it cannot write, and no output may destroy an input or another output.
#include "commands.h"

#include "tp/core/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <fstream>
#include <system_error>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tpcli {

namespace fs = std::filesystem;

namespace {

// The file a path names: symbolic links followed, also one that points at a file not yet written
// (so that --json X --trace L, L → X, is one path), then made absolute and normal.
fs::path canonical(const std::string& p)
{
    std::error_code ec;
    fs::path at = fs::absolute(p, ec);
    for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, ec)); ++hops) {
        const fs::path to = fs::read_symlink(at, ec);
        if (ec)
            break;
        at = to.is_absolute() ? to : at.parent_path() / to;
    }
    fs::path c = fs::weakly_canonical(at, ec);
    return ec ? fs::path(p) : c;
}

// Two names of one file: the same path once links are resolved, or the same inode (a hard link).
bool sameFile(const fs::path& a, const fs::path& b)
{
    if (a == b)
        return true;
    struct stat sa {}, sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

} // namespace

std::string checkOutputPaths(const std::vector<std::pair<std::string, std::string>>& outputs,
                             const std::vector<std::string>& inputs)
{
    std::vector<fs::path> taken; // inputs, then the outputs seen so far
    std::vector<std::string> takenBy;
    for (const auto& in : inputs) {
        if (in.empty())
            continue;
        std::error_code ec;
        const fs::path c = canonical(in);
        if (fs::is_directory(c, ec)) { // a model folder: every file in it is an input
            for (const auto& e : fs::directory_iterator(c, ec))
                if (e.is_regular_file(ec)) {
                    taken.push_back(canonical(e.path().string()));
                    takenBy.push_back(fmt::format("a file of the input folder {}", in));
                }
        } else {
            taken.push_back(c);
            takenBy.push_back(fmt::format("the input {}", in));
        }
    }
    for (const auto& [option, path] : outputs) {
        if (path.empty())
            continue;
        const fs::path c = canonical(path);
        for (std::size_t i = 0; i < taken.size(); ++i)
            if (sameFile(taken[i], c))
                return fmt::format("{} {}: that is {}; it would be overwritten", option, path, takenBy[i]);
        std::error_code ec;
        if (fs::exists(c, ec) && !fs::is_regular_file(c, ec))
            return fmt::format("{} {}: exists and is not a regular file", option, path);
        const fs::path dir = c.has_parent_path() ? c.parent_path() : fs::path(".");
        if (!fs::is_directory(dir, ec))
            return fmt::format("{} {}: the folder {} does not exist", option, path, dir.string());
        // Written as writeOutput() writes it: a file created beside it, then renamed. Creating (and
        // removing) that file now is the one test that holds for root, read-only mounts and /proc.
        const std::string probe = fmt::format("{}.tmp-{}", c.string(), ::getpid());
        const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
            return fmt::format("{} {}: the folder {} is not writable ({})", option, path, dir.string(),
                               std::generic_category().message(errno));
        ::close(fd);
        ::unlink(probe.c_str());
        taken.push_back(c);
        takenBy.push_back(fmt::format("the output of {}", option));
    }
    return {};
}

std::string writeOutput(const std::string& given, const std::function<void(std::ostream&)>& write)
{
    // Through a symbolic link to the file it names (the link stays), and beside that file, so that
    // the rename stays on one file system.
    const std::string path = canonical(given).string(), tmp = fmt::format("{}.tmp-{}", path, ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            return fmt::format("{}: cannot create {}", path, tmp);
        write(out);
        out.close();
        if (!out) {
            std::remove(tmp.c_str());
            return fmt::format("{}: cannot write (disk full or I/O error); the file was not changed", path);
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return fmt::format("{}: cannot replace it", path);
    }
    return {};
}

CLI::Option* addSizeOption(CLI::App* cmd, const char* flags, std::int64_t& target, const char* help)
{
    return cmd
        ->add_option_function<std::string>(
            flags,
            [&target, flags](const std::string& v) {
                const std::string what = std::string(flags) + " " + v;
                const char* usage = "a size is a number with an optional K, M, G or T suffix";
                std::size_t pos = 0;
                double x = 0;
                try {
                    x = std::stod(v, &pos);
                } catch (const std::exception&) {
                    throw CLI::ValidationError(what, usage);
                }
                const std::string unit = v.substr(pos);
                const double mult = unit.empty() ? 1
                    : unit == "K"                 ? 1024.0
                    : unit == "M"                 ? 1048576.0
                    : unit == "G"                 ? 1073741824.0
                    : unit == "T"                 ? 1099511627776.0
                                                  : -1;
                if (mult < 0 || !std::isfinite(x))
                    throw CLI::ValidationError(what, usage);
                if (!(x * mult >= 1 && x * mult <= 1099511627776.0))
                    throw CLI::ValidationError(what, "a size must be from 1 byte to 1T");
                target = static_cast<std::int64_t>(x * mult);
            },
            help)
        ->type_name("SIZE");
}

CLI::Option* addIntListOption(CLI::App* cmd, const char* flags, std::vector<int>& target, int lo, int hi,
                              const std::string& help)
{
    return cmd
        ->add_option_function<std::string>(
            flags,
            [&target, flags, lo, hi](const std::string& v) {
                std::vector<int> out;
                std::size_t at = 0;
                for (;;) {
                    const std::size_t comma = v.find(',', at);
                    const std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
                    int x = 0;
                    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
                    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || x < lo || x > hi)
                        throw CLI::ValidationError(std::string(flags) + " " + v,
                                                   fmt::format("a comma-separated list of whole numbers from {} to {}", lo, hi));
                    out.push_back(x);
                    if (comma == std::string::npos)
                        break;
                    at = comma + 1;
                }
                target = std::move(out);
            },
            help)
        ->type_name("LIST");
}

std::string decimalInteger(std::string& text)
{
    const std::size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
    const std::string_view digits = std::string_view(text).substr(sign);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return fmt::format("'{}' is not a decimal whole number", tp::terminalSafe(text.substr(0, 40)));
    const std::size_t zeros = std::min(digits.find_first_not_of('0'), digits.size() - 1);
    text.erase(sign, zeros);
    return {};
}

std::string decimalNumber(const std::string& text)
{
    // [+-] digits [. digits] [e [+-] digits], at least one digit before the exponent: no 0x, inf or nan.
    std::size_t i = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
    const auto digits = [&] {
        const std::size_t from = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9')
            ++i;
        return i - from;
    };
    std::size_t mantissa = digits();
    if (i < text.size() && text[i] == '.') {
        ++i;
        mantissa += digits();
    }
    bool ok = mantissa > 0;
    if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        if (i < text.size() && (text[i] == '-' || text[i] == '+'))
            ++i;
        ok = digits() > 0;
    }
    return ok && i == text.size() ? std::string() : fmt::format("'{}' is not a decimal number", tp::terminalSafe(text.substr(0, 40)));
}

void makeNumbersDecimal(CLI::App& app)
{
    for (CLI::Option* opt : app.get_options()) {
        const std::string type = opt->get_type_name();
        if ((type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) && opt->get_name() != "--seed")
            opt->transform(CLI::Validator([](std::string& v) { return decimalInteger(v); }, "", "decimal"));
        else if (type.rfind("FLOAT", 0) == 0)
            opt->transform(CLI::Validator([](std::string& v) { return decimalNumber(v); }, "", "decimal"));
    }
    for (CLI::App* sub : app.get_subcommands({}))
        makeNumbersDecimal(*sub);
}

} // namespace tpcli
