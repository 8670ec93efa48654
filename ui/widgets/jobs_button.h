// jobs_button.h — the status bar's view of the JobTracker: hidden while nothing runs, else "2 jobs"
// with a busy bar; its menu lists each job with how long it has run and a Stop entry where the job
// can be stopped.
#pragma once

#include <QWidget>

class QMenu;
class QProgressBar;
class QTimer;
class QToolButton;

namespace tpui {

class JobTracker;

class JobsButton final : public QWidget
{
    Q_OBJECT
public:
    explicit JobsButton(JobTracker* tracker, QWidget* parent = nullptr);
    QToolButton* button() const { return m_button; }
    QMenu* menu() const { return m_menu; }

private:
    void refresh();
    void fillMenu();

    JobTracker* m_tracker;
    QToolButton* m_button;
    QProgressBar* m_busy;
    QMenu* m_menu;
    QTimer* m_tick;
};

} // namespace tpui
