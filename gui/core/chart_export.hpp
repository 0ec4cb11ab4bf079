// Saves the three charts of a plan as one PNG or SVG image (the format follows the file's suffix).
#pragma once

#include "core/breakdown_data.hpp"
#include "core/memory_chart_data.hpp"
#include "core/timeline_geometry.hpp"

#include <QSize>
#include <QString>

namespace tessel::gui {

struct ChartSet {
    MemoryChartData memory;
    BreakdownData breakdown;
    TimelineGeometry timeline;   // its current view (zoom and pan) is kept; the size is the export's
    QString title;               // e.g. the plan summary, drawn above the charts
};

// Paints the set into `painter` over a `size` canvas: memory and breakdown side by side above the timeline.
void paintChartSet(QPainter& painter, const QSize& size, ChartSet set);
// Writes a .png or .svg; returns an empty string on success, else why it failed (SVG needs QtSvg).
QString exportCharts(const QString& path, const ChartSet& set, const QSize& size = QSize(1600, 1000));
bool svgExportAvailable();

} // namespace tessel::gui
