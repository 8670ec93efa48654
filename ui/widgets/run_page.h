// run_page.h — runs the plan on the embedded engine in a child `tpstudio-cli run --json-stream`
// process (so a crash or a hang never takes the editor down): settings, progress, cancel, a log,
// and the run record when it ends.
#pragma once

#include "tp/profile/run_record.h"

#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QWidget>

#include <memory>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QStandardItem;

namespace tpui {

class PlanDocument;

struct RunData
{
    tp::RunRecord record;               // the child's run.json, read with tp::parseRunRecord
    QString tracePath, csvPath, jsonPath; // files the child wrote
    std::shared_ptr<QTemporaryDir> dir;   // holds them while the run is shown
};

class RunPage final : public QWidget
{
    Q_OBJECT
public:
    explicit RunPage(PlanDocument* doc, QWidget* parent = nullptr);
    ~RunPage() override;

    // The CLI to start: $TPSTUDIO_CLI, else tpstudio-cli next to this executable, else on PATH.
    static QString cliPath();
    QStringList arguments(const QString& planFile, const QString& dir) const;
    bool running() const;
    QPlainTextEdit* log() const { return m_log; }
    QLineEdit* tpSizes() const { return m_tp; }
    QComboBox* backendBox() const { return m_backend; }
    QComboBox* dtypeBox() const { return m_dtype; }
    QCheckBox* emulateBox() const { return m_emulate; }
    QLabel* devicesLabel() const { return m_devices; }
    // What `tpstudio-cli devices --json` reported (filled asynchronously at start-up).
    void setDevices(const QJsonObject& devices);
    QSpinBox* seqBox() const { return m_seq; }
    QSpinBox* decodeBox() const { return m_decode; }
    QPushButton* runButton() const { return m_run; }
    QProgressBar* progressBar() const { return m_progress; }

public slots:
    void start();
    void cancel();

signals:
    void runStarted(); // the engine's child process is starting
    void runFinished(std::shared_ptr<const tpui::RunData> data);
    void runFailed(const QString& message);

private:
    void readLines();
    void advance(); // one iteration or decode step done
    void handle(const QJsonObject& event);
    void finished(int code, QProcess::ExitStatus status);

    void probeDevices();
    QStandardItem* cudaItem() const;

    PlanDocument* m_doc;
    QComboBox* m_backend;
    QComboBox* m_dtype;
    QCheckBox* m_emulate;
    QLabel* m_devices;
    QLineEdit* m_tp;
    QSpinBox *m_batch, *m_seq, *m_decode, *m_warmup, *m_iters;
    QCheckBox* m_random;
    QPushButton *m_run, *m_cancel;
    QProgressBar* m_progress;
    QPlainTextEdit* m_log;
    QProcess* m_proc = nullptr;
    QProcess* m_probe = nullptr;  // tpstudio-cli devices
    std::shared_ptr<QTemporaryDir> m_dir;
    QByteArray m_buffer;
    QJsonObject m_record;
    QString m_error;
    bool m_cancelled = false;
    int m_steps = 0;
};

} // namespace tpui
