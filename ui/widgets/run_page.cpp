#include "widgets/run_page.h"

#include "models/plan_document.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QIcon>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpressionValidator>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QVBoxLayout>

namespace tpui {

RunPage::RunPage(PlanDocument* doc, QWidget* parent)
    : QWidget(parent)
    , m_doc(doc)
    , m_backend(new QComboBox)
    , m_dtype(new QComboBox)
    , m_emulate(new QCheckBox(tr("Emulate every rank on one device (communication modelled, not measured)")))
    , m_devices(new QLabel(tr("Looking for devices…")))
    , m_tp(new QLineEdit(QStringLiteral("1,2")))
    , m_batch(new QSpinBox)
    , m_seq(new QSpinBox)
    , m_decode(new QSpinBox)
    , m_warmup(new QSpinBox)
    , m_iters(new QSpinBox)
    , m_random(new QCheckBox(tr("Seeded random weights (ignore the checkpoint)")))
    , m_run(new QPushButton(QIcon::fromTheme(QStringLiteral("media-playback-start")), tr("&Run")))
    , m_cancel(new QPushButton(QIcon::fromTheme(QStringLiteral("process-stop")), tr("&Cancel")))
    , m_progress(new QProgressBar)
    , m_log(new QPlainTextEdit)
{
    m_backend->addItem(QIcon::fromTheme(QStringLiteral("cpu")), tr("CPU (one thread per rank, oneDNN)"), QStringLiteral("cpu"));
    m_backend->addItem(QIcon::fromTheme(QStringLiteral("video-display")), tr("CUDA (one GPU per rank, cuBLAS, NCCL)"),
                       QStringLiteral("cuda"));
    cudaItem()->setEnabled(false); // once a GPU is found
    m_dtype->addItem(tr("f32"), QStringLiteral("f32"));
    m_dtype->addItem(tr("bf16"), QStringLiteral("bf16"));
    m_dtype->addItem(tr("f16"), QStringLiteral("f16"));
    m_dtype->setToolTip(tr("Storage of weights and activations; arithmetic accumulates in fp32"));
    m_emulate->setToolTip(tr("Runs every rank's shards on one device, one op at a time, and takes each collective's time "
                             "from the hardware profile chosen in the toolbar: what T devices would do, from one"));
    m_devices->setWordWrap(true);
    m_devices->setTextInteractionFlags(Qt::TextSelectableByMouse);
    connect(m_backend, &QComboBox::currentIndexChanged, this, [this] {
        // GPU runs default to bf16, CPU runs to f32 (the dtype Transformers checks are made in).
        m_dtype->setCurrentIndex(m_backend->currentData().toString() == QLatin1String("cuda") ? 1 : 0);
    });
    m_tp->setValidator(new QRegularExpressionValidator(QRegularExpression(QStringLiteral("\\d+(,\\d+)*")), m_tp));
    m_tp->setToolTip(tr("Comma-separated tp sizes; T=1 runs first so that the others get a speedup"));
    m_batch->setRange(1, 4096);
    m_seq->setRange(1, 65536);
    m_seq->setValue(128);
    m_seq->setToolTip(tr("Prompt tokens per sequence: one prefill forward over them (its time is the time to first token)"));
    m_decode->setRange(0, 4096);
    m_decode->setValue(32);
    m_decode->setToolTip(tr("Greedy decode steps after each prefill, one token per sequence each, on a per-rank KV cache; "
                            "0: prefill only"));
    m_warmup->setRange(0, 100);
    m_warmup->setValue(1);
    m_iters->setRange(1, 1000);
    m_iters->setValue(3);
    m_cancel->setEnabled(false);
    m_log->setReadOnly(true);
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_log->setMaximumBlockCount(5000);

    auto* form = new QFormLayout;
    form->addRow(tr("Backend:"), m_backend);
    form->addRow(tr("Devices:"), m_devices);
    form->addRow(tr("Storage dtype:"), m_dtype);
    form->addRow(tr("TP sizes:"), m_tp);
    form->addRow(QString(), m_emulate);
    form->addRow(tr("Batch:"), m_batch);
    form->addRow(tr("Prompt length:"), m_seq);
    form->addRow(tr("Decode steps:"), m_decode);
    form->addRow(tr("Warm-up iterations:"), m_warmup);
    form->addRow(tr("Timed iterations:"), m_iters);
    form->addRow(QString(), m_random);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_cancel);
    buttons->addWidget(m_progress, 1);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(form);
    lay->addLayout(buttons);
    lay->addWidget(new QLabel(tr("Log")));
    lay->addWidget(m_log, 1);

    // Runs use the shapes the previews use, so measured and predicted compare like for like.
    auto follow = [this] {
        m_batch->setValue(int(m_doc->settings().batch));
        m_seq->setValue(int(std::min<qint64>(m_doc->settings().seq, m_seq->maximum())));
    };
    follow();
    connect(m_doc, &PlanDocument::settingsChanged, this, follow);
    connect(m_run, &QPushButton::clicked, this, &RunPage::start);
    connect(m_cancel, &QPushButton::clicked, this, &RunPage::cancel);
    probeDevices();
}

QStandardItem* RunPage::cudaItem() const
{
    return qobject_cast<QStandardItemModel*>(m_backend->model())->item(1);
}

void RunPage::probeDevices()
{
    // In a child process, as every engine call that touches a GPU: a driver fault stays there.
    auto* proc = m_probe = new QProcess(this);
    connect(proc, &QProcess::finished, this, [this, proc](int code, QProcess::ExitStatus status) {
        m_probe = nullptr;
        const QJsonDocument d = QJsonDocument::fromJson(proc->readAllStandardOutput());
        if (status == QProcess::NormalExit && code == 0 && d.isObject())
            setDevices(d.object());
        else
            m_devices->setText(tr("Cannot list devices: %1 exited with code %2").arg(cliPath()).arg(code));
        proc->deleteLater();
    });
    connect(proc, &QProcess::errorOccurred, this, [this, proc](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart) {
            m_probe = nullptr;
            m_devices->setText(tr("Cannot list devices: %1").arg(proc->errorString()));
            proc->deleteLater();
        }
    });
    proc->start(cliPath(), {QStringLiteral("devices"), QStringLiteral("--json")});
}

void RunPage::setDevices(const QJsonObject& devices)
{
    const QJsonObject cpu = devices.value(QStringLiteral("cpu")).toObject();
    const QJsonObject cuda = devices.value(QStringLiteral("cuda")).toObject();
    QStringList lines{tr("CPU: %1, %2 cores, %3 GiB available")
                          .arg(cpu.value(QStringLiteral("model")).toString())
                          .arg(cpu.value(QStringLiteral("logical_cores")).toInt())
                          .arg(cpu.value(QStringLiteral("available_bytes")).toDouble() / (1 << 30), 0, 'f', 1)};
    const QJsonArray gpus = cuda.value(QStringLiteral("devices")).toArray();
    for (const auto& g : gpus) {
        const QJsonObject o = g.toObject();
        lines << tr("GPU %1: %2, %3 GiB, compute %4")
                     .arg(o.value(QStringLiteral("index")).toInt())
                     .arg(o.value(QStringLiteral("name")).toString())
                     .arg(o.value(QStringLiteral("memory_bytes")).toDouble() / (1 << 30), 0, 'f', 1)
                     .arg(o.value(QStringLiteral("compute_capability")).toString());
    }
    if (gpus.isEmpty())
        lines << tr("CUDA: %1").arg(cuda.value(QStringLiteral("reason")).toString());
    m_devices->setText(lines.join(QLatin1Char('\n')));
    cudaItem()->setEnabled(!gpus.isEmpty());
    cudaItem()->setToolTip(gpus.isEmpty() ? tr("No CUDA device: %1").arg(cuda.value(QStringLiteral("reason")).toString())
                                          : tr("%n GPU(s)", nullptr, int(gpus.size())));
}

RunPage::~RunPage()
{
    if (m_probe) { // the devices probe must not report to a page being destroyed
        m_probe->disconnect(this);
        m_probe->kill();
        m_probe->waitForFinished(3000);
    }
    if (m_proc && m_proc->state() != QProcess::NotRunning) {
        // A page being destroyed hears nothing more from its run (its finished() reached a window
        // half destroyed: a crash when the GUI was closed or interrupted during a run). SIGTERM lets
        // tpstudio-cli stop within a second; one that has not is killed.
        m_proc->disconnect(this);
        m_proc->terminate();
        if (!m_proc->waitForFinished(3000)) {
            m_proc->kill();
            m_proc->waitForFinished(3000);
        }
    }
}

QString RunPage::cliPath()
{
    const QString env = qEnvironmentVariable("TPSTUDIO_CLI");
    if (!env.isEmpty())
        return env;
    const QString sibling = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("tpstudio-cli"));
    if (QFileInfo(sibling).isExecutable())
        return sibling;
    const QString onPath = QStandardPaths::findExecutable(QStringLiteral("tpstudio-cli"));
    return onPath.isEmpty() ? sibling : onPath;
}

QStringList RunPage::arguments(const QString& planFile, const QString& dir) const
{
    QStringList a{QStringLiteral("run"), QStringLiteral("--model"), m_doc->source(), QStringLiteral("--plan"), planFile,
                  m_emulate->isChecked() ? QStringLiteral("--emulate-tp") : QStringLiteral("--tp"), m_tp->text(),
                  QStringLiteral("--dtype"), m_dtype->currentData().toString(), QStringLiteral("--batch"), QString::number(m_batch->value()),
                  QStringLiteral("--seq"), QString::number(m_seq->value()), QStringLiteral("--decode"),
                  QString::number(m_decode->value()), QStringLiteral("--warmup"),
                  QString::number(m_warmup->value()), QStringLiteral("--iters"), QString::number(m_iters->value()),
                  QStringLiteral("--backend"), m_backend->currentData().toString(), QStringLiteral("--json-stream"),
                  QStringLiteral("--trace"), dir + QStringLiteral("/trace.json"), QStringLiteral("--csv"),
                  dir + QStringLiteral("/spans.csv"), QStringLiteral("--json"), dir + QStringLiteral("/run.json")};
    if (m_random->isChecked())
        a << QStringLiteral("--random-weights");
    if (m_emulate->isChecked()) // the collectives timed by the profile the predictions use
        a << QStringLiteral("--hardware") << m_doc->settings().hardware;
    return a;
}

bool RunPage::running() const { return m_proc && m_proc->state() != QProcess::NotRunning; }

void RunPage::start()
{
    if (running() || !m_doc->spec())
        return;
    m_dir = std::make_shared<QTemporaryDir>();
    const QString planFile = m_dir->filePath(QStringLiteral("plan.json"));
    if (auto st = m_doc->exportJson(planFile); !st.ok()) {
        emit runFailed(QString::fromStdString(st.message()));
        return;
    }
    m_log->clear();
    m_record = {};
    m_error.clear();
    m_buffer.clear();
    m_cancelled = false;
    m_steps = 0;
    // Busy until the first iteration reports (the weights load first), then a percentage.
    m_progress->setRange(0, 0);
    m_progress->setValue(0);
    m_proc = new QProcess(this);
    m_proc->setProcessChannelMode(QProcess::SeparateChannels);
    connect(m_proc, &QProcess::readyReadStandardOutput, this, &RunPage::readLines);
    connect(m_proc, &QProcess::readyReadStandardError, this, [this] {
        m_log->appendPlainText(QString::fromUtf8(m_proc->readAllStandardError()).trimmed());
    });
    connect(m_proc, &QProcess::finished, this, &RunPage::finished);
    connect(m_proc, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart) {
            m_log->appendPlainText(tr("Cannot start %1: %2").arg(cliPath(), m_proc->errorString()));
            finished(-1, QProcess::CrashExit);
        }
    });
    const QStringList args = arguments(planFile, m_dir->path());
    m_log->appendPlainText(QStringLiteral("$ %1 %2").arg(cliPath(), args.join(QLatin1Char(' '))));
    m_run->setEnabled(false);
    m_cancel->setEnabled(true);
    m_proc->start(cliPath(), args);
    emit runStarted();
}

void RunPage::cancel()
{
    if (!running())
        return;
    m_cancelled = true;
    m_log->appendPlainText(tr("Cancelling…"));
    m_proc->kill();
}

void RunPage::readLines()
{
    m_buffer += m_proc->readAllStandardOutput();
    int nl;
    while ((nl = int(m_buffer.indexOf('\n'))) >= 0) {
        const QByteArray line = m_buffer.left(nl).trimmed();
        m_buffer.remove(0, nl + 1);
        if (line.isEmpty())
            continue;
        QJsonParseError err{};
        const QJsonDocument d = QJsonDocument::fromJson(line, &err);
        if (d.isObject())
            handle(d.object());
        else
            m_log->appendPlainText(QString::fromUtf8(line));
    }
}

void RunPage::handle(const QJsonObject& e)
{
    const QString ev = e.value(QStringLiteral("event")).toString();
    if (ev == QLatin1String("start")) {
        m_log->appendPlainText(tr("Running %1 (%2) for tp sizes %3 on %4, %5 storage%6")
                                   .arg(e.value(QStringLiteral("class")).toString(), e.value(QStringLiteral("weights")).toString(),
                                        QString::fromUtf8(QJsonDocument(e.value(QStringLiteral("tp")).toArray()).toJson(QJsonDocument::Compact)),
                                        e.value(QStringLiteral("devices")).toString(), e.value(QStringLiteral("dtype")).toString(),
                                        e.value(QStringLiteral("emulated")).toBool()
                                            ? tr(" (emulated: communication modelled with %1)").arg(e.value(QStringLiteral("comm_model")).toString())
                                            : QString()));
    } else if (ev == QLatin1String("progress")) {
        advance();
        m_log->appendPlainText(tr("T=%1 %2 %3: %4 ms")
                                   .arg(e.value(QStringLiteral("tp")).toInt())
                                   .arg(e.value(QStringLiteral("warmup")).toBool() ? tr("warm-up") : tr("iteration"))
                                   .arg(e.value(QStringLiteral("iteration")).toInt())
                                   .arg(e.value(QStringLiteral("seconds")).toDouble() * 1e3, 0, 'f', 2));
    } else if (ev == QLatin1String("step")) { // decode steps: progress only, the result line sums them up
        advance();
    } else if (ev == QLatin1String("result")) {
        m_log->appendPlainText(tr("T=%1: median %2 ms, %3 tokens/s, speedup %4×, communication %5%")
                                   .arg(e.value(QStringLiteral("tp")).toInt())
                                   .arg(e.value(QStringLiteral("median_s")).toDouble() * 1e3, 0, 'f', 2)
                                   .arg(e.value(QStringLiteral("tokens_per_s")).toDouble(), 0, 'f', 1)
                                   .arg(e.value(QStringLiteral("speedup")).toDouble(), 0, 'f', 2)
                                   .arg(e.value(QStringLiteral("comm_share")).toDouble() * 100, 0, 'f', 1));
        if (const QJsonObject d = e.value(QStringLiteral("decode")).toObject(); !d.isEmpty())
            m_log->appendPlainText(tr("T=%1 decode: TTFT %2 ms, ITL %3 ms (p10 %4, p90 %5), %6 tokens/s, speedup %7×, "
                                      "communication %8%")
                                       .arg(e.value(QStringLiteral("tp")).toInt())
                                       .arg(d.value(QStringLiteral("ttft_s")).toDouble() * 1e3, 0, 'f', 2)
                                       .arg(d.value(QStringLiteral("itl_median_s")).toDouble() * 1e3, 0, 'f', 3)
                                       .arg(d.value(QStringLiteral("itl_p10_s")).toDouble() * 1e3, 0, 'f', 3)
                                       .arg(d.value(QStringLiteral("itl_p90_s")).toDouble() * 1e3, 0, 'f', 3)
                                       .arg(d.value(QStringLiteral("tokens_per_s")).toDouble(), 0, 'f', 1)
                                       .arg(d.value(QStringLiteral("speedup")).toDouble(), 0, 'f', 2)
                                       .arg(d.value(QStringLiteral("comm_share")).toDouble() * 100, 0, 'f', 1));
    } else if (ev == QLatin1String("record")) {
        m_record = e.value(QStringLiteral("record")).toObject();
    } else if (ev == QLatin1String("error")) {
        m_error = e.value(QStringLiteral("message")).toString();
        m_log->appendPlainText(tr("Error: %1").arg(m_error));
    }
}

void RunPage::advance()
{
    if (m_progress->maximum() == 0) {
        const int sizes = int(m_tp->text().split(QLatin1Char(','), Qt::SkipEmptyParts).size());
        m_progress->setRange(0, std::max(1, sizes * (m_warmup->value() + m_iters->value()) * (1 + m_decode->value())));
    }
    m_progress->setValue(std::min(++m_steps, m_progress->maximum()));
}

void RunPage::finished(int code, QProcess::ExitStatus status)
{
    if (m_proc)
        readLines();
    m_run->setEnabled(true);
    m_cancel->setEnabled(false);
    QString failure;
    if (m_cancelled)
        failure = tr("Run cancelled");
    else if (status == QProcess::CrashExit)
        failure = tr("The engine process crashed or was killed (%1); the plan and earlier results are untouched")
                      .arg(m_proc ? m_proc->errorString() : tr("did not start"));
    else if (code != 0 || m_record.isEmpty())
        failure = m_error.isEmpty() ? tr("The engine exited with code %1").arg(code) : m_error;
    if (m_proc) {
        m_proc->deleteLater();
        m_proc = nullptr;
    }
    if (!failure.isEmpty()) {
        if (failure != m_error) // the engine's own error is in the log already
            m_log->appendPlainText(failure);
        m_progress->setRange(0, 1); // nothing measured: back to empty, not left part way
        m_progress->setValue(0);
        emit runFailed(failure);
        return;
    }
    auto data = std::make_shared<RunData>();
    // The record the Results page reads: the child's JSON file, parsed by the engine's own reader
    // (a record it cannot read is the run's failure, named by its key).
    const QString jsonPath = m_dir->filePath(QStringLiteral("run.json"));
    QFile file(jsonPath);
    QString parseError;
    if (!file.open(QIODevice::ReadOnly)) {
        parseError = tr("The run record %1 could not be read: %2").arg(jsonPath, file.errorString());
    } else {
        const QByteArray text = file.read(std::int64_t(1) << 30);
        auto rec = tp::parseRunRecord(std::string_view(text.constData(), std::size_t(text.size())), "run.json");
        if (rec.ok())
            data->record = std::move(*rec);
        else
            parseError = tr("The run record could not be read: %1").arg(QString::fromStdString(rec.status().message()));
    }
    if (!parseError.isEmpty()) {
        m_log->appendPlainText(parseError);
        emit runFailed(parseError);
        return;
    }
    m_progress->setValue(m_progress->maximum());
    data->tracePath = m_dir->filePath(QStringLiteral("trace.json"));
    data->csvPath = m_dir->filePath(QStringLiteral("spans.csv"));
    data->jsonPath = m_dir->filePath(QStringLiteral("run.json"));
    data->dir = m_dir;
    emit runFinished(data);
}

} // namespace tpui
