// verify_dialog.cpp — see verify_dialog.h.
#include "widgets/verify_dialog.h"

#include "models/format.h"
#include "models/plan_document.h"
#include "models/settings.h"
#include "widgets/run_page.h"

#include <QDialogButtonBox>
#include <QFile>
#include <QFormLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tpui {

VerifyDialog::VerifyDialog(const PlanDocument* doc, int tp, QWidget* parent) : QDialog(parent), m_doc(doc), m_tp(tp)
{
    setWindowTitle(tr("Verify with Transformers"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(tr("Runs this plan at T=%1 in Hugging Face Transformers itself (one CPU process per rank, "
                                "gloo), on a reduced random-weight copy of the model when its weights are absent or "
                                "over 1 GiB, and compares every collective Transformers issues with the preview, and "
                                "its logits with the engine's.")
                                 .arg(tp),
                             this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    QString python = Settings::verifyPython();
    if (python.isEmpty())
        python = qEnvironmentVariable("TPSTUDIO_PYTHON", QStringLiteral("python3"));
    m_python = new QLineEdit(python, this);
    m_python->setToolTip(tr("A Python with torch, transformers, safetensors and accelerate"));
    form->addRow(tr("&Python:"), m_python);
    layout->addLayout(form);
    m_verdict = new QLabel(tr("Not run yet."), this);
    m_verdict->setWordWrap(true);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_verdict);
    m_table = new QTableWidget(0, 6, this);
    m_table->setHorizontalHeaderLabels({tr("Collective"), tr("Predicted"), tr("Observed"), tr("Predicted bytes"),
                                        tr("Observed bytes"), tr("")});
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    layout->addWidget(m_table, 1);
    m_log = new QPlainTextEdit(this);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(2000);
    m_log->setPlaceholderText(tr("What tpstudio-cli plan verify prints appears here."));
    layout->addWidget(m_log, 1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_start = buttons->addButton(tr("&Verify"), QDialogButtonBox::ActionRole);
    m_cancel = buttons->addButton(tr("&Stop"), QDialogButtonBox::ActionRole);
    m_cancel->setEnabled(false);
    connect(m_start, &QPushButton::clicked, this, &VerifyDialog::start);
    connect(m_cancel, &QPushButton::clicked, this, &VerifyDialog::cancel);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    resize(720, 520);
}

VerifyDialog::~VerifyDialog() { cancel(); }

void VerifyDialog::start()
{
    if (running() || !m_doc->spec())
        return;
    m_work = std::make_unique<QTemporaryDir>();
    const QString plan = m_work->filePath(QStringLiteral("plan.json"));
    if (!m_work->isValid() || !m_doc->exportJson(plan).ok()) {
        m_verdict->setText(tr("Cannot write the plan to a temporary folder."));
        emit done(false);
        return;
    }
    Settings::setVerifyPython(m_python->text());
    m_table->setRowCount(0);
    m_log->clear();
    m_verdict->setText(tr("Verifying… Transformers starts %1 processes; this takes a minute.").arg(m_tp));
    m_proc = new QProcess(this);
    m_proc->setProcessChannelMode(QProcess::MergedChannels);
    connect(m_proc, &QProcess::readyRead, this, [this] { m_log->appendPlainText(QString::fromUtf8(m_proc->readAll()).trimmed()); });
    connect(m_proc, &QProcess::finished, this, &VerifyDialog::finished);
    connect(m_proc, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            finished(-1, QProcess::CrashExit);
    });
    m_start->setEnabled(false);
    m_cancel->setEnabled(true);
    m_proc->start(RunPage::cliPath(),
                  {QStringLiteral("plan"), QStringLiteral("verify"), m_doc->source(), QStringLiteral("--plan"), plan,
                   QStringLiteral("--tp"), QString::number(m_tp), QStringLiteral("--python"), m_python->text(),
                   QStringLiteral("--json"), m_work->filePath(QStringLiteral("verify.json"))});
    emit started();
}

void VerifyDialog::cancel()
{
    if (!running())
        return;
    m_proc->disconnect(this);
    m_proc->terminate(); // plan verify passes it on to Python, which stops its ranks
    if (!m_proc->waitForFinished(5000))
        m_proc->kill();
    m_proc->deleteLater();
    m_proc = nullptr;
    m_verdict->setText(tr("Stopped."));
    m_start->setEnabled(true);
    m_cancel->setEnabled(false);
}

void VerifyDialog::finished(int code, QProcess::ExitStatus status)
{
    if (!m_proc)
        return;
    m_log->appendPlainText(QString::fromUtf8(m_proc->readAll()).trimmed());
    const QString error = m_proc->error() == QProcess::FailedToStart ? m_proc->errorString() : QString();
    m_proc->deleteLater();
    m_proc = nullptr;
    m_start->setEnabled(true);
    m_cancel->setEnabled(false);
    QFile f(m_work->filePath(QStringLiteral("verify.json")));
    if (status == QProcess::NormalExit && f.open(QIODevice::ReadOnly)) {
        showResult(f.readAll());
        emit done(code == 0);
        return;
    }
    // No comparison: the CLI said why on its last line (no torch, an invalid plan, …).
    const QStringList lines = m_log->toPlainText().trimmed().split(QLatin1Char('\n'));
    m_verdict->setText(error.isEmpty() ? tr("Not verified: %1").arg(lines.isEmpty() ? tr("exit code %1").arg(code) : lines.last())
                                       : tr("Cannot start %1: %2").arg(RunPage::cliPath(), error));
    emit done(false);
}

void VerifyDialog::showResult(const QByteArray& json)
{
    const QJsonObject res = QJsonDocument::fromJson(json).object().value(QStringLiteral("results")).toArray().at(0).toObject();
    if (const QString err = res.value(QStringLiteral("error")).toString(); !err.isEmpty()) {
        m_verdict->setText(tr("Not verified: %1").arg(err));
        return;
    }
    const QJsonArray rows = res.value(QStringLiteral("collectives")).toArray();
    m_table->setRowCount(static_cast<int>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
        const QJsonObject r = rows.at(i).toObject();
        QStringList observed;
        for (const auto& c : r.value(QStringLiteral("observed_counts")).toArray())
            observed << QString::number(c.toInt());
        observed.removeDuplicates();
        const bool ok = r.value(QStringLiteral("ok")).toBool();
        const QStringList cells{r.value(QStringLiteral("kind")).toString(),
                                QString::number(r.value(QStringLiteral("predicted_count")).toInt()), observed.join(QLatin1Char('/')),
                                humanBytes(r.value(QStringLiteral("predicted_bytes")).toDouble()),
                                humanBytes(r.value(QStringLiteral("observed_bytes")).toDouble()),
                                ok ? tr("agree") : tr("MISMATCH")};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c > 0 && c < 5)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_table->setItem(i, c, item);
        }
    }
    const double err = res.value(QStringLiteral("logits_rel_error")).toDouble();
    const bool ok = res.value(QStringLiteral("ok")).toBool();
    m_verdict->setText((ok ? tr("<b>Verified.</b> ") : tr("<b>Mismatch.</b> "))
                       + tr("%1 · logits, engine vs Transformers: %2 relative (tolerance 1e-4)")
                             .arg(res.value(QStringLiteral("model")).toString().toHtmlEscaped())
                             .arg(err, 0, 'e', 1));
}

} // namespace tpui
