// verify_dialog.h — "Verify with Transformers": the plan being edited, run in Hugging Face
// Transformers itself by a child `tpstudio-cli plan verify … --json` (torch.distributed.run on CPU
// ranks; a depth-reduced random-weight copy of the model when its weights are absent or large), and
// its collectives per kind, count and bytes, against the preview's, with the logits against the
// engine's. The child runs asynchronously: the editor stays usable, Cancel stops it.
#pragma once

#include <QDialog>
#include <QProcess>
#include <QTemporaryDir>

#include <memory>

class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QTableWidget;

namespace tpui {

class PlanDocument;

class VerifyDialog final : public QDialog
{
    Q_OBJECT
public:
    // `tp`: the tensor-parallel size to verify (the toolbar's).
    VerifyDialog(const PlanDocument* doc, int tp, QWidget* parent = nullptr);
    ~VerifyDialog() override;

    // The Python with torch and transformers: the last one used (settings), else TPSTUDIO_PYTHON,
    // else python3.
    QLineEdit* pythonEdit() const { return m_python; }
    QPushButton* startButton() const { return m_start; }
    QTableWidget* table() const { return m_table; }
    QLabel* verdict() const { return m_verdict; }
    QPlainTextEdit* log() const { return m_log; }
    bool running() const { return m_proc && m_proc->state() != QProcess::NotRunning; }

    void start();
    void cancel();

signals:
    void done(bool ok);
    void started(); // Transformers' processes are starting

private:
    void finished(int code, QProcess::ExitStatus status);
    void showResult(const QByteArray& json);

    const PlanDocument* m_doc;
    int m_tp;
    QLineEdit* m_python = nullptr;
    QPushButton* m_start = nullptr;
    QPushButton* m_cancel = nullptr;
    QLabel* m_verdict = nullptr;
    QTableWidget* m_table = nullptr;
    QPlainTextEdit* m_log = nullptr;
    QProcess* m_proc = nullptr;
    std::unique_ptr<QTemporaryDir> m_work;
};

} // namespace tpui
