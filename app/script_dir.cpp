#include "script_dir.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {
const std::vector<std::pair<std::string_view, std::string_view>>& verifyFiles(); // verify_script.cpp, made by CMake
}

namespace tpapp {

tp::Result<std::unique_ptr<ScriptDir>> ScriptDir::make(const char* prefix)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    if (ec)
        return tp::internalError(fmt::format("no temporary directory (TMPDIR={}): {}", std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "", ec.message()));
    std::string tmpl = (tmp / (std::string(prefix) + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data()))
        return tp::internalError("cannot create a temporary folder in " + tmp.string());
    std::unique_ptr<ScriptDir> d(new ScriptDir(tmpl));
    std::ofstream f(d->script(), std::ios::binary);
    f << tp::verifyFiles().front().second;
    if (!f.flush())
        return tp::internalError("cannot write " + d->script().string());
    return d;
}

ScriptDir::~ScriptDir()
{
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
}

} // namespace tpapp
