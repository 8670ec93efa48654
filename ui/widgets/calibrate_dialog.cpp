// calibrate_dialog.cpp — see calibrate_dialog.h.
#include "widgets/calibrate_dialog.h"

#include "widgets/run_page.h"

#include "tp/cost/hardware.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QRegularExpressionValidator>
#include <QSysInfo>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

namespace tpui {

namespace {
// Profile ids are file names without an extension: letters, digits, '-' and '_' (no '/' or '.').
const QRegularExpression kIdPattern(QStringLiteral("[A-Za-z0-9][A-Za-z0-9_-]{0,63}"));

// The CLI's own default: "calibrated-" and the host name, lower case, other characters as '-'.
QString defaultId()
{
    QString host = QSysInfo::machineHostName().toLower();
    host.replace(QRegularExpression(QStringLiteral("[^a-z0-9-]")), QStringLiteral("-"));
    return (QStringLiteral("calibrated-") + host).left(64);
}
} // namespace

CalibrateDialog::CalibrateDialog(QWidget* parent)
    : QDialog(parent)
    , m_id(new QLineEdit(defaultId()))
    , m_backend(new QComboBox)
    , m_quick(new QCheckBox(tr("&Quick (a few seconds; fewer, smaller measurements)")))
    , m_progress(new QProgressBar)
    , m_step(new QLabel(tr("Not run yet.")))
{
    setWindowTitle(tr("Calibrate This Machine"));
    auto* layout = new QVBoxLayout(this);
    const QString dir = QString::fromStdString(tp::userHardwareDir());
    auto* intro = new QLabel(tr("Measures this machine — GEMM efficiency, memory bandwidth and the collectives between "
                                "its ranks — and installs the profile in %1, where the hardware list finds it. The "
                                "cost model and the Advisor then predict for this machine.")
                                 .arg(dir.isEmpty() ? tr("your hardware folder") : dir.toHtmlEscaped()));
    intro->setWordWrap(true);
    intro->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    m_id->setValidator(new QRegularExpressionValidator(kIdPattern, m_id));
    m_id->setToolTip(tr("The profile's id and file name; an existing calibration of that id is replaced once you "
                        "confirm it"));
    form->addRow(tr("Profile &id:"), m_id);
    m_backend->addItem(tr("CPU"), QStringLiteral("cpu"));
    m_backend->addItem(tr("CUDA GPUs"), QStringLiteral("cuda"));
    form->addRow(tr("&Backend:"), m_backend);
    form->addRow(QString(), m_quick);
    layout->addLayout(form);
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setTextVisible(true);
    m_progress->setFormat(QStringLiteral("%p%"));
    layout->addWidget(m_progress);
    m_step->setWordWrap(true);
    m_step->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_step);
    layout->addStretch(1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_start = buttons->addButton(tr("&Calibrate"), QDialogButtonBox::ActionRole);
    m_stop = buttons->addButton(tr("&Stop"), QDialogButtonBox::ActionRole);
    m_stop->setEnabled(false);
    connect(m_start, &QPushButton::clicked, this, &CalibrateDialog::start);
    connect(m_stop, &QPushButton::clicked, this, &CalibrateDialog::stop);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_id, &QLineEdit::textChanged, this, [this] { m_start->setEnabled(!running() && m_id->hasAcceptableInput()); });
    layout->addWidget(buttons);
    resize(560, 260);
}

CalibrateDialog::~CalibrateDialog()
{
    if (!running())
        return;
    // As stop(), but now: a dialog being destroyed hears nothing more from its child.
    m_proc->disconnect(this);
    m_proc->terminate();
    if (!m_proc->waitForFinished(5000)) {
        m_proc->kill();
        m_proc->waitForFinished(3000);
    }
}

QStringList CalibrateDialog::arguments() const
{
    const QString backend = m_backend->currentData().toString();
    // The collectives of CPU ranks are timed on the local communicator, of GPUs on NCCL.
    QStringList args{QStringLiteral("calibrate"), QStringLiteral("--backend"), backend, QStringLiteral("--comm"),
                     backend == QLatin1String("cuda") ? QStringLiteral("nccl") : QStringLiteral("local"),
                     QStringLiteral("--json-stream"), QStringLiteral("--install"), QStringLiteral("--id"), m_id->text()};
    if (m_quick->isChecked())
        args << QStringLiteral("--quick");
    if (m_replace)
        args << QStringLiteral("--force");
    return args;
}

void CalibrateDialog::start()
{
    if (running() || !m_id->hasAcceptableInput())
        return;
    // tpstudio-cli replaces an installed profile only when told to: asked here first.
    const QString dir = QString::fromStdString(tp::userHardwareDir());
    m_replace = !dir.isEmpty() && QFileInfo::exists(dir + QLatin1Char('/') + m_id->text() + QStringLiteral(".json"));
    if (m_replace
        && QMessageBox::question(this, tr("Replace the profile?"),
                                 tr("A profile <b>%1</b> is already installed. Replace it with this calibration?")
                                     .arg(m_id->text().toHtmlEscaped()))
               != QMessageBox::Yes)
        return;
    m_buffer.clear();
    m_stopping = false;
    m_error.clear();
    m_installedId.clear();
    m_stderrTail.clear();
    m_progress->setValue(0);
    m_step->setText(tr("Starting…"));
    m_proc = new QProcess(this);
    connect(m_proc, &QProcess::readyReadStandardOutput, this, &CalibrateDialog::readLines);
    connect(m_proc, &QProcess::readyReadStandardError, this, [this] {
        m_stderrTail += QString::fromUtf8(m_proc->readAllStandardError());
        m_stderrTail = m_stderrTail.right(4000);
    });
    connect(m_proc, &QProcess::finished, this, &CalibrateDialog::finished);
    connect(m_proc, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            finished(-1, QProcess::CrashExit);
    });
    for (QWidget* w : {static_cast<QWidget*>(m_id), static_cast<QWidget*>(m_backend), static_cast<QWidget*>(m_quick)})
        w->setEnabled(false);
    m_start->setEnabled(false);
    m_stop->setEnabled(true);
    m_proc->start(RunPage::cliPath(), arguments());
    emit started();
}

void CalibrateDialog::stop()
{
    if (!running() || m_stopping)
        return;
    // Asynchronous: SIGTERM, and the CLI stops at its next measurement and installs nothing;
    // finished() reports it. A child that has not gone 5 s later is killed.
    m_stopping = true;
    m_stop->setEnabled(false);
    m_step->setText(tr("Stopping…"));
    m_proc->terminate();
    QTimer::singleShot(5000, m_proc, [p = m_proc] {
        if (p->state() != QProcess::NotRunning)
            p->kill();
    });
}

void CalibrateDialog::readLines()
{
    m_buffer += m_proc->readAllStandardOutput();
    for (qsizetype nl; (nl = m_buffer.indexOf('\n')) >= 0;) {
        const QByteArray line = m_buffer.left(nl).trimmed();
        m_buffer.remove(0, nl + 1);
        if (!line.isEmpty())
            handleLine(line);
    }
}

void CalibrateDialog::handleLine(const QByteArray& line)
{
    const QJsonObject o = QJsonDocument::fromJson(line).object();
    const QString event = o.value(QStringLiteral("event")).toString();
    if (event == QLatin1String("start")) {
        const int ranks = o.value(QStringLiteral("ranks")).toInt(1);
        m_step->setText(tr("Calibrating %1 with %n rank(s) at once…", nullptr, ranks).arg(o.value(QStringLiteral("backend")).toString()));
    } else if (event == QLatin1String("progress")) {
        m_progress->setValue(int(std::clamp(o.value(QStringLiteral("fraction")).toDouble(), 0.0, 1.0) * 1000));
        m_step->setText(tr("Measuring %1").arg(o.value(QStringLiteral("what")).toString()));
    } else if (event == QLatin1String("done")) {
        m_installedId = o.value(QStringLiteral("id")).toString();
        m_step->setText(tr("Installed %1").arg(o.value(QStringLiteral("path")).toString()));
    } else if (event == QLatin1String("error")) {
        m_error = o.value(QStringLiteral("message")).toString();
    }
}

void CalibrateDialog::finished(int code, QProcess::ExitStatus status)
{
    if (!m_proc)
        return;
    readLines();
    if (!m_buffer.trimmed().isEmpty())
        handleLine(m_buffer.trimmed());
    const QString startError = m_proc->error() == QProcess::FailedToStart ? m_proc->errorString() : QString();
    m_proc->deleteLater();
    m_proc = nullptr;
    if (!startError.isEmpty())
        return end(false, tr("Cannot start %1: %2").arg(RunPage::cliPath(), startError));
    const bool stopped = std::exchange(m_stopping, false);
    if (stopped && !(status == QProcess::NormalExit && code == 0 && !m_installedId.isEmpty()))
        return end(false, tr("Stopped; nothing was installed."));
    if (status == QProcess::NormalExit && code == 0 && !m_installedId.isEmpty()) {
        m_progress->setValue(m_progress->maximum());
        return end(true, tr("Installed the profile <b>%1</b>; it is selected in the hardware list.").arg(m_installedId.toHtmlEscaped()));
    }
    // The stream's error, else the last thing the child said on stderr, else its exit.
    QString why = m_error;
    if (why.isEmpty())
        why = m_stderrTail.trimmed().section(QLatin1Char('\n'), -1);
    if (why.isEmpty())
        why = status == QProcess::CrashExit ? tr("the calibration crashed") : tr("exit code %1").arg(code);
    end(false, tr("Not calibrated: %1").arg(why.toHtmlEscaped()));
}

void CalibrateDialog::end(bool ok, const QString& text)
{
    m_step->setText(text);
    for (QWidget* w : {static_cast<QWidget*>(m_id), static_cast<QWidget*>(m_backend), static_cast<QWidget*>(m_quick)})
        w->setEnabled(true);
    m_start->setEnabled(m_id->hasAcceptableInput());
    m_stop->setEnabled(false);
    emit done(ok, ok ? m_installedId : QString());
}

} // namespace tpui
