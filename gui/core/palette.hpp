// The colours every chart uses, in one place so the legend, the PNG/SVG export and the widgets agree.
#pragma once

#include "tessel/sim/schedule.hpp"

#include <QBrush>
#include <QColor>

namespace tessel::gui {

// Memory components, bottom to top of a stacked bar.
enum class MemoryComponent { Weights = 0, Grads, Optimizer, Activations, Other };
constexpr int kMemoryComponentCount = 5;
QColor memoryComponentColor(MemoryComponent c);
QString memoryComponentName(MemoryComponent c);

// Step breakdown parts, in the order they are stacked (compute first, bubble last).
enum class BreakdownPart { Compute = 0, Tp, Cp, Ep, Pp, Dp, Optimizer, Bubble };
constexpr int kBreakdownPartCount = 8;
QColor breakdownPartColor(BreakdownPart p);
QString breakdownPartName(BreakdownPart p);

// A compute block: the hue follows the micro-batch (golden-angle steps so neighbours differ), the kind sets
// lightness: forward light, backward dark, backward_input like backward, backward_weight pale (and hatched
// by the painter). The optimizer step is slate grey.
QColor computeColor(sim::ActionKind kind, int microBatch);
// Communication lanes: pipeline sends teal, receives violet, data-parallel collectives orange.
QColor communicationColor(sim::ActionKind kind);
// Pattern drawn over backward_weight blocks so they read apart from backward_input without relying on colour.
Qt::BrushStyle computePattern(sim::ActionKind kind);

QColor bubbleColor();        // idle compute (shaded behind blocks)
QColor oomColor();           // stages that do not fit
QColor capacityColor();      // the GPU memory line
QColor measuredColor();      // measured values laid over predictions
QColor gridColor();
QColor textColor();
QColor mutedTextColor();

} // namespace tessel::gui
