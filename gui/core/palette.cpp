// The colours every chart uses.
#include "core/palette.hpp"

#include <cmath>

namespace tessel::gui {

QColor memoryComponentColor(MemoryComponent c) {
    switch (c) {
    case MemoryComponent::Weights: return QColor(0x3b, 0x75, 0xaf);
    case MemoryComponent::Grads: return QColor(0xef, 0x8a, 0x3c);
    case MemoryComponent::Optimizer: return QColor(0x51, 0x9e, 0x3e);
    case MemoryComponent::Activations: return QColor(0x8d, 0x69, 0xb8);
    case MemoryComponent::Other: return QColor(0xa5, 0xa5, 0xa5);
    }
    return Qt::black;
}

QString memoryComponentName(MemoryComponent c) {
    switch (c) {
    case MemoryComponent::Weights: return QStringLiteral("weights");
    case MemoryComponent::Grads: return QStringLiteral("grads");
    case MemoryComponent::Optimizer: return QStringLiteral("optimizer");
    case MemoryComponent::Activations: return QStringLiteral("activations");
    case MemoryComponent::Other: return QStringLiteral("other");
    }
    return {};
}

QColor breakdownPartColor(BreakdownPart p) {
    switch (p) {
    case BreakdownPart::Compute: return QColor(0x4c, 0x9a, 0x5a);
    case BreakdownPart::Tp: return QColor(0x3b, 0x75, 0xaf);
    case BreakdownPart::Cp: return QColor(0x35, 0xb4, 0xc8);
    case BreakdownPart::Ep: return QColor(0x1f, 0x8a, 0x80);
    case BreakdownPart::Pp: return QColor(0x8d, 0x69, 0xb8);
    case BreakdownPart::Dp: return QColor(0xef, 0x8a, 0x3c);
    case BreakdownPart::Optimizer: return QColor(0x8c, 0x56, 0x4b);
    case BreakdownPart::Bubble: return QColor(0xc8, 0xc8, 0xc8);
    }
    return Qt::black;
}

QString breakdownPartName(BreakdownPart p) {
    switch (p) {
    case BreakdownPart::Compute: return QStringLiteral("compute");
    case BreakdownPart::Tp: return QStringLiteral("TP");
    case BreakdownPart::Cp: return QStringLiteral("CP");
    case BreakdownPart::Ep: return QStringLiteral("EP");
    case BreakdownPart::Pp: return QStringLiteral("PP");
    case BreakdownPart::Dp: return QStringLiteral("DP");
    case BreakdownPart::Optimizer: return QStringLiteral("optimizer");
    case BreakdownPart::Bubble: return QStringLiteral("bubble");
    }
    return {};
}

QColor computeColor(sim::ActionKind kind, int microBatch) {
    if (kind == sim::ActionKind::OptimizerStep) return QColor(0x5a, 0x64, 0x70);
    // Golden angle: consecutive micro-batches land far apart on the colour wheel.
    const int hue = microBatch < 0 ? 0 : static_cast<int>(std::fmod(microBatch * 137.508, 360.0));
    switch (kind) {
    case sim::ActionKind::Forward: return QColor::fromHsv(hue, 120, 245);
    case sim::ActionKind::Backward:
    case sim::ActionKind::BackwardInput: return QColor::fromHsv(hue, 210, 170);
    case sim::ActionKind::BackwardWeight: return QColor::fromHsv(hue, 90, 200);
    default: return QColor::fromHsv(hue, 150, 200);
    }
}

QColor communicationColor(sim::ActionKind kind) {
    switch (kind) {
    case sim::ActionKind::SendActivation:
    case sim::ActionKind::SendGrad: return QColor(0x1f, 0x9e, 0x99);
    case sim::ActionKind::RecvActivation:
    case sim::ActionKind::RecvGrad: return QColor(0x8d, 0x69, 0xb8);
    case sim::ActionKind::Collective: return QColor(0xef, 0x8a, 0x3c);
    default: return QColor(0x80, 0x80, 0x80);
    }
}

Qt::BrushStyle computePattern(sim::ActionKind kind) {
    return kind == sim::ActionKind::BackwardWeight ? Qt::BDiagPattern : Qt::NoBrush;
}

QColor bubbleColor() { return QColor(0xe4, 0xe4, 0xe4); }
QColor oomColor() { return QColor(0xd6, 0x27, 0x28); }
QColor capacityColor() { return QColor(0x20, 0x20, 0x20); }
QColor measuredColor() { return QColor(0x10, 0x10, 0x10); }
QColor gridColor() { return QColor(0xdd, 0xdd, 0xdd); }
QColor textColor() { return QColor(0x20, 0x20, 0x20); }
QColor mutedTextColor() { return QColor(0x60, 0x60, 0x60); }

} // namespace tessel::gui
