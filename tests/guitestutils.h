// guitestutils.h — what the GUI tests share: open a model in a MainWindow and wait for its preview.
#pragma once

#include "models/preview_service.h"
#include "widgets/main_window.h"

#include <QComboBox>
#include <QSignalSpy>
#include <QSpinBox>
#include <QString>

namespace tptest {

// Opens `what` in the window and waits (up to `ms` each) for the model and its first preview.
inline bool openAndPreview(tpui::MainWindow& w, const QString& what, int ms = 30000)
{
    QSignalSpy loaded(&w, &tpui::MainWindow::modelLoaded);
    QSignalSpy applied(&w, &tpui::MainWindow::previewApplied);
    w.openModel(what);
    if (!loaded.wait(ms))
        return false;
    return applied.count() > 0 || applied.wait(ms);
}

// Waits until the preview reflects the document (the newest request has been applied).
inline bool settle(tpui::MainWindow& w)
{
    QSignalSpy applied(&w, &tpui::MainWindow::previewApplied);
    for (int i = 0; i < 150; ++i) {
        auto p = w.previews()->latest();
        if (p && !w.previews()->busy() && p->settings == w.document()->settings() && p->graph.plan
            && p->graph.plan->entries == w.document()->plan().entries)
            return true;
        applied.wait(200);
    }
    return false;
}

// Opens `what` on the built-in `hardware` profile at tp size `tp` and waits for that preview.
inline bool openOn(tpui::MainWindow& w, const QString& what, const QString& hardware, int tp)
{
    if (!openAndPreview(w, what))
        return false;
    w.hardwareBox()->setCurrentIndex(w.hardwareBox()->findData(hardware));
    w.tpBox()->setValue(tp);
    return settle(w);
}

} // namespace tptest
