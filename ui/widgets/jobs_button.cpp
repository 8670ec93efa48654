#include "widgets/jobs_button.h"

#include "models/job_tracker.h"

#include <QHBoxLayout>
#include <QMenu>
#include <QIcon>
#include <QTimer>
#include <QToolButton>

namespace tpui {

namespace {

// Whole seconds: the list ticks once a second.
QString elapsedText(const JobTracker::Job& j) { return QObject::tr("%1 s").arg(j.started.elapsed() / 1000); }

} // namespace

JobsButton::JobsButton(JobTracker* tracker, QWidget* parent)
    : QWidget(parent)
    , m_tracker(tracker)
    , m_button(new QToolButton(this))
    , m_menu(new QMenu(this))
    , m_tick(new QTimer(this))
{
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_button->setAutoRaise(true);
    m_button->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_button->setIcon(QIcon::fromTheme(QStringLiteral("view-refresh"), QIcon(QStringLiteral(":/icons/info.svg"))));
    m_button->setPopupMode(QToolButton::InstantPopup);
    m_button->setMenu(m_menu);
    m_button->setToolTip(tr("Background work: what runs, for how long, and Stop"));
    layout->addWidget(m_button);
    connect(m_menu, &QMenu::aboutToShow, this, &JobsButton::fillMenu);
    connect(m_tracker, &JobTracker::changed, this, &JobsButton::refresh);
    m_tick->setInterval(1000);
    connect(m_tick, &QTimer::timeout, this, &JobsButton::refresh);
    refresh();
}

void JobsButton::refresh()
{
    const auto& jobs = m_tracker->jobs();
    setVisible(!jobs.empty());
    if (jobs.empty()) {
        m_tick->stop();
        return;
    }
    if (!m_tick->isActive())
        m_tick->start();
    m_button->setText(jobs.size() == 1 ? tr("%1 · %2").arg(jobs.front().title, elapsedText(jobs.front()))
                                       : tr("%n jobs running", nullptr, int(jobs.size())));
    if (m_menu->isVisible())
        fillMenu();
}

void JobsButton::fillMenu()
{
    m_menu->clear();
    for (const auto& j : m_tracker->jobs()) {
        const QString text = tr("%1 — %2").arg(j.title, elapsedText(j));
        if (j.cancel) {
            const JobTracker::Id id = j.id;
            m_menu->addAction(tr("Stop: %1").arg(text), this, [this, id] { m_tracker->cancel(id); });
        } else {
            m_menu->addAction(text)->setEnabled(false);
        }
    }
}

} // namespace tpui
