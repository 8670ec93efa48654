#include "models/background.h"

#include <QDeadlineTimer>
#include <QThread>

#include <atomic>

namespace tpui {

namespace {
std::atomic<int> g_inFlight{0};
}

QThreadPool* backgroundPool()
{
    // Never deleted: a QThreadPool's destructor waits for its tasks. Enough threads that a few
    // superseded loads still finishing never queue the newest one behind them.
    static QThreadPool* pool = [] {
        auto* p = new QThreadPool;
        p->setMaxThreadCount(std::max(8, QThread::idealThreadCount()));
        p->setExpiryTimeout(5000);
        return p;
    }();
    return pool;
}

int backgroundTasksInFlight() { return g_inFlight.load(); }

bool waitForBackgroundTasks(int msecs)
{
    const QDeadlineTimer deadline(msecs);
    while (g_inFlight.load() > 0) {
        if (deadline.hasExpired())
            return false;
        QThread::msleep(5);
    }
    return true;
}

namespace detail {
void taskSubmitted() { g_inFlight.fetch_add(1); }
void taskEnded() { g_inFlight.fetch_sub(1); }
} // namespace detail

} // namespace tpui
