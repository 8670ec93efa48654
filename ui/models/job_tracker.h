// job_tracker.h — the window's background work in one list: opening a model, runs, collective
// benchmarks, advisor searches, calibrations, verifications. Each job has a title, the time it
// started and, when it can be stopped, a cancel action; the status bar shows the list (JobsButton).
// The tracker only records: every job runs off the GUI thread (a worker or a child process) and
// reports its start and end here.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include <functional>
#include <vector>

namespace tpui {

class JobTracker final : public QObject
{
    Q_OBJECT
public:
    using Id = quint64;
    struct Job
    {
        Id id = 0;
        QString title;
        QElapsedTimer started;
        std::function<void()> cancel; // empty: cannot be stopped from the list
    };

    using QObject::QObject;
    // Records a job that started now; returns its id.
    Id start(const QString& title, std::function<void()> cancel = {});
    // The job ended (finished, failed or cancelled). Unknown ids are ignored.
    void finish(Id id);
    // Asks the job to stop; false when it is unknown or cannot be stopped.
    bool cancel(Id id);
    const std::vector<Job>& jobs() const { return m_jobs; }

signals:
    void changed();

private:
    std::vector<Job> m_jobs;
    Id m_next = 1;
};

} // namespace tpui
