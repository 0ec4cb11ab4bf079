// Painting of the three charts with QPainter, shared by the widgets and by the PNG/SVG export, so what a
// user saves is what they saw. The painters only draw: every number comes from the chart data classes.
#pragma once

#include "core/breakdown_data.hpp"
#include "core/memory_chart_data.hpp"
#include "core/timeline_geometry.hpp"

#include <QPainter>
#include <QRectF>

namespace tessel::gui {

// The memory chart's layout inside `rect` for the painter's current font (the widget hit-tests with it).
MemoryChartData::Layout memoryChartLayout(const MemoryChartData& data, const QRectF& rect, const QFontMetricsF& fm);
void paintMemoryChart(QPainter& p, const QRectF& rect, const MemoryChartData& data, int hoveredStage = -1);

// Row rectangles of the breakdown bars inside `rect` (index = stage), for hover.
std::vector<QRectF> breakdownRowRects(const BreakdownData& data, const QRectF& rect, const QFontMetricsF& fm);
void paintBreakdown(QPainter& p, const QRectF& rect, const BreakdownData& data, int hoveredStage = -1);

// Height of the timeline legend strip for the painter's font in `width` pixels (it wraps when narrow).
double timelineLegendHeight(const QFontMetricsF& fm, double width, bool measured);
// The legend: forward / backward / backward_weight / optimizer / bubble / send / recv / dp (/ measured).
void paintTimelineLegend(QPainter& p, const QRectF& rect, bool measured);
// The timeline in geometry coordinates (0,0 = the top-left of the geometry's viewport); `hovered` is an
// index into geometry.items() drawn with an outline.
void paintTimeline(QPainter& p, const TimelineGeometry& geometry, int hovered = -1);

} // namespace tessel::gui
