// background.h — work the GUI thread never waits for: opening models and computing previews.
//
// Tasks run on a thread pool of their own that is never destroyed, so neither closing a window nor
// the application's exit blocks on one (QtConcurrent's global pool is joined when the application
// object is destroyed, which would hold a closed window's process until a long load ends). A task
// owns copies and shared pointers only, never a QObject: its result reaches the GUI thread through a
// QFutureWatcher, and a task whose watcher has gone or moved on finishes unseen, freeing its result
// where the last reference to it drops.
#pragma once

#include <QFuture>
#include <QThreadPool>
#include <QtConcurrent/QtConcurrentRun>

#include <utility>

namespace tpui {

QThreadPool* backgroundPool();
// Tasks submitted and not finished yet (queued or running).
int backgroundTasksInFlight();
// Blocks the calling thread until no task is in flight or `msecs` have passed; true when none is.
// For tests and the end of main(); the GUI thread never calls it while a window is open.
bool waitForBackgroundTasks(int msecs);

namespace detail {
void taskSubmitted();
void taskEnded();
} // namespace detail

template <class F>
auto runInBackground(F&& f)
{
    detail::taskSubmitted();
    return QtConcurrent::run(backgroundPool(), [f = std::forward<F>(f)]() mutable {
        struct Ended
        {
            ~Ended() { detail::taskEnded(); }
        } ended;
        return f();
    });
}

} // namespace tpui
