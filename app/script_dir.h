// script_dir.h — the embedded scripts/tp_verify.py, written into a temporary folder for the user's Python to run.
#pragma once

#include "tp/core/status.h"

#include <filesystem>
#include <memory>

namespace tpapp {

// A new folder PREFIX-XXXXXX in the temporary directory holding tp_verify.py; it and everything put in it are
// removed when this goes.
class ScriptDir
{
public:
    static tp::Result<std::unique_ptr<ScriptDir>> make(const char* prefix);
    ~ScriptDir();
    ScriptDir(const ScriptDir&) = delete;
    ScriptDir& operator=(const ScriptDir&) = delete;

    const std::filesystem::path& dir() const { return m_dir; }
    std::filesystem::path script() const { return m_dir / "tp_verify.py"; }

private:
    explicit ScriptDir(std::filesystem::path dir)
        : m_dir(std::move(dir))
    {
    }
    std::filesystem::path m_dir;
};

} // namespace tpapp
