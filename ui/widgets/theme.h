// theme.h — light and dark appearance. The window follows the system palette by default; View →
// Theme switches to Qt's Fusion style with a light or a dark palette (remembered in the settings).
// Charts take their colours from the palette and follow a change while they are shown.
#pragma once

#include <QString>

class QCustomPlot;
class QPalette;

namespace tpui {

enum class Theme { System, Light, Dark };

QString themeName(Theme t);                  // "system", "light", "dark"
Theme themeFromName(const QString& name);    // unknown names: System
// Sets the application's style and palette. System restores what the platform gave at start-up.
void applyTheme(Theme t);
Theme currentTheme();
// A palette reads as dark when its window colour is darker than its text.
bool isDark(const QPalette& p);

// Colours a chart's background, axes, grid and legend from its palette, now and whenever the
// palette changes.
void themePlot(QCustomPlot* plot);

} // namespace tpui
