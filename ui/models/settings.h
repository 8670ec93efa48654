// settings.h — everything TP Studio keeps between sessions, in one place: each key is spelled once
// here (QSettings of organisation "TP Studio", application "tpstudio").
#pragma once

#include "models/plan_document.h"

#include <QByteArray>
#include <QString>
#include <QStringList>

namespace tpui {

class Settings
{
public:
    // The toolbar's preview settings (T, batch, sequence, dtype, hardware).
    static PreviewSettings preview();
    static void setPreview(const PreviewSettings& s);

    // Models opened lately, newest first, at most kMaxRecent.
    static constexpr int kMaxRecent = 10;
    static QStringList recentModels();
    static void addRecentModel(const QString& what);

    static QByteArray windowGeometry();
    static QByteArray windowState();
    static void setWindow(const QByteArray& geometry, const QByteArray& state);

    // View → Theme: "system", "light" or "dark".
    static QString theme();
    static void setTheme(const QString& name);

    // The Python that Run → Verify with Transformers starts ("" until one is chosen).
    static QString verifyPython();
    static void setVerifyPython(const QString& path);

    // The session saved at the last quit, next to the settings file.
    static QString lastSessionPath();
};

} // namespace tpui
