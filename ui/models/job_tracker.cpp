#include "models/job_tracker.h"

#include <algorithm>

namespace tpui {

JobTracker::Id JobTracker::start(const QString& title, std::function<void()> cancel)
{
    Job j;
    j.id = m_next++;
    j.title = title;
    j.started.start();
    j.cancel = std::move(cancel);
    m_jobs.push_back(std::move(j));
    emit changed();
    return m_jobs.back().id;
}

void JobTracker::finish(Id id)
{
    const auto it = std::find_if(m_jobs.begin(), m_jobs.end(), [id](const Job& j) { return j.id == id; });
    if (it == m_jobs.end())
        return;
    m_jobs.erase(it);
    emit changed();
}

bool JobTracker::cancel(Id id)
{
    const auto it = std::find_if(m_jobs.begin(), m_jobs.end(), [id](const Job& j) { return j.id == id; });
    if (it == m_jobs.end() || !it->cancel)
        return false;
    const auto stop = it->cancel; // the job may finish (and leave the list) while it stops
    stop();
    return true;
}

} // namespace tpui
