// Text for numbers shown in the GUI: GiB, adaptive seconds, percentages, plan summaries (DESIGN §6 units).
#pragma once

#include "tessel/cost/plan.hpp"

#include <QString>

#include <cstdint>

namespace tessel::gui {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

inline double toGiB(double bytes) { return bytes / kBytesPerGiB; }
QString gibText(double bytes, int decimals = 1);
// A GiB figure for chart labels: whole numbers and values from 100 up without decimals, else one ("61.2").
QString gibLabel(double gib);
// "18.55 s", "12.3 ms", "45.0 us": three significant digits in the largest unit that keeps the value >= 1.
QString secondsText(double seconds);
QString percentText(double fraction, int decimals = 1);
// "+10.0%" / "-3.2%": signed relative error (measured - predicted) / predicted.
QString signedPercentText(double fraction, int decimals = 1);
// "1,234,567": counts with thousands separators independent of the locale.
QString countText(uint64_t n);
// "tp8 pp8 dp16 mb1 zero0 selective 1f1b" (the knobs a user compares plans by).
QString planSummary(const Plan& plan);
// The plan's uneven pipeline split in a few characters ("7,8x14,7", "first 6", "balanced"); empty when even.
QString pipelineSplitLabel(const Plan& plan);

} // namespace tessel::gui
