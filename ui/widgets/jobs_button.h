// jobs_button.h — the status bar's view of the JobTracker: hidden while nothing runs, else the job
// and how long it has run ("2 jobs running" for more); its menu lists each job with how long it has run and a Stop entry where the job
// can be stopped.
#pragma once

#include <QWidget>

class QMenu;
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
    QMenu* m_menu;
    QTimer* m_tick;
};

} // namespace tpui
