// calibrate_dialog.h — "Calibrate This Machine": a child `tpstudio-cli calibrate --json-stream
// --install --id ID` measures this machine (GEMMs, memory bandwidth, collectives) and installs the
// profile into tp::userHardwareDir(), where the hardware list finds it. The child streams one JSON
// object a line (start, progress with a fraction and the step, done with the profile's id, or error
// with its message); the dialog shows them as they come. The editor stays usable; Stop ends the child.
#pragma once

#include <QDialog>
#include <QProcess>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace tpui {

class CalibrateDialog final : public QDialog
{
    Q_OBJECT
public:
    explicit CalibrateDialog(QWidget* parent = nullptr);
    ~CalibrateDialog() override;

    // The profile's id: "calibrated-<host name>" by default.
    QLineEdit* idEdit() const { return m_id; }
    QComboBox* backendBox() const { return m_backend; }
    QCheckBox* quickBox() const { return m_quick; }
    QProgressBar* progress() const { return m_progress; }
    QLabel* stepLabel() const { return m_step; }
    QPushButton* startButton() const { return m_start; }
    QPushButton* stopButton() const { return m_stop; }
    bool running() const { return m_proc && m_proc->state() != QProcess::NotRunning; }
    // The arguments the child gets (after the CLI's path).
    QStringList arguments() const;

    void start();
    void stop();

signals:
    // The profile `id` is installed (ok), or the calibration failed or was stopped.
    void done(bool ok, const QString& id);
    void started(); // the calibration's child process is starting

private:
    void readLines();
    void handleLine(const QByteArray& line);
    void finished(int code, QProcess::ExitStatus status);
    void end(bool ok, const QString& text);

    QLineEdit* m_id;
    QComboBox* m_backend;
    QCheckBox* m_quick;
    QProgressBar* m_progress;
    QLabel* m_step;
    QPushButton* m_start = nullptr;
    QPushButton* m_stop = nullptr;
    QProcess* m_proc = nullptr;
    bool m_stopping = false; // Stop was pressed; finished() reports it
    bool m_replace = false;  // the id is installed and the user agreed to replace it (--force)
    QByteArray m_buffer;     // stdout not yet a whole line
    QString m_error;         // the stream's error event
    QString m_installedId;   // the stream's done event
    QString m_stderrTail;    // what the child printed to stderr, last lines
};

} // namespace tpui
