#include "widgets/theme.h"

#include <QApplication>
#include <QEvent>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

#include <qcustomplot.h>

#include <optional>

namespace tpui {

namespace {

Theme g_theme = Theme::System;

// What the platform gave before any theme was applied (System restores it).
struct Startup
{
    QString style;
    QPalette palette;
};
const Startup& startup()
{
    static const Startup s{QApplication::style()->name(), QApplication::palette()};
    return s;
}

QPalette darkPalette()
{
    QPalette p;
    const QColor window(0x2b, 0x2d, 0x30), base(0x1e, 0x1f, 0x22), text(0xdf, 0xe1, 0xe5), disabled(0x80, 0x83, 0x88);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2b));
    p.setColor(QPalette::ToolTipBase, QColor(0x3c, 0x3f, 0x43));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(0x35, 0x38, 0x3b));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Light, QColor(0x4a, 0x4d, 0x51));
    p.setColor(QPalette::Midlight, QColor(0x3e, 0x41, 0x45));
    p.setColor(QPalette::Mid, QColor(0x5c, 0x60, 0x66));
    p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1b));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, QColor(0x3d, 0x7a, 0xd6));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
    p.setColor(QPalette::LinkVisited, QColor(0xb3, 0x9d, 0xff));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, disabled);
    p.setColor(QPalette::Disabled, QPalette::Base, window);
    p.setColor(QPalette::Disabled, QPalette::Highlight, QColor(0x4a, 0x4d, 0x51));
    return p;
}

void colourPlot(QCustomPlot* plot)
{
    const QPalette& pal = plot->palette();
    const QColor text = pal.color(QPalette::Text), base = pal.color(QPalette::Base);
    QColor grid = pal.color(QPalette::Mid);
    grid.setAlpha(isDark(pal) ? 110 : 90);
    plot->setBackground(base);
    for (QCPAxisRect* rect : plot->axisRects())
        for (QCPAxis* a : rect->axes()) {
            a->setBasePen(QPen(text));
            a->setTickPen(QPen(text));
            a->setSubTickPen(QPen(text));
            a->setTickLabelColor(text);
            a->setLabelColor(text);
            a->grid()->setPen(QPen(grid, 1, Qt::DotLine));
            a->grid()->setZeroLinePen(Qt::NoPen);
        }
    QColor legend = base;
    legend.setAlpha(215);
    plot->legend->setBrush(legend);
    plot->legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
    plot->legend->setTextColor(text);
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)); title && title->property("themed").toBool())
            title->setTextColor(text);
    // Texts that take the palette's text colour say so (property "themed"); notes keep their colour.
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* label = qobject_cast<QCPItemText*>(plot->item(i)); label && label->property("themed").toBool())
            label->setColor(text);
}

class PlotPaletteFilter final : public QObject
{
public:
    using QObject::QObject;

protected:
    bool eventFilter(QObject* watched, QEvent* e) override
    {
        if (e->type() == QEvent::PaletteChange)
            if (auto* plot = qobject_cast<QCustomPlot*>(watched)) {
                colourPlot(plot);
                plot->replot(QCustomPlot::rpQueuedReplot);
            }
        return false;
    }
};

} // namespace

QString themeName(Theme t)
{
    switch (t) {
    case Theme::Light: return QStringLiteral("light");
    case Theme::Dark: return QStringLiteral("dark");
    case Theme::System: break;
    }
    return QStringLiteral("system");
}

Theme themeFromName(const QString& name)
{
    if (name == QLatin1String("light"))
        return Theme::Light;
    if (name == QLatin1String("dark"))
        return Theme::Dark;
    return Theme::System;
}

bool isDark(const QPalette& p) { return p.color(QPalette::Window).lightness() < p.color(QPalette::WindowText).lightness(); }

void applyTheme(Theme t)
{
    const Startup& s = startup();
    g_theme = t;
    if (t == Theme::System) {
        QApplication::setStyle(QStyleFactory::create(s.style));
        QApplication::setPalette(s.palette);
        return;
    }
    QStyle* fusion = QStyleFactory::create(QStringLiteral("Fusion"));
    const QPalette palette = t == Theme::Dark ? darkPalette() : fusion->standardPalette();
    QApplication::setStyle(fusion);
    QApplication::setPalette(palette);
}

Theme currentTheme() { return g_theme; }

void themePlot(QCustomPlot* plot)
{
    startup(); // the platform's look is taken before any theme changes it
    colourPlot(plot);
    static PlotPaletteFilter* filter = new PlotPaletteFilter(qApp);
    plot->installEventFilter(filter);
}

} // namespace tpui
