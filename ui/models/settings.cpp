#include "models/settings.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>

namespace tpui {

namespace {

const QString kTp = QStringLiteral("preview/tp"), kBatch = QStringLiteral("preview/batch"), kSeq = QStringLiteral("preview/seq"),
              kDtype = QStringLiteral("preview/dtype"), kKvDtype = QStringLiteral("preview/kvDtype"), kHardware = QStringLiteral("preview/hardware"),
              kRecent = QStringLiteral("recentModels"), kGeometry = QStringLiteral("window/geometry"),
              kState = QStringLiteral("window/state"), kTheme = QStringLiteral("view/theme"),
              kPython = QStringLiteral("verify/python");

} // namespace

PreviewSettings Settings::preview()
{
    const QSettings q;
    const PreviewSettings d;
    PreviewSettings s;
    s.tpSize = q.value(kTp, d.tpSize).toInt();
    s.batch = q.value(kBatch, d.batch).toLongLong();
    s.seq = q.value(kSeq, d.seq).toLongLong();
    s.dtype = q.value(kDtype, d.dtype).toString();
    s.kvDtype = q.value(kKvDtype, d.kvDtype).toString() == QLatin1String("fp8") ? QStringLiteral("fp8") : d.kvDtype;
    s.hardware = q.value(kHardware, d.hardware).toString();
    return s;
}

void Settings::setPreview(const PreviewSettings& s)
{
    QSettings q;
    q.setValue(kTp, s.tpSize);
    q.setValue(kBatch, s.batch);
    q.setValue(kSeq, s.seq);
    q.setValue(kDtype, s.dtype);
    q.setValue(kKvDtype, s.kvDtype);
    q.setValue(kHardware, s.hardware);
}

QStringList Settings::recentModels() { return QSettings().value(kRecent).toStringList().mid(0, kMaxRecent); }

void Settings::addRecentModel(const QString& what)
{
    QStringList recent = recentModels();
    recent.removeAll(what);
    recent.prepend(what);
    QSettings().setValue(kRecent, recent.mid(0, kMaxRecent));
}

QByteArray Settings::windowGeometry() { return QSettings().value(kGeometry).toByteArray(); }
QByteArray Settings::windowState() { return QSettings().value(kState).toByteArray(); }

void Settings::setWindow(const QByteArray& geometry, const QByteArray& state)
{
    QSettings q;
    q.setValue(kGeometry, geometry);
    q.setValue(kState, state);
}

QString Settings::theme() { return QSettings().value(kTheme, QStringLiteral("system")).toString(); }
void Settings::setTheme(const QString& name) { QSettings().setValue(kTheme, name); }

QString Settings::verifyPython() { return QSettings().value(kPython).toString(); }
void Settings::setVerifyPython(const QString& path) { QSettings().setValue(kPython, path); }

QString Settings::lastSessionPath()
{
    return QFileInfo(QSettings().fileName()).dir().filePath(QStringLiteral("last.tpsession"));
}

} // namespace tpui
